"""The phases' free-energy difference from the LLC against the posterior's profile: the summary and
the figure of an ``llc_phases`` sweep (docs/theory.md §11, "The free energy from the LLC").

Reads the sweep file (``bayes_attn/configs/llc_phases*.toml``: per phase the TI ladder of the exact
LLC at its centre, the run at t = n and, with ``gamma_nodes``, the γ ladder that takes the
localization away) and the free-energy profile of the same posterior (a landscape file at that P,
Gram width and seed), prints the summary and draws F(aG) with the centres and the ΔF's on it.

    bayes-attn sweep --config bayes_attn/configs/llc_phases.toml --out docs/figures/paper/llc_phases_P285_d256.nc
    python docs/scripts/llc_phases.py docs/figures/paper/llc_phases_P285_d256.nc \
        --profile docs/figures/paper/llc_phases/P285_d256_profile.nc --figure docs/figures/paper/llc_phases.png
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn.analysis.free_energy import landscape_report
from bayes_attn.experiments.llc_studies import PHASES
from bayes_attn.experiments.results import options
from bayes_attn.experiments.sweep import load_sweep
from bayes_attn.plotting.studies import llc_phases_profile
from bayes_attn.theory.modes import phase_boundary


def difference(ds, basin=False):
    """F_strong - F_weak, its standard error and the quadrature checks combined: localized, or
    (``basin``) with the localization taken away by the γ ladder."""
    f = float(np.diff(ds["free_energy_basin" if basin else "free_energy"].values)[0])
    names = ("delta_f_se", "loc_delta_f_se") if basin else ("delta_f_se",)
    checks = ("quadrature_error", "loc_quadrature_error") if basin else ("quadrature_error",)
    return (f, math.hypot(*np.concatenate([ds[k].values for k in names])),
            math.hypot(*np.concatenate([ds[k].values for k in checks])))  # fmt: skip


def summary(ds, P, gamma):
    for ph in ds.phase.values:
        r = ds.sel(phase=ph)
        slt = P * float(r.init_loss) + float(r.llc_top) * math.log(P)
        print(f"{ph}: aG* {float(r.aG_star):.3f}, n L_n(w*) = {P * float(r.init_loss):.3f}, "
              f"F(n) = {float(r.free_energy):.3f} ± {float(r.delta_f_se):.3f} (quadrature check "
              f"{float(r.quadrature_error):.3f}); llc(n) = {float(r.llc_top):.3f} ± "
              f"{float(r.llc_top_mcse):.3f}; SLT n L_n + llc log n = {slt:.3f}; E|M - M*|² = "
              f"{float(r.distance2_top):.3f}")  # fmt: skip
        if "loc_g" in ds:
            print(f"{ph}: ½E|w - w*|² at γ = {np.round(r.loc_g.values, 3)}: "
                  f"{np.round(r.loc_half_sq_distance.values, 3)} (R-hat max "
                  f"{float(r.loc_rhat.max()):.3f}); F(γ) - F(0) = {float(r.loc_delta_f):.3f} ± "
                  f"{float(r.loc_delta_f_se):.3f} (check {float(r.loc_delta_f_half):.3f}); n L_n "
                  f"over its draws {P * float(r.loc_loss_min.min()):.1f}-"
                  f"{P * float(r.loc_loss_max.max()):.1f}")  # fmt: skip
    dF, se, _ = difference(ds)
    w, s = ds.sel(phase="weak"), ds.sel(phase="strong")
    corr = gamma / 2 * float(s.distance2_top - w.distance2_top)
    slt = P * float(s.init_loss - w.init_loss) + float(s.llc_top - w.llc_top) * math.log(P)
    print(f"ΔF_TI = F_strong - F_weak = {dF:.3f} ± {se:.3f}; first-order localization correction "
          f"{corr:.3f} -> {dF - corr:.3f}; SLT {slt:.3f}")  # fmt: skip
    if "loc_g" in ds:
        print("ΔF_TI of the basins (localization taken away) = {:.3f} ± {:.3f} (quadrature checks "
              "combined {:.3f})".format(*difference(ds, basin=True)))  # fmt: skip


def read_profile(path, P):
    """The profile, split at its own barrier where F(aG) has two minima, else at Level 2's phase
    divide at this P (:func:`bayes_attn.theory.modes.phase_boundary`)."""
    idata = az.from_netcdf(path)
    prof = landscape_report(idata)
    if np.atleast_1d(prof.q_minimum.values).size < 2:
        divide = phase_boundary(ba.CopyTask(25, 5), ba.Hyper.paper(), P)
        prof = landscape_report(idata, divide=float(divide))
    return prof


def figure(ds, prof, P, o, path):
    basin = difference(ds, basin=True) if "loc_g" in ds else None
    llc_phases_profile(ds, prof, P, o, difference(ds), basin).savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="an llc_phases sweep file")
    ap.add_argument("--profile", type=Path, help="the posterior's profile (a landscape file)")
    ap.add_argument("--figure", type=Path, help="needs --profile")
    a = ap.parse_args()
    sweep = load_sweep(a.file)
    opts = options(sweep)
    for P in sweep.P.values[sweep.done.any(dim=("activation", "L", "V", "seed")).values]:
        ds = sweep.sel(P=P).isel(activation=0, L=0, V=0, seed=0).assign_coords(phase=list(PHASES))
        summary(ds, int(P), opts["gamma"])
        if a.profile:
            prof = read_profile(a.profile, int(P))
            print(f"profile: ΔF = {float(prof.delta_F):.3f} ± {float(prof.delta_F_se):.3f} at the divide "
                  f"aG = {float(prof.divide):.3f}; minima of F(aG) at "
                  f"{', '.join(f'{q:.3f}' for q in np.atleast_1d(prof.q_minimum.values))}")  # fmt: skip
            if a.figure:
                figure(ds, prof, int(P), opts, a.figure)
