"""Numbers in docs/validation.md, "Free energy of the phases beyond Level 2".

The small preset: L = 25, V = 5, chi = 30, g_W = g_O = 1, sigma2 = 5. Level 2 depends on P / sigma2
only, so this is the paper's softmax transition at P* = 46.0 (spinodals 44.2, 49.5) with 26 times
fewer sequences, which makes Level 1 (a 900-dimensional M) affordable. One nested dataset
(``task.sample(key(1), 60)[:P]``).

1. Level 2 (exact) and the Level-1 modes from both starts at each P: the coexistence window at each
   level and the potential difference at the modes.
2. Delta F by SMC per basin at Level 1, at the P values where both phases exist, and at Level 0
   (d = 32, embeddings frozen at an orthonormal draw: its posterior over M is exactly Level 1's).
3. Occupancy: NUTS at Level 1 with 2 + 2 chains from the uniform and the copy start; Adam members
   (2 + 2) at Level 0.

0. ``level2``: the method check at Level 2 at the paper preset (``Hyper.paper()``, sigma2 = 30):
   per-basin SMC evidences (3 runs x 500 particles) against the exact quadrature of ``modes``, at
   the weight crossing and at P = 1200 x 30 / 131.8 (the P = 1200 of the earlier sigma2 = 131.8).

Run: ``.venv/bin/python docs/scripts/coexistence.py [level2|modes|smc|occupancy|LEVEL:P]...`` (all
but level2 by default). ``level2`` takes under a minute. ``smc`` runs the three rows of part 2 one
after the other; ``kernel:42``, ``network:42`` or ``kernel:43`` runs that row alone, so that rows
can run side by side (``taskset -c 0 ... kernel:42 & taskset -c 1 ... kernel:43``). Each row is
written to ``$COEXISTENCE_OUT/smc_<level>_P<P>.nc`` (default ``docs/figures/coexistence``) with the
SMC settings, the command and the wall time in its attrs. At the current SMC defaults a Level-1
row takes tens of minutes on one core (docs/validation.md).
"""

import sys
import time

import jax

import bayes_attn as ba
from bayes_attn.experiments.coexistence import (
    ensemble_occupancy,
    phase_free_energies,
    phase_starts,
    start_occupancy,
)
from bayes_attn.experiments.hysteresis import orthonormal_start
from bayes_attn.inference.potential import find_mode
from bayes_attn.models import kernel_limit_model
from bayes_attn.theory import modes, phase_boundaries

task = ba.CopyTask(25, 5)
hyper = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=5.0)
pool = task.sample(jax.random.key(1), 60)
draw = orthonormal_start(task, hyper, 32, 1)
emb = (draw["W_emb"][0], draw["p"][0])
parts = sys.argv[1:] or ["modes", "smc", "occupancy"]

if "level2" in parts:
    from bayes_attn.theory.modes import weight_crossing

    ptask, phyper = ba.CopyTask.paper(), ba.Hyper.paper()
    print(
        "| P | log Z weak: SMC, exact | log Z strong: SMC, exact | Delta F: SMC, exact "
        "| tempering steps (weak, strong) | time |"
    )
    for P in (weight_crossing(ptask, phyper).P_cross, 1200.0 * phyper.sigma2 / 131.8):
        t = time.perf_counter()
        ds = phase_free_energies(ptask, phyper, P, "reduced", include_logdet=True,
                                 smc_options={"num_particles": 500, "replicates": 3})  # fmt: skip
        m = modes(ptask, phyper, P, "softmax", include_logdet=True)
        exact = dict(zip(map(str, m.phase.values), map(float, m.log_weight.values), strict=True))
        w, s = ds.sel(phase="weak"), ds.sel(phase="strong")
        print(
            f"| {P:.2f} | {float(w.log_Z_smc):.3f} ± {float(w.log_Z_smc_se):.3f}, "
            f"{exact['weak']:.3f} | {float(s.log_Z_smc):.3f} ± {float(s.log_Z_smc_se):.3f}, "
            f"{exact['strong']:.3f} | {float(ds.delta_F):.3f} ± {float(ds.delta_F_se):.3f}, "
            f"{float(m.delta_F):.3f} | {float(w.tempering_steps):.1f}, "
            f"{float(s.tempering_steps):.1f} | {time.perf_counter() - t:.0f} s |",
            flush=True,
        )


def level1_modes(P):
    """aG and potential at the Level-1 modes reached from the uniform and the copy start."""
    tok = pool[:P]
    args = (task, hyper, tok, "softmax")
    out = []
    for phase, start in phase_starts(task, hyper, P, "kernel").items():
        mode = find_mode(kernel_limit_model, start=start, model_args=args)
        out.append((phase, float(mode.sites()["aG"]), mode.U))
    return out


if "modes" in parts:
    b = phase_boundaries(task, hyper)
    print(
        f"Level 2: P* = {b.first_order:.2f}, spinodals {b.spinodals[0]:.2f}, {b.spinodals[1]:.2f}"
    )
    print(
        "| P | Level 2 aG (weak, strong) | Level-2 Delta F | Level 1 aG from uniform, copy start "
        "| Level-1 U_strong - U_weak |"
    )
    for P in range(38, 50):
        m = modes(task, hyper, P, "softmax", include_logdet=True)
        l2 = ", ".join(f"{a:.3f}" for a in m.aG.values)
        dF = float(m.delta_F) if (m.phase == "strong").any() else float("nan")
        (_, a_w, U_w), (_, a_s, U_s) = level1_modes(P)
        dU = U_s - U_w if abs(a_s - a_w) > 1e-3 else float("nan")
        print(f"| {P} | {l2} | {dF:.2f} | {a_w:.3f}, {a_s:.3f} | {dU:.2f} |", flush=True)

ROWS = [("kernel", 42), ("network", 42), ("kernel", 43)]
picked = [tuple(a.split(":")) for a in parts if ":" in a]  # e.g. kernel:42 runs that row only
if picked:
    parts = [*parts, "smc"]
if "smc" in parts:
    import os

    from _free_energy import HEADER, table_row, write_row

    out_dir = os.environ.get("COEXISTENCE_OUT", "docs/figures/coexistence")
    print(HEADER)
    rows = [(lv, int(P)) for lv, P in picked] if picked else ROWS
    for level, P in rows:
        if (level, P) not in ROWS:
            raise SystemExit(f"row: {level}:{P} is not one of {ROWS}")
        kw = {"embeddings": emb} if level == "network" else {}
        t = time.perf_counter()
        os.makedirs(out_dir, exist_ok=True)  # each basin checkpoints there: a killed row resumes
        ckpt = os.path.join(out_dir, f"smc_{level}_P{P}.nc.smc-checkpoint")
        ds = phase_free_energies(task, hyper, pool[:P], level, include_logdet=True,
                                 smc_options={"replicates": 2}, checkpoint=ckpt, **kw)  # fmt: skip
        wall = time.perf_counter() - t
        print(table_row(f"{level}, P = {P}", ds, wall), flush=True)
        write_row(
            ds,
            os.path.join(out_dir, f"smc_{level}_P{P}.nc"),
            dataset="task.sample(jax.random.key(1), 60)[:P]",
            command=f"python docs/scripts/coexistence.py {level}:{P}",
            wall=wall,
        )

if "occupancy" in parts:
    P = 42
    t = time.perf_counter()
    occ, _ = start_occupancy(
        task, hyper, pool[:P], "kernel", num_chains=4, num_warmup=100, num_samples=100
    )
    print(f"NUTS, Level 1, P = {P} ({time.perf_counter() - t:.0f} s):\n{occ}", flush=True)
    t = time.perf_counter()
    ens = ensemble_occupancy(task, hyper, pool[:P], emb, members=2, max_steps=400)
    print(
        f"Adam, Level 0 (d = 32, orthonormal frozen embeddings), P = {P} "
        f"({time.perf_counter() - t:.0f} s), boundary aG = {ens.attrs['boundary_aG']:.3f}:"
    )
    print(ens.to_dataframe().to_string())
    print({k: v for k, v in ens.attrs.items() if k.startswith("strong")})
