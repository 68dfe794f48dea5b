"""The Level-2 split of the softmax phases: the coexistence window (:func:`inside_window`,
between the spinodals of :func:`~bayes_attn.theory.boundaries.softmax_transition`), a start in
each phase at every level (:func:`phase_starts`), and the boundary between the phases
(:func:`phase_boundary`, the density minimum at which the basin quadrature splits them).
:func:`bayes_attn.analysis.phase_occupancy` counts draws against that boundary; the coexistence
experiments and the umbrella's default windows start from its minima. Re-exported by
:mod:`bayes_attn.theory.modes`.

References
----------
Paper Sec. 3.3; docs/theory.md §7 ("The first-order transition at finite χ").
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import (
    LEVELS,
)
from bayes_attn.theory.action import (
    Scales,
    scales,
)
from bayes_attn.theory.boundaries import softmax_transition
from bayes_attn.theory.quadrature import barrier, softmax_minima

__all__ = ["OnePhaseError", "inside_window", "phase_boundary", "phase_starts"]


class OnePhaseError(ValueError):
    """The softmax transition is not first order at this preset: there is one phase, and no
    start in each of two (a ``ValueError``, so callers that catch those still do)."""


def _window(task, hyper) -> tuple[Scales, float, float]:
    """(scales, lower spinodal, upper spinodal); ValueError where the transition is not first order."""
    sc = scales(task, hyper)
    _, lo, hi = softmax_transition(sc)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise OnePhaseError(
            f"task: the softmax transition is not first order at L={task.L}, V={task.V}; "
            "there are no two phases"
        )
    return sc, lo, hi


def inside_window(task, hyper, P) -> float:
    """P moved just inside the Level-2 coexistence window (the spinodals) if it lies outside.

    The margin is 1e-3 of the window's width, so both softmax minima exist at the returned P.

    Raises
    ------
    ValueError
        Where the softmax transition is not first order (no window).

    References
    ----------
    docs/theory.md §7 ("The first-order transition at finite χ").
    """
    _, lo, hi = _window(task, hyper)
    margin = 1e-3 * (hi - lo)
    return min(max(float(P), lo + margin), hi - margin)


def phase_starts(task, hyper, P, level: str = "kernel", *, embeddings=None) -> dict[str, dict]:
    """Starting values in the weak (uniform start) and strong (copy start) softmax phases.

    Returns ``{"weak": {...}, "strong": {...}}``: constrained values of the latent sites of
    ``order_param_model`` (``aG``, the Level-2 minima), ``kernel_limit_model`` (``M``: zero, and the
    smallest-norm realisation of the strong Level-2 minimum's logits) or ``network_model`` with
    frozen ``embeddings`` (``W_G`` realising the same M, :func:`bayes_attn.algebra.network_gate`,
    ``W_O`` = 0). Where P lies outside the Level-2 coexistence window, the minima are taken just
    inside it (:func:`inside_window`). Re-exported by
    :mod:`bayes_attn.experiments.coexistence`; the umbrella's default windows start from it. At
    Level 1 and 0 the starts are starts only: with tokens that are not uniform they are the
    uniform task's (the reduced level refuses such tokens).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    theory_task = task if level == "reduced" else task.uniform()
    Pw = inside_window(theory_task, hyper, P)
    cG, _, _ = softmax_minima(Pw, scales(theory_task, hyper))
    cG = np.sort(np.asarray(cG))
    if level == "reduced":
        aG = [float(algebra.softmax_order(jnp.float64(c), task.L)[1]) for c in (cG[0], cG[-1])]
        return {"weak": {"aG": aG[0]}, "strong": {"aG": aG[1]}}
    strong = cG[-1]
    M = algebra.min_norm_M(algebra.reduced_logits(-strong / task.L, strong, task.L), task.V)
    n = task.n_features
    if level == "kernel":
        return {"weak": {"M": jnp.zeros((n, n))}, "strong": {"M": M}}
    if embeddings is None:
        raise ValueError("embeddings: the network level needs the frozen (W_emb, p)")
    W_G = algebra.network_gate(M, embeddings)
    d = W_G.shape[0]
    W_O = jnp.zeros((task.V, d))
    return {"weak": {"W_G": jnp.zeros((d, d)), "W_O": W_O}, "strong": {"W_G": W_G, "W_O": W_O}}


def phase_boundary(task, hyper, P, *, include_logdet: bool = False, var: str = "aG") -> float:
    """The density minimum between the weak- and strong-copy softmax modes at P, in ``aG`` or ``cG``.

    The minima come from the grid finder of :func:`phase_weights` (:func:`softmax_minima`); the
    split point is that of the basin quadrature (:func:`barrier`), so the exact mass above the
    boundary is the strong weight. Where P has fewer than two minima, P is first moved just
    inside the coexistence window (:func:`inside_window`).

    Raises
    ------
    ValueError
        For an unknown ``var`` or where the softmax transition is not first order (no two phases).

    References
    ----------
    Paper Sec. 3.3; docs/theory.md §7.
    """
    if var not in ("aG", "cG"):
        raise ValueError(f"var must be 'aG' or 'cG' for a default boundary, got {var!r}")
    sc, _, _ = _window(task, hyper)
    P = float(P)
    x, _, _ = softmax_minima(P, sc)
    if len(x) < 2:
        P = inside_window(task, hyper, P)
        x, _, _ = softmax_minima(P, sc)
    if len(x) < 2:
        raise ValueError(f"P: found {len(x)} softmax mode(s) near P = {P}")
    x = np.sort(x)
    args = (jnp.float64(P), jnp.float64(hyper.chi), sc, bool(include_logdet))
    cut = float(barrier(x[-2], x[-1], *args))
    if var == "cG":
        return cut
    return float(algebra.softmax_order(jnp.float64(cut), task.L)[1])
