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


def newton_step(f, c):
    """One damped Newton step from ``c`` (n,); never increases ``f``."""
    g = jax.grad(f)(c)
    H = jax.hessian(f)(c)
    ev = jnp.linalg.eigvalsh(H)
    scale = jnp.max(jnp.abs(ev)) + 1e-300
    mu = jnp.where(ev[0] > 1e-10 * scale, 0.0, -ev[0] + 1e-3 * scale)
    d = -jnp.linalg.solve(H + mu * jnp.eye(c.shape[0]), g)
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
