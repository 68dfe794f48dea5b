"""Statistics of results: convergence diagnostics, phase occupancy, and ensemble summaries."""

from bayes_attn.analysis.diagnostics import Diagnosis, diagnose, fold_posterior
from bayes_attn.analysis.ensembles import classify_minima, ensemble_summary, final_state
from bayes_attn.analysis.phases import PhaseOccupancy, phase_boundary, phase_occupancy

__all__ = [
    "Diagnosis",
    "PhaseOccupancy",
    "classify_minima",
    "diagnose",
    "ensemble_summary",
    "final_state",
    "fold_posterior",
    "phase_boundary",
    "phase_occupancy",
]
