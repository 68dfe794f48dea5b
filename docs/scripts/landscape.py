"""Numbers and figure of docs/validation.md "Free-energy profiles": F(aG) of the full (Level-1)
posterior by umbrella sampling and MBAR, beside the exact Level-2 profile.

``run``: Level 1 (g = I, or ``--gram-width`` for the Gram of one prior draw) at Table 1 on the
nested dataset ``task.sample(jax.random.key(DATASET), 320)[:P]`` of
``docs/scripts/level1_transition.py`` (the dataset of the SMC row, ``level1_delta_f.py``), written
to ``docs/figures/paper/landscape_kernel_P<P>_d<DATASET>.nc`` with the command and wall time in
its attrs, and its report printed (ΔF at SMC's divide, the level's own ``level_modes`` divide, and
ΔF as the divide moves). ``scan``: the same at every P of ``--Ps``
(default :data:`SCAN`) on fixed windows, into ``docs/figures/paper/landscape_scan/``, skipping the
points already written. ``small``: the same at the small preset (sigma^2 = 5, ``key(1)``, P = 42),
against SMC's 43.34 ± 0.14. ``figure``: the figure from the files written.

Run: ``.venv/bin/python docs/scripts/landscape.py run --P 272`` (about an hour on two cores);
``... scan [--gram-width 10000]`` (about ten minutes a point on a quiet core); ``... small``;
``... figure``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

import bayes_attn as ba
from bayes_attn.analysis.free_energy import profile_mean
from bayes_attn.experiments.coexistence import level_modes
from bayes_attn.experiments.landscape import (
    landscape_report,
    landscape_text,
    run_landscape,
    write_landscape,
)

#: one chain per window (split R-hat), Level 1's gradient run one at a time (batch 1: it does not
#: vectorise on a CPU), the metric from the two modes' Hessians
UMBRELLA = {"num_warmup": 100, "num_samples": 250, "num_chains": 1, "refine": 1, "batch": 1,
            "metric": "mode", "max_windows": 32}  # fmt: skip


#: the scan's P values (Table 1, around the softmax transition; the nested pool holds 320)
SCAN = (272, 260, 266, 278, 284, 290, 300, 310, 320)
#: the scan's windows, the same at every P (the default placement needs both modes, and above
#: Level 1's upper spinodal the weak one is gone): 33 centres 0.134 apart, kappa 1 / spacing^2
SCAN_CENTRES = np.linspace(0.1, 4.4, 33)


def measure(task, hyper, tokens, out, command, *, gram_width=None, **opts):
    P = int(tokens.shape[0])
    _, cut = level_modes(task, hyper, tokens, "kernel")
    t = time.perf_counter()
    idata = run_landscape(task, hyper, P, "kernel", tokens=tokens, gram_width=gram_width,
                          **{**UMBRELLA, **opts})  # fmt: skip
    wall = time.perf_counter() - t
    for g in ba._arviz.groups(idata):
        idata[g].attrs.update(command=command, wall_time_s=wall, level_divide_aG=cut)
    write_landscape(idata, out)
    prof = landscape_report(idata, divide=cut if np.isfinite(cut) else None)
    print(landscape_text(prof))
    print(f"level_modes divide {cut:.4f}; wall {wall:.0f} s; wrote {out}", flush=True)
    return prof


def linear(Ps, command, samples):
    """F(cG) of linear attention at Level 1 with protocol member 0's dataset and d = 10^4 Gram
    (the network of that width with frozen embeddings, exactly; the member of the exact protocol
    table), windows from cG = -0.1 to 0.5 past the MAP."""
    from bayes_attn.experiments import frozen
    from bayes_attn.experiments.protocol import ProtocolConfig, member_datasets
    from bayes_attn.theory.level1 import level1_map

    cfg, hyper = ProtocolConfig.paper(), ba.Hyper.paper()
    task = cfg.task()
    for P in (int(p) for p in Ps.split(",")):
        out = f"docs/figures/paper/landscape_scan/linear_P{P}_m0_g10000.nc"
        if Path(out).exists():
            print(f"P = {P}: {out} exists, skipped", flush=True)
            continue
        tokens = member_datasets(cfg, "linear", P)[0]
        gram = frozen.member_grams(cfg, hyper, "linear", P, 10_000)[0]
        cG = abs(level1_map(task, hyper, tokens, "linear", gram=gram).cG)
        print(f"==== linear P = {P}, member 0, d = 10^4 Gram: MAP cG {cG:.3f}", flush=True)
        t = time.perf_counter()
        idata = run_landscape(task, hyper, P, "kernel", "linear", tokens=tokens, gram=gram,
                              centres=np.linspace(-0.1, cG + 0.5, 32),
                              **{**UMBRELLA, "num_samples": samples})  # fmt: skip
        wall = time.perf_counter() - t
        for g in ba._arviz.groups(idata):
            idata[g].attrs.update(command=command, wall_time_s=wall, map_cG=cG, member=0)
        write_landscape(idata, out)
        prof = landscape_report(idata)
        print(landscape_text(prof))
        print(f"profile mean of cG {profile_mean(prof):.3f} "
              f"against the MAP {cG:.3f}; wall {wall:.0f} s; wrote {out}", flush=True)  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "scan", "linear", "small", "figure"))
    parser.add_argument("--P", type=int, default=272)
    parser.add_argument("--Ps", default=",".join(map(str, SCAN)),
                        help="scan: the P values, comma-separated")  # fmt: skip
    parser.add_argument("--dataset", type=int, default=0)
    parser.add_argument("--gram-width", type=int, default=None)
    parser.add_argument("--samples", type=int, default=UMBRELLA["num_samples"])
    parser.add_argument("--out", default=None,
                        help="run, small: the file; scan: the folder (for a timing away from the data)")  # fmt: skip
    args = parser.parse_args(argv)
    command = "python docs/scripts/landscape.py " + " ".join(argv or sys.argv[1:])
    if args.what == "figure":
        from landscape_figure import main as figure

        return figure()
    if args.what == "linear":
        return linear(args.Ps if args.Ps != ",".join(map(str, SCAN)) else "300,400,500", command,
                      args.samples)  # fmt: skip
    if args.what == "small":
        task, hyper = ba.CopyTask.paper(), ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=5.0)
        tokens = task.sample(jax.random.key(1), 60)[:42]
        out = args.out or "docs/figures/coexistence/landscape_kernel_P42.nc"
        return measure(task, hyper, tokens, out, command, num_samples=args.samples)
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    pool = task.sample(jax.random.key(args.dataset), 320)
    g = f"_g{args.gram_width}" if args.gram_width else ""
    if args.what == "run":
        out = args.out or f"docs/figures/paper/landscape_kernel_P{args.P}_d{args.dataset}{g}.nc"
        return measure(task, hyper, pool[: args.P], out, command, gram_width=args.gram_width,
                       num_samples=args.samples)  # fmt: skip
    for P in (int(p) for p in args.Ps.split(",")):  # resumable: a point written is skipped
        out = f"{args.out or 'docs/figures/paper/landscape_scan'}/kernel_P{P}_d{args.dataset}{g}.nc"
        if Path(out).exists():
            print(f"P = {P}: {out} exists, skipped", flush=True)
            continue
        print(f"==== P = {P}{' (Gram of d = ' + str(args.gram_width) + ')' if g else ''}",
              flush=True)  # fmt: skip
        measure(task, hyper, pool[:P], out, command, gram_width=args.gram_width,
                num_samples=args.samples, centres=SCAN_CENTRES)  # fmt: skip


if __name__ == "__main__":
    main()
