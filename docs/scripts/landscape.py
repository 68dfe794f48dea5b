"""Numbers of docs/validation.md "Free-energy profiles": F(aG) of the full (Level-1) posterior by
umbrella sampling and MBAR at every P of a scan, beside the exact Level-2 Delta F at the same
divide; from the files of ``bayes_attn/configs/landscape_scan.toml`` (g = I, or the Gram of a
d = 10^4 prior draw with ``--option gram_width=10000``) and ``landscape_small.toml`` (the small
preset, against SMC's 43.34 ± 0.14). Each point's whole profile is written to the folder of the
option ``profiles``, which ``landscape_figure.py`` draws:

    bayes-attn sweep --config bayes_attn/configs/landscape_scan.toml --out docs/figures/paper/landscape_scan.nc
    python docs/scripts/landscape.py docs/figures/paper/landscape_scan.nc
    python docs/scripts/landscape_figure.py

``--split Q`` adds F_strong - F_weak across the fixed divide aG = Q (log P(aG < Q) - log
P(aG >= Q), by MBAR from the point's whole profile in the sweep's ``profiles`` folder), defined
where the profile has one minimum too: the structured-token profiles (``tokens_profile.toml``)
read it at the study's aG_split, 2:

    python docs/scripts/landscape.py docs/figures/tokens/tokens_profile_zipf1.nc --split 2

The single profile at P = 272 with windows from the modes is ``landscape_P272.toml``; linear
attention's F(cG) on protocol member 0's dataset and d = 10^4 Gram (P = 300, 400, 500) is
``landscape_linear.toml`` (kind ``landscape_linear``); this script tabulates their files too.
"""

import argparse
from pathlib import Path

import numpy as np
from _study import open_study, preset, setting

from bayes_attn import _arviz as az
from bayes_attn.analysis.free_energy import free_energy_profile
from bayes_attn.theory.modes import phase_boundary
from bayes_attn.theory.profile import delta_F_at

COLUMNS = ("delta_F", "delta_F_se", "divide", "aG_weak", "aG_strong", "barrier_weak",
           "barrier_strong", "min_overlap", "max_r_hat")  # fmt: skip
LINEAR = ("cG_minimum", "n_profile_minima", "profile_mean", "level2_minimum", "map_cG",
          "F_at_map", "min_overlap", "max_r_hat")  # fmt: skip


def split_delta_F(ds, P, split: float) -> tuple[float, float]:
    """(Delta F, its s.e.) across aG = ``split`` of the point P's saved profile (nan, nan where
    the sweep kept none)."""
    width = setting(ds, "gram_width")
    name = f"{setting(ds, 'level')}_P{P:g}_d{int(ds.seed) if 'seed' in ds.coords else 0}"
    path = Path(setting(ds, "profiles") or ".") / (name + (f"_g{width}" if width else "") + ".nc")
    if not setting(ds, "profiles") or not path.exists():
        return np.nan, np.nan
    prof = free_energy_profile(az.from_netcdf(path), divide=split)
    return float(prof.delta_F), float(prof.delta_F_se)


def table(path, split: float | None = None) -> str:
    """One row per P (softmax: with Level 2's Delta F at the profile's divide, for uniform
    tokens; with ``split``, Delta F across aG = split)."""
    ds = open_study(path).squeeze("activation")
    task, hyper = preset(ds)
    linear = ds.attrs.get("kind") == "landscape_linear"
    uniform = ds.attrs.get("tokens", "uniform") == "uniform"
    cols = LINEAR if linear else (*COLUMNS, *(["Level 2 Delta F at the divide"] if uniform else []))
    if split is not None:
        cols = (*cols, f"Delta F across aG = {split:g}")
    lines = [f"{path}: " + ("linear F(cG)" if linear else f"level {setting(ds, 'level')}, "
                            f"gram_width {setting(ds, 'gram_width')}"),
             "| P | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]  # fmt: skip
    for P in ds.P.values:
        row = ds.sel(P=P)
        cells = [f"{float(row[c]):.3f}" for c in cols if c in row]
        if not linear and uniform:
            ok = np.isfinite(row.divide)
            cells.append(f"{delta_F_at(task, hyper, float(P), float(row.divide)) if ok else np.nan:.2f}")  # fmt: skip
        if split is not None:
            dF, se = split_delta_F(row, P, split)
            cells.append(f"{dF:.2f} ± {se:.2f}")
        lines.append(f"| {P:g} | {' | '.join(cells)} |")
    if not linear and uniform:
        cut = phase_boundary(task, hyper, 275.97, include_logdet=True)
        lines.append(f"Level 2's divide at its P*: {cut:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--split", type=float, default=None, help="Delta F across aG = SPLIT too")
    args = ap.parse_args()
    for path in args.files:
        print(table(path, args.split))
