"""Phase boundaries of the reduced theory (the phase-diagram grids: :mod:`bayes_attn.theory.diagram`).

* ``second_order``: linear attention leaves the origin where the Hessian of the action at
  (c1, cG) = 0 stops being positive (numerically, by root finding), checked against the closed form
  P* = L V^2 sigma^2 / ((L+V) sqrt(g_O g_W (L+1)(L+V-1))).
* ``crossover``: the linear crossover scale, defined as the P of steepest growth of the copy order
  parameter, the maximum of d cG / d log P along the global branch (docs/theory.md explains why).
* ``first_order``: the softmax P where the weak-copy and strong-copy minima have equal action.
* ``spinodals``: where the strong-copy minimum appears (lower) and the weak one disappears (upper).
* ``softmax_boundaries_many``: the softmax boundaries of many (L, V) at once, their programs batched.

References
----------
Paper Eqs. 16, 17 and 21 (17 and 21 are missing from the text); docs/theory.md §7
and §8.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

from bayes_attn import algebra
from bayes_attn._validation import Record, check_activation
from bayes_attn.theory import _newton
from bayes_attn.theory._lockstep import Lockstep
from bayes_attn.theory.action import (
    Scales,
    action_linear,
    action_softmax,
    scales,
)
from bayes_attn.theory.saddles import minimum_bounds

# --------------------------------------------------------------------------------------------------
# Linear: second-order transition and crossover


def second_order_leading(sc: Scales):
    """P* ~ L V^2 sigma^2 / ((L + V) sqrt(g_O g_W (L + 1)(L + V - 1))): the paper's Eq. 16 with its
    square root restored (docs/theory.md §8). It drops a term of relative size ~1e-5 at the paper preset;
    :func:`second_order_closed_form` is exact.
    """
    L, V = sc.L, sc.V
    return L * V**2 * sc.sigma2 / ((L + V) * jnp.sqrt(sc.g_o * sc.g_w * (L + 1) * (L + V - 1)))


def second_order_closed_form(sc: Scales):
    """Exact P* where the Hessian of the linear action at the origin becomes singular.

    In the coordinates m = c1 + cG/L and r = c1 + cG the quadratic part of the action is
    [(a - beta K) m^2 + B (r - m)^2 - beta (V-1) r^2] / (2 g_W) with a = (LV/(L+V))^2, K = L(L+V),
    B = L^2/(L-1) and beta = P^2 g_O g_W / (sigma^4 V^2). Its determinant vanishes at the smaller root
    of (V-1) K beta^2 - [K B + (V-1)(a + B)] beta + a B = 0, so P* = sigma^2 V sqrt(beta / (g_O g_W)).
    Dropping beta^2 gives :func:`second_order_leading`.
    """
    L, V = sc.L, sc.V
    a = (L * V / (L + V)) ** 2
    K = L * (L + V)
    B = L**2 / (L - 1)
    b = K * B + (V - 1) * (a + B)
    beta = 2 * a * B / (b + jnp.sqrt(b**2 - 4 * (V - 1) * K * a * B))
    return sc.sigma2 * V * jnp.sqrt(beta / (sc.g_o * sc.g_w))


@jax.jit
def _origin_min_eig(P, sc: Scales):
    H = jax.hessian(lambda c: action_linear(c, P, sc))(jnp.zeros(2))
    return jnp.linalg.eigvalsh(H)[0]


def second_order_numeric(sc: Scales) -> float:
    """The linear P* as the root of the smallest Hessian eigenvalue at the origin (no closed form used)."""
    f = lambda logP: float(_origin_min_eig(jnp.exp(jnp.float64(logP)), sc))  # noqa: E731
    lo, hi = 0.0, 1.0
    while f(hi) > 0:
        lo, hi = hi, hi + 2.0
    while f(lo) < 0:
        lo, hi = lo - 2.0, lo
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps))


@jax.jit
def _linear_point(logP, c0, sc: Scales):
    """A linear minimum at log P by warm-started Newton from ``c0``: (c, dc/dlogP, Z2 sign).

    One program serves the grid of :func:`crossover` (a loop of warm starts, 0.1 s for 400 P) and
    its refinements, where a scan over the grid was a second program of its own."""
    P = jnp.exp(logP)
    c = _newton.minimise(lambda x: action_linear(x, P, sc), c0, 15)
    return c, _dc_dlogP(c, P, sc), algebra.z2_sign(c[0], c[1])


def _linear_track(logPs, c0, sc: Scales):
    """Follow a linear minimum along log P by warm-started Newton; returns c(P), dc/dlogP and the
    Z2 sign of c(P) (numpy, one row per P)."""
    rows, c = [], jnp.asarray(c0, dtype=jnp.float64)
    for lp in np.asarray(logPs, dtype=float):
        c, dc, sign = _linear_point(jnp.float64(lp), c, sc)
        rows.append((c, dc, sign))
    return tuple(np.stack([np.asarray(r[i]) for r in rows]) for i in range(3))


def _dc_dlogP(c, P, sc: Scales):
    """Implicit function theorem at a minimum: dc/dlogP = -H^-1 d(grad s)/dlogP."""
    H = jax.hessian(lambda x: action_linear(x, P, sc))(c)
    mixed = jax.jacfwd(lambda lp: jax.grad(lambda x: action_linear(x, jnp.exp(lp), sc))(c))(
        jnp.log(P)
    )
    return -jnp.linalg.solve(H, mixed)


def crossover(
    sc: Scales, P_star: float | None = None, span: float = 1e3, n: int = 400, markers: bool = True
) -> dict:
    """The linear crossover scale and two auxiliary markers (nan without ``markers``).

    The branch born at P* (the global minimum there) is followed up to ``span`` P* on a geometric grid; each marker
    is then refined by a scalar solve, re-converging the minimum from the nearest grid point.
    Returns ``{"crossover": P of max d cG/d log P, "c1_peak": P where c1 is largest,
    "copy_overtakes": P where cG = c1}``; nan where a marker does not exist in the range.
    """
    P_star = P_star or second_order_numeric(sc)
    grid = math.log(P_star) + np.linspace(0.01, math.log(span), n)
    c, dc, flip = _linear_track(grid, np.array([1e-3, 0.0]), sc)
    flip = flip[:, None]  # the package's Z2 image
    c, dc = c * flip, dc * flip

    def at(lp):  # (c1, cG, dc1/dlogP, dcG/dlogP) at log P, warm-started from the grid
        k = int(np.clip(np.searchsorted(grid, lp), 0, n - 1))
        ck, dk, f = (a[0] for a in _linear_track([lp], c[k], sc))
        return np.concatenate([ck * f, dk * f])

    def root(y, g):  # first downward zero crossing of the grid values y, refined on g
        k = next((i for i in range(n - 1) if y[i] > 0 >= y[i + 1]), None)
        if k is None:
            return math.nan
        return math.exp(optimize.brentq(g, grid[k], grid[k + 1], xtol=1e-12))

    k = int(np.argmax(dc[:, 1]))
    if 0 < k < n - 1:
        res = optimize.minimize_scalar(
            lambda lp: -at(lp)[3],
            bounds=(grid[k - 1], grid[k + 1]),
            method="bounded",
            options={"xatol": 1e-9},
        )
        P_x = math.exp(res.x)
    else:
        P_x = math.nan
    if not markers:
        return {"crossover": P_x, "c1_peak": math.nan, "copy_overtakes": math.nan}
    return {
        "crossover": P_x,
        "c1_peak": root(dc[:, 0], lambda lp: at(lp)[2]),
        "copy_overtakes": root(c[:, 0] - c[:, 1], lambda lp: at(lp)[0] - at(lp)[1]),
    }


# --------------------------------------------------------------------------------------------------
# Softmax: spinodals and the first-order transition

_NGRID = 2001


@jax.jit
def softmax_grid_minima(P, sc: Scales):
    """All minima of the 1-D softmax action by a dense grid over the bounded region, Newton-polished.

    Returns up to 4 minima as (cG, s, valid), sorted by cG.
    """
    B_G, _ = minimum_bounds(P, sc)
    grid = B_G * jnp.linspace(-1.0, 1.0, _NGRID)
    s = action_softmax(grid, P, sc)
    is_min = (s[1:-1] < s[:-2]) & (s[1:-1] <= s[2:])
    (idx,) = jnp.nonzero(is_min, size=4, fill_value=-1)
    valid = idx >= 0
    x0 = grid[jnp.where(valid, idx + 1, 0)][:, None]
    f = lambda c: action_softmax(c[0], P, sc)  # noqa: E731
    x = _newton.minimise_many(f, x0, 25)[:, 0]
    vals = jnp.where(valid, action_softmax(x, P, sc), jnp.inf)
    x = jnp.where(valid, x, jnp.inf)
    order = jnp.argsort(x)
    return x[order], vals[order], valid[order]


def _n_minima(P, sc, ev=None) -> int:
    return int(np.sum((ev or _DIRECT).minima(P, sc)[2]))


@jax.jit
def _fold(z, sc: Scales):
    """(s'(c), s''(c)) of the softmax action at z = (c, log P): both vanish at a spinodal."""
    ds = jax.grad(lambda c: action_softmax(c, jnp.exp(z[1]), sc))
    return jnp.stack([ds(z[0]), jax.grad(ds)(z[0])])


def _spinodal(sc: Scales, P_one: float, P_two: float, strong_side: bool, ev=None) -> float:
    """Refine where the minimum count changes between P_one (1 minimum) and P_two (2 minima).

    Bisection on the count, then the exact fold s'(c) = s''(c) = 0 by root finding in (c, log P).
    """
    ev = ev or _DIRECT
    for _ in range(30):
        mid = math.sqrt(P_one * P_two)
        if _n_minima(mid, sc, ev) >= 2:
            P_two = mid
        else:
            P_one = mid
    # the vanishing minimum at P_two, and the fold polished from it
    x, _, valid = ev.minima(P_two, sc)
    xs = x[valid]
    c_guess = xs[-1] if strong_side else xs[0]
    F = lambda z: ev.fold(z, sc)  # noqa: E731
    sol = optimize.root(F, [c_guess, math.log(P_two)], method="hybr", options={"xtol": 1e-13})
    P_fold = math.exp(sol.x[1])
    if sol.success and abs(P_fold / P_two - 1) < 1e-3:
        return P_fold
    return P_two


def _counts_and_global(Ps, sc: Scales):
    """(number of softmax minima, the global minimum's cG) at each P of ``Ps``: the one-P program
    :func:`softmax_grid_minima` in a loop (0.1 s for 300 P), not a vmapped program of its own,
    whose compile (8-9 s on a quiet core, minutes on a loaded one) every process paid once before
    its first Level-1 start (``phase_split.phase_starts`` asks for the spinodals); same counts."""
    rows = [_DIRECT.minima(P, sc) for P in np.asarray(Ps, dtype=float)]
    x, s, valid = (np.stack([r[i] for r in rows]) for i in range(3))
    return valid.sum(axis=1), x[np.arange(len(rows)), np.argmin(np.where(valid, s, np.inf), axis=1)]


def coexistence_scan(sc: Scales, P_scale: float, n: int = 300, zooms: int = 3, ev=None):
    """(Ps, counts): the number of softmax minima on a geometric grid of P over
    [P_scale / 100, 1000 P_scale], zoomed in where there is no coexistence.

    A coexistence window narrower than the grid's spacing (4% at n = 300; near the critical end
    point the window closes, e.g. at V = 5 and the paper's scales L = 16, 17 and 19 have windows
    of well under 4%) falls between two grid points. So where no point has two minima, the scan is
    repeated ``zooms`` times, each on n points between the neighbours of the largest jump of the
    global minimum (where a first-order transition would be), each time ~n/2 times finer.
    """
    ev = ev or _DIRECT
    Ps = P_scale * np.geomspace(1e-2, 1e3, n)
    counts, x = ev.counts(Ps, sc)
    for _ in range(zooms):
        if np.any(counts >= 2):
            break
        k = int(np.argmax(np.abs(np.diff(x))))
        Ps = np.geomspace(Ps[max(k - 1, 0)], Ps[min(k + 2, len(Ps) - 1)], n)
        counts, x = ev.counts(Ps, sc)
    return Ps, counts


def softmax_boundaries(sc: Scales, P_scale: float, n: int = 300) -> dict:
    """First-order P* (equal action) and the spinodals of the softmax action.

    The count of minima is scanned on a geometric grid of P over [P_scale / 100, 1000 P_scale],
    zoomed in where a narrow coexistence window could hide (:func:`coexistence_scan`); where no
    coexistence is found the transition is not first order and every entry is nan.
    :func:`softmax_boundaries_many` does the same for many (L, V) at once.
    """
    return _softmax_boundaries(_DIRECT, sc, P_scale, n)


def _softmax_boundaries(ev, sc: Scales, P_scale: float, n: int) -> dict:
    """:func:`softmax_boundaries`, its programs evaluated through ``ev``."""
    Ps, counts = coexistence_scan(sc, P_scale, n, ev=ev)
    n = len(Ps)
    two = np.flatnonzero(counts >= 2)
    nan = {"first_order": math.nan, "spinodals": (math.nan, math.nan)}
    if two.size == 0 or two[0] == 0 or two[-1] == n - 1:
        return nan
    i_lo = two[0]
    i_hi = i_lo
    while i_hi + 1 < n and counts[i_hi + 1] >= 2:
        i_hi += 1
    lower = _spinodal(sc, Ps[i_lo - 1], Ps[i_lo], strong_side=True, ev=ev)
    upper = _spinodal(sc, Ps[i_hi + 1], Ps[i_hi], strong_side=False, ev=ev)

    def gap(logP):
        x, s, valid = ev.minima(math.exp(logP), sc)
        s = s[valid]
        return float(s[-1] - s[0]) if s.size >= 2 else math.nan

    # bracket inside the refined spinodals, where both minima exist (and the grid sees both)
    lo, width = math.log(lower), math.log(upper) - math.log(lower)
    a = next((lo + f * width for f in (0.02, 2e-3, 2e-4) if gap(lo + f * width) > 0), math.nan)
    b = next(
        (lo + (1 - f) * width for f in (0.02, 2e-3, 2e-4) if gap(lo + (1 - f) * width) < 0),
        math.nan,
    )
    if not (gap(a) > 0 > gap(b)):
        return {"first_order": math.nan, "spinodals": (lower, upper)}
    P_first = math.exp(optimize.brentq(gap, a, b, xtol=1e-12))
    return {"first_order": P_first, "spinodals": (lower, upper)}


# --------------------------------------------------------------------------------------------------
# Many (L, V) at once: the same solvers, their programs batched across cells


class _Direct:
    """The programs of the softmax solvers, one cell and one call at a time (today's path)."""

    minima = staticmethod(
        lambda P, sc: tuple(np.asarray(a) for a in softmax_grid_minima(jnp.float64(P), sc))
    )
    counts = staticmethod(lambda Ps, sc: _counts_and_global(Ps, sc))
    fold = staticmethod(lambda z, sc: np.asarray(_fold(jnp.asarray(z), sc)))


_DIRECT = _Direct()

_KERNELS = {"minima": (softmax_grid_minima, 256), "fold": (_fold, 64)}  # (program, chunk size)


class _Batched(Lockstep):
    """:class:`_Direct`, each request batched with those of the other cells."""

    def __init__(self):
        super().__init__(_KERNELS)

    def minima(self, P, sc: Scales):
        return tuple(a[0] for a in self.ask("minima", (np.array([float(P)]),), sc))

    def counts(self, Ps, sc: Scales):
        x, s, valid = self.ask("minima", (np.asarray(Ps, dtype=float),), sc)
        best = np.argmin(np.where(valid, s, np.inf), axis=1)
        return valid.sum(axis=1), x[np.arange(len(x)), best]

    def fold(self, z, sc: Scales):
        return self.ask("fold", (np.asarray(z, dtype=float)[None],), sc)[0][0]


def softmax_boundaries_many(scs: list[Scales], P_scales, n: int = 300) -> list:
    """:func:`softmax_boundaries` at each of ``scs``, the cells solved in lockstep threads and
    their programs batched (``bayes_attn.theory._lockstep.Lockstep``): the one-cell results up
    to the last bits (1.8e-15 on the 12 x 12 grid). One dict per cell, or the exception it raised."""
    return _Batched().run(
        [
            lambda ev, sc=sc, P=float(P): _softmax_boundaries(ev, sc, P, n)
            for sc, P in zip(scs, P_scales, strict=True)
        ]
    )


# --------------------------------------------------------------------------------------------------
# Public face


@dataclasses.dataclass(frozen=True)
class PhaseBoundaries(Record):
    """The transitions of the reduced theory for one (task, hyper).

    Attributes
    ----------
    second_order : float
        Linear P* found numerically (Hessian at the origin).
    second_order_closed_form : float
        The same from the exact closed form (a root of a quadratic); they agree to ~1e-12.
    second_order_leading : float
        The closed form of docs/theory.md §7 (the paper's Eq. 16 with the square root restored), a leading-order
        approximation good to ~1e-5 at the paper preset.
    crossover : float
        Linear crossover scale, argmax of d cG / d log P.
    crossover_markers : dict
        ``c1_peak`` (where c1 stops growing) and ``copy_overtakes`` (where cG = c1).
    first_order : float
        Softmax P* of equal action; nan if the softmax transition is not first order here.
    spinodals : tuple of float
        Softmax (lower, upper): the strong-copy minimum appears, the weak-copy one disappears.
    """

    second_order: float
    second_order_closed_form: float
    second_order_leading: float
    crossover: float
    crossover_markers: dict
    first_order: float
    spinodals: tuple[float, float]


def softmax_transition(sc: Scales) -> tuple[float, float, float]:
    """(equal-action P*, lower spinodal, upper spinodal) of the softmax action; chi-independent.

    The one cache of the softmax boundaries: :func:`phase_boundaries` and the mode census
    (:mod:`bayes_attn.theory.modes`) both read it.
    """
    return _softmax_transition(*(float(v) for v in sc))


@functools.lru_cache(maxsize=64)
def _softmax_transition(L: float, V: float, g_w: float, g_o: float, sigma2: float) -> tuple:
    sc = Scales(*(jnp.float64(v) for v in (L, V, g_w, g_o, sigma2)))
    soft = softmax_boundaries(sc, second_order_numeric(sc))
    return (soft["first_order"], *soft["spinodals"])


@jax.jit
def _cusp(z, sc: Scales):
    """(s', s'', s''') of the softmax action in c at z = (c, log P, L): all three vanish at the
    critical end point, where the two spinodal folds meet."""
    sc = sc._replace(L=z[2])
    ds = jax.grad(lambda c: action_softmax(c, jnp.exp(z[1]), sc))
    d2 = jax.grad(ds)
    return jnp.stack([ds(z[0]), d2(z[0]), jax.grad(d2)(z[0])])


def _first_order_at(sc: Scales, L: float) -> tuple[float, float, float]:
    return softmax_transition(sc._replace(L=jnp.float64(L)))


@functools.lru_cache(maxsize=16)
def critical_end_point(task, hyper, bracket=None, tol: float = 0.01) -> dict:
    """The critical end point of the softmax first-order line in the (P, L) plane, V and the
    scales fixed: where the two spinodals meet and the jump vanishes (docs/theory.md §7).

    L is treated as continuous. Bisection on whether the softmax transition is first order
    (:func:`softmax_transition`) brackets the end point to ``tol`` in L, between ``bracket`` =
    (continuous L, first-order L), by default (2, the task's L); it is then polished as the cusp
    s'(c) = s''(c) = s'''(c) = 0 in (cG, log P, L).

    Returns
    -------
    dict
        ``P``, ``L`` and ``cG`` of the end point, ``L_bracket`` (the bisection's bracket) and
        ``polished``. Where the polish does not converge inside the bracket, ``P`` and ``L`` are
        the bracket's first-order end (its spinodals' geometric mean) and ``polished`` is False.

    Raises
    ------
    ValueError
        When the bracket's ends are not continuous and first order respectively.
    """
    sc = scales(task, hyper)
    lo, hi = (2.0, float(task.L)) if bracket is None else (float(b) for b in bracket)
    if not math.isfinite(_first_order_at(sc, hi)[0]):
        raise ValueError(f"bracket: the softmax transition is not first order at L = {hi:g}")
    if math.isfinite(_first_order_at(sc, lo)[0]):
        raise ValueError(f"bracket: the softmax transition is already first order at L = {lo:g}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if math.isfinite(_first_order_at(sc, mid)[0]) else (mid, hi)
    _, s_lo, s_hi = _first_order_at(sc, hi)
    P0 = math.sqrt(s_lo * s_hi)
    sc_hi = sc._replace(L=jnp.float64(hi))
    x, _, valid = (np.asarray(a) for a in softmax_grid_minima(jnp.float64(P0), sc_hi))
    c0 = float(np.mean(x[valid]))
    F = lambda z: np.asarray(_cusp(jnp.asarray(z), sc))  # noqa: E731
    sol = optimize.root(F, [c0, math.log(P0), hi], method="hybr", options={"xtol": 1e-12})
    c, logP, L = (float(v) for v in sol.x)
    ok = sol.success and lo - tol <= L <= hi + tol and abs(logP - math.log(P0)) < 0.1
    if not ok:
        return dict(P=P0, L=hi, cG=c0, L_bracket=(lo, hi), polished=False)
    return dict(P=math.exp(logP), L=L, cG=c, L_bracket=(lo, hi), polished=True)


def phase_boundaries(task, hyper, activation: str | None = None) -> PhaseBoundaries:
    """Every phase boundary of the reduced theory for one task and set of scales.

    Results are cached per (task, hyper), both immutable: the figures, the CLI and the sweeps ask
    for the same preset many times.

    Parameters
    ----------
    activation : {"linear", "softmax"}, optional
        Compute only that activation's boundaries (which field belongs to which:
        ``bayes_attn.models._sites.BOUNDARY_ACTIVATION``); the other's fields are nan. Default:
        both.

    References
    ----------
    Paper Eqs. 16, 17, 21; docs/theory.md §7 ("Saddle points and phase boundaries") and §8.
    """
    if activation is not None:
        check_activation(activation)
    nan = math.nan
    if activation == "softmax":
        linear = dict(second_order=nan, second_order_closed_form=nan, second_order_leading=nan,
                      crossover=nan, crossover_markers=dict(c1_peak=nan, copy_overtakes=nan))  # fmt: skip
    else:
        linear = _linear_boundaries(task, hyper)
    soft = (nan,) * 3 if activation == "linear" else softmax_transition(scales(task, hyper))
    first, lo, hi = soft
    return PhaseBoundaries(**linear, first_order=first, spinodals=(lo, hi))


@functools.lru_cache(maxsize=64)
def _linear_boundaries(task, hyper) -> dict:
    """The linear fields of :func:`phase_boundaries` (cached per (task, hyper)); a fresh dict."""
    sc = scales(task, hyper)
    P2 = second_order_numeric(sc)
    cross = crossover(sc, P2)
    return dict(
        second_order=P2,
        second_order_closed_form=float(second_order_closed_form(sc)),
        second_order_leading=float(second_order_leading(sc)),
        crossover=cross.pop("crossover"),
        crossover_markers=cross,
    )


# the phase-diagram grids live in theory.diagram (re-exported here, their old home)
from bayes_attn.theory.diagram import global_path, phase_diagram  # noqa: E402,F401
