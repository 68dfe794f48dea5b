"""Statistics of results: convergence diagnostics, phase occupancy, ensemble summaries, and the
free-energy profile of umbrella windows."""

from bayes_attn import _deprecation
from bayes_attn.analysis.diagnostics import Diagnosis, diagnose, fold_posterior
from bayes_attn.analysis.ensembles import classify_minima, ensemble_summary, final_state
from bayes_attn.analysis.free_energy import free_energy_profile
from bayes_attn.analysis.llc import LLCEstimate, calibration_verdict, llc_estimate
from bayes_attn.analysis.phases import PhaseOccupancy, phase_occupancy

__all__ = [
    "Diagnosis",
    "LLCEstimate",
    "calibration_verdict",
    "llc_estimate",
    "PhaseOccupancy",
    "classify_minima",
    "diagnose",
    "ensemble_summary",
    "final_state",
    "free_energy_profile",
    "fold_posterior",
    "phase_occupancy",
]

# The Level-2 mode census and phase split live in bayes_attn.theory (one release of warnings).
__getattr__ = _deprecation.moved(
    __name__,
    {
        "phase_boundary": "bayes_attn.theory.modes",
        "modes": "bayes_attn.theory.modes",
        "phase_weights": "bayes_attn.theory.modes",
        "weight_crossing": "bayes_attn.theory.modes",
        "WeightCrossing": "bayes_attn.theory.modes",
    },
)
