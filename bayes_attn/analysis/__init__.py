"""Analysis: diagnostics and figures."""

from bayes_attn.analysis import plots
from bayes_attn.analysis.diagnostics import Diagnosis, diagnose

__all__ = ["Diagnosis", "diagnose", "plots"]
