"""Sites shared by the models that see a dataset, and the names every layer uses for them: the order
parameters of each activation and the activation each phase boundary belongs to."""

from __future__ import annotations

import numpyro

from bayes_attn import algebra
from bayes_attn._validation import ACTIVATIONS

#: every order-parameter name, linear first: (c1, cG) for linear attention, (a1, aG) for softmax
ORDER_PARAMETERS = ("c1", "cG", "a1", "aG")

#: the activation each field of :class:`bayes_attn.theory.PhaseBoundaries` belongs to
BOUNDARY_ACTIVATION = {
    "second_order": "linear",
    "second_order_closed_form": "linear",
    "second_order_leading": "linear",
    "crossover": "linear",
    "crossover_markers": "linear",
    "first_order": "softmax",
    "spinodals": "softmax",
}


def order_parameters(activation: str) -> tuple[str, str]:
    """The order parameters that the models record: (c1, cG) for linear, (a1, aG) for softmax
    (public home: :func:`bayes_attn.models.levels.order_parameters`)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    return ORDER_PARAMETERS[:2] if activation == "linear" else ORDER_PARAMETERS[2:]


def record_order_parameters(A, activation: str) -> None:
    """Deterministic sites from an attention tensor (P, L, L): ``c1``/``cG`` for linear attention,
    ``a1``/``aG`` for softmax (the projection of the mean pattern), and ``token_residual``."""
    pr = algebra.project(A)
    names = order_parameters(activation)
    numpyro.deterministic(names[0], pr["c1"])
    numpyro.deterministic(names[1], pr["cG"])
    numpyro.deterministic("token_residual", pr["token_residual"])
