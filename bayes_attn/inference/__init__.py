"""Samplers over the package's NumPyro models, returning ArviZ InferenceData."""

from bayes_attn.inference.adam import (
    classify_minima,
    early_stopping,
    ensemble_summary,
    train_adam,
)
from bayes_attn.inference.nuts import run_nuts, to_inference_data

__all__ = [
    "classify_minima",
    "early_stopping",
    "ensemble_summary",
    "run_nuts",
    "to_inference_data",
    "train_adam",
]
