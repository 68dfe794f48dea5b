"""Numbers in docs/validation.md "Level 1 against Level 2 at Table 1", from the files of the
``level1`` sweeps (L-BFGS on the exact Level-1 action, log-determinant left out, from each start:
linear from the Level-2 saddle's realisation, Z2-folded; softmax from the uniform start M = 0 and
the copy start, the strong Level-2 minimum's logits):

- ``level1_vs_level2.toml`` (independent datasets, three per P, at the paper's 14 P): the Level-1
  global MAP against the equivalent-kernel Level-2 saddle;
- ``level1_transition.toml`` (three nested datasets, the first P of a pool of 320 drawn with keys
  0, 1, 2, P through Level 2's coexistence window 264.97 - 296.76): where the softmax phases
  coexist (the copy start's minimum stays strong, aG > 2; the uniform start's weak, aG < 1) and
  where their actions cross (linear interpolation between grid points).

    bayes-attn sweep --config bayes_attn/configs/level1_vs_level2.toml --out docs/figures/paper/level1_vs_level2.nc
    bayes-attn sweep --config bayes_attn/configs/level1_transition.toml --out docs/figures/paper/level1_transition.nc
    python docs/scripts/level1.py docs/figures/paper/level1_vs_level2.nc docs/figures/paper/level1_transition.nc
"""

import sys

import numpy as np
from _study import open_study, preset, setting

from bayes_attn.theory import phase_boundaries

STARTS = ["saddle", "uniform", "copy"]  # bayes_attn.experiments.studies.STARTS


def read_vs(path):
    """The file with its starts named and the saddle per (activation, P)."""
    ds = open_study(path, keep=("seed",)).assign_coords(start=STARTS)
    for name in ("theory_c1", "theory_cG"):
        if "seed" in ds[name].dims:
            ds[name] = ds[name].isel(seed=0)
    return ds


def table(ds) -> str:
    """Markdown: per (activation, P) the saddle, the mean +- sd over datasets of the Level-1 global
    MAP, the largest token residual, and (softmax) how many datasets have both phases as minima."""
    rows = ["| activation | P | Level 2 (c1, cG) / (a1, aG) | Level-1 MAP, mean ± sd over 3 datasets "
            "| gap in cG / aG | token residual | both phases are minima |", "|---" * 7 + "|"]  # fmt: skip
    for act in ds.activation.values:
        sub = ds.sel(activation=act)
        for P in sub.P.values:
            row = sub.sel(P=P)
            best = row.level1_action.fillna(np.inf).argmin("start")
            c1, cG = row.level1_c1.isel(start=best), row.level1_cG.isel(start=best)
            both = "–"
            if act == "softmax":
                gap = abs(row.level1_cG.sel(start="copy") - row.level1_cG.sel(start="uniform"))
                both = f"{int((gap > 1.0).sum())} of {row.sizes['seed']}"
            t1, tG = float(row.theory_c1), float(row.theory_cG)
            rows.append(f"| {act} | {P} | ({t1:.3f}, {tG:.3f}) | ({float(c1.mean()):.3f} ± "
                        f"{float(c1.std()):.3f}, {float(cG.mean()):.3f} ± {float(cG.std()):.3f}) | "
                        f"{float(cG.mean()) - tG:+.3f} | {float(row.level1_residual.max()):.3f} | "
                        f"{both} |")  # fmt: skip
    return "\n".join(rows)


def read_transition(path):
    """The file as (seed, P, start = uniform, copy): ``aG`` and ``action``, Level 2's boundaries
    in the attrs (an older file of this layout is returned as it is)."""
    ds = open_study(path, keep=("seed",))
    if "level1_cG" in ds:  # a level1 sweep (bayes_attn.experiments.studies.STARTS)
        ds = ds.squeeze("activation").assign_coords(start=["saddle", "uniform", "copy"])
        ds = ds.rename(level1_cG="aG", level1_action="action")[["aG", "action"]]
        ds = ds.sel(start=["uniform", "copy"]).transpose("seed", "P", "start")
        b = phase_boundaries(*preset(ds))
        ds.attrs.update(level2_first_order=b.first_order, level2_spinodals=list(b.spinodals))
    return ds


def summary(ds) -> str:
    """Per dataset: the P range where both phases are minima, and the equal-action P."""
    lo, hi = ds.attrs["level2_spinodals"]
    lines = [f"Level 2: spinodals {lo:.2f}, {hi:.2f}; equal action "
             f"{ds.attrs['level2_first_order']:.2f}",
             "| dataset | both phases are minima at P | equal-action P (Level 1) |", "|---|---|---|"]  # fmt: skip
    P = ds.P.values
    for seed in ds.seed.values:
        row = ds.sel(seed=seed)
        both = (row.aG.sel(start="uniform").values < 1.0) & (row.aG.sel(start="copy").values > 2.0)
        window = f"{P[both].min()} – {P[both].max()}" if both.any() else "none on this grid"
        diff = np.where(both, (row.action.sel(start="copy") - row.action.sel(start="uniform")).values,
                        np.nan)  # fmt: skip
        cross = "–"
        for j in range(len(P) - 1):
            if np.isfinite(diff[j]) and np.isfinite(diff[j + 1]) and diff[j] > 0 >= diff[j + 1]:
                cross = f"{P[j] + (P[j + 1] - P[j]) * diff[j] / (diff[j] - diff[j + 1]):.1f}"
        lines.append(f"| {seed} | {window} | {cross} |")
    return "\n".join(lines)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        ds = open_study(path)  # nested datasets (or an older file of aG, action): the window
        nested = setting(ds, "pool", 0) or "level1_cG" not in ds
        print(summary(read_transition(path)) if nested else table(read_vs(path)))
