"""The LLC's Langevin samplers (SGLD, RMSProp-SGLD, MALA) as one vectorised scan.

* ``"sgld"``: w <- w + ε ∇log p(w) + √(2ε) ξ, the package's SGLD convention (devinterp's step
  size is 2ε: its update is -ε'/2 ∇ + N(0, ε')); a minibatch gradient when the model has a
  subsample plate, full batch otherwise.
* ``"rmsprop"``: the same step preconditioned by RMSProp's running second moment, G = 1 / (√v + δ)
  (Li et al. 2016, without the Γ correction, as devinterp).
* ``"mala"``: the full-batch Langevin step with its Metropolis correction (exact).

Every step also records the exact full-batch MALA acceptance of the move it made (near 1: the
discretisation's bias is negligible). :func:`run_langevin` steps the chains in chunks
(:mod:`bayes_attn.inference.llc_checkpoint`: progress, divergence checks, Ctrl-C and the
checkpoint between chunks); each chain carries its own key, so the draws do not depend on the
chunks.

References
----------
C. Li, C. Chen, D. Carlson and L. Carin, "Preconditioned stochastic gradient Langevin dynamics",
AAAI 2016.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import SamplerDiverged
from bayes_attn.inference import llc_checkpoint as ckpt
from bayes_attn.inference.llc_target import LLCTarget

__all__ = ["BLOWUP", "run_langevin"]

BLOWUP = 1e3
"""A chain has blown up when its log density falls more than ``BLOWUP (D + 10)`` below its
start: a chain in equilibrium sits O(D) below w*'s, D the flat dimension."""


class _Chain(NamedTuple):
    x: jax.Array
    logp: jax.Array  # full-batch log density at x
    grad: jax.Array  # its gradient
    loss: jax.Array  # full-batch L_n at x
    v: jax.Array  # RMSProp's running second moment
    key: jax.Array


def _log_q(x_to, x_from, grad_from, eps, G):
    """log q(x_to | x_from) of the Langevin proposal N(x + εG∇, 2εG), up to a constant."""
    r = x_to - x_from - eps * G * grad_from
    return -jnp.sum(r**2 / (4 * eps * G))


def _langevin_step(target: LLCTarget, sampler: str, eps: float, rms: tuple, c: _Chain):
    """One step of one chain; returns the new chain and the exact MALA acceptance of the move."""
    key, k_noise, k_batch, k_accept = jax.random.split(c.key, 4)
    if target.subsampled and sampler != "mala":
        g = jax.grad(target.batch_log_density)(c.x, k_batch)
    else:
        g = c.grad
    alpha, delta = rms
    if sampler == "rmsprop":
        v = alpha * c.v + (1 - alpha) * g**2
        G = 1.0 / (jnp.sqrt(v) + delta)
    else:
        v, G = c.v, jnp.ones_like(c.x)
    noise = jax.random.normal(k_noise, c.x.shape, c.x.dtype)
    x = c.x + eps * G * g + jnp.sqrt(2 * eps * G) * noise

    def parts(x):
        loss = target.loss(x)
        return target.log_density(x), loss

    (logp, loss), grad = jax.value_and_grad(parts, has_aux=True)(x)
    log_a = logp - c.logp + _log_q(c.x, x, grad, eps, G) - _log_q(x, c.x, c.grad, eps, G)
    log_a = jnp.where(jnp.isfinite(log_a), log_a, -jnp.inf)
    accept = jnp.exp(jnp.minimum(log_a, 0.0))
    new = _Chain(x, logp, grad, loss, v, key)
    if sampler == "mala":
        take = jax.random.uniform(k_accept) < accept
        new = jax.tree.map(lambda a, b: jnp.where(take, a, b), new, c._replace(key=key))
    return new, accept


def _chunk_program(target, sampler, eps, rms, size):
    """The compiled chunk: per chain, ``n_draws`` draws of ``n_inner`` steps each, recording the
    loss, |w - w*| and the mean acceptance at each draw, and the first step (from 1) whose log
    density is not finite or has fallen below ``floor`` (:data:`BLOWUP`). The counts are traced,
    so one program serves every chunk."""

    def chain_chunk(c, bad, floor, n_draws, n_inner, first):
        def one(_, carry):
            c, acc, bad, k = carry
            c, a = _langevin_step(target, sampler, eps, rms, c)
            k = k + 1
            wrong = ~jnp.isfinite(c.logp) | (c.logp < floor)
            return c, acc + a, jnp.where((bad == 0) & wrong, k, bad), k

        def draw(i, carry):
            c, bad, buf, k = carry
            zero = jnp.zeros((), c.x.dtype)
            c, acc, bad, k = jax.lax.fori_loop(0, n_inner, one, (c, zero, bad, k))
            rec = (c.loss, jnp.linalg.norm(c.x - target.x_star), acc / n_inner)
            return c, bad, jax.tree.map(lambda b, r: b.at[i].set(r), buf, rec), k

        buf = tuple(jnp.zeros(size, c.x.dtype) for _ in range(3))
        c, bad, buf, _ = jax.lax.fori_loop(0, n_draws, draw, (c, bad, buf, first))
        return c, bad, buf

    return jax.jit(jax.vmap(chain_chunk, in_axes=(0, 0, 0, None, None, None)))


def _start(target, x0, keys):
    def one(x, key):
        (logp, loss), grad = jax.value_and_grad(
            lambda x: (target.log_density(x), target.loss(x)), has_aux=True
        )(x)
        return _Chain(x, logp, grad, loss, jnp.zeros_like(x), key)

    return jax.jit(jax.vmap(one))(x0, keys)


def run_langevin(target, sampler, x0, keys, eps, rms, num_burnin, num_draws, thinning, bar,
                 keeper=None):  # fmt: skip
    """Vectorised chains from ``x0`` (one key each): ``num_burnin`` steps, then ``num_draws``
    draws each ``thinning`` steps apart, in chunks of about
    :data:`~bayes_attn.inference.llc_checkpoint.CHUNK_SECONDS`. Returns (loss, distance,
    acceptance), each (chains, draws).
    After a chunk in which a chain diverged, :class:`~bayes_attn._validation.SamplerDiverged`.
    ``keeper`` (an :class:`~bayes_attn.inference.llc_checkpoint.Keeper`) resumes from and
    writes the checkpoint: the chains after ``steps`` steps and the draws so far."""
    keeper = keeper or ckpt.Keeper(None)
    chunk = _chunk_program(target, sampler, eps, rms, max(ckpt.chunks(num_draws)))
    chains = _start(target, x0, keys)
    floor = chains.logp - BLOWUP * (target.x_star.size + 10)
    bad = jnp.zeros(x0.shape[0], dtype=int)
    done, out = 0, [np.zeros((x0.shape[0], 0)) for _ in range(3)]
    saved = keeper.resume(chains)
    if saved is not None:
        chains, done, arrays = saved
        out = [arrays[k] for k in ("loss", "distance", "acceptance")]
        bar.update(done)
    total = num_burnin + num_draws * thinning
    burnin = ckpt.Chunker(max(ckpt.chunks(num_burnin)) if num_burnin else 1)
    drawing = ckpt.Chunker(max(ckpt.chunks(num_draws)))
    while done < total:
        in_burnin = done < num_burnin
        sizes = burnin if in_burnin else drawing
        left = num_burnin - done if in_burnin else (total - done) // thinning
        n, t0 = sizes(left), time.perf_counter()
        n_draws, n_inner = (1, n) if in_burnin else (n, thinning)
        chains, bad, rec = chunk(chains, bad, floor, n_draws, n_inner, done)
        _check(bad, sampler, eps)
        if not in_burnin:
            out = [
                np.concatenate([o, np.asarray(r)[:, :n]], axis=1)
                for o, r in zip(out, rec, strict=True)
            ]
        done += n_draws * n_inner
        sizes.timed(n, time.perf_counter() - t0)
        bar.update(n_draws * n_inner)
        keeper.tick(chains, done, dict(zip(("loss", "distance", "acceptance"), out, strict=True)))
    return tuple(out)


def _check(bad, sampler, eps):
    b = np.asarray(bad)
    if b.any():
        raise SamplerDiverged(
            sampler, int(b[b > 0].min()), eps, np.flatnonzero(b),
            hint="halve step_size, or leave it to the curvature (step_size='auto')",
        )  # fmt: skip
