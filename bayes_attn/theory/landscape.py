"""The reduced action evaluated on grids, for pictures of the landscape."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_positive
from bayes_attn.theory.action import action_linear, action_softmax, scales


def landscape(task, hyper, P, activation: str, c1=None, cG=None) -> xr.DataArray:
    """The action per unit chi, minus its minimum, on a grid.

    Linear: over (c1, cG) (defaults: c1 in [-1, 1], cG in [-3, 3]). Softmax: over aG in its support
    (default [-0.5, min(10, 0.98 L)]), or at the logit gaps ``cG``, with the gap as a coordinate.
    """
    check_activation(activation)
    P = check_positive("P", P)
    sc = scales(task, hyper)
    if activation == "linear":
        c1 = np.linspace(-0.8, 0.8, 201) if c1 is None else np.asarray(c1)
        cG = np.linspace(-3.5, 3.5, 281) if cG is None else np.asarray(cG)
        C1, CG = np.meshgrid(c1, cG, indexing="ij")
        s = np.asarray(action_linear(jnp.stack([C1, CG], -1), P, sc))
        da = xr.DataArray(s - s.min(), dims=("c1", "cG"), coords={"c1": c1, "cG": cG})
    else:
        L = task.L
        if cG is None:
            aG = np.linspace(-0.5, min(10.0, 0.98 * L), 600)
        else:
            aG = np.asarray(algebra.softmax_order(jnp.asarray(cG), L)[1])
        logit = np.asarray(algebra.softmax_logit(jnp.asarray(aG), L))
        s = np.asarray(action_softmax(jnp.asarray(logit), P, sc))
        da = xr.DataArray(s - s.min(), dims=("aG",), coords={"aG": aG, "cG": ("aG", logit)})
    da.attrs.update(P=P, activation=activation, description="action per unit chi minus its minimum")
    return da
