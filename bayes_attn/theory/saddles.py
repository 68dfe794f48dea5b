"""Saddle points of the reduced action: every local minimum, global first.

Minima are found by multi-start damped Newton plus continuation in P: the same starts are also
carried up from P/16 and down from 16 P in small geometric steps, so that a metastable minimum whose
basin is small at P is still reached along the branch it belongs to. Starts are placed inside the
region where any minimum must lie: a minimum has s <= s(0) = P L / (2 sigma^2) and the data term is
non-negative, so the prior bounds |cG| and |c1 + cG/L| (:func:`minimum_bounds`).

References
----------
Paper Sec. 3.3 and Fig. 2; docs/theory.md §7 (Level 2 saddles).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_positive
from bayes_attn.theory import _newton
from bayes_attn.theory.action import Scales, action_linear, action_softmax, loss_per_token, scales

_SPAN = 16.0  # continuation runs from P / _SPAN and from _SPAN * P
_LEVELS = 12  # geometric continuation steps on each side
_G_FRACS = np.array([-1.0, -0.6, -0.3, -0.1, 0.0, 0.1, 0.3, 0.6, 1.0])
_M_FRACS = np.array([0.0, 0.1, 0.3, 0.6, 1.0])
_SOFTMAX_FRACS = np.linspace(-1.0, 1.0, 25)


def objective(activation: str):
    """The action per unit chi as f(c, P, sc), with c the Gaussian coordinates: (c1, cG) or (cG,)."""
    if activation == "linear":
        return action_linear
    return lambda c, P, sc: action_softmax(c[..., 0], P, sc)


def minimum_bounds(P, sc: Scales):
    """|cG| <= B_G and |c1 + cG/L| <= B_m hold at every minimum (prior <= s(0))."""
    budget = sc.g_w * P * sc.L / sc.sigma2
    B_G = jnp.sqrt(budget / (sc.L - 1))
    B_m = jnp.sqrt(budget) * (sc.L + sc.V) / (sc.L * sc.V)
    return B_G, B_m


def starts(activation: str, P, sc: Scales) -> jax.Array:
    """Fixed-size grid of starting points covering the region of :func:`minimum_bounds`."""
    B_G, B_m = minimum_bounds(P, sc)
    if activation == "softmax":
        return (B_G * _SOFTMAX_FRACS)[:, None]
    cG = B_G * _G_FRACS[None, :]
    m = B_m * _M_FRACS[:, None]
    c1 = m - cG / sc.L
    return jnp.stack(jnp.broadcast_arrays(c1, cG), axis=-1).reshape(-1, 2)


def _schedule():
    """The Newton steps of :func:`candidates` as one sequence: for each step, the index into the
    ladder of P of the three groups of starts (direct at P, up from P / _SPAN, down from _SPAN P;
    index -1 is P itself) and whether the group moves. Numpy: nothing is computed at import."""
    stages = [(40, (-1, 0, 0), (True, True, True))]  # each group's starts, at its first P
    stages += [(10, (-1, j, j), (False, True, True)) for j in range(1, _LEVELS + 1)]  # continuation
    stages += [(30, (-1, -1, -1), (True, True, True))]  # every endpoint polished at P
    idx = np.concatenate([np.tile(i, (n, 1)) for n, i, _ in stages])
    moves = np.concatenate([np.tile(m, (n, 1)) for n, _, m in stages])
    return idx, moves


_STEP_P, _STEP_MOVES = _schedule()


@functools.partial(jax.jit, static_argnames=("activation",))
def candidates(activation: str, P, sc: Scales):
    """Endpoints of all multi-start and continuation runs at P, with their diagnostics.

    Three groups of starts (:func:`starts`) are minimised: at P (40 damped Newton steps); at
    P / 16, carried up to P in 12 geometric levels (40 steps, then 10 per level); at 16 P, carried
    down likewise; then every endpoint takes 30 steps at P. The groups run in lockstep through one
    scan over the step sequence, a group that waits keeping its points, so the program holds one
    Newton step, not one per stage (a sixth of the tracing and compiling).

    Returns ``(points, action, grad_norm, min_eig)``; jittable and vmappable over P and ``sc``.
    """
    f = objective(activation)
    ladder = _SPAN ** jnp.linspace(-1.0, 0.0, _LEVELS + 1)
    table = jnp.stack(
        [jnp.full(_LEVELS + 2, P), jnp.append(P * ladder, P), jnp.append(P / ladder, P)]
    )
    group_P = table[jnp.arange(3)[None, :], _STEP_P]  # (steps, 3)
    x0 = jnp.stack([starts(activation, Pg, sc) for Pg in (P, P * ladder[0], P / ladder[0])])

    def step_group(x, Pg, moves):
        new = jax.vmap(lambda c: _newton.newton_step(lambda y: f(y, Pg, sc), c))(x)
        return jnp.where(moves, new, x)

    def body(x, step):
        return jax.vmap(step_group)(x, *step), None

    x = jax.lax.scan(body, x0, (group_P, jnp.asarray(_STEP_MOVES)))[0]
    pts = x.reshape(-1, x.shape[-1])
    gnorm, lam, _ = jax.vmap(lambda c: _newton.stationarity(lambda x: f(x, P, sc), c))(pts)
    return pts, jax.vmap(lambda c: f(c, P, sc))(pts), gnorm, lam


@dataclasses.dataclass(frozen=True)
class Saddle:
    """A local minimum of the reduced action.

    Attributes
    ----------
    activation : str
    P : float
    c1, cG : float
        Linear: the order parameters (the Z2 image c1 + cG >= 0, :func:`~bayes_attn.algebra.z2_sign`). Softmax: ``cG`` is the logit gap
        of the copy entry and ``c1`` is None (softmax ignores it).
    aG, a1 : float or None
        Softmax order parameters, a1 = 1 - aG / L. None for linear attention.
    action : float
        Action per unit chi, s = S / chi (the log-determinant, O(1), is left out).
    hessian : ndarray
        Hessian of s in the Gaussian coordinates: (c1, cG) for linear, cG for softmax.
    log_weight : float
        Laplace log-weight at the hyperparameters' chi:
        -chi s - 1/2 log det(chi H / 2 pi) + log(multiplicity).
    multiplicity : int
        2 for a linear minimum off the Z2 axis (its mirror image (-c1, -cG) counts too), else 1.
    loss : float
        Theory loss per token at the saddle (:func:`bayes_attn.theory.action.loss_per_token`).
    """

    activation: str
    P: float
    c1: float | None
    cG: float
    aG: float | None
    a1: float | None
    action: float
    hessian: np.ndarray
    log_weight: float
    multiplicity: int
    loss: float

    def order_parameters(self) -> dict[str, float]:
        """The order parameters the paper plots: (c1, cG) for linear, (aG, a1) for softmax."""
        if self.activation == "linear":
            return {"c1": self.c1, "cG": self.cG}
        return {"aG": self.aG, "a1": self.a1}


def _canonical(activation: str, c: np.ndarray) -> np.ndarray:
    """Z2 representative for linear attention: the image of :func:`bayes_attn.algebra.z2_sign`
    (c1 + cG >= 0), with the origin reported exactly (|c| <= 1e-12 is Newton's rounding of 0)."""
    if activation == "linear":
        c = c * float(algebra.z2_sign(c[0], c[1]))
        c = np.where(np.abs(c) <= 1e-12, 0.0, c)
    return c


#: The data term is (P L / 2 sigma^2) (1 - fit) with 1 - fit -> 0 as P grows: in float64 it keeps
#: its digits while P L / (2 sigma^2) <= 4e9 (P = 9.6e9 at Table 1). At Table 1 the saddles match a
#: cancellation-free form of the action to 1e-8 up to P = 1e11 (linear) and 1e13 (softmax); from
#: P ~ 1e12 the linear gradient is rounding noise and no candidate passes the stationarity test.
MAX_DATA_SCALE = 4e9


def max_P(task, hyper) -> float:
    """The largest P at which :func:`saddles` is accurate in float64 (see ``MAX_DATA_SCALE``)."""
    return MAX_DATA_SCALE * 2 * float(hyper.sigma2) / task.L


def check_P_in_range(task, hyper, P) -> float:
    """``P`` if :func:`saddles` can answer it (positive, at most :func:`max_P`), else
    ``ValueError`` naming the largest P: a check to make before any work."""
    P = check_positive("P", P)
    if P > max_P(task, hyper):
        raise ValueError(
            f"P must be <= {max_P(task, hyper):.3g} at L={task.L}, sigma^2={hyper.sigma2:g} (the "
            f"float64 reduced action loses its digits beyond it), got {P:g}"
        )
    return P


def saddles(task, hyper, P, activation: str) -> list[Saddle]:
    """Every local minimum of the reduced action at training-set size P, the global one first.

    Parameters
    ----------
    task : CopyTask
    hyper : Hyper
    P : float
        Number of training sequences (> 0; need not be an integer in the theory).
    activation : {"linear", "softmax"}

    Returns
    -------
    list of Saddle
        Sorted by action. For linear attention each Z2 pair appears once (c1 + cG >= 0).
        ``ValueError`` for P above :func:`max_P`.

    References
    ----------
    Paper Sec. 3.3, Fig. 2; docs/theory.md §7.
    """
    check_activation(activation)
    P = check_P_in_range(task, hyper, P)
    return minima_at(activation, P, scales(task, hyper), hyper.chi)


def minima_at(activation: str, P, sc, chi) -> list:
    """The distinct local minima among :func:`candidates` at the scales ``sc`` (a ``Scales``, or
    the token-aware scales of :mod:`bayes_attn.theory.structured`), global first."""
    pts, vals, gnorm, lam = (np.asarray(a) for a in candidates(activation, jnp.float64(P), sc))
    ok = (gnorm <= 1e-7 * np.maximum(1.0, np.abs(vals))) & (lam > 0) & np.isfinite(vals)
    order = np.argsort(np.where(ok, vals, np.inf))
    kept: list[np.ndarray] = []
    for i in order:
        if not ok[i]:
            break
        c = _canonical(activation, pts[i])
        if all(np.linalg.norm(c - k) > 1e-5 * (1 + np.linalg.norm(k)) for k in kept):
            kept.append(c)
    return [_make_saddle(activation, P, c, sc, chi) for c in kept]


@functools.partial(jax.jit, static_argnames=("activation",))
def _saddle_numbers(activation, c, P, sc: Scales):
    """(s, Hessian, a1, aG, loss) at a minimum ``c``: one program per activation (and scales'
    type), not an eager Hessian that re-traces and dispatches op by op at every saddle."""
    f = objective(activation)
    s = f(c, P, sc)
    H = jax.hessian(lambda x: f(x, P, sc))(c)
    if activation == "linear":
        return s, H, jnp.nan, jnp.nan, loss_per_token(c[0], c[1], P, sc)
    a1, aG = algebra.softmax_order(c[0], sc.L)
    return s, H, a1, aG, loss_per_token(a1, aG, P, sc)


def _make_saddle(activation, P, c, sc: Scales, chi) -> Saddle:
    s, H, a1j, aGj, loss = _saddle_numbers(activation, jnp.asarray(c), jnp.float64(P), sc)
    s, H = float(s), np.asarray(H)
    if activation == "linear":
        mult = 1 if np.allclose(c, 0.0, atol=1e-10) else 2
        c1, cG, a1, aG = float(c[0]), float(c[1]), None, None
    else:
        mult = 1
        c1, cG, a1, aG = None, float(c[0]), float(a1j), float(aGj)
    logw = -chi * s - 0.5 * np.linalg.slogdet(chi * H / (2 * np.pi))[1] + np.log(mult)
    return Saddle(activation, P, c1, cG, aG, a1, s, H, float(logw), mult, float(loss))


def global_saddle(task, hyper, P, activation: str) -> Saddle:
    """The global minimum of the reduced action (the first of :func:`saddles`)."""
    return saddles(task, hyper, P, activation)[0]
