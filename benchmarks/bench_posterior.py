"""Benchmark: NUTS on the reduced posterior, and the kernel-limit gradient against a dense baseline.

1. Reduced posterior, 4 chains x 2000 draws (500 warm-up): compile time, sampling time, ESS/s.
   Compile time is the first run minus a second run of the same compiled sampler.
2. Kernel-limit posterior at L = 25, V = 5, P = 400 (and 800): seconds per gradient of the potential
   with our table gathers, against a dense-einsum baseline (psi^T M psi and sum_b A psi_b as einsums
   over (P, L, V+L) features) in the same run; then a short NUTS run for ESS/s of (c1, cG).

Run: ``.venv/bin/python benchmarks/bench_posterior.py [--skip-kernel-nuts]``.
"""

from __future__ import annotations

import argparse
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import initialize_model

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.models import kernel_limit_model, order_param_model


def _timed_runs(model, args, num_warmup, num_samples, chains, fold=False):
    mcmc = MCMC(
        NUTS(model),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    t0 = time.perf_counter()
    mcmc.run(jax.random.key(0), *args)
    jax.block_until_ready(mcmc.get_samples())
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    mcmc.run(jax.random.key(1), *args)
    jax.block_until_ready(mcmc.get_samples())
    second = time.perf_counter() - t0
    idata = az.from_numpyro(mcmc, log_likelihood=False)
    if fold:  # linear ordered phase: chains sit in one Z2 image each; measure ESS within an image
        sign = np.sign(idata.posterior["c1"])
        for v in ("c1", "cG"):
            idata.posterior[v] = idata.posterior[v] * sign
    ess = az.ess(idata)
    return first, second, min(float(ess[v].min()) for v in ess.data_vars)


def reduced():
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    print("reduced posterior, 4 chains x 2000 draws (+500 warm-up)")
    for activation, P in (
        ("linear", 50.0),
        ("linear", 300.0),
        ("softmax", 300.0),
        ("softmax", 2000.0),
    ):
        fold = activation == "linear" and P > 22.76  # above P* = 22.76 (Table 1)
        first, second, ess = _timed_runs(
            order_param_model, (task, hyper, P, activation), 500, 2000, 4, fold=fold
        )
        print(
            f"  {activation:8s} P={P:6.0f}: compile ~{first - second:5.1f} s, sampling {second:5.2f} s,"
            f" min bulk ESS {ess:6.0f}, ESS/s {ess / second:7.0f}{' (Z2-folded)' if fold else ''}"
        )


def _dense_potential(task, hyper, tokens, activation):
    """Baseline: the same potential with dense (P, L, V+L) feature einsums."""
    psi = algebra.features(tokens, task.V)

    def pot(M):
        K = jnp.einsum("pai,ij,pbj->pab", psi, M, psi)
        A = algebra.attention(K, activation)
        Phi = jnp.einsum("pab,pbi->pai", A, psi).reshape(-1, task.n_features)
        y = algebra.targets(tokens, task.V).reshape(-1, task.V)
        G, B = Phi.T @ Phi, Phi.T @ y
        lam = hyper.sigma2 / hyper.g_o
        fit = jnp.sum(B * jnp.linalg.solve(lam * jnp.eye(task.n_features) + G, B))
        s = (jnp.sum(y**2) - fit) / (2 * hyper.sigma2)
        ld = task.V / 2 * jnp.linalg.slogdet(jnp.eye(task.n_features) + G / lam)[1]
        return hyper.chi * (jnp.sum(M**2) / (2 * hyper.g_w) + s) + ld

    return pot


def _per_call(f, x, n=20):
    jax.block_until_ready(f(x))
    t0 = time.perf_counter()
    for _ in range(n):
        jax.block_until_ready(f(x))
    return (time.perf_counter() - t0) / n


def kernel(run_nuts: bool):
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    for P in (400, 800):
        tokens = task.sample(jax.random.key(0), P)
        args = (task, hyper, tokens, "linear")
        info = initialize_model(jax.random.key(0), kernel_limit_model, model_args=args)
        M = info.param_info.z["M"]
        ours = jax.jit(jax.grad(lambda m, pot=info.potential_fn: pot({"M": m})))
        dense = jax.jit(jax.grad(_dense_potential(*args)))
        g1, g2 = ours(M), dense(M)
        assert float(jnp.max(jnp.abs(g1 - g2))) < 1e-6 * float(jnp.max(jnp.abs(g2)))
        t_ours, t_dense = _per_call(ours, M), _per_call(dense, M)
        print(
            f"kernel limit L=25 V=5 P={P}: gradient {t_ours * 1e3:6.1f} ms (gathers) vs "
            f"{t_dense * 1e3:6.1f} ms (dense einsum): x{t_dense / t_ours:4.1f}"
        )
    if run_nuts:
        tokens = task.sample(jax.random.key(0), 400)
        mcmc = MCMC(
            NUTS(kernel_limit_model),
            num_warmup=100,
            num_samples=100,
            num_chains=2,
            chain_method="vectorized",
            progress_bar=False,
        )
        t0 = time.perf_counter()
        mcmc.run(jax.random.key(0), task, hyper, tokens, "linear", extra_fields=("num_steps",))
        jax.block_until_ready(mcmc.get_samples())
        wall = time.perf_counter() - t0
        ess = az.ess(az.from_numpyro(mcmc, log_likelihood=False), var_names=["c1", "cG"])
        e = min(float(ess[v]) for v in ess.data_vars)
        steps = float(np.mean(mcmc.get_extra_fields()["num_steps"]))
        print(
            f"kernel limit P=400 NUTS, 2 chains x 100 draws (+100 warm-up), compile included: "
            f"{wall:6.1f} s, mean leapfrog steps/draw {steps:5.0f}, min bulk ESS (c1, cG) {e:5.0f}, "
            f"ESS/s {e / wall:6.2f}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-kernel-nuts", action="store_true")
    args = parser.parse_args()
    reduced()
    kernel(not args.skip_kernel_nuts)


if __name__ == "__main__":
    main()
