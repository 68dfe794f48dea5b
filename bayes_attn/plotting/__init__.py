"""Plots (data in, matplotlib Figure out): ``plots``; the paper's figures drawn from the data
:mod:`bayes_attn.experiments.figures` computes (``figures``, what ``bayes-attn figures`` runs); and
the plots of ``bayes-attn diagnose`` (``report``)."""

from bayes_attn.plotting import plots

__all__ = ["plots"]
