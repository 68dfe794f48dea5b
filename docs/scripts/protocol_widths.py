"""Figure and table of docs/validation.md: the paper protocol at several widths against the theory.

Reads the NetCDF files written by ``benchmarks/bench_protocol.py --d D --out ...widths_dD.nc``
and draws, per activation, the order parameters against P: the Level-2 saddle on a fine grid, the
Level-1 MAP, and the Adam (filtered by the loss) and SGLD ensemble means at each width. Prints a
markdown table of the gaps to the Level-2 saddle and where each network jumps or crosses over.

Run: ``.venv/bin/python docs/scripts/protocol_widths.py out/protocol_d64.nc out/protocol_d256.nc ...``
"""

from __future__ import annotations

import argparse

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from bayes_attn.task import preset_from_attrs
from bayes_attn.theory import phase_diagram


def global_min(ds, rtol=0.05):
    """The loss filter of ``classify_minima``: final train loss within rtol of the ensemble's best."""
    loss = ds.adam_train_loss
    return loss <= loss.min("member") * (1 + rtol)


def filtered_mean(ds, name):
    """Ensemble mean over members at the global minimum (the paper's filter)."""
    return ds[name].where(global_min(ds)).mean("member")


def jump_and_crossover(ds):
    """Softmax: the P interval with the largest rise of aG; linear: the first P where cG > c1."""
    out = {}
    for act in ds.activation.values:
        sub = ds.sel(activation=act)
        for stage in ("adam", "sgld", "theory"):
            c1 = sub[f"{stage}_c1"] if stage == "theory" else filtered_mean(sub, f"{stage}_c1")
            cG = sub[f"{stage}_cG"] if stage == "theory" else filtered_mean(sub, f"{stage}_cG")
            P = sub.P.values
            if act == "softmax":
                rise = np.diff(cG.values)
                k = int(np.nanargmax(rise))
                out[(act, stage)] = (
                    f"aG rises most between P = {P[k]} and {P[k + 1]} (by {rise[k]:.3f})"
                )
            else:
                over = np.nonzero(cG.values > c1.values + 0.01)[0]
                out[(act, stage)] = (
                    f"cG > c1 from P = {P[over[0]]}" if over.size else "cG < c1 at every P"
                )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--fig", default="docs/figures/paper/protocol_widths.png")
    args = parser.parse_args()
    runs = {int(xr.open_dataset(f, engine="h5netcdf").attrs["d_model"]): f for f in args.files}
    runs = {d: xr.load_dataset(f, engine="h5netcdf") for d, f in sorted(runs.items())}
    first = next(iter(runs.values()))
    task, hyper = preset_from_attrs(first.attrs)
    Pf = np.geomspace(1, 3000, 200)
    acts = list(first.activation.values)
    fig, axes = plt.subplots(len(acts), 2, figsize=(10, 4 * len(acts)), squeeze=False)
    colors = plt.cm.viridis(np.linspace(0.1, 0.8, len(runs)))
    for r, act in enumerate(acts):
        th = phase_diagram(task, hyper, Pf, act, L=[task.L], boundaries=False).isel(L=0)
        names = ("c1", "cG") if act == "linear" else ("a1", "aG")
        for c, name in enumerate(names):
            ax = axes[r, c]
            ax.plot(Pf, th[name], "k-", lw=1.5, label="Level 2 saddle")
            sub = first.sel(activation=act)
            if np.isfinite(sub[f"level1_{('c1', 'cG')[c]}"]).any():
                ax.plot(sub.P, sub[f"level1_{('c1', 'cG')[c]}"], "kx", ms=7, label="Level 1 MAP")
            for color, (d, ds) in zip(colors, runs.items(), strict=True):
                s = ds.sel(activation=act)
                v = f"{('c1', 'cG')[c]}"
                ax.errorbar(
                    s.P,
                    filtered_mean(s, f"adam_{v}"),
                    s[f"adam_{v}"].where(global_min(s)).std("member"),
                    fmt="o",
                    color=color,
                    ms=4,
                    capsize=2,
                    label=f"Adam d={d}",
                )
                ax.plot(
                    s.P,
                    filtered_mean(s, f"sgld_{v}"),
                    "s",
                    mfc="none",
                    color=color,
                    ms=6,
                    label=f"SGLD d={d}",
                )
            ax.set_xscale("log")
            ax.set_xlabel("P")
            ax.set_ylabel(name)
            ax.set_title(f"{act}: {name}")
            ax.set_xlim(1, 3000)
        axes[r, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.fig, dpi=120)
    print(f"wrote {args.fig}\n")

    print(
        "| activation | P | Level 2 (c1, cG) | Level 1 | "
        + " | ".join(f"Adam d={d} | SGLD d={d}" for d in runs)
        + " |"
    )
    print("|---" * (4 + 2 * len(runs)) + "|")
    for act in acts:
        for P in first.P.values:
            t = first.sel(activation=act, P=P)
            row = [act, str(P), f"{float(t.theory_c1):.3f}, {float(t.theory_cG):.3f}"]
            row.append(
                f"{float(t.level1_c1):.3f}, {float(t.level1_cG):.3f}"
                if np.isfinite(t.level1_c1)
                else "-"
            )
            for ds in runs.values():
                if P not in ds.P.values:
                    row += ["-", "-"]
                    continue
                s = ds.sel(activation=act, P=P)
                n = int(global_min(s).sum())
                for stage in ("adam", "sgld"):
                    row.append(
                        f"{float(filtered_mean(s, f'{stage}_c1')):.3f}, "
                        f"{float(filtered_mean(s, f'{stage}_cG')):.3f}"
                        + (f" ({n})" if stage == "adam" else "")
                    )
            print("| " + " | ".join(row) + " |")
    print()
    for d, ds in runs.items():
        kept = global_min(ds).mean().item()
        print(f"d={d}: {100 * kept:.0f}% of members pass the loss filter")
        for (act, stage), text in jump_and_crossover(ds).items():
            print(f"  {act:8s} {stage:6s} {text}")
        gap = {}
        for stage in ("adam", "sgld"):
            g = np.abs(filtered_mean(ds, f"{stage}_cG") - ds.theory_cG)
            gap[stage] = float(g.mean())
        print(
            f"  mean |cG - cG_theory| over P and activations: Adam {gap['adam']:.3f}, SGLD {gap['sgld']:.3f}"
        )


if __name__ == "__main__":
    main()
