"""Experiments: the paper protocol, resumable sweeps, hysteresis, coexisting phases beyond Level 2,
precursors and the free-energy landscape; each combines the theory, the samplers and the
statistics, and writes NetCDF."""

from bayes_attn.experiments.coexistence import (
    ensemble_occupancy,
    phase_free_energies,
    phase_starts,
    start_occupancy,
)
from bayes_attn.experiments.hysteresis import (
    hysteresis_sweep,
    jump_points,
    orthonormal_start,
    theory_sweep,
)
from bayes_attn.experiments.landscape import landscape_report, run_landscape, write_landscape
from bayes_attn.experiments.precursors import precursors

__all__ = [
    "ensemble_occupancy",
    "hysteresis_sweep",
    "jump_points",
    "landscape_report",
    "orthonormal_start",
    "phase_free_energies",
    "phase_starts",
    "precursors",
    "run_landscape",
    "start_occupancy",
    "theory_sweep",
    "write_landscape",
]
