"""Numbers in docs/validation.md "Level 1 against Level 2 at Table 1": where the softmax phases of
the exact Level-1 action coexist and cross on real datasets, against Level 2's window.

For three nested datasets (the first P sequences of a pool of 320 drawn with keys 0, 1, 2) and P
on a grid through Level 2's coexistence window (264.97 - 296.76): L-BFGS on the exact Level-1 action
(log-determinant left out, as in the saddle-point theory) from the uniform start (M = 0) and from
the copy start (the strong Level-2 minimum's logits). The copy start's minimum exists where it
stays strong (aG > 2); the uniform start's where it stays weak (aG < 1). Where both exist, the
action difference (strong - weak, per unit chi) crosses zero at the Level-1 first-order P of that
dataset (linear interpolation between grid points). Writes
``docs/figures/paper/level1_transition.nc``.

Run: ``.venv/bin/python docs/scripts/level1_transition.py [--out PATH]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import numpy as np
import xarray as xr

import bayes_attn as ba
from bayes_attn.experiments.coexistence import phase_starts
from bayes_attn.task import preset_attrs
from bayes_attn.theory import level1_map, phase_boundaries

SEEDS = (0, 1, 2)
PS = tuple(range(236, 321, 4))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures/paper/level1_transition.nc")
    args = parser.parse_args(argv)
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    b = phase_boundaries(task, hyper)
    starts = ("uniform", "copy")
    shape = (len(SEEDS), len(PS), len(starts))
    aG, action = np.full(shape, np.nan), np.full(shape, np.nan)
    t0 = time.perf_counter()
    for s, seed in enumerate(SEEDS):
        pool = task.sample(jax.random.key(seed), max(PS))
        for j, P in enumerate(PS):
            st = phase_starts(task, hyper, P, "kernel")
            for k, key in enumerate(("weak", "strong")):  # the uniform and the copy start
                m = level1_map(task, hyper, pool[:P], "softmax", M0=st[key]["M"])
                aG[s, j, k], action[s, j, k] = m.cG, m.action
        print(f"dataset {seed} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    ds = xr.Dataset(
        {
            "aG": (("seed", "P", "start"), aG),
            "action": (("seed", "P", "start"), action),
        },
        coords={"seed": list(SEEDS), "P": list(PS), "start": list(starts)},
        attrs=dict(
            title="Level-1 softmax minima from a uniform and a copy start on nested datasets",
            script="docs/scripts/level1_transition.py",
            bayes_attn_version=ba.__version__,
            **preset_attrs(task, hyper),
            include_logdet=0,
            pool_size=max(PS),
            level2_first_order=b.first_order,
            level2_spinodals=list(b.spinodals),
            wall_time_s=time.perf_counter() - t0,
        ),
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(args.out, engine="h5netcdf")
    print(summary(ds))
    print(f"wrote {args.out} ({ds.attrs['wall_time_s'] / 60:.1f} min)")


def summary(ds) -> str:
    """Per dataset: the P range where both phases are minima, and the equal-action P."""
    lines = [
        f"Level 2: spinodals {ds.attrs['level2_spinodals'][0]:.2f}, "
        f"{ds.attrs['level2_spinodals'][1]:.2f}; equal action {ds.attrs['level2_first_order']:.2f}",
        "| dataset | both phases are minima at P | equal-action P (Level 1) |",
        "|---|---|---|",
    ]
    P = ds.P.values
    for seed in ds.seed.values:
        row = ds.sel(seed=seed)
        weak = row.aG.sel(start="uniform").values < 1.0
        strong = row.aG.sel(start="copy").values > 2.0
        both = weak & strong
        window = f"{P[both].min()} – {P[both].max()}" if both.any() else "none on this grid"
        diff = (row.action.sel(start="copy") - row.action.sel(start="uniform")).values
        diff = np.where(both, diff, np.nan)
        cross = "–"
        for j in range(len(P) - 1):
            if np.isfinite(diff[j]) and np.isfinite(diff[j + 1]) and diff[j] > 0 >= diff[j + 1]:
                cross = f"{P[j] + (P[j + 1] - P[j]) * diff[j] / (diff[j] - diff[j + 1]):.1f}"
        lines.append(f"| {seed} | {window} | {cross} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
