"""Benchmark: one run_sgld step of the network against the bare forward and backward.

At P = 800, L = 25, V = 5, full batch, one chain, d_model = 256 by default, it times

* **bare**: the jitted value and gradient of the chi-scaled negative log-posterior with the span
  forward (:func:`bayes_attn.models.network.neg_log_posterior`), the step of
  ``benchmarks/bench_forward.py`` without Adam's update: the floor of any sampler's step;
* **run_sgld**: the seconds per step of :func:`bayes_attn.inference.run_sgld` on
  :func:`bayes_attn.models.network_model`, from two runs of different lengths (their difference
  removes compilation and the post-processing of the kept draws), float64 and float32;
* **MCMC**: the same kernel under NumPyro's ``MCMC`` (what run_sgld did before issue 28: the
  sites and order parameters post-processed at every step), the same way.

Each difference is the least of two (on a shared machine the others' load only adds). It
prints the ratio run_sgld / bare (issue 28's goal: at most 1.5 at d = 256, P = 800).

The step size follows the curvature at the start: ε = 0.1 / h_max, h_max the largest eigenvalue
of the potential's Hessian there (power method). A fixed ε = 1e-6 (the earlier default) is
stable at d = 256 (h_max = 1.3e6, εh = 1.3) but not at d = 1024 (h_max = 5.2e6, εh = 5.2: the
chain diverged at step 6, which ended in NumPyro's "Normal distribution got invalid loc
parameter" and now stops with ``SamplerDiverged``). The time of a step does not depend on ε.

With ``--breakdown`` it instead times the pieces of one step of run_sgld's kernel on the network
of issue 44 (embeddings frozen, so W_G and W_O are the (d + V) d sampled weights): the value and
gradient of the potential (and a step along it), the noise (key splits and one normal per weight,
float64 and float32, summed so that none is skipped),
the flat bookkeeping (ravel z and the gradient, the update, unravel, the gradient's norm), and the
whole step with the default settings and with ``SGLDSettings``' ``fused`` and ``noise_dtype``
options. Each piece runs in a jitted loop of STEPS iterations, as the sampler's loop runs it; the
figure is the least of 3 calls, in wall and in CPU (process) seconds, the CPU figure being the
robust one on a shared machine.

Run: ``.venv/bin/python benchmarks/bench_sgld.py [--d 256] [--P 800] [--steps 200]
[--breakdown]``.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

import bayes_attn as ba
from bayes_attn.inference import run_sgld
from bayes_attn.inference.potential import flat_potential
from bayes_attn.inference.sgld import SGLD
from bayes_attn.models import init_params, network_model
from bayes_attn.models.network import neg_log_posterior


def _bare(params, tokens, hyper, activation, reps):
    step = jax.jit(jax.value_and_grad(lambda p: neg_log_posterior(p, tokens, hyper, activation)))
    jax.block_until_ready(step(params))
    t0 = time.perf_counter()
    for _ in range(reps):
        out = step(params)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


def _step_size(args, params, iterations=15):
    """0.1 / h_max of the network's potential at ``params`` (module docstring)."""
    pot = flat_potential(network_model, args)
    x = pot.ravel(params)
    grad = jax.grad(pot.U)
    hvp = jax.jit(lambda x, v: jax.jvp(grad, (x,), (v,))[1])
    v, h_max = jnp.ones_like(x) / x.size**0.5, 0.0
    for _ in range(iterations):
        w = hvp(x, v)
        h_max = float(jnp.linalg.norm(w))
        v = w / h_max
    return 0.1 / h_max


def _sgld(args, params, steps, dtype, eps):
    def run(n):
        t0 = time.perf_counter()
        idata = run_sgld(
            network_model, model_args=args, num_chains=1, num_warmup=n, num_samples=10,
            thinning=10, step_size=eps, init_params=params, progress_bar=False, dtype=dtype,
        )  # fmt: skip
        assert idata.posterior.sizes["draw"] == 1
        return time.perf_counter() - t0

    run(steps)  # the first run compiles what later runs reuse (the model's own jits)
    return min(run(3 * steps) - run(steps) for _ in range(2)) / (2 * steps)


def _mcmc(args, params, steps, eps):
    from numpyro.infer import MCMC

    from bayes_attn.inference.sgld import SGLD

    def run(n):
        t0 = time.perf_counter()
        mcmc = MCMC(SGLD(network_model, eps), num_warmup=n, num_samples=10, thinning=10,
                    progress_bar=False)  # fmt: skip
        mcmc.run(jax.random.key(0), *args, init_params=params)
        jax.block_until_ready(mcmc.get_samples())
        return time.perf_counter() - t0

    run(steps)
    return min(run(3 * steps) - run(steps) for _ in range(2)) / (2 * steps)


def _loop_time(body, state, steps):
    """(wall, CPU) ms per iteration of ``body`` in a jitted loop of ``steps``: least of 3 calls."""
    loop = jax.jit(lambda s: jax.lax.fori_loop(0, steps, lambda i, s: body(s), s))
    state = jax.block_until_ready(loop(state))
    best = [float("inf")] * 2
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        state = jax.block_until_ready(loop(state))
        best = [min(best[0], time.perf_counter() - t0), min(best[1], time.process_time() - c0)]
    return [1e3 * b / steps for b in best]


def breakdown(task, hyper, tokens, activation, d, steps):
    """The pieces of one kernel step (module docstring), frozen embeddings."""
    params = init_params(jax.random.key(1), task, hyper, d)
    kw = {"train_embeddings": False, "embeddings": (params["W_emb"], params["p"])}
    margs, z = (task, hyper, tokens, activation, d), {k: params[k] for k in ("W_G", "W_O")}
    kernel = SGLD(network_model, 1e-12)
    state = kernel.init(jax.random.key(0), 0, z, margs, kw)
    n = ravel_pytree(z)[0].size

    def value_grad(s):  # z moves, so that XLA cannot hoist the gradient out of the loop
        pe, g = kernel._potential_and_grad(s.z, s.rng_key, margs, kw)
        z = jax.tree.map(lambda x, g: x - 1e-12 * g, s.z, g)
        return s._replace(z=z, z_grad=g, potential_energy=pe)

    def noise(dtype):
        def body(s):
            key, key_noise, _ = jax.random.split(s.rng_key, 3)
            xi = jax.random.normal(key_noise, (n,), dtype)
            return s._replace(rng_key=key, potential_energy=s.potential_energy + jnp.sum(xi))

        return body

    def bookkeeping(s):
        flat, unravel = ravel_pytree(s.z)
        z = unravel(flat - 1e-12 * ravel_pytree(s.z_grad)[0] + 1e-12 * flat)
        return s._replace(z=z, grad_norm=jnp.linalg.norm(ravel_pytree(s.z_grad)[0]))

    rows = {
        "value and gradient of the potential": value_grad,
        "noise: 3-way key split + normal draw, float64": noise(jnp.float64),
        "noise: 3-way key split + normal draw, float32": noise(jnp.float32),
        "flat bookkeeping (ravel, update, unravel, norm)": bookkeeping,
    }
    for name, options in (("", {}), (", fused", {"fused": True}),
                          (", fused + float32 noise", {"fused": True, "noise_dtype": "float32"})):  # fmt: skip
        k = SGLD(network_model, 1e-12, **options)
        rows[f"whole step{name or ', default'}"] = partial(
            k.sample, model_args=margs, model_kwargs=kw
        )
    print(f"one kernel step, d = {d}, P = {tokens.shape[0]}, {activation}, frozen embeddings, "
          f"{n} sampled weights, float64; ms per step, wall / CPU (least of 3 loops of {steps})")  # fmt: skip
    for name, body in rows.items():
        wall, cpu = _loop_time(body, state, steps)
        print(f"  {name:52s} {wall:8.2f} / {cpu:8.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[256])
    parser.add_argument("--P", type=int, default=800)
    parser.add_argument("--activation", default="softmax")
    parser.add_argument("--steps", type=int, default=1000, help="the runs take STEPS, 3 STEPS")
    parser.add_argument("--breakdown", action="store_true", help="the pieces of one step")
    args = parser.parse_args()
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(0), args.P)
    if args.breakdown:
        for d in args.d:
            breakdown(task, hyper, tokens, args.activation, d, args.steps)
        return
    print(f"one SGLD step, {args.activation}, P={args.P}, L={task.L}, V={task.V}, full batch")
    for d in args.d:
        params = init_params(jax.random.key(1), task, hyper, d)
        bare = _bare(params, tokens, hyper, args.activation, args.steps)
        margs = (task, hyper, tokens, args.activation, d)
        eps = _step_size(margs, params)
        f64 = _sgld(margs, params, args.steps, "float64", eps)
        f32 = _sgld(margs, params, args.steps, "float32", eps)
        old = _mcmc(margs, params, args.steps, eps)
        print(
            f"d_model={d:5d} (ε {eps:.2g}): bare value+grad {bare * 1e3:7.2f} ms, run_sgld float64 "
            f"{f64 * 1e3:7.2f} ms (x{f64 / bare:4.2f}), float32 {f32 * 1e3:7.2f} ms "
            f"(x{f32 / bare:4.2f} of the float64 bare step); NumPyro MCMC {old * 1e3:7.2f} ms "
            f"(x{old / bare:4.2f})"
        )


if __name__ == "__main__":
    main()
