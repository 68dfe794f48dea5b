"""Samplers over the package's NumPyro models, returning ArviZ InferenceData."""

from bayes_attn.inference.nuts import run_nuts, to_inference_data

__all__ = ["run_nuts", "to_inference_data"]
