"""Umbrella sampling + MBAR against SMC per basin for the phases' free-energy difference.

One smaller Level-1 problem (L = 20, V = 3, chi = 30, sigma^2 = 30, softmax: (V + L)^2 = 529
weights against Table 1's 900; the issue's L = 8 has no first-order transition at Table 1's chi,
sigma^2: at V = 3 the softmax critical end point is at L = 17.75 (``critical_end_point``; 15.58 is
Table 1's V = 5), so below it Level 2 has one phase and the script stops with that message; a dataset drawn with
``key(0)`` at a P inside the Level-2 coexistence window where both Level-1 phases are modes), both
methods in one process:

* SMC per basin, :func:`bayes_attn.experiments.coexistence.phase_free_energies` (the basins split at
  the level's own divide, ``level_modes``; 2 replicates x 128 particles, run_smc's defaults);
* umbrella sampling, :func:`bayes_attn.experiments.landscape.run_landscape`, and MBAR with Delta F
  at the same divide.

It prints both Delta F with their standard errors and wall times, and the time ratio at equal
standard error, ``(t_smc / t_umbrella) x (se_smc / se_umbrella)^2`` (a Monte Carlo error falls like
one over the square root of the work). The goal is >= 10.

Run: ``python benchmarks/bench_landscape.py [--L 20] [--P P] [--samples 400]``.
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import numpy as np

import bayes_attn as ba
from bayes_attn.experiments.coexistence import level_modes, phase_free_energies
from bayes_attn.experiments.landscape import landscape_report, run_landscape
from bayes_attn.theory import phase_boundaries
from bayes_attn.theory.boundaries import critical_end_point


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--P", type=int, default=None, help="default: inside both windows")
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--L", type=int, default=20)
    args = parser.parse_args(argv)
    task, hyper = ba.CopyTask(args.L, 3), ba.Hyper.paper()
    b = phase_boundaries(task, hyper)
    lo, hi = b.spinodals
    if not (math.isfinite(lo) and math.isfinite(hi)):
        end = critical_end_point(ba.CopyTask(40, 3), hyper)["L"]
        raise SystemExit(f"L = {args.L}, V = 3: no first-order softmax transition at this preset "
                         f"(below the critical end point, L = {end:.2f}): no two phases to compare")  # fmt: skip
    print(f"L = {args.L}, V = 3: Level-2 spinodals {lo:.1f}, {hi:.1f}, equal action "
          f"{b.first_order:.1f}")  # fmt: skip
    pool = task.sample(jax.random.key(0), int(hi) + 40)
    Ps = [args.P] if args.P else range(int(lo) - 10, int(hi) + 10)
    for P in Ps:
        tokens = pool[:P]
        found, cut = level_modes(task, hyper, tokens, "kernel")
        if math.isfinite(cut):
            break
    else:
        raise SystemExit("no P with both Level-1 phases on this dataset")
    print(f"P = {P}: Level-1 modes aG {found['weak']['aG']:.3f}, {found['strong']['aG']:.3f}; "
          f"divide {cut:.3f}")  # fmt: skip
    t = time.perf_counter()
    smc = phase_free_energies(task, hyper, tokens, "kernel", include_logdet=True, progress=False)
    t_smc = time.perf_counter() - t
    dF_smc, se_smc = float(smc.delta_F), float(smc.delta_F_se)
    print(f"SMC per basin:     Delta F = {dF_smc:.3f} ± {se_smc:.3f} in {t_smc:.0f} s", flush=True)
    t = time.perf_counter()
    idata = run_landscape(task, hyper, P, "kernel", tokens=tokens, num_samples=args.samples,
                          progress=False)  # fmt: skip
    t_umb = time.perf_counter() - t
    prof = landscape_report(idata, divide=cut)
    dF_u, se_u = float(prof.delta_F), float(prof.delta_F_se)
    print(f"umbrella + MBAR:   Delta F = {dF_u:.3f} ± {se_u:.3f} in {t_umb:.0f} s "
          f"({prof.sizes['window']} windows)")  # fmt: skip
    z = (dF_u - dF_smc) / math.hypot(se_u, se_smc)
    ratio = (t_smc / t_umb) * (se_smc / se_u) ** 2
    print(f"difference {dF_u - dF_smc:+.3f} ({z:+.1f} combined s.e.); time ratio at equal s.e. "
          f"{ratio:.1f} (goal >= 10)")  # fmt: skip
    return {"P": P, "smc": (dF_smc, se_smc, t_smc), "umbrella": (dF_u, se_u, t_umb), "ratio": ratio}


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
