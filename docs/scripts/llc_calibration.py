"""The LLC's step calibration on the network with the exact value beside: the table and the figure
of an ``llc_calibration`` sweep (docs/validation.md, "``calibrate_llc`` on the network").

Reads the sweep file (``bayes_attn/configs/llc_calibration.toml``: at each point
``calibrate_llc``'s λ̂ over (nβ, ε) with its verdict, and the exact LLC at each nβ), prints the
table (bayes_attn.analysis.llc.calibration_markdown) and draws ``plots.llc_calibration`` with the
exact values dotted.

    bayes-attn sweep --config bayes_attn/configs/llc_calibration.toml --out docs/figures/llc_calibration_d64.nc
    python docs/scripts/llc_calibration.py docs/figures/llc_calibration_d64.nc \
        --figure docs/figures/llc_calibration_d64.png
"""

import argparse
from pathlib import Path

from bayes_attn.analysis.llc import calibration_markdown
from bayes_attn.experiments.llc_studies import calibration_tables
from bayes_attn.experiments.sweep import load_sweep
from bayes_attn.plotting import plots

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="an llc_calibration sweep file")
    ap.add_argument("--figure", type=Path, default=None, help="the PNG (the first point's)")
    args = ap.parse_args()
    found = calibration_tables(load_sweep(args.file))
    if not found:
        raise SystemExit(f"{args.file}: no finished point")
    for t in found:
        a = t.attrs
        print(f"\n{a['activation']}, P = {a['P']}, d = {a['d_model']}, seed {a['seed']} (exact "
              f"{a['exact_seconds']:.0f} s, calibration {a['calibration_seconds']:.0f} s)")  # fmt: skip
        print(calibration_markdown(t))
    if args.figure:
        import matplotlib.pyplot as plt

        fig = plots.llc_calibration(found[0], exact=found[0].exact_llc.values)
        fig.savefig(args.figure, dpi=110)
        plt.close(fig)
        print(f"wrote {args.figure}")
