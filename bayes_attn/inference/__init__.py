"""Samplers over the package's NumPyro models, returning ArviZ InferenceData."""

from bayes_attn.inference.adam import (
    classify_minima,
    early_stopping,
    ensemble_summary,
    train_adam,
)
from bayes_attn.inference.nuts import run_nuts, to_inference_data
from bayes_attn.inference.sgld import SGLD, polynomial_decay, run_sgld
from bayes_attn.inference.smc import run_smc, split_log_density

__all__ = [
    "SGLD",
    "classify_minima",
    "early_stopping",
    "ensemble_summary",
    "polynomial_decay",
    "run_nuts",
    "run_sgld",
    "run_smc",
    "split_log_density",
    "to_inference_data",
    "train_adam",
]
