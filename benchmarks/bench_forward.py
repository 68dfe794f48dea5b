"""Benchmark: one Adam training step of the finite-width network, table forward vs per-token forward.

A step is the value and gradient of the chi-scaled negative log-posterior plus the Adam update, at
P = 800, L = 25, V = 5, full batch, float64, for d_model in {256, 1024}. The table forward
(:func:`bayes_attn.models.forward`) gathers the logits from the (V L) x (V L) table of
embedding products; the baseline (:func:`bayes_attn.models.forward_per_token`) embeds every token
and forms the (P, L, d) products. Both run here, in the same process; the ratio is what counts.
The issue's goal: at least 20x fewer seconds per step at d_model = 1024.

Run: ``.venv/bin/python benchmarks/bench_forward.py [--d 256 1024] [--P 800]``.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import optax

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.models import forward, forward_per_token, init_params
from bayes_attn.models.network import prior_scales


def _step(fwd, tokens, hyper, activation):
    """One jitted Adam step on the negative log-posterior with the given forward."""
    opt = optax.adam(1e-3)
    y = algebra.targets(tokens, 5)

    def loss(params):
        std = prior_scales(hyper, params["W_O"].shape[1])
        f, _ = fwd(params, tokens, activation)
        lik = hyper.chi * jnp.sum((y - f) ** 2) / (2 * hyper.sigma2)
        return lik + sum(jnp.sum(w**2) / (2 * std[n] ** 2) for n, w in params.items())

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    return step, opt


def _seconds(step, params, state, reps):
    jax.block_until_ready(step(params, state))  # compile
    t0 = time.perf_counter()
    for _ in range(reps):
        params, state, value = step(params, state)
    jax.block_until_ready(value)
    return (time.perf_counter() - t0) / reps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--P", type=int, default=800)
    parser.add_argument("--activation", default="softmax")
    args = parser.parse_args()
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(0), args.P)
    print(f"one Adam step, {args.activation}, P={args.P}, L={task.L}, V={task.V}, float64, CPU")
    for d in args.d:
        params = init_params(jax.random.key(1), task, hyper, d)
        times = {}
        for name, fwd, reps in (("table", forward, 20), ("per-token", forward_per_token, 3)):
            step, opt = _step(fwd, tokens, hyper, args.activation)
            times[name] = _seconds(step, params, opt.init(params), reps)
        ratio = times["per-token"] / times["table"]
        print(
            f"d_model={d:5d}: table {times['table'] * 1e3:8.1f} ms/step, "
            f"per-token {times['per-token'] * 1e3:8.1f} ms/step, x{ratio:5.1f}"
        )


if __name__ == "__main__":
    main()
