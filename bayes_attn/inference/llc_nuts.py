"""The LLC's NUTS: the package's one NUTS (:mod:`bayes_attn.inference.hmc`) on an LLC target,
chains vectorised, in the same chunked loop as the Langevin samplers.

Two metrics (``metric=``, :data:`NUTS_METRICS`):

* ``"adapt"``: the warm-up is Stan's window adaptation
  (:func:`~bayes_attn.inference.hmc.window_adaptation`: the step by dual averaging, a diagonal
  metric learnt in slow windows) over ``num_burnin`` steps;
* ``"laplace"``: the inverse mass matrix is the dense Laplace metric at w*
  (:func:`~bayes_attn.inference.hmc.laplace_metric` of the target's log density: the inverse
  Hessian of nβ L_n + γ/2 |w - w*|² there), and the warm-up adapts the step alone
  (:func:`~bayes_attn.inference.hmc.step_adaptation`). Where the target is stiff (curvatures
  from γ to thousands of times γ) this whitens it, and NUTS needs short trees.

The draws are :func:`~bayes_attn.inference.hmc.nuts_scan` transitions at the adapted step and
metric.
Every step's key is folded from the chain's key and the step's index, so the draws do not depend
on where chunks end, and a run resumed from its checkpoint
(:mod:`bayes_attn.inference.llc_checkpoint`) gives the draws of an uninterrupted one.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import SamplerDiverged
from bayes_attn.inference import llc_checkpoint as ckpt
from bayes_attn.inference.hmc import (
    laplace_metric,
    nuts_scan,
    step_adaptation,
    window_adaptation,
    window_schedule,
)

__all__ = ["LAPLACE_MAX_DIM", "LAPLACE_WARMUP", "NUTS_METRICS", "TARGET_ACCEPT", "laplace_inverse_mass",
           "run_nuts_chains"]  # fmt: skip

NUTS_METRICS = ("adapt", "laplace")
"""The metrics of the LLC's NUTS: a diagonal one learnt in warm-up, or the dense Laplace one."""

LAPLACE_WARMUP = 200
"""The warm-up steps of ``num_burnin="auto"`` in the Laplace metric: the dual averaging of the step
alone settles in far fewer than the window adaptation's 500 (on Table 1's default problem its
acceptance was 0.83 against the 0.8 aimed at after 200)."""

LAPLACE_MAX_DIM = 5000
"""The largest dimension the dense Laplace metric is built for (its Hessian takes one
Hessian-vector product per dimension and d² numbers: 200 MB at 5000)."""

TARGET_ACCEPT = 0.8
"""The acceptance the warm-up's dual averaging aims at (NumPyro's and Stan's default)."""


def _per_draw(f, x, batch_size: int = 16):
    """``f`` at every draw of ``x`` (chains, draws, dim), ``batch_size`` draws at a time: one
    vmap over all draws holds every draw's intermediates at once (the frozen target's design is
    P L (V + L) numbers a draw, so 4 x 1000 draws at P = 400 took 21 GB)."""
    c, n = x.shape[:2]
    out = jax.jit(lambda xs: jax.lax.map(f, xs, batch_size=batch_size))(x.reshape(c * n, -1))
    return jax.tree.map(lambda v: v.reshape(c, n, *v.shape[1:]), out)


def laplace_inverse_mass(target) -> jax.Array:
    """The dense Laplace metric of ``target`` at its w*: the inverse Hessian of its negative log
    density there (:func:`~bayes_attn.inference.hmc.laplace_metric`), its eigenvalues by
    magnitude and floored at the localization's curvature γ. w* is not a mode of the target, and
    where nβ L_n curves down faster than γ there the Hessian has an eigenvalue at or below zero:
    clipped only to 1e-8 of the largest (before 2026-12-08), it gave that direction a variance
    of 2.6e4 against the bulk's 1/γ, and NUTS's step collapsed below 1e-3 with 1023 leapfrogs a
    transition (the two-layer target at P = 400; docs/validation.md, "The induction head:
    posterior, profiles and LLC"). Refused (``ValueError`` naming ``metric``) above
    :data:`LAPLACE_MAX_DIM` dimensions."""
    dim = int(target.x_star.size)
    if dim > LAPLACE_MAX_DIM:
        raise ValueError(
            f"metric: 'laplace' builds a dense {dim} x {dim} Hessian; it is for at most "
            f"{LAPLACE_MAX_DIM} dimensions (use metric='adapt', on the command line --metric "
            "adapt)"
        )
    inv = laplace_metric(target.log_density, target.x_star, floor=float(target.gamma))
    return jnp.asarray(inv, target.x_star.dtype)


def _laplace_programs(logdensity, inv, num_burnin: int, cap: int):
    """:func:`_programs` at the fixed metric ``inv``: the warm-up adapts the step alone (with
    none, the draws take the first step that ``init`` found). ``carry`` is (NUTS state,
    StepState)."""
    init, update, final = step_adaptation(TARGET_ACCEPT)

    def warm_chain(carry, key, first, n):
        def one(i, carry):
            state, adapt, _ = update(jax.random.fold_in(key, i), *carry, logdensity, inv)
            return state, adapt

        return jax.lax.fori_loop(first, first + n, one, carry)

    def draw_chain(carry, key, first, n):
        state, adapt = carry
        step = final(adapt) if num_burnin else adapt.step_size
        state, buf = _draws(state, key, first, n, logdensity, step, inv, cap)
        return (state, adapt), buf, step

    start = jax.jit(jax.vmap(lambda k, x: init(k, x, logdensity, inv)))
    warm = jax.jit(jax.vmap(warm_chain, in_axes=(0, 0, None, None)))
    draw = jax.jit(jax.vmap(draw_chain, in_axes=(0, 0, None, None)))
    return start, warm, draw


def _draws(state, key, first, n, logdensity, step, inv, cap):
    """``n`` transitions from ``state`` (step ``first`` on), recorded into ``cap`` rows."""
    x = state.position
    buf = (jnp.zeros((cap, *x.shape), x.dtype), jnp.zeros(cap, x.dtype), jnp.zeros(cap, bool))

    def one(i, c):
        state, buf = c
        state, (pos, acc, _, div) = nuts_scan(
            jax.random.fold_in(key, first + i), state, logdensity, step, inv, 1
        )
        rec = (pos[0], acc[0], div[0])
        return state, jax.tree.map(lambda b, r: b.at[i].set(r), buf, rec)

    return jax.lax.fori_loop(0, n, one, (state, buf))


def _programs(logdensity, num_burnin: int, cap: int):
    """The compiled chunks, vmapped over chains: ``warm(carry, keys, first, n)`` runs warm-up
    steps ``first .. first + n - 1``; ``draw(carry, keys, first, n)`` runs transitions at the
    adapted step and metric, recording per step the position, the acceptance and whether it
    diverged (``cap`` rows; the first ``n`` are filled). ``carry`` is (NUTS state, window)."""
    init, update, final = window_adaptation(TARGET_ACCEPT)
    schedule = jnp.asarray(window_schedule(num_burnin)) if num_burnin else None

    def warm_chain(carry, key, first, n):
        def one(i, carry):
            state, window = carry
            k = jax.random.fold_in(key, i)
            state, window, _ = update(k, state, window, logdensity, schedule[i])
            return state, window

        return jax.lax.fori_loop(first, first + n, one, carry)

    def draw_chain(carry, key, first, n):
        state, window = carry
        step, inv = final(window) if num_burnin else (window.step_size, window.inverse_mass_matrix)
        state, buf = _draws(state, key, first, n, logdensity, step, inv, cap)
        return (state, window), buf, step

    start = jax.jit(jax.vmap(lambda k, x: init(k, x, logdensity)))
    warm = jax.jit(jax.vmap(warm_chain, in_axes=(0, 0, None, None)))
    draw = jax.jit(jax.vmap(draw_chain, in_axes=(0, 0, None, None)))
    return start, warm, draw


def run_nuts_chains(target, x0, key, num_burnin, num_draws, thinning, bar, keeper=None,
                    metric="adapt"):  # fmt: skip
    """NUTS chains from ``x0`` (chains, dim) on ``target`` in the metric ``metric`` (one of
    :data:`NUTS_METRICS`; module docstring): ``num_burnin`` warm-up steps, then
    ``num_draws`` draws each ``thinning`` transitions apart, in chunks of about
    :data:`~bayes_attn.inference.llc_checkpoint.CHUNK_SECONDS`. Returns (loss, distance, stats,
    order): the loss and |w - w*| (``target.sq_distance`` where it has one) at each draw,
    ``{"acceptance", "diverging"}`` per draw, and ``target.order`` at each draw. A chain whose
    log density stops being finite raises :class:`~bayes_attn._validation.SamplerDiverged`.
    ``keeper`` (an :class:`~bayes_attn.inference.llc_checkpoint.Keeper`) resumes from and writes
    the checkpoint."""
    keeper = keeper or ckpt.Keeper(None)
    chains, dim = x0.shape
    total = num_burnin + num_draws * thinning
    cap = max(1, -(-total // 20))
    k_tune, k_steps = jax.random.split(key)
    if metric == "laplace":
        start, warm, draw = _laplace_programs(
            target.log_density, laplace_inverse_mass(target), num_burnin, cap
        )
    elif metric == "adapt":
        start, warm, draw = _programs(target.log_density, num_burnin, cap)
    else:
        raise ValueError(f"metric must be one of {NUTS_METRICS}, got {metric!r}")
    carry = start(jax.random.split(k_tune, chains), x0)
    keys = jax.random.split(k_steps, chains)
    done, xs = 0, np.zeros((0, chains, dim))
    stats = np.zeros((0, chains, 2))
    saved = keeper.resume(carry)
    if saved is not None:
        carry, done, arrays = saved
        xs, stats = arrays["x"], arrays["stats"]
        bar.update(done)
    sizes = ckpt.Chunker(cap)
    while done < total:
        n, t0 = sizes(total - done), time.perf_counter()
        if done < num_burnin:
            n = min(n, num_burnin - done)
            carry = warm(carry, keys, done, n)
        else:
            carry, (pos, acc, div), step = draw(carry, keys, done, n)
            idx = np.arange(done, done + n) - num_burnin
            keep = idx % thinning == thinning - 1
            pos, acc, div = (
                np.swapaxes(np.asarray(a)[:, :n][:, keep], 0, 1) for a in (pos, acc, div)
            )
            xs = np.concatenate([xs, pos])
            stats = np.concatenate([stats, np.stack([acc, div.astype(acc.dtype)], -1)])
        _check_finite(carry[0].logdensity, done + n, carry[1].step_size)
        done += n
        sizes.timed(n, time.perf_counter() - t0)
        bar.update(n)
        keeper.tick(carry, done, {"x": xs, "stats": stats})
    return _summaries(target, xs, stats)


def _check_finite(logdensity, step, step_size):
    bad = ~np.isfinite(np.asarray(logdensity))
    if bad.any():
        raise SamplerDiverged("nuts", int(step), float(np.max(np.asarray(step_size))),
                              np.flatnonzero(bad))  # fmt: skip


def _summaries(target, xs, stats):
    """(loss, distance, stats, order) at the kept draws ``xs`` (draws, chains, dim)."""
    x = jnp.asarray(np.swapaxes(xs, 0, 1))
    loss = np.asarray(_per_draw(target.loss, x))
    if target.sq_distance is None:
        dist = np.asarray(jnp.linalg.norm(x - target.x_star, axis=-1))
    else:
        dist = np.asarray(jnp.sqrt(_per_draw(target.sq_distance, x)))
    order = {} if target.order is None else _per_draw(target.order, x)
    out = {"acceptance": np.swapaxes(stats[..., 0], 0, 1),
           "diverging": np.swapaxes(stats[..., 1], 0, 1) > 0.5}  # fmt: skip
    return loss, dist, out, {k: np.asarray(v) for k, v in order.items()}
