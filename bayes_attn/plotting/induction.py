"""The figures of the induction-head studies in docs/validation.md, drawn from the result files
that ``docs/scripts/induction_figure.py`` and ``docs/scripts/induction_training.py`` read: both
layers' order parameters and the MAP's held-out loss against P (:func:`induction_across_P`), both
layers' attention patterns at a few P (:func:`induction_patterns`), the posterior, SGLD and the
LLC beside the MAP along P (:func:`induction_beyond_map`), the umbrella profiles
(:func:`induction_profiles`), Adam's training curves
(:func:`induction_training`) and the LLC along training (:func:`induction_training_llc`).

Data in, matplotlib Figure out: nothing here computes theory or reads a file.
"""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import numpy as np

from bayes_attn.analysis.induction_tables import ACTIVATIONS, SOURCES, done_points, llc_snapshots
from bayes_attn.plotting._common import _shifted_profiles

#: the reference losses of the study file: (variable, label, colour, line style)
REFS = (("loss_bigram", "Bayes (Dirichlet bigram)", "k", "-."),
        ("loss_unigram", "in-context unigram", "C2", "--"),
        ("loss_uniform", "uniform 1/V", "0.5", ":"))  # fmt: skip


def map_points(mp):
    """The done points ``(activation, P, seed)`` of the maps file ``mp`` (an ``induction``
    sweep with ``store_maps``, its axes L and V squeezed out), softmax first, each by P."""
    acts = [a for a in ACTIVATIONS if a in mp.activation.values]
    return [(act, int(P), int(seed)) for act in acts for P in sorted(mp.P.values)
            for seed in mp.seed.values
            if bool(mp.done.sel(activation=act, P=P, seed=seed))]  # fmt: skip


def attention_excess(A):
    """A minus its mean over each query's visible keys (b <= a), NaN above the diagonal: where a
    head puts more (> 0) or less (< 0) than uniform causal attention would."""
    L = A.shape[-1]
    tri = np.tril(np.ones((L, L), bool))
    mean = np.sum(np.where(tri, A, 0.0), axis=-1, keepdims=True) / np.arange(1, L + 1)[:, None]
    return np.where(tri, A - mean, np.nan)


def _maps_marks(ax, mp, act, names):
    for k, (_, P, seed) in enumerate(pt for pt in map_points(mp) if pt[0] == act):
        pt = mp.sel(activation=act, P=P, seed=seed)
        for name, color in zip(names, ("C0", "C3"), strict=False):
            ax.plot(P, float(pt[name]), "s", mfc="none", color=color, ms=7,
                    label="MAP with its forms (maps file)"
                    if k == 0 and name == names[0] else None)  # fmt: skip


def _loss_panel(ax, one):
    for ref, label, color, ls in REFS:
        ax.plot(one.P.values, np.nanmean(one[ref].values, axis=1), ls=ls, color=color, lw=1,
                label=label)  # fmt: skip
    lo = np.nanmin(one.loss_bigram.values)
    if np.isfinite(lo):
        ax.set_ylim(lo - 0.005, np.nanmax(one.loss_uniform.values) + 0.01)
    ax.set(xlabel="P (training sequences)", ylabel="loss per target")


def induction_across_P(ds, mp=None):
    """Layer 1's copy score, layer 2's induction score and the MAP's held-out loss (beside
    :data:`REFS`) against P, softmax and linear, each seed a dot and the seed mean a line; with
    the maps file ``mp`` (:func:`map_points`), its MAPs as open squares. Points not done are left
    out."""
    fig, axes = plt.subplots(3, 2, figsize=(11, 9.5), sharex=True, squeeze=False)
    P = ds.P.values
    with warnings.catch_warnings():  # points not yet run are NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        for col, act in enumerate(ACTIVATIONS):
            one = done_points(ds, act)
            panels = ((axes[0, col], ("copy1", "uniform1"), "layer 1 (copy head)"),
                      (axes[1, col], ("induction2", "induction2_excess"), "layer 2 (induction head)"),
                      (axes[2, col], ("loss",), "held-out loss of the MAP"))  # fmt: skip
            for ax, names, title in panels:
                for name, color in zip(names, ("C0", "C3"), strict=False):
                    v = one[name].values  # (P, seed)
                    for s in range(v.shape[1]):
                        ax.plot(P, v[:, s], ".", color=color, alpha=0.4, ms=4)
                    ax.plot(P, np.nanmean(v, axis=1), "-", color=color, lw=1.5,
                            label=f"{name} (seed mean, dots: seeds)")  # fmt: skip
                if mp is not None and "loss" not in names:
                    _maps_marks(ax, mp, act, names)
                ax.set(title=f"{act}: {title}", xscale="log")
            _loss_panel(axes[2, col], one)
            missing = [int(p) for p in P if not bool(ds.done.sel(activation=act, P=p).any())]
            if missing:
                axes[0, col].set_title(f"{act}: layer 1 (copy head)\nnot yet in the study: P = "
                                       f"{missing if len(missing) < 5 else 'any'}", fontsize=10)  # fmt: skip
            for row in axes[:, col]:
                row.legend(fontsize=7, loc="best")
    fig.suptitle("Two-layer kernel limit's MAP across P (L = 16, V = 3, icl-markov α = 1)")
    fig.tight_layout()
    return fig


#: the files beside the MAP in :func:`induction_beyond_map`: (key, variable stem, label, colour)
BEYOND = (("post", "_mean", "kernel-limit posterior, held out (NUTS; mean ± sd)", "C0"),
          ("sgld", "", "network d = 256, training set (SGLD; mean ± sd)", "C1"))  # fmt: skip


def _beyond_panel(ax, study, files, act, name):
    one = done_points(study, act)
    ax.plot(one.P.values, np.nanmean(one[name].values, axis=1), "-", color="0.4", lw=1.2,
            label="kernel-limit MAP (seed mean of the study)")  # fmt: skip
    for key, stem, label, color in BEYOND:
        f = files.get(key)
        if f is None or act not in f.activation.values:
            continue
        pts = done_points(f, act)
        ax.errorbar(pts.P.values, pts[name + stem].values, yerr=pts[name + "_sd"].values, fmt="o",
                    ms=4, capsize=3, color=color, label=label)  # fmt: skip
        if key == "post":  # the MAP the chains started from, on the same held-out sequences
            ax.plot(pts.P.values, pts[name + "_map"].values, "s", mfc="none", color=color, ms=7,
                    label="its MAP (dataset 0, held out)")  # fmt: skip


def induction_beyond_map(study, posterior=None, sgld=None, llc=None, llc_net=None):
    """Layer 1's copy score, layer 2's induction excess, the held-out loss and (with ``llc``) the
    LLC at the MAP against P, softmax and linear: the study's MAP (seed mean) as a line, the
    kernel-limit posterior (``post``, an ``induction_posterior`` file) and SGLD on the network
    (``sgld``, ``induction_sgld``) as mean ± sd, the posterior-predictive loss beside the MAP's
    and :data:`REFS`; the LLC of the network at Adam's weights beside it (``llc_net``,
    :func:`~bayes_attn.analysis.induction_tables.network_llc`). Each file squeezed to
    (activation, P) (the study keeps its seeds); points not done are left out."""
    post, files = posterior, {"post": posterior, "sgld": sgld}
    lams = [(f, fmt, label) for f, fmt, label in
            ((llc, "o-C4", "kernel limit at the MAP (NUTS)"),
             (llc_net, "s--C2", "network d = 64 at Adam's weights (SGLD)")) if f is not None]  # fmt: skip
    rows = 4 if lams else 3
    fig, axes = plt.subplots(rows, 2, figsize=(11, 2.9 * rows + 0.8), sharex=True, squeeze=False)
    with warnings.catch_warnings():  # points not yet run are NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        for col, act in enumerate(ACTIVATIONS):
            for ax, name, title in ((axes[0, col], "copy1", "layer 1: copy1"),
                                    (axes[1, col], "induction2_excess",
                                     "layer 2: induction2_excess")):  # fmt: skip
                _beyond_panel(ax, study, files, act, name)
                ax.set(title=f"{act}: {title}", xscale="log")
            ax = axes[2, col]
            one = done_points(study, act)
            ax.plot(one.P.values, np.nanmean(one.loss.values, axis=1), "-", color="0.4", lw=1.2,
                    label="MAP (seed mean of the study)")  # fmt: skip
            if post is not None and act in post.activation.values:
                pts = done_points(post, act)
                ax.plot(pts.P.values, pts.loss_predictive.values, "o", color="C0", ms=4,
                        label="posterior predictive (dataset 0)")  # fmt: skip
            _loss_panel(ax, one)
            ax.set(title=f"{act}: held-out loss", xscale="log")
            if lams:
                _llc_panel(ax := axes[3, col], lams, act)
                ax.set(title=f"{act}: local learning coefficient", xscale="log",
                       xlabel="P (training sequences)", ylabel="λ̂")  # fmt: skip
            for ax in axes[:, col]:
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7, loc="best")
    fig.suptitle("Beyond the MAP: the two-layer posterior across P (L = 16, V = 3, seed 0)")
    fig.tight_layout()
    return fig


def _llc_panel(ax, lams, act):
    """λ̂ ± MCSE against P of each LLC file in ``lams`` (file, format, label) at ``act``; a point
    whose R-hat exceeds the package's λ̂ limit (``analysis.llc_exploration.LIMITS.rhat_llc``)
    hollow: not mixed, not yet a result."""
    from bayes_attn.analysis.llc_exploration import LIMITS

    shown = False
    for f, fmt, label in lams:
        if act in f.activation.values:
            pts = done_points(f, act)
            bars = ax.errorbar(pts.P.values, pts.llc_mean.values, yerr=pts.llc_mcse.values,
                               fmt=fmt, ms=4, capsize=3, label=f"{label}; ± MCSE")  # fmt: skip
            bad = pts.llc_rhat.values > LIMITS.rhat_llc
            if bad.any():
                ax.plot(pts.P.values[bad], pts.llc_mean.values[bad], fmt[0], ms=6, mfc="white",
                        mec=bars.lines[0].get_color(), ls="none", zorder=3,
                        label=f"R-hat > {LIMITS.rhat_llc} (chains not mixed)")  # fmt: skip
            shown = True
    if not shown:
        ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center")


def induction_profiles(panels):
    """The umbrella profiles of the two-layer kernel-limit posterior (``induction_profile``'s
    ``profiles`` folder), one panel per site: ``panels`` ``{cv: {P: landscape report}}``
    (:func:`~bayes_attn.analysis.free_energy.landscape_report`), each F shifted to its minimum,
    with its MBAR error bars, the outer minima marked (dotted) and the first report's divide
    (dashed); a panel ``aG`` is the one-layer copy task's beside them."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.4), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, (cv, reps) in zip(axes[0], panels.items(), strict=True):
        _shifted_profiles(ax, reps, sorted(reps), cmap, fmt="o-", mark_minima=True)
        if np.isfinite(divide := float(next(iter(reps.values())).divide)):
            ax.axvline(divide, color="0.5", ls="--", lw=0.8)
        title = "one layer (copy task): aG" if cv == "aG" else f"two layers: {cv}"
        ax.set(xlabel=cv, ylabel=f"F({cv}) − min [nats]", title=title)
        ax.legend(fontsize=7)
    fig.suptitle("Kernel-limit posteriors: umbrella profiles\n(dotted: minima of F; dashed: the "
                 "divide of ΔF)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


def _example_marks(ax, tok):
    """Mark the induction matches (x[b-1] = x[a]) on the example sequence's panel."""
    L = tok.size
    match = (tok[None, :-1] == tok[:, None]) & np.tril(np.ones((L, L), bool))[:, 1:]
    a, b = np.nonzero(match)
    ax.plot(b + 1, a, "k+", ms=5, mew=0.8)
    ax.set_xticks(range(L), tok, fontsize=6)
    ax.set_yticks(range(L), tok, fontsize=6)
    ax.set(xlabel="key token (+: x[b-1] = x[a])", ylabel="query token")


def induction_patterns(mp):
    """Each done point of the maps file ``mp`` (:func:`map_points`) a row: layer 1's and layer 2's
    held-out mean attention and layer 2's on one sequence, each minus uniform causal attention
    (:func:`attention_excess`)."""
    points = map_points(mp)
    fig, axes = plt.subplots(len(points), 3, figsize=(12, 3.5 * len(points)), squeeze=False)
    for row, (act, P, seed) in zip(axes, points, strict=True):
        one = mp.sel(activation=act, P=P, seed=seed)
        panels = ((one.A1_mean, "layer 1, held-out mean"),
                  (one.A2_mean, "layer 2, held-out mean"),
                  (one.A2_example, "layer 2, one sequence"))  # fmt: skip
        for ax, (A, title) in zip(row, panels, strict=True):
            E = attention_excess(A.values)
            m = np.nanmax(np.abs(E))
            if m < 1e-8:  # no attention at all (linear attention with M = 0): nothing to show
                E, m = np.zeros_like(E) * E, 1.0
                ax.text(0.5, 0.5, f"A = 0 (max |A| {np.nanmax(np.abs(A.values)):.0e})",
                        transform=ax.transAxes, ha="center")  # fmt: skip
            im = ax.imshow(E, cmap="RdBu_r", vmin=-m, vmax=m)
            fig.colorbar(im, ax=ax, fraction=0.046)
            ax.set(title=title, xlabel="key b", ylabel="query a")
        row[0].set_ylabel(f"{act}, P = {P} (seed {seed})\nquery a", fontsize=10)
        _example_marks(row[2], one.tokens_example.values.astype(int))
        row[0].set_title(f"layer 1, held-out mean (copy1 {float(one.copy1):.2f})")
        row[2].set_title(f"layer 2, one sequence (induction2_excess {float(one.induction2_excess):+.3f})",
                         fontsize=9)  # fmt: skip
    fig.suptitle("Attention minus uniform causal attention (row mean over b <= a) at the MAP")
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    return fig


def _training_source(row, src, step, label, color):
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


def induction_training(ds):
    """Adam's training curves, one row per P that has a done point: the held-out loss (beside the
    unigram and bigram losses, dotted at each seed's jump), the KL to both reference strategies
    and both layers' order parameters, each token source (:data:`~bayes_attn.analysis.induction_tables.SOURCES`) in its colour."""
    Ps = [P for P in ds.P.values if bool(ds.done.sel(P=P).any())]
    fig, axes = plt.subplots(len(Ps), 3, figsize=(13, 3.6 * len(Ps)), squeeze=False)
    step = ds.train_step.max([d for d in ds.train_step.dims if d != "chunk"]).values
    for row, P in zip(axes, Ps, strict=True):
        one = ds.sel(P=P).where(ds.done.sel(P=P), drop=True)
        for k in one.doubly_stochastic.values:
            _training_source(row, one.sel(doubly_stochastic=k), step, *SOURCES[int(k)])
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
    return fig


def induction_training_llc(ds):
    """The LLC along Adam's training (an ``induction_training`` file with ``llc_every``, its first
    P, seed and source: :func:`~bayes_attn.analysis.induction_tables.llc_snapshots`): the
    held-out loss (beside the unigram and bigram losses), both layers' scores, and λ̂(t) ± 2 MCSE
    at the snapshots with |∇L_n(w(t))| on its own axis; one shared step axis, the jump dotted."""
    one, has = llc_snapshots(ds)
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
