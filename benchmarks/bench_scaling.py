"""Benchmark: the 12 x 12 P*(L, V) grid, both activations, cold; batched against cell by cell.

The grid is :func:`bayes_attn.theory.scaling.pstar_grid` over L in [4, 256] and V in [2, 512] (the
issue's box). Each variant runs in a fresh process, one after the other in the same run, so
each time includes importing the package and compiling every program ("cold"):

* ``batched`` (the default path): the softmax cells solved together, their programs batched
  across cells (:func:`bayes_attn.theory.boundaries.softmax_boundaries_many`), beside the linear
  cells on a second thread;
* ``cells`` (the baseline): every cell on its own, as :func:`bayes_attn.theory.phase_boundaries`
  does (``pstar_grid(..., batched=False)``), the path before issue 42's performance work.

Printed: wall and CPU (user + system) seconds of each process, the ratio baseline / batched, the
load average, and the largest relative difference between the two grids (they must agree to
1e-10). The issue's budget: the cold grid in at most 30 s on the 2-core CPU. On a shared machine
the wall time depends on the load; the CPU time does not.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_scaling.py [--n 12]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def child(mode: str, n: int, path: str) -> None:
    t0 = time.perf_counter()
    from bayes_attn.theory import scaling

    t_import = time.perf_counter() - t0
    Ls = scaling.log_grid(*scaling.L_RANGE, n, "L")
    Vs = scaling.log_grid(*scaling.V_RANGE, n, "V")
    ds = scaling.pstar_grid(Ls, Vs, ("linear", "softmax"), batched=mode == "batched")
    wall = time.perf_counter() - t0
    ds.to_netcdf(path)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps({"wall": wall, "import": t_import, "cpu": cpu, "nan": scaling.nan_counts(ds)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="grid points per axis")
    parser.add_argument("--child", choices=("batched", "cells"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.n, args.out)
    import numpy as np
    import xarray as xr

    res, grids = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("batched", "cells"):
            path = os.path.join(tmp, f"{mode}.nc")
            load = os.getloadavg()[0]
            cmd = [sys.executable, __file__, "--child", mode, "--n", str(args.n), "--out", path]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            res[mode] = json.loads(out.strip().splitlines()[-1]) | {"load": load}
            with xr.open_dataset(path) as ds:
                grids[mode] = ds.load()
    worst = 0.0
    for k in grids["cells"].data_vars:
        a, b = grids["batched"][k].values, grids["cells"][k].values
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            worst = np.inf
        m = np.isfinite(b)
        worst = max(worst, float(np.max(np.abs(a[m] / b[m] - 1), initial=0.0)))
    print(f"grid: {args.n} L x {args.n} V, both activations, each variant cold in a fresh process")
    for mode, r in res.items():
        print(
            f"{mode:8s}: wall {r['wall']:6.1f} s (import {r['import']:4.1f} s) | CPU {r['cpu']:6.1f} s"
            f" | load average at start {r['load']:.1f} | budget 30 s"
        )
    b, c = res["batched"], res["cells"]
    print(
        f"ratio cells / batched: wall x{c['wall'] / b['wall']:.2f}, CPU x{c['cpu'] / b['cpu']:.2f}"
        f" | max rel diff {worst:.1e} | NaN cells equal: {b['nan'] == c['nan']}"
    )
    print(f"NaN cells: {b['nan']}")


if __name__ == "__main__":
    main()
