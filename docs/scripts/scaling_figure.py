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

import time
from pathlib import Path

import numpy as np
import xarray as xr
from _study import arguments, pyplot

import bayes_attn as ba
from bayes_attn.plotting.studies import pstar_scaling
from bayes_attn.theory import scaling

OUT = Path("docs/figures/scaling")
FITS = [(v, r, r == "all") for vs in scaling.TRANSITIONS.values() for v in vs
        for r in ("all", "long", "wide")]  # fmt: skip
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
    """:func:`bayes_attn.plotting.studies.pstar_scaling`: the derived second-order exponents
    (linear), the fitted first-order ones (softmax) in the titles."""
    fits = {r: scaling.fit_exponents(ds, "first_order", r) for r in ("long", "wide")}
    slopes = {"linear": ("derived", {r: scaling.ASYMPTOTIC[r] for r in ("long", "wide")}),
              "softmax": ("fit", {r: (f["b"][0], f["c"][0]) for r, f in fits.items()})}  # fmt: skip
    pstar_scaling(ds, slopes).savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv=None):
    parser = arguments(__doc__)
    parser.add_argument("--grid", help="read this pstar_grid result instead of computing it")
    parser.add_argument("--level1", action="store_true", help="also the Level-1 corner checks")
    parser.add_argument("--P", default="100", help="comma-separated dataset sizes for --level1")
    parser.add_argument("--corners", default="4x2,256x2,4x512,256x512", help="LxV,... for --level1")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    pyplot()
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
