"""Analysis: diagnostics, the mode census, coexisting phases, the paper protocol, hysteresis,
precursors and figures."""

from bayes_attn.analysis import plots
from bayes_attn.analysis.coexistence import (
    ensemble_occupancy,
    phase_free_energies,
    phase_starts,
    start_occupancy,
)
from bayes_attn.analysis.diagnostics import Diagnosis, diagnose
from bayes_attn.analysis.hysteresis import (
    hysteresis_sweep,
    jump_points,
    orthonormal_start,
    theory_sweep,
)
from bayes_attn.analysis.modes import WeightCrossing, modes, phase_weights, weight_crossing
from bayes_attn.analysis.phases import PhaseOccupancy, phase_boundary, phase_occupancy
from bayes_attn.analysis.precursors import precursors

__all__ = [
    "Diagnosis",
    "PhaseOccupancy",
    "WeightCrossing",
    "diagnose",
    "ensemble_occupancy",
    "hysteresis_sweep",
    "jump_points",
    "modes",
    "orthonormal_start",
    "phase_boundary",
    "phase_free_energies",
    "phase_occupancy",
    "phase_starts",
    "phase_weights",
    "plots",
    "precursors",
    "start_occupancy",
    "theory_sweep",
    "weight_crossing",
]
