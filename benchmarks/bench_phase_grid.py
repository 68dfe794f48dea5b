"""Benchmark: a 200 x 200 (P, L) grid of global saddles, against point-by-point saddle searches.

The grid uses continuation along P plus a few fresh starts per point (``phase_diagram``); the baseline
is the full multi-start-plus-continuation search of ``saddles`` at each point, timed on a random
subset and extrapolated per point. Both run here, in the same process, so the ratio is what counts.
The issue's budget: the grid in at most 30 s on the 2-core CPU.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_phase_grid.py [--n 200] [--baseline 20]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import bayes_attn as ba
from bayes_attn.theory import global_saddle, phase_diagram


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="grid points per axis")
    parser.add_argument("--baseline", type=int, default=20, help="points timed for the baseline")
    args = parser.parse_args()
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    Ps = np.geomspace(10, 5000, args.n)
    Ls = np.arange(3, 3 + args.n)  # exactly n distinct lengths
    rng = np.random.default_rng(0)
    print(f"grid: {args.n} P values x {len(Ls)} L values, V = {task.V}")
    for activation, key in (("linear", "cG"), ("softmax", "aG")):
        t0 = time.perf_counter()
        ds = phase_diagram(task, hyper, Ps, activation, L=Ls, boundaries=False)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        ds = phase_diagram(task, hyper, Ps, activation, L=Ls, boundaries=False)
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        phase_diagram(task, hyper, Ps[:2], activation, L=Ls, boundaries=True)
        t_bound = time.perf_counter() - t0
        pick = rng.choice(Ps.size * Ls.size, size=args.baseline, replace=False)
        global_saddle(task, hyper, 100.0, activation)  # compile the baseline first
        t0 = time.perf_counter()
        worst = 0.0
        for k in pick:
            i, j = divmod(int(k), Ps.size)
            sd = global_saddle(ba.CopyTask(L=int(Ls[i]), V=task.V), hyper, Ps[j], activation)
            want = sd.cG if activation == "linear" else sd.aG
            worst = max(worst, abs(float(ds[key].isel(L=i, P=j)) - want))
        per_point = (time.perf_counter() - t0) / args.baseline
        base = per_point * Ps.size * Ls.size
        print(
            f"{activation:8s} grid: {cold:6.2f} s cold (with compile), {warm:6.2f} s warm | "
            f"baseline saddles(): {per_point * 1e3:6.1f} ms/point -> {base:7.1f} s for the grid | "
            f"speed-up x{base / warm:6.1f} | max |diff| on {args.baseline} points {worst:.1e}"
        )
        print(f"{'':8s} boundaries for all {len(Ls)} values of L: {t_bound:6.1f} s")


if __name__ == "__main__":
    main()
