"""The scaling of P*(L, V) for uniform tokens (docs/validation.md "The scaling of P*(L, V)",
docs/theory.md "The scaling of P*(L, V)", README "Scaling").

Computes the Level-2 grid (12 x 12, L in [4, 256], V in [2, 512], both activations) with
:func:`bayes_attn.theory.scaling.pstar_grid`, or reads it back with ``--grid``; writes it to
``docs/figures/scaling/pstar_grid.nc``; prints the NaN counts, the exponent fits (whole grid with a
cross term, long sequences L >= 4V, large vocabularies V >= 4L) and, with ``--level1``, the Level-1
second-order point at the four corners of the grid; draws ``docs/figures/scaling/pstar.png``.

Run: ``.venv/bin/python docs/scripts/scaling_figure.py [--grid PATH] [--level1 [--P 100,400]
[--corners 4x2,256x512]]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

import bayes_attn as ba  # noqa: E402
from bayes_attn.theory import scaling  # noqa: E402

OUT = Path("docs/figures/scaling")
STYLE = {
    "second_order": dict(ls="-", label="second order"),
    "crossover": dict(ls="--", label="crossover"),
    "first_order": dict(ls="-", label="first order"),
    "spinodal_lower": dict(ls=":", label="spinodals"),
    "spinodal_upper": dict(ls=":", label=None),
}
FITS = [(v, r, r == "all") for v in STYLE for r in ("all", "long", "wide")]
CORNERS = [(4, 2), (256, 2), (4, 512), (256, 512)]
SEEDS = (0, 1, 2)


def fit_table(ds):
    print("| P* | region | cells | a | b (L) | c (V) | d (log L log V) | rms of log P* |")
    print("|---|---|---|---|---|---|---|---|")
    for var, region, cross in FITS:
        f = scaling.fit_exponents(ds, var, region, cross=cross)
        d = f"{f['d'][0]:+.3f} ± {f['d'][1]:.3f}" if cross else "–"
        print(
            f"| {var} | {region} | {f['n']} | {f['a'][0]:.2f} ± {f['a'][1]:.2f} | "
            f"{f['b'][0]:+.3f} ± {f['b'][1]:.3f} | {f['c'][0]:+.3f} ± {f['c'][1]:.3f} | {d} | "
            f"{f['rms']:.3f} |"
        )


def level1_table(ds, corners, Ps):
    """The Level-1 second-order point on datasets of P = P2 sequences at each corner, at the sigma^2
    that puts the Level-2 P* (P2, proportional to sigma^2) at P."""
    hyper = ba.Hyper.paper()
    print("| L | V | P (= Level-2 P*) | σ² | Level-1 P / Level-2 P*, datasets 0, 1, 2 | mean − 1 |")
    print("|---|---|---|---|---|---|")
    for L, V in corners:
        p30 = float(ds["second_order"].sel(L=L, V=V))
        for P in Ps:
            h = hyper.replace(sigma2=hyper.sigma2 * P / p30)
            r = []
            for seed in SEEDS:
                tokens = np.random.default_rng(seed).integers(0, V, (P, L))
                r.append(scaling.level1_second_order(tokens, V, h)["P"] / P)
            print(
                f"| {L} | {V} | {P} | {h.sigma2:.4g} | {', '.join(f'{x:.4f}' for x in r)} | "
                f"{np.mean(r) - 1:+.4f} |"
            )


def draw(ds, path):
    fig, axes = plt.subplots(2, 2, figsize=(10, 8), constrained_layout=True)
    Vsel = ds["V"].values[[0, 4, 8, 11]]
    Lsel = ds["L"].values[[0, 4, 8, 11]]
    colours = plt.cm.viridis(np.linspace(0, 0.85, 4))
    for row, (act, vars_) in enumerate(scaling.TRANSITIONS.items()):
        for col, (axis, sel) in enumerate((("L", Vsel), ("V", Lsel))):
            ax = axes[row, col]
            other = "V" if axis == "L" else "L"
            for k, val in enumerate(sel):
                for var in vars_:
                    line = ds[var].sel({other: val})
                    style = dict(STYLE[var])
                    style["label"] = f"{other} = {val}" if var == vars_[0] else None
                    ax.plot(ds[axis], line, color=colours[k], marker=".", **style)
            ax.set(xscale="log", yscale="log", xlabel=axis, ylabel="P*")
            ax.legend(fontsize=7, loc="upper left")
            kinds = ", ".join(
                f"{STYLE[v]['label']} ({STYLE[v]['ls']})" for v in vars_ if STYLE[v]["label"]
            )
            ax.set_title(f"{act}: P* against {axis}; {kinds}", fontsize=9)
            _slopes(ax, ds, act, axis)
    fig.suptitle(
        "Level 2, uniform tokens, Table-1 scales (σ² = 30, g_W = g_O = 1); "
        "slopes in the titles: derived (linear, second order), fitted (softmax, first order)",
        fontsize=9,
    )
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def _slopes(ax, ds, act, axis):
    """Slope triangles: the derived second-order exponents, the fitted first-order ones."""
    if act == "linear":
        slopes = {"long": scaling.ASYMPTOTIC["long"], "wide": scaling.ASYMPTOTIC["wide"]}
        tag = "derived"
    else:
        slopes = {r: _fit_bc(ds, "first_order", r) for r in ("long", "wide")}
        tag = "fit"
    k = 0 if axis == "L" else 1
    text = ", ".join(f"{r}: {s[k]:+.2f}" for r, s in slopes.items())
    ax.set_title(f"{ax.get_title()}\n{tag} slope in {axis}: {text}", fontsize=9)


def _fit_bc(ds, var, region):
    f = scaling.fit_exponents(ds, var, region)
    return f["b"][0], f["c"][0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", help="read this pstar_grid result instead of computing it")
    parser.add_argument("--level1", action="store_true", help="also the Level-1 corner checks")
    parser.add_argument("--P", default="100", help="comma-separated dataset sizes for --level1")
    parser.add_argument("--corners", default="4x2,256x2,4x512,256x512", help="LxV,... for --level1")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.grid:
        ds = xr.load_dataset(args.grid)
    else:
        t0 = time.perf_counter()
        Ls = scaling.log_grid(*scaling.L_RANGE, 12, "L")
        Vs = scaling.log_grid(*scaling.V_RANGE, 12, "V")
        ds = scaling.pstar_grid(Ls, Vs, ("linear", "softmax"))
        print(f"grid in {time.perf_counter() - t0:.1f} s")
        ds.to_netcdf(out / "pstar_grid.nc")
    print("L:", ds["L"].values.tolist(), "V:", ds["V"].values.tolist())
    print("NaN cells:", scaling.nan_counts(ds))
    fit_table(ds)
    if args.level1:
        corners = [tuple(int(v) for v in c.split("x")) for c in args.corners.split(",")]
        level1_table(ds, corners, [int(p) for p in args.P.split(",")])
    draw(ds, out / "pstar.png")


if __name__ == "__main__":
    main()
