"""Numbers and figure for docs/validation.md "The induction head: networks and training": Adam
training curves of the two-layer induction network at fixed P, i.i.d. Dirichlet rows against
doubly-stochastic chains, and the plateau length in steps (mean and spread over the seeds). From the
file of ``bayes_attn/configs/induction_training.toml``:

    bayes-attn sweep --config bayes_attn/configs/induction_training.toml \
        --out out/induction_training.nc
    python docs/scripts/induction_training.py out/induction_training.nc

Prints the plateau table and writes docs/figures/induction/training.png (``--fig``). Only reads
the file.
"""

import argparse
from pathlib import Path

import numpy as np
from _study import open_study, pyplot

SOURCES = {0: ("i.i.d. Dirichlet rows", "C0"), 1: ("doubly stochastic", "C3")}


def plateau_table(ds) -> str:
    """Entry, jump and plateau steps per P and source: mean, sd and the seeds that jumped."""
    lines = [
        "P      source                entry (mean±sd)   jump (mean±sd)    plateau (mean±sd)   jumped"
    ]
    for P in ds.P.values:
        for k in ds.doubly_stochastic.values:
            one = ds.sel(P=P, doubly_stochastic=k).where(ds.done.sel(P=P), drop=True)
            cells = []
            for name in ("entry_step", "jump_step", "plateau_steps"):
                v = one[name].values
                v = v[np.isfinite(v)]
                sd = v.std(ddof=1) if v.size > 1 else np.nan
                cells.append(f"{v.mean():7.0f} ± {sd:5.0f}  " if v.size else "      -          ")
            jumped = int(np.isfinite(one.jump_step.values).sum())
            lines.append(f"{int(P):<6} {SOURCES[int(k)][0]:<21} {' '.join(cells)}  "
                         f"{jumped}/{one.sizes.get('seed', 1)}")  # fmt: skip
    return "\n".join(lines)


def draw(ds, path):
    plt = pyplot()
    Ps = [P for P in ds.P.values if bool(ds.done.sel(P=P).any())]
    fig, axes = plt.subplots(len(Ps), 3, figsize=(13, 3.6 * len(Ps)), squeeze=False)
    step = ds.train_step.max([d for d in ds.train_step.dims if d != "chunk"]).values
    for row, P in zip(axes, Ps, strict=True):
        one = ds.sel(P=P).where(ds.done.sel(P=P), drop=True)
        for k in one.doubly_stochastic.values:
            src = one.sel(doubly_stochastic=k)
            label, color = SOURCES[int(k)]
            for s in src.seed.values:
                curve = src.sel(seed=s)
                first = s == src.seed.values[0]
                row[0].plot(step, curve.test_loss, color=color, lw=1, alpha=0.8,
                            label=label if first else None)  # fmt: skip
                row[1].plot(step, curve.kl_bigram, color=color, lw=1, alpha=0.8,
                            label=f"KL(bigram‖f), {label}" if first else None)  # fmt: skip
                row[1].plot(step, curve.kl_unigram, color=color, lw=1, ls=":", alpha=0.8,
                            label=f"KL(unigram‖f), {label}" if first else None)  # fmt: skip
                row[2].plot(step, curve.copy1, color=color, lw=1, alpha=0.8,
                            label=f"copy1 (layer 1), {label}" if first else None)  # fmt: skip
                row[2].plot(step, 10 * curve.induction2_excess, color=color, lw=1, ls="--",
                            alpha=0.8, label=f"10 x induction2_excess, {label}" if first else None)  # fmt: skip
                jump = float(curve.jump_step)
                if np.isfinite(jump):
                    row[0].axvline(jump, color=color, lw=0.5, ls=":")
            for ref, ls in (("loss_unigram", "--"), ("loss_bigram", "-.")):
                row[0].axhline(float(src[ref].mean()), color=color, lw=0.8, ls=ls)
        row[0].set(title=f"P = {int(P)}: held-out loss (-- unigram, -. bigram)", xlabel="Adam step",
                   ylabel="loss per target")  # fmt: skip
        lo = float(one.loss_bigram.min()) - 0.01
        row[0].set_ylim(lo, float(one.loss_uniform.max()) + 0.02)
        row[1].set(title="KL to the reference strategies", xlabel="Adam step", ylabel="nats",
                   yscale="log")  # fmt: skip
        row[2].set(title="order parameters (held-out)", xlabel="Adam step")
        for ax in row:
            ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--fig", default="docs/figures/induction/training.png")
    args = ap.parse_args()
    ds = open_study(args.path, keep=("seed",)).squeeze("activation")
    print(plateau_table(ds))
    draw(ds, args.fig)


if __name__ == "__main__":
    main()
