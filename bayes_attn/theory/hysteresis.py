"""The hysteresis loop of the reduced (Level-2) action: warm-started descent swept up, then down, in P.

Warm-started damped Newton descent in the Gaussian coordinate follows a minimum until it stops being
one, so the loop's jumps lie at the spinodals to within the grid step (softmax: up at the upper
spinodal, down at the lower). It is the zero-temperature limit of the warm-started trainers of
:func:`bayes_attn.experiments.hysteresis.hysteresis_sweep`, in the same layout, and the reference
for their jump points.

References
----------
Paper App. A.7; docs/theory.md §7 ("First order": the spinodals).
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
from bayes_attn.theory.action import Scales, scales
from bayes_attn.theory.boundaries import softmax_grid_minima
from bayes_attn.theory.diagram import global_path
from bayes_attn.theory.saddles import objective

__all__ = ["theory_sweep"]


@functools.partial(jax.jit, static_argnames=("activation", "steps"))
def _descend_along(activation: str, Ps, c0, sc: Scales, steps: int):
    """Warm-started damped Newton along ``Ps``: each P starts from the previous P's endpoint."""
    f = objective(activation)

    def body(c, P):
        c = _newton.minimise(lambda x: f(x, P, sc), c, steps)
        return c, (c, f(c, P, sc))

    return jax.lax.scan(body, c0, Ps)[1]


def theory_sweep(task, hyper, Ps, activation: str = "softmax", *, steps: int = 200) -> xr.Dataset:
    """The hysteresis loop of the reduced action: warm-started descent swept up, then down, in P.

    The up sweep starts at the global minimum at ``min(Ps)``; at each next P, ``steps`` damped Newton
    steps (:mod:`bayes_attn.theory._newton`; each step never increases the action) start from the
    previous minimum. A minimum is therefore kept until it ceases to exist, and the loop jumps at the
    spinodals (softmax: up at the upper one, down at the lower one), to within the grid step. The
    down sweep continues from the up sweep's endpoint. The descent is gradient-like, so it is the
    zero-temperature (chi -> infinity) limit of the warm-started trainers.

    Returns a Dataset in the layout of :func:`~bayes_attn.experiments.hysteresis.hysteresis_sweep` (one ``member``) with ``q1``, ``qG``
    ((a1, aG) for softmax, (c1, cG) for linear), the action per unit chi ``action`` and the Gaussian
    coordinate ``cG``. For linear attention the Z2 sign is whatever the descent keeps (not folded: a loop follows one image).

    References
    ----------
    Paper App. A.7; docs/theory.md §7 ("First order": the spinodals).
    """
    check_activation(activation)
    Ps = np.sort(check_positive_array("Ps", Ps))
    steps = check_int("steps", steps, 1)
    sc = scales(task, hyper)
    if activation == "linear":
        c0 = global_path("linear", jnp.asarray(Ps[:1]), sc)[0][0]
    else:  # every minimum by the dense-grid finder of the phase boundaries; keep the lowest
        x, s, _ = softmax_grid_minima(jnp.float64(Ps[0]), sc)
        c0 = x[jnp.argmin(s)][None]
    c_up, s_up = _descend_along(activation, jnp.asarray(Ps), c0, sc, steps)
    c_dn, s_dn = _descend_along(activation, jnp.asarray(Ps[::-1]), c_up[-1], sc, steps)
    c = np.stack([np.asarray(c_up), np.asarray(c_dn)[::-1]])  # (direction, P, dim)
    s = np.stack([np.asarray(s_up), np.asarray(s_dn)[::-1]])
    if activation == "linear":
        q1, qG, gap = c[..., 0], c[..., 1], c[..., 1]
        names = ("c1", "cG")
    else:
        gap = c[..., 0]
        q1, qG = (np.asarray(a) for a in algebra.softmax_order(jnp.asarray(gap), task.L))
        names = ("a1", "aG")
    dims = ("direction", "P", "member")
    data = {"q1": q1, "qG": qG, "action": s, "cG": gap}
    return xr.Dataset(
        {k: (dims, np.asarray(v)[..., None]) for k, v in data.items()},
        coords={"direction": ["up", "down"], "P": Ps, "member": [0]},
        attrs={
            "activation": activation,
            "level": "reduced",
            "L": task.L,
            "V": task.V,
            "order_parameter": names[1],
            "newton_steps": steps,
        },
    )
