"""What the plotting modules share: a vertical line at a finite x, plain numbers on a log P axis,
the names and LaTeX labels of the order parameters, umbrella profiles shifted to their minima."""

from __future__ import annotations

import math

import numpy as np

from bayes_attn.models.levels import order_parameters as _order_parameters


def _vline(ax, x, **kw):
    if x is not None and math.isfinite(x):
        ax.axvline(x, **kw)


def _plain_log_ticks(ax):
    """Log-scaled P axis with plain numbers at the decades and no labelled minor ticks."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _order_names(activation: str) -> tuple[str, str]:
    return _order_parameters(activation)


_LATEX = {"c1": r"$\hat c_1$", "cG": r"$\hat c_G$", "a1": r"$\hat a_1$", "aG": r"$\hat a_G$"}


def _shifted_profiles(ax, reps, Ps, cmap, fmt="o", mark_minima=False):
    """Each umbrella profile ``reps[P]`` (a landscape report) for P in ``Ps``, shifted to its
    minimum, with its MBAR error bars, coloured along ``cmap`` (no pale yellow); with
    ``mark_minima`` its minima dotted in its colour. Returns the colours, by P."""
    colours = {}
    for i, P in enumerate(Ps):
        prof, col = reps[P], cmap(0.85 * i / max(len(Ps) - 1, 1))
        ok = np.isfinite(prof.F.values)
        F = prof.F.values - np.nanmin(prof.F.values)
        ax.errorbar(prof.q.values[ok], F[ok], yerr=prof.F_se.values[ok], fmt=fmt, ms=2,
                    lw=0.6, color=col, capsize=1, label=f"P = {P}")  # fmt: skip
        if mark_minima:
            for q in prof.q_minimum.values.ravel():
                ax.axvline(q, color=col, ls=":", lw=0.8)
        colours[P] = col
    return colours
