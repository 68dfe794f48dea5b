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
from bayes_attn.plotting.plots import landscape_profile
from bayes_attn.theory.modes import phase_boundary
from bayes_attn.theory.profile import delta_F_at

FOLDER = Path("docs/figures/paper")
SCAN = FOLDER / "landscape_scan"
SMC = FOLDER / "level1_delta_f_P272_d0.nc"
P_STAR = 275.97


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


def _at_272(a, b, smc):
    """P = 272: the profile, and Delta F as the divide moves against SMC's at its divide."""
    cut = float(smc.attrs["boundary_aG"])
    if (SCAN / "kernel_P272_d0.nc").exists():
        at = landscape_report(az.from_netcdf(SCAN / "kernel_P272_d0.nc"), divide=cut,
                              divides=np.round(np.arange(1.3, 3.51, 0.1), 2))  # fmt: skip
        landscape_profile(at, a, label="Level 1, g = I (umbrella + MBAR)")
        a.set_title("F(aG) at Table 1, P = 272, dataset 0")
        ok = at.delta_F_divide_se.notnull()
        b.errorbar(at.divide_q[ok], at.delta_F_divide[ok], yerr=at.delta_F_divide_se[ok],
                   fmt="o", ms=3, capsize=2, label="Level 1: umbrella + MBAR")  # fmt: skip
    b.errorbar([cut], [float(smc.delta_F)], yerr=[float(smc.delta_F_se)], fmt="s", color="k",
               ms=6, label="Level 1: SMC per basin at its divide")  # fmt: skip
    b.axhline(float(smc.delta_F_level2), color="0.4", ls="--", label="Level 2 (exact, logdet)")
    b.set(xlabel="divide $a_G$", ylabel=r"$\Delta F = F_{strong} - F_{weak}$ [nats]",
          title="P = 272: ΔF as the divide moves")  # fmt: skip
    b.legend(fontsize=8)


def _profiles(c, plain, divide, cmap):
    """The profiles across the scan, each shifted to its minimum: six of them where the scan has
    more (far below, at 272, at the shoulder 284, with both minima 290 and 300, far above)."""
    Ps = sorted(plain)
    if len(Ps) > 6:
        Ps = [P for P in (260, 272, 284, 290, 300, 320) if P in plain] or Ps[:: len(Ps) // 6 + 1]
    for i, P in enumerate(Ps):
        prof, col = plain[P], cmap(0.85 * i / max(len(Ps) - 1, 1))  # no pale yellow
        ok = np.isfinite(prof.F.values)
        F = prof.F.values - np.nanmin(prof.F.values)
        c.errorbar(prof.q.values[ok], F[ok], yerr=prof.F_se.values[ok], fmt="o", ms=2,
                   color=col, capsize=1, label=f"P = {P}")  # fmt: skip
        if "F_level2" in prof:
            F2 = prof.F_level2.values
            c.plot(prof.q.values, F2 - np.nanmin(F2), "-", color=col, lw=0.8, alpha=0.7)
    c.axvline(divide, color="0.5", ls=":", lw=1)
    c.set(xlabel="$a_G$", ylabel="F(aG) − min [nats]", ylim=(-2, 100),
          title="Level 1 (g = I, points) and Level 2 (lines) at six P")  # fmt: skip
    c.legend(fontsize=7, ncol=2)


def _delta_F(d, task, hyper, scans, divide) -> list:
    """Delta F(P) at one divide for each scan and Level 2; the table's rows."""
    rows = []
    for (kind, reps), fmt in zip(scans.items(), "os", strict=True):
        if reps:
            P = np.array(sorted(reps))
            dF, se = (np.array([float(reps[p][v]) for p in P]) for v in ("delta_F", "delta_F_se"))
            d.errorbar(P, dF, yerr=se, fmt=fmt + "-", ms=4, capsize=2, label=kind)
            rows += [_row(p, reps[p], kind, delta_F_at(task, hyper, p, divide)) for p in P]
    grid = np.arange(255.0, 326.0, 1.0)
    d.plot(grid, [delta_F_at(task, hyper, p, divide) for p in grid], "-", color="0.3",
           label="Level 2 (quadrature, logdet)")  # fmt: skip
    d.axhline(0.0, color="0.6", lw=0.8)
    d.axvspan(264.97, 296.76, color="tab:orange", alpha=0.08, label="Level-2 coexistence")
    d.axvline(P_STAR, color="tab:orange", ls=":", lw=1)
    d.set(xlabel="P", ylabel=f"ΔF at aG = {divide:.2f} [nats]",
          title="ΔF(P) at Level 2's divide at its P*")  # fmt: skip
    d.legend(fontsize=8)
    return rows


def softmax_figure(task, hyper, plt):
    divide = phase_boundary(task, hyper, P_STAR, include_logdet=True)
    smc = xr.open_dataset(SMC, engine="h5netcdf").load()
    cut = float(smc.attrs["boundary_aG"])
    scans = {"Level 1, g = I": _scan(r"kernel_P(\d+)_d0\.nc", divide, cut),
             "Level 1, d = 10⁴ Gram": _scan(r"kernel_P(\d+)_d0_g10000\.nc", divide, cut)}  # fmt: skip
    fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=(12.0, 8.6))
    _at_272(a, b, smc)
    _profiles(c, scans["Level 1, g = I"], divide, plt.get_cmap("viridis"))
    rows = _delta_F(d, task, hyper, scans, divide)
    fig.tight_layout()
    fig.savefig(FOLDER / "landscape.png", dpi=110)
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


def linear_figure(task, hyper, plt):
    files = sorted(SCAN.glob("linear_P*_m0_g10000.nc"))
    if not files:
        return
    fig, axes = plt.subplots(1, len(files), figsize=(max(7.0, 4.6 * len(files)), 4.2),
                             squeeze=False)  # fmt: skip
    for ax, f in zip(axes[0], files, strict=True):
        idata = az.from_netcdf(f)
        prof = landscape_report(idata)
        landscape_profile(prof, ax, label="Level 1, member 0, d = 10⁴ Gram")
        mean = profile_mean(prof)
        cmap = float(az.dataset(idata, "posterior").attrs["map_cG"])
        ax.axvline(cmap, color="tab:red", ls="--", lw=1, label=f"MAP {cmap:.3f}")
        ax.axvline(mean, color="tab:green", ls=":", lw=1.5, label=f"posterior mean {mean:.3f}")
        q2 = np.nan  # where Level 2's own F(cG) has its minimum: no entropy of M there
        if "F_level2" in prof:
            q2 = float(prof.q[int(np.nanargmin(prof.F_level2.values))])
            ax.axvline(q2, color="k", ls=":", lw=1, label=f"Level 2's minimum {q2:.3f}")
        ax.set_ylim(-1, 56)  # room for the legend above the points
        ax.legend(fontsize=7, loc="upper center", ncol=2)
        at_map = float(np.interp(cmap, prof.q.values, prof.F.values - np.nanmin(prof.F.values)))
        print(f"linear {f.name}: profile mean cG {mean:.3f}, MAP {cmap:.3f}, minima "
              f"{np.round(prof.q_minimum.values, 3)}, Level 2's minimum {q2:.3f}, "
              f"F - F_min at the MAP {at_map:.1f}, smallest overlap "
              f"{float(prof.min_overlap_next):.3f}, max R-hat {float(np.nanmax(prof.r_hat)):.3f}")  # fmt: skip
    fig.suptitle("Linear attention: F(cG) of the full posterior (points) and Level 2 (line)",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(FOLDER / "landscape_linear.png", dpi=110)


def main():
    task, hyper, plt = ba.CopyTask.paper(), ba.Hyper.paper(), pyplot()
    softmax_figure(task, hyper, plt)
    linear_figure(task, hyper, plt)
    print(f"wrote {FOLDER / 'landscape.png'}, {FOLDER / 'landscape.nc'} and "
          f"{FOLDER / 'landscape_linear.png'}")  # fmt: skip


if __name__ == "__main__":
    main()
