"""Phase-diagram grids of the reduced theory: global saddles along P by continuation plus fresh
starts (:func:`global_path`), and the order parameters, losses and boundaries on a grid of P and of
L or V (:func:`phase_diagram`). The boundaries themselves are :mod:`bayes_attn.theory.boundaries`'.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int, check_positive_array
from bayes_attn.theory import _newton
from bayes_attn.theory.action import Scales, loss_per_token, scales
from bayes_attn.theory.boundaries import (
    crossover,
    second_order_closed_form,
    softmax_boundaries,
)
from bayes_attn.theory.saddles import minimum_bounds, objective, starts

# --------------------------------------------------------------------------------------------------
# Grids of global saddles

_GRID_G = np.array([-0.5, 0.0, 0.3, 0.8])
_GRID_M = np.array([0.1, 0.5])
_GRID_SOFTMAX = np.array([-0.5, 0.0, 0.05, 0.2, 0.5, 0.8])
_CARRY = 4


def _grid_starts(activation, P, sc):
    B_G, B_m = minimum_bounds(P, sc)
    if activation == "softmax":
        return (B_G * _GRID_SOFTMAX)[:, None]
    cG = B_G * _GRID_G[None, :]
    c1 = B_m * _GRID_M[:, None] - cG / sc.L
    return jnp.stack(jnp.broadcast_arrays(c1, cG), axis=-1).reshape(-1, 2)


@functools.partial(jax.jit, static_argnames=("activation",))
def global_path(activation: str, Ps, sc: Scales):
    """Global minima along an increasing array of P, by continuation plus fresh starts at each P.

    Jittable and vmappable over ``sc`` (for example over L or V). Returns (c, action), shapes
    (n_P, dim) and (n_P,).
    """
    f = objective(activation)

    def body(carry, P):
        pts = jnp.concatenate([carry, _grid_starts(activation, P, sc)])
        pts = _newton.minimise_many(lambda c: f(c, P, sc), pts, 10)
        vals = jax.vmap(lambda c: f(c, P, sc))(pts)
        order = jnp.argsort(vals)
        return pts[order[:_CARRY]], (pts[order[0]], vals[order[0]])

    first = starts(activation, Ps[0], sc)
    first = _newton.minimise_many(lambda c: f(c, Ps[0], sc), first, 40)
    vals = jax.vmap(lambda c: f(c, Ps[0], sc))(first)
    carry = first[jnp.argsort(vals)[:_CARRY]]
    return jax.lax.scan(body, carry, Ps)[1]


def _row_boundaries(activation, rows: Scales, n: int, axis: str) -> dict:
    """The activation's phase boundaries for each row of a batched Scales."""
    out = {}
    for i in range(n):
        sc = Scales(*(jnp.asarray(a)[i] if jnp.ndim(a) else a for a in rows))
        P2 = float(second_order_closed_form(sc))
        if activation == "linear":
            values = {"second_order": P2, "crossover": crossover(sc, P2)["crossover"]}
        else:
            soft = softmax_boundaries(sc, P2)
            lo, hi = soft["spinodals"]
            values = {
                "first_order": soft["first_order"],
                "spinodal_lower": lo,
                "spinodal_upper": hi,
            }
        for k, v in values.items():
            out.setdefault(k, np.full(n, np.nan))[i] = v
    return {k: ((axis,), v) for k, v in out.items()}


def phase_diagram(
    task, hyper, P, activation: str, *, L=None, V=None, boundaries: bool = True
) -> xr.Dataset:
    """Global saddles over a grid of P and either L (V fixed by ``task``) or V (L fixed).

    Returns an ``xarray.Dataset`` with dims (L or V, P): the order parameters, the action per unit chi
    and the theory loss per token. With ``boundaries`` it also holds, along the L or V axis, the phase
    boundaries of the activation: ``second_order`` and ``crossover`` (linear), ``first_order``,
    ``spinodal_lower`` and ``spinodal_upper`` (softmax). Pass exactly one of ``L`` and ``V``.
    """
    check_activation(activation)
    if (L is None) == (V is None):
        raise ValueError("pass exactly one of L and V")
    Ps = np.sort(check_positive_array("P", P))
    axis = "L" if L is not None else "V"
    values = np.atleast_1d(L if L is not None else V)
    values = np.array([check_int(axis, v, 2) for v in values])
    base = scales(task, hyper)
    rows = base._replace(**{axis: jnp.asarray(values, dtype=jnp.float64)})
    in_axes = Scales(*(0 if name == axis else None for name in Scales._fields))
    c, s = jax.vmap(lambda r: global_path(activation, jnp.asarray(Ps), r), in_axes=(in_axes,))(rows)
    c, s = np.asarray(c), np.asarray(s)
    dims = (axis, "P")
    coords = {axis: values, "P": Ps}
    if activation == "linear":
        c = c * np.asarray(algebra.z2_sign(c[..., 0], c[..., 1]))[..., None]  # the Z2 image
        data = {"c1": (dims, c[..., 0]), "cG": (dims, c[..., 1])}
        attn = (c[..., 0], c[..., 1])
    else:
        Lb = jnp.asarray(values, dtype=float)[:, None] if axis == "L" else base.L
        a1, aG = (np.asarray(a) for a in algebra.softmax_order(jnp.asarray(c[..., 0]), Lb))
        data = {"aG": (dims, aG), "a1": (dims, a1), "cG": (dims, c[..., 0])}
        attn = (a1, aG)
    per_point = jax.vmap(jax.vmap(loss_per_token, (0, 0, 0, None)), (0, 0, None, in_axes))
    loss = np.asarray(per_point(jnp.asarray(attn[0]), jnp.asarray(attn[1]), jnp.asarray(Ps), rows))
    data["action"] = (dims, s)
    data["loss"] = (dims, loss)
    if boundaries:
        data.update(_row_boundaries(activation, rows, len(values), axis))
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        activation=activation,
        L=task.L,
        V=task.V,
        **{k: getattr(hyper, k) for k in ("chi", "g_w", "g_o", "sigma2")},
    )
    ds["loss"].attrs.update(description="theory loss per token at the global saddle", units="1")
    ds["action"].attrs.update(
        description="action per unit chi at the global saddle", units="nats / chi"
    )
    return ds
