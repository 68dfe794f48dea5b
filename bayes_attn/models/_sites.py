"""Sites shared by the models that see a dataset."""

from __future__ import annotations

import numpyro

from bayes_attn import algebra


def record_order_parameters(A, activation: str) -> None:
    """Deterministic sites from an attention tensor (P, L, L): ``c1``/``cG`` for linear attention,
    ``a1``/``aG`` for softmax (the projection of the mean pattern), and ``token_residual``."""
    pr = algebra.project(A)
    names = ("c1", "cG") if activation == "linear" else ("a1", "aG")
    numpyro.deterministic(names[0], pr["c1"])
    numpyro.deterministic(names[1], pr["cG"])
    numpyro.deterministic("token_residual", pr["token_residual"])
