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
import time

import jax
from _free_energy import HEADER, table_row, write_row

import bayes_attn as ba
from bayes_attn.experiments.coexistence import phase_free_energies


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--P", type=int, default=272)
    parser.add_argument("--dataset", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    out = args.out or f"docs/figures/paper/level1_delta_f_P{args.P}_d{args.dataset}.nc"
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    pool = task.sample(jax.random.key(args.dataset), 320)
    t = time.perf_counter()
    ds = phase_free_energies(
        task,
        hyper,
        pool[: args.P],
        "kernel",
        include_logdet=True,
        smc_options={"replicates": 2},
        checkpoint=f"{out}.smc-checkpoint",
    )  # a killed run resumes; fmt: skip
    wall = time.perf_counter() - t
    print(HEADER)
    print(table_row(f"Level 1, P = {args.P}", ds, wall), flush=True)
    write_row(
        ds,
        out,
        dataset=f"task.sample(jax.random.key({args.dataset}), 320)[:P]",
        command=f"python docs/scripts/level1_delta_f.py --P {args.P} --dataset {args.dataset}",
        wall=wall,
    )


if __name__ == "__main__":
    main()
