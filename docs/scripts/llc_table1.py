"""λ̂ against P at Table 1: the figure and the table of the ``llc_table1`` sweeps.

Reads the files of ``bayes_attn/configs/llc_table1*.toml`` (each file's config says its width and
phase): the exact LLC and SGLD at d = 256 (``llc_table1.toml``), the exact values at d = 10⁴
(``llc_table1_d10000.toml``) and at the weak and strong MAPs at P = 285 (``llc_table1_weak.toml``,
``llc_table1_strong.toml``). Linear, softmax, and softmax through its coexistence window.

    bayes-attn sweep --config bayes_attn/configs/llc_table1.toml --out docs/figures/paper/llc_table1_d256.nc
    python docs/scripts/llc_table1.py docs/figures/paper/llc_table1_{d256,d10000,weak,strong}.nc \
        --figure docs/figures/paper/llc_table1.png [--table]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import bayes_attn as ba
from bayes_attn.experiments.results import options
from bayes_attn.experiments.sweep import load_sweep
from bayes_attn.plotting.studies import llc_against_P
from bayes_attn.theory import phase_boundaries
from bayes_attn.theory.modes import phase_boundary

#: where this network's MAP (d = 256, seed 0) has two minima (docs/validation.md, continuation)
MAP_WINDOW = (280.0, 290.0)
STUDY_POINTS = 26  # the paper's P >= 2, both activations


def read(paths) -> dict:
    """{(activation, d, phase): Dataset over the finished P} from the sweep files."""
    out = {}
    for path in paths:
        ds = load_sweep(path)
        o = options(ds)
        for act in ds.activation.values:
            sub = ds.sel(activation=act).isel(L=0, V=0, seed=0)
            sub = sub.isel(P=np.flatnonzero(sub.done.values))
            if sub.sizes["P"]:
                out[(str(act), int(o["d_model"]), o["phase"])] = sub.assign_attrs(**o)
    return out


def figure(res, path, quick):
    """:func:`bayes_attn.plotting.studies.llc_against_P` with Level 2's marks at Table 1."""
    task, hyper = ba.CopyTask(25, 5), ba.Hyper.paper()
    b = phase_boundaries(task, hyper)
    marks = {"second_order": b.second_order, "first_order": b.first_order,
             "spinodals": b.spinodals, "divide": phase_boundary(task, hyper, b.first_order)}  # fmt: skip
    done = sum(r.sizes["P"] for k, r in res.items() if k[1:] == (256, "map"))
    title = "λ̂ against P at the exact MAP (frozen embeddings, seed 0)"
    title += (" — QUICK RUN: few draws, not the study" if quick else
              f" — study in progress: {done} of {STUDY_POINTS} points" if done < STUDY_POINTS
              else "")  # fmt: skip
    llc_against_P(res, marks, title, MAP_WINDOW).savefig(path, dpi=110)
    print(f"figure: {path}")


def table(res) -> str:
    """The points as a Markdown table (docs/validation.md), and SGLD - exact over them."""
    rows = ["| activation | P | d | w* (order) | exact draws (order) | exact λ̂ ± MCSE (ESS) | "
            "SGLD λ̂ ± MCSE (acceptance, ESS, R-hat) | apart (MCSE) |", "|---" * 8 + "|"]  # fmt: skip
    z = []
    for (act, d, phase), ds in sorted(res.items()):
        names = ("c1", "cG") if act == "linear" else ("a1", "aG")
        for p in ds.P.values:
            r = {k: float(v) for k, v in ds.sel(P=p).data_vars.items()}
            star = ", ".join(f"{round(r[n + '_star'], 3) + 0.0:.3f}" for n in names)
            drawn = ", ".join(f"{round(r[f'exact_{n}_mean'], 3) + 0.0:.3f}" for n in names)
            sg = apart = "–"
            if np.isfinite(r["sgld_llc_mean"]):
                sg = (f"{r['sgld_llc_mean']:.4g} ± {r['sgld_mcse']:.2g} ({r['sgld_acceptance']:.3f}, "
                      f"{r['sgld_ess']:.1f}, {r['sgld_rhat']:.2f})")  # fmt: skip
                diff = r["sgld_llc_mean"] - r["exact_llc_mean"]
                z.append((diff, diff / abs(r["exact_llc_mean"]), diff / np.hypot(r["sgld_mcse"],
                                                                                  r["exact_mcse"])))  # fmt: skip
                apart = f"{z[-1][2]:+.1f}"
            what = "" if phase == "map" else f" ({phase} MAP)"
            rows.append(f"| {act}{what} | {p} | {d} | {star} | {drawn.replace('nan', '–')} | "
                        f"{r['exact_llc_mean']:.4g} ± {r['exact_mcse']:.2g} ({r['exact_ess']:.0f}) "
                        f"| {sg} | {apart} |")  # fmt: skip
    if z:
        diff, rel, zs = (np.array(c) for c in zip(*z, strict=True))
        rows.append(f"\nSGLD - exact over the {len(zs)} points with both: {np.sum(diff > 0)} above; "
                    f"mean {diff.mean():+.3f} (median {100 * np.median(rel):+.1f} % of the exact "
                    f"value); mean of the (SGLD - exact) / combined MCSE {zs.mean():+.2f}, so their "
                    f"sum / √n = {zs.sum() / np.sqrt(len(zs)):+.2f} (independent points: a standard "
                    "normal without a bias)")  # fmt: skip
    return "\n".join(rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="llc_table1 sweep files")
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--table", action="store_true", help="print the points as a Markdown table")
    ap.add_argument("--quick", action="store_true", help="title the figure a quick run")
    args = ap.parse_args()
    res = read(args.files)
    if args.figure:
        figure(res, args.figure, args.quick)
    if args.table:
        print(table(res))
