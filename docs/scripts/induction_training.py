"""Numbers and figure for docs/validation.md "The induction head: networks and training": Adam
training curves of the two-layer induction network at fixed P, i.i.d. Dirichlet rows against
doubly-stochastic chains, and the plateau length in steps (mean and spread over the seeds). From the
file of ``bayes_attn/configs/induction_training.toml``:

    bayes-attn sweep --config bayes_attn/configs/induction_training.toml \
        --out out/induction_training.nc
    python docs/scripts/induction_training.py out/induction_training.nc

Prints the plateau table and writes docs/figures/induction/training.png (``--fig``). A file with
the LLC along training (``llc_every``: ``bayes_attn/configs/induction_training_llc.toml``) also
gets the table of λ̂(t) ± MCSE at every snapshot, and its figure is λ̂(t) beside the held-out loss
and both layers' scores (``--fig docs/figures/induction/training_llc.png``). Only reads the file.
"""

import numpy as np
from _study import arguments, open_study, pyplot, save, setting

from bayes_attn.analysis.induction_tables import plateau_table
from bayes_attn.plotting.plots import induction_training


def _snapshots(ds):
    """The curves of the first P, seed and source, and the records that have an LLC."""
    one = ds.isel({d: 0 for d in ("P", "seed", "doubly_stochastic") if d in ds.dims})
    return one, np.isfinite(one.llc.values)


def llc_table(ds) -> str:
    """λ̂ ± MCSE, R-hat, |∇L_n(w(t))|, the held-out loss and both layers' scores per snapshot."""
    one, has = _snapshots(ds)
    lines = ["step   test_loss  copy1  induction2_excess  llc ± mcse          rhat   |grad L_n|"]
    for i in np.flatnonzero(has):
        lines.append(
            f"{one.train_step.values[i]:5.0f}  {one.test_loss.values[i]:.4f}     "
            f"{one.copy1.values[i]:5.2f}  {one.induction2_excess.values[i]:17.3f}  "
            f"{one.llc.values[i]:8.2f} ± {one.llc_mcse.values[i]:6.2f}  "
            f"{one.llc_rhat.values[i]:5.2f}  {one.llc_grad_norm.values[i]:8.3f}"
        )
    refs = ", ".join(f"{k} {float(one[k]):.4f}" for k in ("loss_bigram", "loss_unigram"))
    return "\n".join([*lines, f"held-out references: {refs}; jump_step {float(one.jump_step)}"])


def llc_figure(ds):
    """λ̂(t) ± 2 MCSE at the snapshots (with |∇L_n(w(t))| on its own axis) under the held-out
    loss (beside the unigram and bigram losses) and both layers' scores, one shared step axis,
    the jump dotted."""
    plt = pyplot()
    one, has = _snapshots(ds)
    step = one.train_step.values
    fig, ax = plt.subplots(3, 1, figsize=(7, 8), sharex=True)
    ax[0].plot(step, one.test_loss, "k-", lw=1, label="held-out loss")
    for ref, ls in (("loss_unigram", "--"), ("loss_bigram", "-.")):
        ax[0].axhline(float(one[ref]), color="grey", lw=0.8, ls=ls, label=ref[5:])
    ax[0].set(ylabel="loss per target", title="Adam on the two-layer network")
    ax[1].plot(step, one.copy1, "C0-", lw=1, label="copy1 (layer 1)")
    ax[1].plot(step, 10 * one.induction2_excess, "C1-", lw=1, label="10 x induction2_excess")
    ax[1].set(ylabel="order parameter")
    s, llc, se = step[has], one.llc.values[has], one.llc_mcse.values[has]
    ax[2].errorbar(s, llc, yerr=2 * se, fmt="o-", color="C3", ms=4, capsize=2,
                   label="λ̂ at w(t) ± 2 MCSE")  # fmt: skip
    ax[2].axhline(0, color="grey", lw=0.5)
    ax[2].set(ylabel="λ̂ (SGLD at w(t))", xlabel="Adam step")
    twin = ax[2].twinx()
    twin.plot(s, one.llc_grad_norm.values[has], "s:", color="C7", ms=3, label="|∇L_n(w(t))|")
    twin.set_ylabel("|∇L_n(w(t))|", color="C7")
    jump = float(one.jump_step)
    for a in ax:
        if np.isfinite(jump):
            a.axvline(jump, color="k", lw=0.6, ls=":")
        a.legend(fontsize=7, loc="best")
    twin.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def main():
    ap = arguments(__doc__)
    ap.add_argument("path")
    ap.add_argument("--fig", default="docs/figures/induction/training.png")
    args = ap.parse_args()
    ds = open_study(args.path, keep=("seed",)).squeeze("activation")
    # the file's doubly_stochastic axis is the index into the option's list: label it by the flags
    flags = setting(ds, "doubly_stochastic", list(ds.doubly_stochastic.values))
    ds = ds.assign_coords(doubly_stochastic=np.asarray(flags, dtype=int))
    print(plateau_table(ds))
    if "llc" in ds:
        print(llc_table(ds))
        save(llc_figure(ds), args.fig, dpi=100)
    else:
        save(induction_training(ds), args.fig, dpi=100)


if __name__ == "__main__":
    main()
