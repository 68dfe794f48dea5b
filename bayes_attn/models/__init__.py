"""NumPyro models of the copy-task posterior at each level (docs/theory.md §1-5: Levels 0-2)."""

from bayes_attn.models.kernel_limit import kernel_limit_model
from bayes_attn.models.levels import LEVELS, level_of, order_parameters
from bayes_attn.models.network import (
    forward,
    forward_per_token,
    init_embeddings,
    init_params,
    neg_log_posterior,
    network_model,
)
from bayes_attn.models.order_params import order_param_model

__all__ = [
    "LEVELS",
    "level_of",
    "order_parameters",
    "forward",
    "forward_per_token",
    "init_embeddings",
    "init_params",
    "kernel_limit_model",
    "neg_log_posterior",
    "network_model",
    "order_param_model",
]
