"""What the plotting modules share: a vertical line at a finite x, plain numbers on a log P axis,
the names and LaTeX labels of the order parameters."""

from __future__ import annotations

import math

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
