"""Numbers in docs/validation.md, "Free energy of the phases beyond Level 2" and "Level 1 against
Level 2 at Table 1": Delta F between the softmax phases by SMC per basin (``delta_f`` sweeps), the
modes from both starts (``coexistence_modes``) and the occupancy from both starts (``occupancy``),
from the files of ``bayes_attn/configs/coexistence*.toml`` (the small preset, sigma^2 = 5, on the
nested dataset ``task.sample(key(1), 60)[:P]``; ``coexistence_level2.toml``: the method check at
Level 2 at Table 1 against the exact quadrature of :func:`bayes_attn.theory.modes`) and of
``level1_delta_f.toml`` (Level 1 at Table 1, P = 272, dataset 0). Older files of one row
(``phase_free_energies``' own output) are read too:

    bayes-attn sweep --config bayes_attn/configs/coexistence.toml --out docs/figures/coexistence/smc_kernel.nc
    bayes-attn sweep --config bayes_attn/configs/coexistence.toml --option level=network --P 42 \\
        --out docs/figures/coexistence/smc_network.nc
    bayes-attn sweep --config bayes_attn/configs/coexistence_modes.toml --out docs/figures/coexistence/modes.nc
    python docs/scripts/coexistence.py FILE...   # each config's comment names its file
"""

import sys

import numpy as np
from _study import open_study, preset, setting

from bayes_attn.experiments.studies_coexistence import VERDICTS
from bayes_attn.theory import modes, phase_boundaries

HEADER = (
    "| row | aG weak, strong | log Z weak (Laplace, SMC) | log Z strong (Laplace, SMC) "
    "| tempering steps | Delta F SMC | Delta F Laplace | Delta U | Delta F Level 2 | time |"
)


def rows(ds):
    """(P, the row at P with dim phase = weak, strong) for every P of a delta_f file."""
    if "P" not in ds.dims:  # a file of one row
        yield float(ds.attrs["P"]), ds
        return
    ds = ds.squeeze("activation").assign_coords(phase=["weak", "strong"])
    for P in ds.P.values:
        yield float(P), ds.sel(P=P)


def table_row(label: str, ds) -> str:
    """One line of the Delta F table."""
    w, s = ds.sel(phase="weak"), ds.sel(phase="strong")
    return (
        f"| {label} | {float(w.aG):.3f}, {float(s.aG):.3f} "
        f"| {float(w.log_Z_laplace):.2f}, {float(w.log_Z_smc):.2f} ± {float(w.log_Z_smc_se):.2f} "
        f"| {float(s.log_Z_laplace):.2f}, {float(s.log_Z_smc):.2f} ± {float(s.log_Z_smc_se):.2f} "
        f"| {float(w.tempering_steps):.1f}, {float(s.tempering_steps):.1f} "
        f"| {float(ds.delta_F):.2f} ± {float(ds.delta_F_se):.2f} | {float(ds.delta_F_laplace):.2f} "
        f"| {float(ds.delta_U):.2f} | {float(ds.delta_F_level2):.2f} "
        f"| {ds.attrs.get('wall_time_s', np.nan):.0f} s |"
    )


def level2_check(ds):
    """Per P: SMC's log evidences and Delta F at Level 2 against the exact quadrature."""
    task, hyper = preset(ds)
    print("| P | log Z weak: SMC, exact | log Z strong: SMC, exact | Delta F: SMC, exact |")
    for P, r in rows(ds):
        m = modes(task, hyper, P, "softmax", include_logdet=True)
        exact = dict(zip(map(str, m.phase.values), map(float, m.log_weight.values), strict=True))
        w, s = r.sel(phase="weak"), r.sel(phase="strong")
        print(
            f"| {P:.2f} | {float(w.log_Z_smc):.3f} ± {float(w.log_Z_smc_se):.3f}, "
            f"{exact['weak']:.3f} | {float(s.log_Z_smc):.3f} ± {float(s.log_Z_smc_se):.3f}, "
            f"{exact['strong']:.3f} | {float(r.delta_F):.3f} ± {float(r.delta_F_se):.3f}, "
            f"{float(m.delta_F):.3f} |"
        )


def modes_table(ds):
    """Per P: Level 2's phases and Delta F, the Level-1 modes from both starts and their Delta U."""
    ds = ds.squeeze("activation")
    b = phase_boundaries(*preset(ds))
    lo, hi = b.spinodals
    print(f"Level 2: P* = {b.first_order:.2f}, spinodals {lo:.2f}, {hi:.2f}")
    print("| P | Level 2 aG (weak, strong) | Level-2 Delta F | Level 1 aG from uniform, copy start "
          "| Level-1 U_strong - U_weak |")  # fmt: skip
    for P in ds.P.values:
        r = ds.sel(P=P)
        l2 = ", ".join(f"{a:.3f}" for a in r.level2_aG.values if np.isfinite(a))
        (a_w, a_s), (U_w, U_s) = r.level1_aG.values, r.level1_U.values
        dU = U_s - U_w if abs(a_s - a_w) > 1e-3 else np.nan
        print(f"| {P} | {l2} | {float(r.level2_delta_F):.2f} | {a_w:.3f}, {a_s:.3f} | {dU:.2f} |")


def occupancy_table(ds):
    """NUTS's chains from both starts and the Adam members from both starts, per P."""
    ds = ds.squeeze("activation")
    for P in ds.P.values:
        r = ds.sel(P=P)
        print(f"NUTS, Level 1, P = {P}: verdict {VERDICTS[int(r.nuts_verdict)]!r}, strong fraction "
              f"{float(r.nuts_fraction):.3f}, boundary aG = {float(r.nuts_boundary):.3f}")  # fmt: skip
        for c, n in ((c, r.sel(chain=c)) for c in r.chain.values):
            print(f"  chain {c}: {float(n.nuts_n_strong):.0f} of {float(n.nuts_n_draws):.0f} draws "
                  f"strong, {float(n.nuts_n_switches):.0f} switches, ESS {float(n.nuts_ess):.1f}")  # fmt: skip
        print(f"Adam, network (d = {setting(ds, 'd_model')}, frozen orthonormal embeddings), "
              f"boundary aG = {float(r.adam_boundary):.3f}:")  # fmt: skip
        for m, a in ((m, r.sel(member=m)) for m in r.member.values):
            print(f"  member {m}: {'copy' if a.adam_start else 'uniform'} start, aG "
                  f"{float(a.adam_aG):.3f} ({'strong' if a.adam_strong else 'weak'}), "
                  f"objective {float(a.adam_objective):.4f}")  # fmt: skip


if __name__ == "__main__":
    header = [HEADER]  # printed once, before the first Delta F row
    for path in sys.argv[1:]:
        ds = open_study(path)
        kind, level = ds.attrs.get("kind"), setting(ds, "level", "kernel")
        if kind in ("coexistence_modes", "occupancy"):
            (modes_table if kind == "coexistence_modes" else occupancy_table)(ds)
        elif level == "reduced":
            level2_check(ds)
        else:
            if header:
                print(header.pop())
            for P, row in rows(ds):
                print(table_row(f"{'Level 1' if level == 'kernel' else level}, P = {P:g}", row))
