"""The exact Level-2 free-energy profile of the softmax order parameter, by quadrature.

At Level 2 the posterior of the logit gap is ``p(cG) ∝ exp(-chi s(cG))`` (times
``exp(-logdet)`` with ``include_logdet``), and that of the attention order parameter
``aG = L (1 - a1)`` follows by the change of variables, ``p(aG) = p(cG(aG)) |dcG/daG|``, the density
the reduced NumPyro model samples. Its free energy ``F(q) = -log p(q)`` is normalised by the exact
total mass, the sum of the basin masses of :func:`bayes_attn.theory.modes.modes` (trapezoid
quadrature that converges faster than any power of the spacing). This is the line that umbrella
sampling of the full posterior (:func:`bayes_attn.inference.run_umbrella`) is drawn beside.

References
----------
Paper Sec. 3.3; docs/theory.md §7 and "The free-energy landscape".
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_positive
from bayes_attn.theory.modes import modes, softmax_log_density

__all__ = ["reduced_profile"]

VARIABLES = ("aG", "cG")


def reduced_profile(
    task, hyper, P, activation: str, q, include_logdet: bool = False, *, var: str = "aG"
) -> np.ndarray:
    """``F(q) = -log p(q)`` of the Level-2 posterior at training-set size P, normalised.

    Parameters
    ----------
    task, hyper : CopyTask, Hyper
    P : float
    activation : {"softmax"}
        Softmax's one order parameter (linear attention's two are not a profile).
    q : array_like
        Points of ``var``; ``aG`` inside its support (-L/(L-1), L).
    include_logdet : bool
        The equivalent-kernel log-determinant in the density (as ``order_param_model``).
    var : {"aG", "cG"}
        The variable the density is of (they differ by the Jacobian dcG/daG).

    Returns
    -------
    numpy.ndarray
        F at ``q`` (same shape); ``inf`` outside the support.
    """
    check_activation(activation)
    if activation != "softmax":
        raise ValueError(
            f"activation must be 'softmax' for a one-dimensional profile, got {activation!r}"
        )
    if var not in VARIABLES:
        raise ValueError(f"var must be one of {VARIABLES}, got {var!r}")
    P = check_positive("P", P)
    q = np.asarray(q, dtype=np.float64)
    census = modes(task, hyper, P, activation, include_logdet=include_logdet)
    log_Z = float(logsumexp(census.log_weight.values))
    L = task.L
    if var == "cG":
        return -softmax_log_density(task, hyper, P, q, include_logdet=include_logdet) + log_Z
    inside = (q > -L / (L - 1.0)) & (q < L)
    aG = np.where(inside, q, 1.0)
    cG = np.asarray(algebra.softmax_logit(jnp.asarray(aG), L))
    jac = np.log(np.asarray(algebra.softmax_dlogit(jnp.asarray(aG), L)))
    ld = softmax_log_density(task, hyper, P, cG, include_logdet=include_logdet) + jac
    return np.where(inside, -ld + log_Z, np.inf)
