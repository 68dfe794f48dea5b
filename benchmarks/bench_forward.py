"""Benchmark: one Adam training step of the finite-width network, span forward against its baselines.

A step is the value and gradient of the chi-scaled negative log-posterior plus the Adam update, at
P = 800, L = 25, V = 5, full batch, float64, for d_model in {256, 1024}, all in one process:

* **span** (:func:`bayes_attn.models.forward`, the package's forward): the logits through
  M = W^T W_G W / d ((V + L) d^2 for M and for its gradient), the readout through W_O W;
* **table** (the previous forward, kept here as a reference): the (V L) x d table H of every
  (token, position) embedding, logits from H W_G H^T / d (V L d^2);
* **per-token** (:func:`bayes_attn.models.forward_per_token`, the baseline): embed every token and
  form the (P, L, d) products, as a plain implementation would.

It prints the seconds per step, the ratio per-token / span (the issue's goal: at least 150x at
d = 256 and at d = 1024) and the fraction of the span step that is Adam's own update (the same
update applied to a fixed gradient, timed alone), which is the O(d^2) floor of any forward. The
gradients of the three forwards agree to 1e-10 (``tests/test_network.py``).

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


def forward_table(params, tokens, activation: str):
    """The previous forward: logits gathered from the (V L) x (V L) table H W_G H^T / d."""
    W_emb, pos, W_O = params["W_emb"], params["p"], params["W_O"]
    d, V = W_emb.shape
    L = pos.shape[1]
    H = (pos.T[:, None, :] + W_emb.T[None, :, :]).reshape(L * V, d)
    T = (H @ params["W_G"]) @ H.T / d
    s = algebra.symbols(tokens, V)
    A = algebra.attention(T[s[..., :, None], s[..., None, :]], activation)
    return A @ (H @ W_O.T)[s], A


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


def _update_only(opt, grads):
    """Adam's update and its application alone, on a fixed gradient: the step's O(d^2) floor."""

    @jax.jit
    def step(params, state):
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, state[0].count

    return step


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
    parser.add_argument("--reps", type=int, default=20, help="steps timed for the span forward")
    args = parser.parse_args()
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(0), args.P)
    print(f"one Adam step, {args.activation}, P={args.P}, L={task.L}, V={task.V}, float64, CPU")
    for d in args.d:
        params = init_params(jax.random.key(1), task, hyper, d)
        times = {}
        for name, fwd, reps in (
            ("span", forward, args.reps),
            ("table", forward_table, max(args.reps // 2, 2)),
            ("per-token", forward_per_token, 3),
        ):
            step, opt = _step(fwd, tokens, hyper, args.activation)
            times[name] = _seconds(step, params, opt.init(params), reps)
        grads = jax.tree.map(jnp.ones_like, params)
        opt = optax.adam(1e-3)
        times["update"] = _seconds(_update_only(opt, grads), params, opt.init(params), args.reps)
        print(
            f"d_model={d:5d}: span {times['span'] * 1e3:8.2f} ms/step, "
            f"table {times['table'] * 1e3:8.2f}, per-token {times['per-token'] * 1e3:8.1f}; "
            f"per-token/span x{times['per-token'] / times['span']:6.1f}, "
            f"table/span x{times['table'] / times['span']:4.2f}; "
            f"Adam's update {times['update'] * 1e3:6.2f} ms = "
            f"{100 * times['update'] / times['span']:4.1f}% of the span step"
        )


if __name__ == "__main__":
    main()
