"""Numbers in docs/validation.md "Level 1 against Level 2 at Table 1": the free-energy difference of
the softmax phases of the exact Level-1 posterior on one dataset at Table 1 (sigma^2 = 30), by SMC per
basin (:func:`bayes_attn.experiments.coexistence.phase_free_energies`, 2 runs x 128 particles, the
rest at run_smc's defaults), beside Laplace and beside Level 2's exact Delta F at the same P.

The dataset is the first P sequences of the pool of 320 drawn with ``jax.random.key(DATASET)``, the
nested datasets of ``docs/scripts/level1_transition.py``, whose Level-1 MAPs from both starts exist
at P = 260-284 (dataset 0). Writes ``docs/figures/paper/level1_delta_f_P<P>_d<DATASET>.nc`` with the
settings, the command and the wall time in its attrs.

Run: ``.venv/bin/python docs/scripts/level1_delta_f.py [--P 272] [--dataset 0]`` (about an hour per
basin on two cores of a laptop-class CPU).
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import time

import jax

import bayes_attn as ba
from bayes_attn.experiments.coexistence import phase_free_energies
from bayes_attn.inference import smc
from bayes_attn.io import write_atomic


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--P", type=int, default=272)
    parser.add_argument("--dataset", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    out = args.out or f"docs/figures/paper/level1_delta_f_P{args.P}_d{args.dataset}.nc"
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    pool = task.sample(jax.random.key(args.dataset), 320)
    t = time.perf_counter()
    ds = phase_free_energies(task, hyper, pool[: args.P], "kernel", replicates=2)
    wall = time.perf_counter() - t
    w, s = ds.sel(phase="weak"), ds.sel(phase="strong")
    print(
        "| P | aG weak, strong | log Z weak (Laplace, SMC) | log Z strong (Laplace, SMC) "
        "| tempering steps | Delta F SMC | Delta F Laplace | Delta U | Delta F Level 2 | time |"
    )
    print(
        f"| {args.P} | {float(w.aG):.3f}, {float(s.aG):.3f} "
        f"| {float(w.log_Z_laplace):.2f}, {float(w.log_Z_smc):.2f} ± {float(w.log_Z_smc_se):.2f} "
        f"| {float(s.log_Z_laplace):.2f}, {float(s.log_Z_smc):.2f} ± {float(s.log_Z_smc_se):.2f} "
        f"| {float(w.tempering_steps):.1f}, {float(s.tempering_steps):.1f} "
        f"| {float(ds.delta_F):.2f} ± {float(ds.delta_F_se):.2f} | {float(ds.delta_F_laplace):.2f} "
        f"| {float(ds.delta_U):.2f} | {float(ds.delta_F_level2):.2f} | {wall:.0f} s |",
        flush=True,
    )
    defaults = {
        k: v.default
        for k, v in inspect.signature(smc.run_smc).parameters.items()
        if k in ("num_mcmc_steps", "max_mcmc_steps", "mixing_target", "target_ess",
                 "num_integration_steps", "kernel")
    }  # fmt: skip
    ds.attrs.update(
        {f"smc_{k}": v for k, v in defaults.items()},
        dataset=f"task.sample(jax.random.key({args.dataset}), 320)[:P]",
        command=f"python docs/scripts/level1_delta_f.py --P {args.P} --dataset {args.dataset}",
        wall_time_s=wall,
        machine=f"{platform.machine()}, {len(os.sched_getaffinity(0))} core(s) in use",
        bayes_attn_version=ba.__version__,
        jax_version=jax.__version__,
    )
    write_atomic(ds, out)
    print(f"wrote {out}", flush=True)


if __name__ == "__main__":
    main()
