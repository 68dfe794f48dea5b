"""Figures. Each function takes computed data (xarray objects, dataclasses) and returns a Figure.

Nothing here computes theory: pass what :mod:`bayes_attn.theory` returned.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np


def _vline(ax, x, **kw):
    if x is not None and math.isfinite(x):
        ax.axvline(x, **kw)


def order_parameters(linear, softmax, boundaries=None):
    """Order parameters against P for both activations, with the phase boundaries marked.

    Parameters
    ----------
    linear, softmax : xarray.Dataset
        Global saddles along P (``phase_diagram`` output at one L, or any Dataset with a ``P`` dim and
        ``c1``/``cG`` resp. ``aG``/``a1`` variables).
    boundaries : PhaseBoundaries, optional
    """
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), constrained_layout=True)
    ax = axes[0]
    ax.plot(linear.P, linear.c1, label=r"$\hat c_1$ (uniform pooling)")
    ax.plot(linear.P, linear.cG, label=r"$\hat c_G$ (copy)")
    ax.set(xscale="log", xlabel="P (training sequences)", title="linear attention")
    ax = axes[1]
    ax.plot(softmax.P, softmax.aG, color="C3", label=r"$\hat a_G$ (copy)")
    ax.plot(softmax.P, softmax.a1, color="C2", label=r"$\hat a_1$")
    ax.set(xscale="log", xlabel="P (training sequences)", title="softmax attention")
    ax = axes[2]
    ax.plot(linear.P, linear.loss, label="linear")
    ax.plot(softmax.P, softmax.loss, color="C3", label="softmax")
    ax.set(
        xscale="log",
        xlabel="P (training sequences)",
        ylabel="theory loss per token",
        title="loss at the global saddle",
    )
    if boundaries is not None:
        for a in axes[[0, 2]]:
            _vline(a, boundaries.second_order, color="k", ls="-", lw=0.8, label="2nd-order P*")
            _vline(a, boundaries.crossover, color="k", ls="--", lw=0.8, label="crossover")
        for a in axes[1:]:
            _vline(a, boundaries.first_order, color="C3", ls="-", lw=0.8, label="1st-order P*")
            for k, s in enumerate(boundaries.spinodals):
                _vline(a, s, color="C3", ls=":", lw=0.8, label="spinodals" if k == 0 else None)
    for a in axes:
        a.legend(fontsize=7)
    return fig


def action_landscapes(panels, ncols: int = 3, cap: float = 4.0):
    """Action landscapes: a list of (title, DataArray from ``theory.landscape``), ``ncols`` a row.

    The action is shown relative to its minimum and clipped at ``cap`` (per unit chi) so that the
    minima, not the walls, fill the colour scale.
    """
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4 * ncols, 3.3 * nrows), constrained_layout=True
    )
    axes = axes.ravel()
    for ax, (title, da) in zip(axes, panels, strict=False):
        if da.ndim == 2:
            v = da.clip(max=cap).values
            im = ax.contourf(da.cG, da.c1, v, levels=np.linspace(0, cap, 21), cmap="viridis")
            ax.contour(da.cG, da.c1, v, levels=[0.05, 0.5], colors="w", linewidths=0.6)
            ax.set(xlabel=r"$\hat c_G$", ylabel=r"$\hat c_1$")
            fig.colorbar(im, ax=ax, shrink=0.8, label=r"$(S - S_{min})/\chi$")
        else:
            ax.plot(da.aG, da.values, color="C3")
            ax.set(xlabel=r"$\hat a_G$", ylabel=r"$(S - S_{min})/\chi$", ylim=(-0.05 * cap, cap))
        ax.set_title(f"{title}, P = {da.attrs['P']:.0f}", fontsize=9)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    return fig
