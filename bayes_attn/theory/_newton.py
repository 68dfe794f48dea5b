"""Damped Newton minimisation in a few dimensions, vectorised over starting points.

Pure functions of an objective ``f(c) -> scalar`` (``c`` of shape (n,)); the caller jits. Each step
solves (H + mu I) d = -g with mu lifting the smallest Hessian eigenvalue when H is not positive,
then takes the best of a fixed ladder of step lengths (a vectorised backtracking line search).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_LADDER = 2.0 ** -np.arange(20.0)  # numpy: nothing is computed by JAX at import


def _eig_extremes(H):
    """(smallest eigenvalue, largest |eigenvalue|) of a symmetric H; closed form for n <= 2 (a
    LAPACK call per start and step is most of the cost of the vectorised grids)."""
    n = H.shape[0]
    if n == 1:
        return H[0, 0], jnp.abs(H[0, 0])
    if n == 2:
        a, b, d = H[0, 0], 0.5 * (H[0, 1] + H[1, 0]), H[1, 1]
        mid, rad = 0.5 * (a + d), jnp.sqrt(0.25 * (a - d) ** 2 + b**2)
        return mid - rad, jnp.abs(mid) + rad
    ev = jnp.linalg.eigvalsh(H)
    return ev[0], jnp.max(jnp.abs(ev))


def _solve(A, g):
    """A^-1 g for symmetric positive A; closed form for n <= 2."""
    n = A.shape[0]
    if n == 1:
        return g / A[0, 0]
    if n == 2:
        a, b, d = A[0, 0], 0.5 * (A[0, 1] + A[1, 0]), A[1, 1]
        return jnp.stack([d * g[0] - b * g[1], a * g[1] - b * g[0]]) / (a * d - b * b)
    return jnp.linalg.solve(A, g)


def newton_step(f, c):
    """One damped Newton step from ``c`` (n,); never increases ``f``."""
    g = jax.grad(f)(c)
    H = jax.hessian(f)(c)
    ev0, ev_max = _eig_extremes(H)
    scale = ev_max + 1e-300
    mu = jnp.where(ev0 > 1e-10 * scale, 0.0, -ev0 + 1e-3 * scale)
    d = -_solve(H + mu * jnp.eye(c.shape[0]), g)
    trial = c[None, :] + _LADDER[:, None] * d[None, :]
    vals = jax.vmap(f)(trial)
    vals = jnp.where(jnp.isfinite(vals), vals, jnp.inf)
    k = jnp.argmin(vals)
    return jnp.where(vals[k] < f(c), trial[k], c)


def minimise(f, c, steps: int):
    """``steps`` damped Newton steps from one start ``c`` (n,)."""
    return jax.lax.fori_loop(0, steps, lambda _, x: newton_step(f, x), c)


def minimise_many(f, starts, steps: int):
    """Minimise from each row of ``starts`` (k, n); returns the endpoints (k, n)."""
    return jax.vmap(lambda c: minimise(f, c, steps))(starts)


def stationarity(f, c):
    """Gradient norm, smallest Hessian eigenvalue and the Hessian at ``c``."""
    H = jax.hessian(f)(c)
    return jnp.linalg.norm(jax.grad(f)(c)), jnp.linalg.eigvalsh(H)[0], H
