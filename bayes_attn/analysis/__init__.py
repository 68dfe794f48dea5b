"""Analysis: diagnostics, the mode census, the paper protocol, hysteresis and figures."""

from bayes_attn.analysis import plots
from bayes_attn.analysis.diagnostics import Diagnosis, diagnose
from bayes_attn.analysis.modes import WeightCrossing, modes, phase_weights, weight_crossing

__all__ = [
    "Diagnosis",
    "WeightCrossing",
    "diagnose",
    "modes",
    "phase_weights",
    "plots",
    "weight_crossing",
]
