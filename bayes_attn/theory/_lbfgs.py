"""L-BFGS on a JAX objective: the one way the theory layer runs scipy's L-BFGS-B.

``value_and_grad(x)`` takes a JAX array and returns (value, gradient); the caller jits it and keeps
its own options (``gtol``, ``ftol``, ``maxiter``, ``maxcor``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def lbfgs(value_and_grad, x0, **options):
    """scipy's ``OptimizeResult`` of L-BFGS-B from ``x0`` (flattened, float64) on
    ``value_and_grad``, with scipy's ``options``."""
    from scipy import optimize

    def fun(x):
        v, g = value_and_grad(jnp.asarray(x))
        return float(v), np.asarray(g, dtype=np.float64)

    x0 = np.asarray(x0, dtype=np.float64).ravel()
    return optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", options=options)
