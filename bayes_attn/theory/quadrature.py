"""The reduced (Level-2) posterior's log-densities and the quadrature of its basins: the jitted
log-densities of softmax (in cG) and linear attention (in (c1, cG)), the density minimum between
two softmax modes (:func:`barrier`), the softmax minima on a grid (:func:`softmax_minima`), the
1-D basin quadrature of softmax and the 2-D watershed quadrature of linear attention.

:mod:`bayes_attn.theory.modes` builds the mode census and the phase weights on these; its
docstring has the method ("Modes and basins", "Quadrature").

References
----------
Paper Sec. 3.3 and App. A.7; docs/theory.md §7.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import (
    check_positive,
)
from bayes_attn.theory.action import (
    Scales,
    action_linear,
    action_softmax,
    logdet_ek,
    scales,
)
from bayes_attn.theory.boundaries import softmax_grid_minima, softmax_transition

_DROP = 60.0  # grids extend until the log-density is this far below its maximum
_BARRIER_GRID = 2049
_MIN_PAD = 1024

__all__ = [
    "barrier",
    "linear_log_density",
    "softmax_log_density",
    "softmax_minima",
]


# --------------------------------------------------------------------------------------------------
# Log-densities (jitted; evaluated on padded arrays so that shapes, and compilations, stay few)


@functools.partial(jax.jit, static_argnames=("include_logdet",))
def _logdens_softmax(cG, P, chi, sc: Scales, include_logdet: bool):
    ld = -chi * action_softmax(cG, P, sc)
    if include_logdet:
        a1, aG = algebra.softmax_order(cG, sc.L)
        ld = ld - logdet_ek(a1, aG, P, sc)
    return ld


@functools.partial(jax.jit, static_argnames=("include_logdet",))
def _logdens_linear(c, P, chi, sc: Scales, include_logdet: bool):
    ld = -chi * action_linear(c, P, sc)
    if include_logdet:
        ld = ld - logdet_ek(c[..., 0], c[..., 1], P, sc)
    return ld


def _evaluate(fn, x: np.ndarray, *args) -> np.ndarray:
    """``fn(x, *args)`` with the leading axis of ``x`` padded to a power of two (few recompiles)."""
    n = x.shape[0]
    size = max(_MIN_PAD, 1 << max(n - 1, 1).bit_length())
    pad = np.concatenate([x, np.broadcast_to(x[:1], (size - n, *x.shape[1:]))])
    return np.asarray(fn(jnp.asarray(pad), *args))[:n]


def softmax_log_density(task, hyper, P, cG, *, include_logdet: bool = False) -> np.ndarray:
    """The unnormalised Level-2 log-density of the softmax logit gap, ``-chi s(cG)`` (minus the
    equivalent-kernel log-determinant with ``include_logdet``), at the points ``cG``; the density
    whose basins :func:`modes` integrates.

    References
    ----------
    Paper Sec. 3.3; docs/theory.md §3-5.
    """
    P = check_positive("P", P)
    cG = np.atleast_1d(np.asarray(cG, dtype=np.float64))
    sc = scales(task, hyper)
    args = (jnp.float64(P), jnp.float64(hyper.chi), sc, bool(include_logdet))
    return _evaluate(_logdens_softmax, cG.ravel(), *args).reshape(cG.shape)


def linear_log_density(task, hyper, P, c, *, include_logdet: bool = False) -> np.ndarray:
    """The unnormalised Level-2 log-density of linear attention's ``c = (c1, cG)`` (last axis),
    ``-chi s(c)`` (minus the equivalent-kernel log-determinant with ``include_logdet``): the
    density whose basins :func:`modes` integrates, shape ``c.shape[:-1]``."""
    P = check_positive("P", P)
    c = np.asarray(c, dtype=np.float64)
    if c.shape[-1:] != (2,):
        raise ValueError(f"c: the last axis must hold (c1, cG), got shape {c.shape}")
    sc = scales(task, hyper)
    args = (jnp.float64(P), jnp.float64(hyper.chi), sc, bool(include_logdet))
    return _evaluate(_logdens_linear, c.reshape(-1, 2), *args).reshape(c.shape[:-1])


@functools.partial(jax.jit, static_argnames=("include_logdet",))
def barrier(a, b, P, chi, sc: Scales, include_logdet: bool):
    """The point of lowest density in (a, b): grid argmin, then Newton on the log-density."""
    x = jnp.linspace(a, b, _BARRIER_GRID)
    ld = _logdens_softmax(x, P, chi, sc, include_logdet)
    i = jnp.clip(jnp.argmin(ld), 1, _BARRIER_GRID - 2)
    lo, hi = x[i - 1], x[i + 1]
    f = lambda c: _logdens_softmax(c, P, chi, sc, include_logdet)  # noqa: E731
    g = jax.grad(f)
    h = jax.grad(g)

    def step(_, c):
        hc = h(c)
        return jnp.where(hc > 0, jnp.clip(c - g(c) / hc, lo, hi), c)

    return jax.lax.fori_loop(0, 40, step, x[i])


@jax.jit
def _softmax_curvature(cG, P, sc: Scales):
    """s''(cG) (vectorised)."""
    d2 = jax.grad(jax.grad(lambda c: action_softmax(c, P, sc)))
    return jax.vmap(d2)(cG)


# --------------------------------------------------------------------------------------------------
# Softmax: 1-D quadrature over basins


def _labels(aG: np.ndarray, P: float, sc: Scales) -> list[str]:
    """``weak``/``strong`` (smallest/largest aG); a lone mode by the side of the equal-action P*."""
    n = len(aG)
    if n >= 2:
        out = ["other"] * n
        out[int(np.argmin(aG))] = "weak"
        out[int(np.argmax(aG))] = "strong"
        return out
    first, lo, hi = softmax_transition(sc)
    threshold = first if math.isfinite(first) else math.sqrt(lo * hi)
    if not math.isfinite(threshold):
        return ["single"]  # no first-order transition: the phases are not distinct
    return ["strong" if P > threshold else "weak"]


def _softmax_quadrature(x, hess, P, chi, sc, include_logdet, points_per_sd):
    """Exact log-masses of the basins of the softmax minima ``x`` (sorted) with curvatures ``hess``.

    Returns ``(log_Z, info)``: log_Z (k,) and a dict with the basin edges and the grid.
    """
    k = len(x)
    sig = 1.0 / np.sqrt(chi * hess)
    h = float(sig.min()) / points_per_sd
    args = (jnp.float64(P), jnp.float64(chi), sc, include_logdet)
    ld_min = _evaluate(_logdens_softmax, np.asarray(x), *args)
    ref = float(ld_min.max())
    cuts = [float(barrier(x[i], x[i + 1], *args)) for i in range(k - 1)]

    def edge(x0, step):
        ladder = x0 + step * 12.0 * 2.0 ** np.arange(12)
        vals = _evaluate(_logdens_softmax, ladder, *args)
        ok = np.flatnonzero(vals < ref - _DROP)
        return float(ladder[ok[0]] if ok.size else ladder[-1])

    bounds = [edge(x[0], -sig[0]), *cuts, edge(x[-1], sig[-1])]
    grids = [
        np.linspace(a, b, max(3, math.ceil((b - a) / h) + 1))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    ld = _evaluate(_logdens_softmax, np.concatenate(grids), *args)
    log_Z, start = np.empty(k), 0
    for i, g in enumerate(grids):
        w = np.full(len(g), g[1] - g[0])
        w[[0, -1]] *= 0.5
        part = ld[start : start + len(g)]
        top = float(part.max())  # per basin, so that a far-weaker mode does not underflow
        log_Z[i] = top + math.log(np.sum(w * np.exp(part - top)))
        start += len(g)
    return log_Z, {"edges": np.asarray(bounds), "spacing": h, "n_points": start}


def softmax_minima(P: float, sc: Scales) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All softmax minima (cG, s, s'') at P by the dense-grid finder of the phase boundaries."""
    x, s, valid = (np.asarray(a) for a in softmax_grid_minima(jnp.float64(P), sc))
    x, s = x[valid], s[valid]
    hess = np.asarray(_softmax_curvature(jnp.asarray(x), jnp.float64(P), sc)) if x.size else x
    keep: list[int] = []
    for i in np.argsort(x):
        if hess[i] > 0 and all(abs(x[i] - x[j]) > 1e-5 * (1 + abs(x[j])) for j in keep):
            keep.append(int(i))
    return x[keep], s[keep], hess[keep]


def _logdet_softmax(x, P, sc):
    a1, aG = algebra.softmax_order(jnp.asarray(x), sc.L)
    return np.asarray(logdet_ek(a1, aG, jnp.float64(P), sc))


def _delta_F(log_Z: np.ndarray, labels: list[str]) -> float:
    """F_strong - F_weak = log Z_weak - log Z_strong; +inf without a strong mode, -inf without weak."""
    if "single" in labels:
        return math.nan
    get = {lab: z for lab, z in zip(labels, log_Z, strict=True)}
    return get.get("weak", -math.inf) - get.get("strong", -math.inf)


def _softmax_fast(P, chi, sc, include_logdet, points_per_sd) -> dict:
    """The softmax census without :func:`saddles` (jitted pieces only): for scans over P."""
    x, s, hess = softmax_minima(P, sc)
    log_Z, _ = _softmax_quadrature(x, hess, P, chi, sc, include_logdet, points_per_sd)
    lap = -chi * s - 0.5 * np.log(chi * hess / (2 * np.pi))
    if include_logdet:
        lap = lap - _logdet_softmax(x, P, sc)
    aG = np.asarray(algebra.softmax_order(jnp.asarray(x), sc.L)[1])
    return {"cG": x, "aG": aG, "labels": _labels(aG, P, sc), "log_Z": log_Z, "laplace": lap}


# --------------------------------------------------------------------------------------------------
# Linear: 2-D quadrature with a discrete watershed


def _ascent_roots(ld: np.ndarray) -> np.ndarray:
    """For every grid point, the flat index of the grid maximum that steepest ascent reaches."""
    n1, n2 = ld.shape
    pad = np.pad(ld, 1, constant_values=-np.inf)
    best = ld.copy()
    di = np.zeros(ld.shape, dtype=np.int64)
    dj = np.zeros(ld.shape, dtype=np.int64)
    for a in (-1, 0, 1):
        for b in (-1, 0, 1):
            if a == b == 0:
                continue
            v = pad[1 + a : 1 + a + n1, 1 + b : 1 + b + n2]
            up = v > best
            best = np.where(up, v, best)
            di[up], dj[up] = a, b
    i, j = np.indices(ld.shape)
    ptr = ((i + di) * n2 + (j + dj)).ravel()
    while True:
        nxt = ptr[ptr]
        if np.array_equal(nxt, ptr):
            return ptr
        ptr = nxt


def _linear_quadrature(cs, hs, P, chi, sc, include_logdet, points_per_sd, max_points):
    """Exact log-masses of the watershed basins of the linear modes ``cs`` (k, 2), Hessians (k, 2, 2)."""
    cov = np.linalg.inv(hs) / chi
    marg = np.sqrt(np.einsum("kii->ki", cov))
    cond = 1.0 / np.sqrt(chi * np.einsum("kii->ki", hs))
    h = cond.min(axis=0) / points_per_sd
    R = np.max(np.abs(cs) + 12.0 * marg, axis=0)
    args = (jnp.float64(P), jnp.float64(chi), sc, include_logdet)
    ref = float(_evaluate(_logdens_linear, np.asarray(cs), *args).max())
    while True:
        m = np.ceil(R / h).astype(int)
        n_points = int(np.prod(2 * m + 1))
        if n_points > max_points:
            raise ValueError(
                f"points_per_sd: the 2-D grid would need {n_points} points (> max_points = "
                f"{max_points}); lower points_per_sd or raise max_points"
            )
        axes = [h[d] * np.arange(-m[d], m[d] + 1) for d in range(2)]
        C1, CG = np.meshgrid(*axes, indexing="ij")
        ld = _evaluate(_logdens_linear, np.stack([C1.ravel(), CG.ravel()], -1), *args)
        ld = ld.reshape(C1.shape)
        border = max(ld[[0, -1], :].max(), ld[:, [0, -1]].max())
        if border < ref - _DROP:
            break
        R = 1.5 * R
    roots = _ascent_roots(ld)
    uniq, inverse = np.unique(roots, return_inverse=True)
    peaks = np.stack([C1.ravel()[uniq], CG.ravel()[uniq]], -1)
    d = peaks[:, None, :] - cs[None, :, :]
    label = np.argmin(np.einsum("rki,kij,rkj->rk", d, hs, d), axis=1)[inverse]
    # Z2 equivariance: the grid point -p has flat index N-1-i. Keep the labels of the half with
    # c1 > 0 (or c1 = 0, cG > 0), mirror them onto the other half, and split the origin's cell.
    mirror = np.array([int(np.argmin(np.sum((cs + c) ** 2, axis=1))) for c in cs])
    centre = label.size // 2
    label[:centre] = mirror[label[::-1][:centre]]
    flat = ld.ravel()
    origin_share = np.zeros(len(cs))
    if mirror[label[centre]] != label[centre]:  # the origin is no mode: half to each image
        origin_share[[label[centre], mirror[label[centre]]]] = 0.5
        label, flat = np.delete(label, centre), np.delete(flat, centre)
    origin_log = ld.ravel()[centre]
    top = np.full(len(cs), -np.inf)
    np.maximum.at(top, label, flat)  # per basin, so that a far-weaker mode does not underflow
    safe = np.where(np.isfinite(top), top, 0.0)
    mass = np.bincount(label, weights=np.exp(flat - safe[label]), minlength=len(cs))
    mass = mass + origin_share * np.exp(origin_log - safe)
    with np.errstate(divide="ignore"):
        log_Z = safe + np.log(mass * h[0] * h[1])
    return log_Z, {"spacing": h, "n_points": n_points, "half_width": h * m}
