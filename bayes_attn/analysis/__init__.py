"""Analysis: diagnostics, the mode census, the paper protocol, hysteresis and figures."""

from bayes_attn.analysis import plots
from bayes_attn.analysis.diagnostics import Diagnosis, diagnose
from bayes_attn.analysis.modes import WeightCrossing, modes, phase_weights, weight_crossing
from bayes_attn.analysis.phases import PhaseOccupancy, phase_boundary, phase_occupancy

__all__ = [
    "Diagnosis",
    "PhaseOccupancy",
    "WeightCrossing",
    "diagnose",
    "modes",
    "phase_boundary",
    "phase_occupancy",
    "phase_weights",
    "plots",
    "weight_crossing",
]
