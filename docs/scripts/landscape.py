"""Numbers of docs/validation.md "Free-energy profiles": F(aG) of the full (Level-1) posterior by
umbrella sampling and MBAR at every P of a scan, beside the exact Level-2 Delta F at the same
divide; from the files of ``bayes_attn/configs/landscape_scan.toml`` (g = I, or the Gram of a
d = 10^4 prior draw with ``--option gram_width=10000``) and ``landscape_small.toml`` (the small
preset, against SMC's 43.34 ± 0.14). Each point's whole profile is written to the folder of the
option ``profiles``, which ``landscape_figure.py`` draws:

    bayes-attn sweep --config bayes_attn/configs/landscape_scan.toml --out docs/figures/paper/landscape_scan.nc
    python docs/scripts/landscape.py docs/figures/paper/landscape_scan.nc
    python docs/scripts/landscape_figure.py

The single profile at P = 272 with windows from the modes is ``landscape_P272.toml``; linear
attention's F(cG) on protocol member 0's dataset and d = 10^4 Gram (P = 300, 400, 500) is
``landscape_linear.toml`` (kind ``landscape_linear``); this script tabulates their files too.
"""

import sys

import numpy as np
from _study import open_study, preset, setting

from bayes_attn.theory.modes import phase_boundary
from bayes_attn.theory.profile import delta_F_at

COLUMNS = ("delta_F", "delta_F_se", "divide", "aG_weak", "aG_strong", "barrier_weak",
           "barrier_strong", "min_overlap", "max_r_hat")  # fmt: skip
LINEAR = ("cG_minimum", "n_profile_minima", "profile_mean", "level2_minimum", "map_cG",
          "F_at_map", "min_overlap", "max_r_hat")  # fmt: skip


def table(path) -> str:
    """One row per P (softmax: with Level 2's Delta F at the profile's divide)."""
    ds = open_study(path).squeeze("activation")
    task, hyper = preset(ds)
    linear = ds.attrs.get("kind") == "landscape_linear"
    cols = LINEAR if linear else (*COLUMNS, "Level 2 Delta F at the divide")
    lines = [f"{path}: " + ("linear F(cG)" if linear else f"level {setting(ds, 'level')}, "
                            f"gram_width {setting(ds, 'gram_width')}"),
             "| P | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]  # fmt: skip
    for P in ds.P.values:
        row = ds.sel(P=P)
        cells = [f"{float(row[c]):.3f}" for c in cols if c in row]
        if not linear:
            ok = np.isfinite(row.divide)
            cells.append(f"{delta_F_at(task, hyper, float(P), float(row.divide)) if ok else np.nan:.2f}")  # fmt: skip
        lines.append(f"| {P:g} | {' | '.join(cells)} |")
    if not linear:
        cut = phase_boundary(task, hyper, 275.97, include_logdet=True)
        lines.append(f"Level 2's divide at its P*: {cut:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(table(path))
