"""The LLC checks of docs/validation.md ("The local learning coefficient against exact values").

1. The exact checks of tests/test_llc.py, with their numbers (quadratic: MALA and SGLD's closed-
   form bias; RMSProp-SGLD at its settled preconditioner; w^4; the normal crossing on a box against
   quadrature).
2. The frozen-embedding network (L = 8, V = 3, softmax, P = 20, nβ = P / log P, γ = 100) at its
   exact MAP: the exact LLC (W_O integrated out, NUTS over the whitened gate) against MALA and
   SGLD on the explicit network's weights at d = 16 and d = 64, SGLD on a halving ladder of ε.

3. ``--calibrate``: prints the two commands that make ``docs/figures/llc_calibration_d64.{nc,png}``
   (``calibrate_llc`` on the same network at d = 64 with the exact value beside each nβ's verdict):
   the ``llc_calibration`` sweep kind (``bayes_attn/configs/llc_calibration.toml``) and
   ``docs/scripts/llc_calibration.py``.

4. ``--seeds``: SGLD's step bias at d = 64 with the error from six independent seeds per step.

Run: ``.venv/bin/python benchmarks/llc_exact.py [d ...] [--quick]`` (about 15 min on 2 busy cores; the
toy checks only with the default widths 16 and 64); ``... llc_exact.py 1024 10000 --exact-only``
the exact rows alone (any width: the explicit network's side grows as d²);
``... llc_exact.py 10000 --step-cost`` the explicit SGLD step's cost at that width. The
steps scale as 16 / d (the curvature of the network's W_G grows with d) and each kept draw is
d / 16 steps after the last.
"""

from __future__ import annotations

import math
import time

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

import bayes_attn as ba
from bayes_attn.analysis.llc import llc_estimate
from bayes_attn.experiments.llc_studies import benchmark_problem
from bayes_attn.inference.llc import exact_frozen_llc, run_llc
from bayes_attn.models import network_model

A = np.array([1.0, 4.0, 0.25])


def quadratic(n=100):
    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand((3,)).to_event(1))
    numpyro.factor("loss", -n * 0.5 * jnp.sum(jnp.asarray(A) * w**2))


def row(label, est, exact=None):
    ref = "" if exact is None else f" | {exact:.4f} | {(est.llc_mean - exact) / est.mcse:+.1f}"
    print(f"| {label} | {est.llc_mean:.4f} ± {est.mcse:.4f} | {est.acceptance:.3f}{ref} |")


def toy_checks():
    nbeta, gamma = 50.0, 10.0
    h = nbeta * A + gamma
    print("| check | λ̂ ± MCSE | acceptance | exact | (λ̂ − exact)/MCSE |\n|---|---|---|---|---|")
    exact = 0.5 * np.sum(nbeta * A / h)
    kw = dict(n=100, nbeta=nbeta, gamma=gamma, num_chains=4, num_draws=4000, num_burnin=200, seed=0)
    row("quadratic, MALA ε = 2e-3", llc_estimate(run_llc(quadratic, jnp.zeros(3), sampler="mala",
                                                         step_size=2e-3, **kw)), exact)  # fmt: skip
    for eps in (2e-3, 1e-3, 5e-4):
        ula = 0.5 * np.sum(nbeta * A / (h * (1 - eps * h / 2)))
        est = llc_estimate(run_llc(quadratic, jnp.zeros(3), step_size=eps, **kw))
        row(f"quadratic, SGLD ε = {eps:g} (exact: its ULA value; continuum {exact:.4f})", est, ula)
    # RMSProp-SGLD: ULA at the settled G = 1 / (√v + δ), v = h / (1 - u / 2), u = ε G h
    eps, G = 0.035, 1 / np.sqrt(h)
    for _ in range(200):
        G = 1 / (np.sqrt(h / (1 - eps * G * h / 2)) + 1e-8)
    settled = 0.5 * np.sum(nbeta * A / (h * (1 - eps * G * h / 2)))
    for alpha, draws, burnin in ((0.999, 4000, 5000), (0.99, 40000, 5000), (0.999, 40000, 5000),
                                 (0.9999, 40000, 50000)):  # fmt: skip
        est = llc_estimate(run_llc(quadratic, jnp.zeros(3), sampler="rmsprop", step_size=eps,
                                   rmsprop=(alpha, 1e-8), **{**kw, "num_draws": draws,
                                                             "num_burnin": burnin}))  # fmt: skip
        row(f"quadratic, RMSProp-SGLD ε = {eps:g}, α = {alpha:g}, {draws} draws after {burnin}",
            est, settled)  # fmt: skip


def frozen_case(P, d):
    """w* and the call of the network (L = 8, V = 3, softmax, γ = 100) at P and width d
    (:func:`bayes_attn.experiments.llc_studies.benchmark_problem`: the benchmark's key layout)."""
    task, hyper = ba.CopyTask(8, 3), ba.Hyper.paper()
    _, args, kw, w_star, _ = benchmark_problem(task, hyper, P, "softmax", d_model=d)
    return w_star, dict(model_args=args, model_kwargs=kw, gamma=100.0)


def network_checks(P=20, widths=(16, 64), ladder=(1e-3, 5e-4, 2.5e-4), draws=4000,
                   exact_only=False):  # fmt: skip
    print(
        "\n| d | sampler | ε | λ̂ ± MCSE | R-hat | acceptance | time (s) |\n|---|---|---|---|---|---|---|"
    )
    for d in widths:
        w_star, call = frozen_case(P, d)
        t0 = time.perf_counter()
        ex = llc_estimate(exact_frozen_llc(network_model, w_star, num_draws=1000, seed=0, **call))
        print(f"| {d} | exact (NUTS, W_O integrated out) | — | {ex.llc_mean:.4f} ± {ex.mcse:.4f} | "
              f"{ex.rhat:.3f} | {ex.acceptance:.3f} | {time.perf_counter() - t0:.0f} |")  # fmt: skip
        # the curvature grows with d: the steps scale as 16 / d, each draw d / 16 steps apart
        scale = 16 / d
        runs = (
            [] if exact_only else [("mala", 1e-3 * scale)] + [("sgld", e * scale) for e in ladder]
        )
        for sampler, eps in runs:
            t0 = time.perf_counter()
            est = llc_estimate(run_llc(network_model, w_star, sampler=sampler, step_size=eps,
                                       num_draws=draws, num_burnin=1000, thinning=d // 16,
                                       seed=0, **call))  # fmt: skip
            z = (est.llc_mean - ex.llc_mean) / math.hypot(est.mcse, ex.mcse)
            print(f"| {d} | {sampler} | {eps:g} | {est.llc_mean:.4f} ± {est.mcse:.4f} ({z:+.1f} "
                  f"combined MCSE from exact) | {est.rhat:.3f} | {est.acceptance:.3f} | "
                  f"{time.perf_counter() - t0:.0f} |")  # fmt: skip
        print(f"(d = {d}: L_n(w*) = {ex.init_loss:.6f}, |∇L_n(w*)| = {ex.grad_norm:.4f}, "
              f"nβ = {ex.nbeta:.4f})")  # fmt: skip


def step_cost(widths, P=20):
    """Seconds per SGLD step on the explicit network (one chain), from runs of 2 and 12 steps (the
    difference over 10): what the explicit side of the table costs at large d. Each run compiles
    afresh, so the difference carries the compile's jitter (about a second): fine at d = 10⁴
    (5 s a step), noise at small d (d = 16 reads a few hundredths of a second, either sign)."""
    for d in widths:
        w_star, call = frozen_case(P, d)
        wall = {}
        for steps in (2, 12):
            t0 = time.perf_counter()
            run_llc(network_model, w_star, num_chains=1, num_draws=steps, step_size=1e-7, seed=0,
                    **call)  # fmt: skip
            wall[steps] = time.perf_counter() - t0
        print(
            f"d = {d}: {(wall[12] - wall[2]) / 10:.2f} s per SGLD step, one chain "
            f"(2 steps {wall[2]:.1f} s, 12 steps {wall[12]:.1f} s)",
            flush=True,
        )


#: the commands that make docs/figures/llc_calibration_d64.{nc,png} (``--calibrate``)
CALIBRATION_COMMANDS = """\
bayes-attn sweep --config bayes_attn/configs/llc_calibration.toml --out docs/figures/llc_calibration_d64.nc
python docs/scripts/llc_calibration.py docs/figures/llc_calibration_d64.nc --figure docs/figures/llc_calibration_d64.png"""


def seed_spread(d=64, P=20, steps=(6.25e-5, 3.125e-5), seeds=6, total=20000):
    """SGLD's step bias with an honest error: at each ε, ``seeds`` independent runs (4 chains each,
    ``total`` x (6.25e-5 / ε) steps, 1/20 of them burn-in), the mean over the seeds against the
    exact value with the standard error from the seeds' spread (not from one run's MCSE), and
    that spread against the runs' own MCSE."""
    w_star, call = frozen_case(P, d)
    ex = llc_estimate(exact_frozen_llc(network_model, w_star, num_draws=1000, seed=0, **call))
    print(f"\nexact {ex.llc_mean:.4f} ± {ex.mcse:.4f}\n\n| ε | steps per chain | λ̂ per seed | "
          "mean ± s.e. over seeds | from exact (s.e.) | spread / mean MCSE | time (s) |\n"
          "|---|---|---|---|---|---|---|")  # fmt: skip
    for eps in steps:
        n = round(total * 6.25e-5 / eps)
        thin = n // 5000
        t0 = time.perf_counter()
        est = [llc_estimate(run_llc(network_model, w_star, sampler="sgld", step_size=eps,
                                    num_draws=5000, thinning=thin, num_burnin=n // 20, seed=s,
                                    **call)) for s in range(seeds)]  # fmt: skip
        vals = np.array([e.llc_mean for e in est])
        se = vals.std(ddof=1) / math.sqrt(seeds)
        ratio = vals.std(ddof=1) / np.mean([e.mcse for e in est])
        print(f"| {eps:g} | {n} | {', '.join(f'{v:.3f}' for v in vals)} | {vals.mean():.4f} ± "
              f"{se:.4f} | {(vals.mean() - ex.llc_mean) / math.hypot(se, ex.mcse):+.1f} | "
              f"{ratio:.2f} | {time.perf_counter() - t0:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    import sys

    if "--seeds" in sys.argv:
        seed_spread()
        sys.exit()

    if "--calibrate" in sys.argv:  # now a sweep kind and its drawing script
        print(CALIBRATION_COMMANDS)
        sys.exit()
    quick = "--quick" in sys.argv  # the smallest SGLD step only, 2000 draws (for d = 256)
    flags = ("--quick", "--exact-only", "--step-cost")
    given = tuple(int(a) for a in sys.argv[1:] if a not in flags)
    widths = given or (16, 64)
    if "--step-cost" in sys.argv:  # seconds per explicit SGLD step (one chain) at each width
        step_cost(given or (10_000,))
        sys.exit()
    if "--exact-only" in sys.argv:  # the exact rows alone (any width: the explicit side is d²)
        network_checks(widths=widths, exact_only=True)
        sys.exit()
    if widths == (16, 64):
        toy_checks()
    if quick:
        network_checks(widths=widths, ladder=(2.5e-4,), draws=2000)
    else:
        network_checks(widths=widths)
