"""The reduced posterior of (c1, cG) across the linear second-order transition.

NUTS samples exp(-chi s(c1, cG)) at several P around P* = 22.76 (the paper's Table 1). The figures show the
posterior with ``az.plot_posterior`` (``az.plot_dist`` under ArviZ 1.x) and the joint draws below and above P*, and the posterior variance
of c1 against P: the fluctuations grow towards P*, the precursor of a second-order transition,
beside the Laplace (Hessian) prediction (H^-1)_11 / chi, which diverges there.
Above P* the posterior has two Z2 images; there the draws are folded onto c1 >= 0 (one image).

Run: ``.venv/bin/python examples/reduced_posterior.py --out out/reduced_posterior [--quick]``.
"""

from __future__ import annotations

import argparse
import pathlib

import matplotlib.pyplot as plt
import numpy as np

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn import theory
from bayes_attn.analysis import diagnose
from bayes_attn.inference import run_nuts
from bayes_attn.models import order_param_model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/reduced_posterior")
    parser.add_argument("--quick", action="store_true", help="few P values and draws (for tests)")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    P_star = theory.phase_boundaries(task, hyper).second_order
    Ps = [9.0, 23.0, 57.0] if args.quick else [7, 11, 16, 19, 21.6, 22.8, 23.9, 26, 32, 46, 68, 114]
    draws = 300 if args.quick else 2000

    rows, runs = [], {}
    for P in Ps:
        idata = run_nuts(
            order_param_model,
            model_args=(task, hyper, float(P), "linear"),
            num_warmup=500,
            num_samples=draws,
            seed=0,
            progress_bar=False,
        )
        c = np.stack([idata.posterior[v].values.ravel() for v in ("c1", "cG")])
        sd = theory.global_saddle(task, hyper, P, "linear")
        folded = c * np.sign(c[0] + 1e-300) if P > P_star else c  # one Z2 image above P*
        H = sd.hessian
        laplace = np.linalg.inv(H)[0, 0] / hyper.chi if np.linalg.det(H) > 0 else np.inf
        rows.append((P, folded[0].mean(), folded[0].var(), laplace, sd.c1))
        runs[P] = idata
        d = diagnose(idata)
        print(
            f"P = {P:6.1f}: c1 = {folded[0].mean():.4f} +- {folded[0].std():.4f} "
            f"(saddle {sd.c1:.4f}); {d.warnings[0] if d.warnings else d.z2 or 'chains agree'}"
        )

    below, above = min(Ps), max(Ps)
    for P in (below, above):
        axes = az.plot_posterior(runs[P], var_names=["c1", "cG"])  # plot_dist under ArviZ 1.x
        fig = axes.ravel()[0].figure
        fig.set_size_inches(8, 3.4)
        fig.suptitle(f"reduced posterior, linear, P = {P:g} (P* = {P_star:.1f})", y=1.0)
        fig.tight_layout()
        fig.savefig(out / f"posterior_P{P:g}.png", dpi=90)
        post = runs[P].posterior
        fig, ax = plt.subplots(figsize=(4, 4), constrained_layout=True)
        ax.scatter(post["c1"].values.ravel(), post["cG"].values.ravel(), s=2, alpha=0.3)
        ax.set(xlabel="c1", ylabel="cG", title=f"joint posterior draws, P = {P:g}")
        fig.savefig(out / f"pair_P{P:g}.png", dpi=90)
        plt.close("all")

    r = np.array(rows)
    fig, ax = plt.subplots(figsize=(5.5, 3.6), constrained_layout=True)
    ax.plot(r[:, 0], r[:, 2], "o-", label="NUTS (within one Z2 image)")
    ax.plot(
        r[:, 0],
        np.where(np.isfinite(r[:, 3]), r[:, 3], np.nan),
        "k--",
        label="Laplace (H^-1)_11 / chi",
    )
    ax.axvline(P_star, color="grey", lw=0.8, label="P*")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="P",
        ylabel="posterior variance of c1",
        title="fluctuations grow towards the second-order P*",
    )
    ax.legend(fontsize=8)
    fig.savefig(out / "variance_c1.png", dpi=100)
    print(f"wrote {out}/variance_c1.png, posterior_P*.png, pair_P*.png")


if __name__ == "__main__":
    main()
