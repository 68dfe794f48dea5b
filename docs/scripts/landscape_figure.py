"""The free-energy landscape figure of the README (``docs/figures/paper/landscape.png``) and its
data (``docs/figures/paper/landscape.nc``): F(aG) of the full Level-1 posterior at Table 1,
P = 272, dataset 0 (umbrella sampling + MBAR, points with standard errors) beside the exact
Level-2 profile at the same P (line), the phases shaded either side of the divide; and Delta F as
the divide moves, against SMC per basin (54.16 ± 0.06 at its divide) and Level 2.

Run after ``docs/scripts/landscape.py run --P 272``: ``python docs/scripts/landscape.py figure``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from bayes_attn import _arviz as az  # noqa: E402
from bayes_attn.analysis.free_energy import landscape_report  # noqa: E402
from bayes_attn.plotting.plots import landscape_profile  # noqa: E402

FOLDER = Path("docs/figures/paper")
RUN = FOLDER / "landscape_kernel_P272_d0.nc"
SMC = FOLDER / "level1_delta_f_P272_d0.nc"


def main():
    idata = az.from_netcdf(RUN)
    divide = float(az.dataset(idata, "posterior").attrs["level_divide_aG"])
    prof = landscape_report(idata, divide=divide, divides=np.round(np.arange(1.3, 3.51, 0.1), 2))
    smc = xr.open_dataset(SMC, engine="h5netcdf").load()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11.0, 4.2))
    landscape_profile(prof, a, label="Level 1, P = 272 (umbrella + MBAR)")
    a.set_title("F(aG) at Table 1, P = 272, dataset 0")
    ok = prof.delta_F_divide_se.notnull()
    b.errorbar(prof.divide_q[ok], prof.delta_F_divide[ok], yerr=prof.delta_F_divide_se[ok],
               fmt="o", ms=3, capsize=2, label="Level 1: umbrella + MBAR")  # fmt: skip
    b.errorbar([smc.attrs["boundary_aG"]], [float(smc.delta_F)], yerr=[float(smc.delta_F_se)],
               fmt="s", color="k", ms=6, label="Level 1: SMC per basin at its divide")  # fmt: skip
    b.axhline(float(smc.delta_F_level2), color="0.4", ls="--", label="Level 2 (exact, logdet)")
    b.set_xlabel("divide $a_G$")
    b.set_ylabel(r"$\Delta F = F_{strong} - F_{weak}$ [nats]")
    b.set_title("ΔF as the divide moves")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(FOLDER / "landscape.png", dpi=110)
    out = prof.copy()
    out["smc_delta_F"], out["smc_delta_F_se"] = smc.delta_F, smc.delta_F_se
    out.attrs.update(smc_divide=float(smc.attrs["boundary_aG"]),
                     script="docs/scripts/landscape.py figure", source=str(RUN))  # fmt: skip
    out.to_netcdf(FOLDER / "landscape.nc", engine="h5netcdf")
    print(f"wrote {FOLDER / 'landscape.png'} and {FOLDER / 'landscape.nc'}")


if __name__ == "__main__":
    main()
