"""Figure and table of docs/validation.md: the paper protocol at several widths against the theory.

Reads the protocol sweeps of ``bayes_attn/configs/protocol_widths.toml``, one per width D
(``bayes-attn sweep --config bayes_attn/configs/protocol_widths.toml --option d_model=D --out
docs/figures/paper/widths_dD.nc``, or ``benchmarks/bench_protocol.py --config ... --d D``), and draws, per activation, the order parameters against P: the Level-2 saddle on a fine grid, the
Level-1 MAP, and the Adam (filtered by the loss) and SGLD ensemble means at each width. Prints a
markdown table of the gaps to the Level-2 saddle and where each network jumps or crosses over.

Run: ``python docs/scripts/protocol_widths.py docs/figures/paper/widths_d64.nc ...widths_d256.nc ...``
"""

import numpy as np
from _study import arguments, filtered, open_study, preset, pyplot, setting

from bayes_attn.analysis.ensembles import largest_rise
from bayes_attn.plotting.studies import protocol_widths
from bayes_attn.theory import phase_diagram


def jump_and_crossover(ds):
    """Softmax: the P interval with the largest rise of aG; linear: the first P where cG > c1."""
    out = {}
    for act in ds.activation.values:
        sub = ds.sel(activation=act)
        for stage in ("adam", "sgld", "theory"):
            c1, cG = (sub[f"{stage}_{q}"] if stage == "theory" else filtered(sub, f"{stage}_{q}")[0]
                      for q in ("c1", "cG"))  # fmt: skip
            P = sub.P.values
            if act == "softmax":
                v = cG.values
                k = largest_rise(v)
                out[(act, stage)] = f"aG rises most between P = {P[k]} and {P[k + 1]} (by {v[k + 1] - v[k]:.3f})"  # fmt: skip
            else:
                over = np.nonzero(cG.values > c1.values + 0.01)[0]
                out[(act, stage)] = f"cG > c1 from P = {P[over[0]]}" if over.size else "cG < c1 at every P"  # fmt: skip
    return out


def figure(runs, path):
    first, _ = next(iter(runs.values())), pyplot()
    task, hyper = preset(first)
    Pf = np.geomspace(1, 3000, 200)
    theory = {act: (Pf, phase_diagram(task, hyper, Pf, act, L=[task.L], boundaries=False).isel(L=0))
              for act in first.activation.values}  # fmt: skip
    protocol_widths(runs, theory).savefig(path, dpi=120)
    print(f"wrote {path}\n")


def table(runs):
    first = next(iter(runs.values()))
    print("| activation | P | Level 2 (c1, cG) | Level 1 | "
          + " | ".join(f"Adam d={d} | SGLD d={d}" for d in runs) + " |")  # fmt: skip
    print("|---" * (4 + 2 * len(runs)) + "|")
    for act in first.activation.values:
        for P in first.P.values:
            t = first.sel(activation=act, P=P)
            row = [act, str(P), f"{float(t.theory_c1):.3f}, {float(t.theory_cG):.3f}"]
            finite = np.isfinite(t.level1_c1)
            row.append(f"{float(t.level1_c1):.3f}, {float(t.level1_cG):.3f}" if finite else "-")
            for ds in runs.values():
                if P not in ds.P.values:
                    row += ["-", "-"]
                    continue
                s = ds.sel(activation=act, P=P)
                n = int(filtered(s, "adam_cG")[2])
                for stage in ("adam", "sgld"):
                    m1, mG = (float(filtered(s, f"{stage}_{q}")[0]) for q in ("c1", "cG"))
                    row.append(f"{m1:.3f}, {mG:.3f}" + (f" ({n})" if stage == "adam" else ""))
            print("| " + " | ".join(row) + " |")
    print()
    for d, ds in runs.items():
        print(f"d={d}: {100 * (ds.global_min > 0.5).mean().item():.0f}% of members pass the loss "
              "filter")  # fmt: skip
        for (act, stage), text in jump_and_crossover(ds).items():
            print(f"  {act:8s} {stage:6s} {text}")
        gap = {st: float(np.abs(filtered(ds, f"{st}_cG")[0] - ds.theory_cG).mean())
               for st in ("adam", "sgld")}  # fmt: skip
        print(f"  mean |cG - cG_theory| over P and activations: Adam {gap['adam']:.3f}, SGLD "
              f"{gap['sgld']:.3f}")  # fmt: skip


def main():
    parser = arguments(__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--fig", default="docs/figures/paper/protocol_widths.png")
    args = parser.parse_args()
    runs = {int(setting(ds, "d_model")): ds for ds in map(open_study, args.files)}
    runs = dict(sorted(runs.items()))
    figure(runs, args.fig)
    table(runs)


if __name__ == "__main__":
    main()
