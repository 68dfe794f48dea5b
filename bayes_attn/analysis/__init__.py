"""Analysis: figures now; diagnostics, mode census and sweeps come with later issues."""

from bayes_attn.analysis import plots

__all__ = ["plots"]
