"""The two coexisting phases of the softmax posterior at its first-order transition.

At the paper preset the weak-copy (aG ~ 0.4) and strong-copy (aG ~ 3.8) phases carry equal posterior
mass at P_cross = 276.03 (chi = 30, log-determinant left out, as in the saddle-point theory). NUTS
chains started in either phase stay there; tempered SMC crosses the barrier and weighs the phases.
Figures: the posterior of aG from SMC (a histogram of the draws) with the exact density overlaid, the
per-chain traces of stuck NUTS chains beside the SMC draws, the exact weight of the strong
phase against P with the SMC fractions, and the hysteresis loop: warm-started descent on the
reduced action swept up and down in P (it jumps at the spinodals) beside warm-started Adam networks
(d_model = 32, embeddings frozen at an orthonormal basis, 2 members, 400 steps per P over
P = 230 ... 340; about 8 min on two CPU cores, left out with --quick).

Run: ``.venv/bin/python examples/multimodal_softmax.py --out out/multimodal [--quick]``.
"""

from __future__ import annotations

import argparse
import pathlib

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.analysis import diagnose, phase_occupancy
from bayes_attn.experiments.hysteresis import (
    hysteresis_sweep,
    jump_points,
    orthonormal_start,
    theory_sweep,
)
from bayes_attn.inference import run_nuts, run_smc
from bayes_attn.models import order_param_model
from bayes_attn.plotting import plots
from bayes_attn.theory import phase_weights, weight_crossing
from bayes_attn.theory.action import action_softmax, scales


def exact_density(task, hyper, P, aG):
    """The normalised posterior density of aG: exp(-chi s(cG)) |dcG/daG| on a grid."""
    cG = algebra.softmax_logit(jnp.asarray(aG), task.L)
    logp = -hyper.chi * action_softmax(cG, P, scales(task, hyper))
    logp += jnp.log(jnp.abs(algebra.softmax_dlogit(jnp.asarray(aG), task.L)))
    p = np.exp(np.asarray(logp) - float(jnp.max(logp)))
    return p / np.trapezoid(p, aG)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/multimodal")
    parser.add_argument("--quick", action="store_true", help="fewer particles and draws (tests)")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    particles, draws = (500, 200) if args.quick else (4000, 1000)

    crossing = weight_crossing(task, hyper)
    P = crossing.P_cross
    pw = phase_weights(task, hyper, [P])
    aG_w, aG_s = float(pw.aG_weak[0]), float(pw.aG_strong[0])
    print(f"equal phase weights at P = {P:.2f}: weak aG = {aG_w:.3f}, strong aG = {aG_s:.3f}")

    smc = run_smc(
        order_param_model, model_args=(task, hyper, P, "softmax"), num_particles=particles, seed=0
    )
    occ = phase_occupancy(smc)
    print(
        f"SMC: strong-phase fraction {occ.fraction:.3f} +- {occ.se:.3f} (exact 0.500), "
        f"log evidence {smc.posterior.attrs['log_evidence']:.3f}"
    )

    aG0 = jnp.array([aG_w] * 4 + [aG_s] * 4)  # initial values in the constrained space
    nuts = run_nuts(
        order_param_model,
        model_args=(task, hyper, P, "softmax"),
        num_chains=8,
        num_warmup=200,
        num_samples=draws,
        init_params={"aG": aG0},
        progress_bar=False,
    )
    print(diagnose(nuts, ["aG"]))

    # 1. the posterior of aG, both modes, with the exact density
    fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
    draws = smc.posterior["aG"].values.ravel()
    ax.hist(draws, bins=120, density=True, color="C0", alpha=0.5, label="SMC draws")
    grid = np.linspace(-0.5, 6.0, 4000)
    ax.plot(grid, exact_density(task, hyper, P, grid), "k-", lw=1, label="exact")
    ax.set_title(f"aG at P = {P:.1f}: SMC draws and the exact posterior")
    ax.set(xlabel="aG (copy weight)", ylabel="density")
    ax.legend()
    ax.figure.savefig(out / "posterior_aG.png", dpi=110)
    plt.close(ax.figure)

    # 2. per-chain traces: NUTS stuck in its starting phase, SMC particles in both
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.5), sharey=True)
    x = nuts.posterior.aG.values
    for c in range(x.shape[0]):
        a.plot(x[c], lw=0.5, label=f"chain {c}")
    a.set(title="NUTS, 8 chains (4 started in each phase)", xlabel="draw", ylabel="aG")
    b.plot(smc.posterior.aG.values[0], ".", ms=1)
    b.set(title="tempered SMC particles", xlabel="particle")
    fig.tight_layout()
    fig.savefig(out / "traces.png", dpi=110)
    plt.close(fig)

    # 3. the weight of the strong phase against P: exact curve and SMC fractions
    Ps = np.linspace(P - 1.4, P + 1.4, 121)
    curve = phase_weights(task, hyper, Ps)
    checks = [P - 0.39, P, P + 0.30] if not args.quick else [P]
    fracs = [
        phase_occupancy(
            run_smc(
                order_param_model,
                model_args=(task, hyper, float(p), "softmax"),
                num_particles=particles,
                seed=1,
            )
        )
        for p in checks
    ]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(Ps, curve.strong_weight, "k-", label="exact (quadrature)")
    ax.plot(Ps, curve.strong_weight_laplace, "k:", label="Laplace")
    ax.errorbar(checks, [f.fraction for f in fracs], [f.se for f in fracs], fmt="o", label="SMC")
    ax.set(xlabel="P", ylabel="weight of the strong-copy phase", title="chi = 30, paper preset")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "phase_weights.png", dpi=110)
    plt.close(fig)

    # 4. hysteresis: the Level-2 loop (jumps at the spinodals) and warm-started Adam networks
    loop = theory_sweep(task, hyper, np.geomspace(205.0, 365.0, 57))
    jp = jump_points(loop)
    lo, hi = crossing.spinodals
    print(
        f"Level-2 loop: up-jump at P = {jp['up']:.1f}, down-jump at {jp['down']:.1f} "
        f"(spinodals {lo:.1f}, {hi:.1f}; equal action {crossing.first_order:.1f})"
    )
    if args.quick:
        fig = plots.hysteresis_loop(loop, crossing, jumps=jp)
    else:
        # embeddings frozen at an orthonormal basis: the objective is the Level-1 action on the
        # data (trained embeddings collapse and never copy; docs/validation.md "Hysteresis loop")
        net = hysteresis_sweep(
            task,
            hyper,
            [230, 240, 250, 260, 270, 280, 290, 300, 310, 320, 340],
            "softmax",
            32,
            members=2,
            init=orthonormal_start(task, hyper, 32, members=2, seed=0),
            lr=1e-2,
            max_steps=400,
            patience=10**6,
            train_embeddings=False,
        )
        net.to_netcdf(out / "hysteresis_network.nc")
        jn = jump_points(net, min_jump=1.0)
        print(f"network loop: up-jump at P = {jn['up']:.1f}, down-jump at {jn['down']:.1f}")
        fig = plots.hysteresis_loop(net, crossing, theory=loop, jumps=jn)
    fig.savefig(out / "hysteresis_loop.png", dpi=110)
    plt.close(fig)
    print(f"Wrote {out}/posterior_aG.png, traces.png, phase_weights.png, hysteresis_loop.png")


if __name__ == "__main__":
    main()
