"""The exact Level-2 free-energy profile of an order parameter, by quadrature.

At Level 2 the posterior of the logit gap is ``p(cG) ∝ exp(-chi s(cG))`` (times
``exp(-logdet)`` with ``include_logdet``), and that of the attention order parameter
``aG = L (1 - a1)`` follows by the change of variables, ``p(aG) = p(cG(aG)) |dcG/daG|``, the density
the reduced NumPyro model samples. Its free energy ``F(q) = -log p(q)`` is normalised by the exact
total mass, the sum of the basin masses of :func:`bayes_attn.theory.modes.modes` (trapezoid
quadrature that converges faster than any power of the spacing). This is the line that umbrella
sampling of the full posterior (:func:`bayes_attn.inference.run_umbrella`) is drawn beside.

Linear attention has two coordinates ``(c1, cG)``; the profile of the copy coordinate is the
marginal ``p(cG) = ∫ p(c1, cG) dc1`` (trapezoid over c1 on the census grid, both Z2 images
included), normalised by the same total mass.

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
from bayes_attn.theory.modes import linear_log_density, modes, softmax_log_density

__all__ = ["delta_F_at", "reduced_profile"]

VARIABLES = ("aG", "cG")


def reduced_profile(
    task, hyper, P, activation: str, q, include_logdet: bool = False, *, var: str = "aG"
) -> np.ndarray:
    """``F(q) = -log p(q)`` of the Level-2 posterior at training-set size P, normalised.

    Parameters
    ----------
    task, hyper : CopyTask, Hyper
    P : float
    activation : {"softmax", "linear"}
        Softmax: the profile of ``var``; linear: the marginal profile of ``cG`` (``var`` must be
        ``"cG"``), c1 integrated out.
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
    if var not in VARIABLES:
        raise ValueError(f"var must be one of {VARIABLES}, got {var!r}")
    if activation == "linear" and var != "cG":
        raise ValueError(f"var: linear attention's profile is of 'cG', got {var!r}")
    P = check_positive("P", P)
    q = np.asarray(q, dtype=np.float64)
    census = modes(task, hyper, P, activation, include_logdet=include_logdet)
    log_Z = float(logsumexp(census.log_weight.values))
    if activation == "linear":
        return _linear_marginal(task, hyper, P, q, include_logdet, census) + log_Z
    L = task.L
    if var == "cG":
        return -softmax_log_density(task, hyper, P, q, include_logdet=include_logdet) + log_Z
    inside = (q > -L / (L - 1.0)) & (q < L)
    aG = np.where(inside, q, 1.0)
    cG = np.asarray(algebra.softmax_logit(jnp.asarray(aG), L))
    jac = np.log(np.asarray(algebra.softmax_dlogit(jnp.asarray(aG), L)))
    ld = softmax_log_density(task, hyper, P, cG, include_logdet=include_logdet) + jac
    return np.where(inside, -ld + log_Z, np.inf)


def delta_F_at(task, hyper, P, divide: float, include_logdet: bool = True, num: int = 80001):
    """Level 2's Delta F of softmax at a fixed divide: the log mass of aG below ``divide`` minus
    that above it (a Riemann sum of :func:`reduced_profile` on ``num`` points from the lower
    edge of aG's support to 8), the number umbrella sampling's Delta F at that divide is
    set beside (docs/validation.md, "Free-energy profiles")."""
    L = task.L
    x = np.linspace(-L / (L - 1) + 1e-9, 8.0, num)
    lw = -reduced_profile(task, hyper, P, "softmax", x, include_logdet) + np.log(x[1] - x[0])
    return float(logsumexp(lw[x < divide]) - logsumexp(lw[x >= divide]))


def _linear_marginal(task, hyper, P, cG, include_logdet, census) -> np.ndarray:
    """``-log ∫ exp(-chi s(c1, cG) [- logdet]) dc1`` at the points ``cG`` (trapezoid in c1 on the
    census grid's spacing and reach, where the density has fallen by e^-60 at the ends)."""
    h = float(census.attrs["grid_spacing"][0])
    half = float(census.attrs["grid_half_width"][0])
    c1 = np.arange(-half, half + 0.5 * h, h)
    flat = cG.ravel()
    out = np.empty(flat.size)
    for start in range(0, flat.size, 256):  # 256 points of cG at a time: memory ~ 256 x grid
        part = flat[start : start + 256]
        c = np.stack(np.broadcast_arrays(c1[None, :], part[:, None]), axis=-1)
        ld = linear_log_density(task, hyper, P, c, include_logdet=include_logdet)
        w = np.full(c1.size, h)
        w[[0, -1]] = 0.5 * h
        out[start : start + 256] = -logsumexp(ld + np.log(w)[None, :], axis=1)
    return out.reshape(cG.shape)
