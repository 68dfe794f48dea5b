"""The LLC's step calibration on the network with the exact value beside: the table and the figure
of an ``llc_calibration`` sweep (docs/validation.md, "``calibrate_llc`` on the network").

Reads the sweep file (``bayes_attn/configs/llc_calibration.toml``: at each point
``calibrate_llc``'s λ̂ over (nβ, ε) with its verdict, and the exact LLC at each nβ), prints the
table and draws ``plots.llc_calibration`` with the exact values dotted.

    bayes-attn sweep --config bayes_attn/configs/llc_calibration.toml --out docs/figures/llc_calibration_d64.nc
    python docs/scripts/llc_calibration.py docs/figures/llc_calibration_d64.nc \
        --figure docs/figures/llc_calibration_d64.png
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import xarray as xr

from bayes_attn.analysis.llc_exploration import LIMITS
from bayes_attn.experiments.results import options
from bayes_attn.experiments.sweep import load_sweep
from bayes_attn.plotting import plots

#: the variables of calibrate_llc's table, over (nbeta, step_size) or nbeta alone
GRID = ("llc", "mcse", "rhat", "acceptance", "passes")
ROW = ("chosen", "exact_llc", "exact_mcse")


def tables(ds) -> list:
    """calibrate_llc's table (over ``nbeta``, ``step_size``) with the exact values, one per
    finished grid point of the sweep file ``ds``."""
    o = options(ds)
    grid = [d for d in ("activation", "L", "V", "P", "seed") if d in ds.dims]
    out = []
    for idx in np.ndindex(*(ds.sizes[d] for d in grid)):
        pt = ds.isel(dict(zip(grid, idx, strict=True)))
        if not bool(pt.done):
            continue
        nbeta, steps = pt.nbeta.values, pt.step_size.values
        table = xr.Dataset(
            {k: (("nbeta", "step_size"), pt[k].values) for k in GRID}
            | {k: (("nbeta",), pt[k].values) for k in ROW},
            coords={"nbeta": nbeta, "step_size": steps},
        )
        table["passes"] = table.passes > 0.5
        out.append(table.assign_attrs(
            min_acceptance=LIMITS.min_acceptance, d_model=o["d_model"], P=int(pt.P),
            activation=str(pt.activation.values), seed=int(pt.seed) if "seed" in pt else 0,
            exact_seconds=float(pt.exact_seconds), calibration_seconds=float(pt.calibration_seconds),
        ))  # fmt: skip
    return out


def markdown(table) -> str:
    """The table as docs/validation.md gives it: λ̂ per (nβ, ε), from exact in combined MCSE."""
    rows = ["| nβ | ε | λ̂ ± MCSE | from exact (combined MCSE) | acceptance | passes |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for i, nb in enumerate(table.nbeta.values):
        ex, se_ex = float(table.exact_llc[i]), float(table.exact_mcse[i])
        rows.append(f"| {nb:.4g} | exact | {ex:.4f} ± {se_ex:.4f} | | | |")
        for j, eps in enumerate(table.step_size.values):
            c = table.isel(nbeta=i, step_size=j)
            z = (float(c.llc) - ex) / math.hypot(float(c.mcse), se_ex)
            rows.append(f"| {nb:.4g} | {eps:g} | {float(c.llc):.4f} ± {float(c.mcse):.4f} | "
                        f"{z:+.1f} | {float(c.acceptance):.3f} | {bool(c.passes)} |")  # fmt: skip
        rows.append(f"| {nb:.4g} | chosen: {float(table.chosen[i]):g} | | | | |")
    return "\n".join(rows)


def figure(table):
    """``plots.llc_calibration`` with the exact value at each nβ (dotted)."""
    fig = plots.llc_calibration(table)
    ax = fig.axes[0]
    colors = [ln.get_color() for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    for i, (ex, color) in enumerate(zip(table.exact_llc.values, colors, strict=True)):
        ax.axhline(ex, ls=":", color=color, label="exact" if i == 0 else None)
    ax.legend(fontsize=8)
    ax.set_title(f"calibrate_llc on the network (d = {table.attrs['d_model']}, "
                 f"P = {table.attrs['P']}); dotted: exact\n"
                 f"(hollow: acceptance < {table.attrs['min_acceptance']:g}; ringed: chosen)",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="an llc_calibration sweep file")
    ap.add_argument("--figure", type=Path, default=None, help="the PNG (the first point's)")
    args = ap.parse_args()
    found = tables(load_sweep(args.file))
    if not found:
        raise SystemExit(f"{args.file}: no finished point")
    for t in found:
        a = t.attrs
        print(f"\n{a['activation']}, P = {a['P']}, d = {a['d_model']}, seed {a['seed']} (exact "
              f"{a['exact_seconds']:.0f} s, calibration {a['calibration_seconds']:.0f} s)")  # fmt: skip
        print(markdown(t))
    if args.figure:
        import matplotlib.pyplot as plt

        fig = figure(found[0])
        fig.savefig(args.figure, dpi=110)
        plt.close(fig)
        print(f"wrote {args.figure}")
