"""The free-energy landscape figures of the README and their data (``docs/figures/paper/``):

* ``landscape.png`` / ``landscape.nc``: F(aG) of the full Level-1 posterior at Table 1, dataset 0
  (umbrella + MBAR, points) beside the exact Level-2 profile (line) at P = 272, and Delta F as the
  divide moves there against SMC per basin (54.16 ± 0.06 at its divide); the profiles across the
  scan; and Delta F(P) at Level 2's divide at its P* for g = I, the d = 10^4 Gram and Level 2.
* ``landscape_linear.png``: linear attention's F(cG) at Level 1 (protocol member 0's dataset and
  d = 10^4 Gram) beside Level 2, with the MAP and the profile's mean marked.

Run after the sweeps of ``bayes_attn/configs/landscape_scan.toml`` (also with ``--option
gram_width=10000``) and ``landscape_linear.toml``, which write their profiles to
``docs/figures/paper/landscape_scan/``: ``python docs/scripts/landscape_figure.py``. Points whose
files are missing are left out; ``docs/scripts/landscape.py`` tabulates the sweeps' files.
"""

import re
from pathlib import Path

import numpy as np
import xarray as xr
from _study import pyplot

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn.analysis.free_energy import landscape_report, profile_mean
from bayes_attn.experiments.results import profile_reports
from bayes_attn.plotting.studies import free_energy_scan, linear_profiles, token_profiles
from bayes_attn.theory.modes import phase_boundary
from bayes_attn.theory.profile import delta_F_at

FOLDER = Path("docs/figures/paper")
SCAN = FOLDER / "landscape_scan"
SMC = FOLDER / "level1_delta_f_P272_d0.nc"
P_STAR = 275.97
COEXISTENCE = (264.97, 296.76)  # Level 2's spinodals at Table 1


def _scan(pattern: str, divide, smc_divide) -> dict:
    """{P: the report at ``divide`` (Delta F at SMC's divide among its ``divides``)} of the scan's
    files whose names match ``pattern``."""
    files = {}
    for p in sorted(SCAN.glob("kernel_P*_d0*.nc")):
        m = re.fullmatch(pattern, p.name)
        if m:
            files[int(m.group(1))] = p
    return {P: landscape_report(az.from_netcdf(f), divide=divide, divides=[smc_divide])
            for P, f in sorted(files.items())}  # fmt: skip


def _row(P, prof, kind, level2):
    return {"P": P, "kind": kind, "delta_F": float(prof.delta_F),
            "delta_F_se": float(prof.delta_F_se),
            "delta_F_smc_divide": float(prof.delta_F_divide[0]),
            "delta_F_smc_divide_se": float(prof.delta_F_divide_se[0]),
            "delta_F_level2": level2, "n_minima": int(prof.q_minimum.size),
            "q_minima": ", ".join(f"{q:.2f}" for q in prof.q_minimum.values),
            "barrier": float(prof.barrier_above) if prof.q_minimum.size > 1 else np.nan,
            "min_overlap": float(prof.min_overlap_next)}  # fmt: skip


def softmax_figure(task, hyper):
    divide = phase_boundary(task, hyper, P_STAR, include_logdet=True)
    smc = xr.open_dataset(SMC, engine="h5netcdf").load()
    cut = float(smc.attrs["boundary_aG"])
    scans = {"Level 1, g = I": _scan(r"kernel_P(\d+)_d0\.nc", divide, cut),
             "Level 1, d = 10⁴ Gram": _scan(r"kernel_P(\d+)_d0_g10000\.nc", divide, cut)}  # fmt: skip
    at = None
    if (SCAN / "kernel_P272_d0.nc").exists():  # Delta F as the divide moves at P = 272
        at = landscape_report(az.from_netcdf(SCAN / "kernel_P272_d0.nc"), divide=cut,
                              divides=np.round(np.arange(1.3, 3.51, 0.1), 2))  # fmt: skip
    grid = np.arange(255.0, 326.0, 1.0)
    level2 = (grid, [delta_F_at(task, hyper, p, divide) for p in grid])
    fig = free_energy_scan(at, smc, scans, divide, level2, COEXISTENCE, P_STAR)
    fig.savefig(FOLDER / "landscape.png", dpi=110)
    rows = [_row(p, reps[p], kind, delta_F_at(task, hyper, p, divide))
            for kind, reps in scans.items() for p in sorted(reps)]  # fmt: skip
    table = xr.Dataset({k: ("row", [r[k] for r in rows]) for k in rows[0]} if rows else {})
    table.attrs.update(divide_aG=divide, smc_divide=cut, smc_delta_F=float(smc.delta_F),
                       smc_delta_F_se=float(smc.delta_F_se),
                       script="docs/scripts/landscape.py figure")  # fmt: skip
    table.to_netcdf(FOLDER / "landscape.nc", engine="h5netcdf")
    for r in rows:
        print(f"{r['kind']:24s} P = {r['P']}: Delta F {r['delta_F']:.2f} ± {r['delta_F_se']:.2f}"
              f" (at SMC's divide {r['delta_F_smc_divide']:.2f} ± "
              f"{r['delta_F_smc_divide_se']:.2f}; Level 2 {r['delta_F_level2']:.2f}),"
              f" minima {r['q_minima']}, barrier {r['barrier']:.2f}, overlap "
              f"{r['min_overlap']:.3f}")  # fmt: skip


def linear_figure():
    panels = []
    for f in sorted(SCAN.glob("linear_P*_m0_g10000.nc")):
        idata = az.from_netcdf(f)
        prof = landscape_report(idata)
        p = {"prof": prof, "mean": profile_mean(prof), "level2_min": np.nan,
             "map": float(az.dataset(idata, "posterior").attrs["map_cG"])}  # fmt: skip
        if "F_level2" in prof:  # where Level 2's own F(cG) is lowest: no entropy of M there
            p["level2_min"] = float(prof.q[int(np.nanargmin(prof.F_level2.values))])
        panels.append(p)
        at_map = float(np.interp(p["map"], prof.q.values, prof.F.values - np.nanmin(prof.F.values)))
        print(f"linear {f.name}: profile mean cG {p['mean']:.3f}, MAP {p['map']:.3f}, minima "
              f"{np.round(prof.q_minimum.values, 3)}, Level 2's minimum {p['level2_min']:.3f}, "
              f"F - F_min at the MAP {at_map:.1f}, smallest overlap "
              f"{float(prof.min_overlap_next):.3f}, max R-hat {float(np.nanmax(prof.r_hat)):.3f}")  # fmt: skip
    if panels:
        linear_profiles(panels).savefig(FOLDER / "landscape_linear.png", dpi=110)


def tokens_figure():
    """docs/figures/tokens/profiles.png: the structured-token profiles (tokens_profile.toml's
    folders), each P's F(aG) shifted to its minimum, the study's divide aG = 2 marked."""
    tokens = Path("docs/figures/tokens")
    panels = {title: profile_reports(tokens / folder).get("aG", {})
              for title, folder in (("Zipf s = 1 (dataset 0)", "profiles_zipf1"),
                                    ("global chain α = 0.3, chain 0", "profiles_markov_a0.3"))}  # fmt: skip
    if any(panels.values()):
        token_profiles(panels).savefig(tokens / "profiles.png", dpi=110)


def main():
    pyplot()
    softmax_figure(ba.CopyTask.paper(), ba.Hyper.paper())
    linear_figure()
    tokens_figure()
    print(f"wrote {FOLDER / 'landscape.png'}, {FOLDER / 'landscape.nc'}, "
          f"{FOLDER / 'landscape_linear.png'} and docs/figures/tokens/profiles.png")  # fmt: skip


if __name__ == "__main__":
    main()
