"""The three levels of the copy-task posterior and their names (docs/theory.md §1-5).

One table owns them: the CLI's name of each level, its NumPyro model, and the order parameters
each activation reports. Everything that needs "which level is this model" or "which order
parameters does this activation have" asks here.

========== ======================================= =========================================
name       model                                   what it samples
========== ======================================= =========================================
reduced    :func:`order_param_model` (Level 2)     the two order parameters
kernel     :func:`kernel_limit_model` (Level 1)    the (V+L)^2 matrix M of the d -> inf limit
network    :func:`network_model` (Level 0)         the weights of a finite network
========== ======================================= =========================================
"""

from __future__ import annotations

from bayes_attn._validation import ACTIVATIONS, LEVELS
from bayes_attn.models._sites import order_parameters
from bayes_attn.models.kernel_limit import kernel_limit_model
from bayes_attn.models.network import network_model
from bayes_attn.models.order_params import order_param_model

__all__ = ["ACTIVATIONS", "LEVELS", "MODELS", "level_name", "level_of", "order_parameters"]

MODELS = {
    "reduced": order_param_model,
    "kernel": kernel_limit_model,
    "network": network_model,
}

#: names that files written before the CLI's names were used carry in ``attrs["level"]``
_OLD_NAMES = {"order_parameters": "reduced", "kernel_limit": "kernel", "network": "network"}


def level_of(model) -> str | None:
    """The CLI name of ``model``'s level, or None for a model that is not one of the package's."""
    return next((name for name, m in MODELS.items() if m is model), None)


def level_name(value: str) -> str:
    """The CLI name for a level recorded in a file's attrs, old names included."""
    return _OLD_NAMES.get(value, value)
