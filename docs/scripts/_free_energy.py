"""What ``coexistence.py`` and ``level1_delta_f.py`` share: the table line of a Delta F row and the
provenance written into its NetCDF file (the SMC settings it ran with, the dataset, the command,
the wall time, the machine and the library versions)."""

from __future__ import annotations

import inspect
import os
import platform

from bayes_attn.inference import smc
from bayes_attn.inference.record import versions
from bayes_attn.io import write_atomic

HEADER = (
    "| row | aG weak, strong | log Z weak (Laplace, SMC) | log Z strong (Laplace, SMC) "
    "| tempering steps | Delta F SMC | Delta F Laplace | Delta U | Delta F Level 2 | time |"
)
_SETTINGS = ("num_mcmc_steps", "max_mcmc_steps", "mixing_target", "target_ess",
             "num_integration_steps", "kernel")  # fmt: skip


def table_row(label: str, ds, wall: float) -> str:
    """One line of the Delta F table for a :func:`phase_free_energies` result."""
    w, s = ds.sel(phase="weak"), ds.sel(phase="strong")
    return (
        f"| {label} | {float(w.aG):.3f}, {float(s.aG):.3f} "
        f"| {float(w.log_Z_laplace):.2f}, {float(w.log_Z_smc):.2f} ± {float(w.log_Z_smc_se):.2f} "
        f"| {float(s.log_Z_laplace):.2f}, {float(s.log_Z_smc):.2f} ± {float(s.log_Z_smc_se):.2f} "
        f"| {float(w.tempering_steps):.1f}, {float(s.tempering_steps):.1f} "
        f"| {float(ds.delta_F):.2f} ± {float(ds.delta_F_se):.2f} | {float(ds.delta_F_laplace):.2f} "
        f"| {float(ds.delta_U):.2f} | {float(ds.delta_F_level2):.2f} | {wall:.0f} s |"
    )


def write_row(ds, path: str, *, dataset: str, command: str, wall: float) -> None:
    """Stamp ``ds`` with how it was made and write it to ``path`` atomically.

    The SMC settings are :func:`run_smc`'s defaults, which ``phase_free_energies`` inherits for
    everything it does not set itself (its ``num_particles`` and ``replicates`` are in its attrs).
    """
    defaults = inspect.signature(smc.run_smc).parameters
    ds.attrs.update(
        {f"smc_{k}": defaults[k].default for k in _SETTINGS},
        dataset=dataset,
        command=command,
        wall_time_s=wall,
        machine=f"{platform.machine()}, {os.cpu_count()} cpu(s) visible, "
        f"{len(os.sched_getaffinity(0))} in use",
        **versions(),
    )
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_atomic(ds, path)
    print(f"wrote {path}", flush=True)
