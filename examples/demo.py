"""A tour of the theory at the paper preset: boundaries, saddles and landscapes, as tables and figures.

Prints the phase boundaries of the reduced theory and the global saddles at the paper's 14 training-set
sizes, writes the order parameters against P for both activations, the action landscapes on both sides
of each transition, and the theory curves as NetCDF.

Run: ``.venv/bin/python examples/demo.py --out out/demo [--quick]``. (``make demo`` is another
thing: it runs ``bayes-attn theory`` and ``bayes-attn figures --quick``, the paper's figures at quick
settings; see the Makefile.)
"""

from __future__ import annotations

import argparse
import math
import pathlib
import time

import numpy as np

import bayes_attn as ba
from bayes_attn import theory
from bayes_attn.plotting import plots

PAPER_P = [1, 10, 20, 60, 100, 200, 250, 275, 300, 400, 500, 600, 700, 800]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/demo", help="folder for figures and data")
    parser.add_argument("--quick", action="store_true", help="coarser P grid (for tests)")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    print(
        f"bayes-attn {ba.__version__}: paper preset L={task.L}, V={task.V}, chi={hyper.chi}, "
        f"g_W={hyper.g_w}, g_O={hyper.g_o}, sigma^2={hyper.sigma2}\n"
    )

    b = theory.phase_boundaries(task, hyper)
    rows = [
        ("linear, second order P*  (numeric)", b.second_order),
        ("linear, second order P*  (exact closed form)", b.second_order_closed_form),
        ("linear, second order P*  (leading order, docs/theory.md §7)", b.second_order_leading),
        ("linear, crossover (max d cG / d log P)", b.crossover),
        ("linear, c1 peaks", b.crossover_markers["c1_peak"]),
        ("linear, cG overtakes c1", b.crossover_markers["copy_overtakes"]),
        ("softmax, first order P* (equal action)", b.first_order),
        ("softmax, lower spinodal (strong copy appears)", b.spinodals[0]),
        ("softmax, upper spinodal (weak copy vanishes)", b.spinodals[1]),
    ]
    print("Phase boundaries (training sequences P)")
    for name, value in rows:
        print(f"  {name:52s} {value:10.3f}")

    print("\nGlobal saddles at the paper's P values (metastable minima in brackets)")
    print(f"  {'P':>6} | {'c1':>7} {'cG':>7} {'loss':>6} | {'aG':>7} {'a1':>7} {'loss':>6}")
    for P in PAPER_P:
        lin = theory.saddles(task, hyper, P, "linear")
        soft = theory.saddles(task, hyper, P, "softmax")
        extra = "".join(f" [aG={s.aG:.3f}]" for s in soft[1:])
        print(
            f"  {P:6d} | {lin[0].c1:7.4f} {lin[0].cG:7.4f} {lin[0].loss:6.4f} | "
            f"{soft[0].aG:7.4f} {soft[0].a1:7.4f} {soft[0].loss:6.4f}{extra}"
        )

    Ps = np.geomspace(1, 5e3, 150 if args.quick else 600)
    lin = theory.phase_diagram(task, hyper, Ps, "linear", L=[task.L], boundaries=False)
    lin = lin.sel(L=task.L)
    soft = theory.phase_diagram(task, hyper, Ps, "softmax", L=[task.L], boundaries=False)
    soft = soft.sel(L=task.L)
    lin.to_netcdf(out / "theory_linear.nc", engine="h5netcdf")
    soft.to_netcdf(out / "theory_softmax.nc", engine="h5netcdf")
    fig = plots.order_parameters(lin, soft, b)
    fig.savefig(out / "order_parameters.png", dpi=110)

    P2, Px, P1 = b.second_order, b.crossover, b.first_order
    panels = [
        ("linear, below P*", theory.landscape(task, hyper, 0.6 * P2, "linear")),
        ("linear, above P*", theory.landscape(task, hyper, 3 * P2, "linear")),
        ("linear, past the crossover", theory.landscape(task, hyper, 2 * Px, "linear")),
    ]
    if math.isfinite(P1):
        panels += [
            (f"softmax, {label}", theory.landscape(task, hyper, P, "softmax"))
            for label, P in (
                ("below P*", math.sqrt(b.spinodals[0] * P1)),
                ("at P*", P1),
                ("above P*", math.sqrt(P1 * b.spinodals[1])),
            )
        ]
    fig = plots.action_landscapes(panels)
    fig.savefig(out / "action_landscape.png", dpi=100)

    print(
        f"\nWrote {out}/order_parameters.png, {out}/action_landscape.png, "
        f"{out}/theory_linear.nc, {out}/theory_softmax.nc in {time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()
