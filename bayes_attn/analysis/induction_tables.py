"""The text tables of the induction-head studies in docs/validation.md, from their result files
as ``docs/scripts/induction_figure.py`` and ``docs/scripts/induction_training.py`` read them: the
seed means across P (:func:`study_table`) and Adam's plateau per P and token source
(:func:`plateau_table`). Only reads what it is given (points not yet done are left out)."""

from __future__ import annotations

import numpy as np

__all__ = ["ACTIVATIONS", "SOURCES", "done_points", "fold_linear", "plateau_table", "study_table"]

ACTIVATIONS = ("softmax", "linear")
#: the training study's token sources, by its ``doubly_stochastic`` value: (label, colour)
SOURCES = {0: ("i.i.d. Dirichlet rows", "C0"), 1: ("doubly stochastic", "C3")}


def done_points(ds, act):
    """The study ``ds`` at activation ``act``, NaN where a point is not yet done."""
    one = ds.sel(activation=act)
    return one.where(one.done)


def fold_linear(ds):
    """``ds`` with layer 1's scores of the linear points folded onto ``copy1 >= 0``.

    With linear attention and the readout integrated out, M1 -> -M1 flips layer 1's output,
    which layer 2's form (its h1 block) and the readout absorb: the evidence and the prior are
    even in M1, so (uniform1, copy1) and -(uniform1, copy1) are the same mode, and a MAP lands
    on either sign (datasets at one P do). Both scores are multiplied by the sign of copy1
    (+1 where copy1 is 0), as the one-layer linear cG is folded; softmax points are unchanged.
    """
    if "activation" not in ds.dims or "linear" not in ds.activation.values:
        return ds
    linear = ds.activation == "linear"
    sign = np.sign(ds.copy1).where(ds.copy1 != 0, 1.0)
    sign = sign.where(linear, 1.0)
    return ds.assign(copy1=ds.copy1 * sign, uniform1=ds.uniform1 * sign)


def study_table(ds) -> str:
    """Seed means (and the seeds done) of the scores and losses at each activation and P."""
    cols = ("copy1", "induction2", "induction2_excess", "loss", "loss_bigram", "loss_unigram")
    lines = ["activation P      seeds " + " ".join(f"{c:>17}" for c in cols)]
    for act in ACTIVATIONS:
        one = done_points(ds, act)
        for P in ds.P.values:
            pt = one.sel(P=P)
            k = int(np.isfinite(pt.loss.values).sum())
            if k:
                vals = " ".join(f"{float(pt[c].mean()):17.4f}" for c in cols)
                lines.append(f"{act:<10} {int(P):<6} {k:>5} {vals}")
    return "\n".join(lines)


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
