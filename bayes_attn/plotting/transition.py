"""The paper's transition figures: the attention patterns and the losses across P
(:func:`attention_and_loss`), and the order parameters across P against the theory, with its
phase boundaries and the end point of the first-order line (:func:`order_parameter_transition`).

Data in, matplotlib Figure out; nothing here computes theory.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from bayes_attn.plotting._common import _LATEX, _order_names, _plain_log_ticks, _vline


def attention_and_loss(protocol, theory_attention, curves, Ps=(20, 100, 300, 800)):
    """Paper Fig. 1: attention patterns (trained above theory) and the loss per token against P.

    Parameters
    ----------
    protocol : xarray.Dataset
        A protocol sweep at one (L, V, seed): ``adam_A_bar`` (activation, P, member, query, key),
        ``adam_train_loss`` and, when present, ``sgld_train_loss`` (activation, P, member).
    theory_attention : xarray.DataArray
        The theory's mean attention at the saddle, dims (activation, P, query, key).
    curves : dict
        activation -> theory Dataset along a fine P grid with ``loss`` (``phase_diagram`` at one L).
    Ps : the training-set sizes whose patterns are shown.

    Notes
    -----
    All patterns of one activation, trained and theory at every P, share one colour scale and one
    colour bar, so that a zero pattern, uniform pooling and the copy diagonal read as what they
    are. Linear attention can be negative and gets a diverging scale centred on zero. The loss
    panel spans the protocol's P range: the theory (dashed), and each ensemble's mean with its
    spread (one standard deviation over members), Adam as circles and SGLD as diamonds.
    """
    acts = list(protocol.activation.values)
    Ps = [P for P in Ps if P in protocol.P.values]
    fig = plt.figure(figsize=(2.6 * len(Ps) + 6.5, 2.3 * 2 * len(acts)), constrained_layout=True)
    grid = fig.add_gridspec(
        2 * len(acts), len(Ps) + 3, width_ratios=[1] * len(Ps) + [0.08, 1.2, 1.2]
    )
    for r, act in enumerate(acts):
        _patterns(fig, grid, r, act, protocol, theory_attention, Ps, last=r == len(acts) - 1)
    _loss_panel(fig.add_subplot(grid[:, len(Ps) + 1 :]), protocol, curves, acts)
    return fig


def _patterns(fig, grid, r: int, act: str, protocol, theory_attention, Ps, last: bool) -> None:
    """The trained and theory patterns of one activation (rows ``2 r``, ``2 r + 1``) on one
    colour scale, with their colour bar."""
    rows = (
        ("trained", protocol.adam_A_bar.sel(activation=act).mean("member")),
        ("theory", theory_attention.sel(activation=act)),
    )
    shown = [[A.sel(P=P).values for P in Ps] for _, A in rows]
    shown = [[a[np.isfinite(a).all(1)][:, np.isfinite(a).all(0)] for a in row] for row in shown]
    top = max(1e-12, *(float(np.abs(a).max()) for row in shown for a in row))
    if act == "linear":
        cmap, lo, hi = "RdBu_r", -top, top
    else:
        cmap, lo, hi = "magma", 0.0, top
    for k, (what, _) in enumerate(rows):
        for c, P in enumerate(Ps):
            ax = fig.add_subplot(grid[2 * r + k, c])
            im = ax.imshow(shown[k][c], cmap=cmap, vmin=lo, vmax=hi)
            ax.set_xticks([])
            ax.set_yticks([])
            if k == 0:
                ax.set_title(f"P = {P}", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{act}\n{what}", fontsize=9)
            if last and k == 1:
                ax.set_xlabel("key b", fontsize=8)
    cax = fig.add_subplot(grid[2 * r : 2 * r + 2, len(Ps)])
    fig.colorbar(im, cax=cax, label=f"{act} attention A[a, b]")


def _loss_panel(ax, protocol, curves, acts) -> None:
    """The loss per token against P: the theory (dashed) and each ensemble's mean and spread."""
    P_lo, P_hi = float(protocol.P.min()), float(protocol.P.max())
    for n, act in enumerate(acts):
        color = f"C{3 * n}"
        curve = curves[act]
        keep = (curve.P >= 0.8 * P_lo) & (curve.P <= 1.25 * P_hi)
        ax.plot(curve.P[keep], curve.loss[keep], color=color, ls="--", label=f"{act}: theory")
        for stage, marker, name in (("adam", "o", "Adam"), ("sgld", "D", "SGLD")):
            if f"{stage}_train_loss" not in protocol:
                continue
            loss = protocol[f"{stage}_train_loss"].sel(activation=act)
            ax.errorbar(
                loss.P,
                loss.mean("member"),
                loss.std("member"),
                fmt=marker,
                color=color,
                mfc=color if stage == "adam" else "none",
                ms=4,
                capsize=2,
                label=f"{act}: {name} ensemble",
            )
    ax.set(
        xscale="log",
        xlabel="P (training sequences)",
        ylabel="train loss per token",
        title="loss per token",
    )
    _plain_log_ticks(ax)
    ax.legend(fontsize=8)


BOUNDARY_WORDS = {
    "second_order": "second-order P*",
    "crossover": "crossover (steepest copy growth)",
    "first_order": "first-order P*",
    "spinodal_lower": "lower spinodal",
    "spinodal_upper": "upper spinodal",
}


def broken_at(x, y, at):
    """``(x, y)`` with a nan inserted between the two points that straddle ``at``, so that a line
    drawn through them breaks there (a first-order jump is not a steep rise). Unchanged when
    ``at`` is None, not finite or outside ``x``."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if at is None or not math.isfinite(at) or not (x.min() < at < x.max()):
        return x, y
    k = int(np.searchsorted(x, at))
    return np.insert(x, k, at), np.insert(y, k, np.nan)


def _first_order_end(diag, axis: str):
    """(P, value of ``axis``) where the computed first-order line of a phase diagram ends at its
    smallest ``axis`` value; None without a first-order point."""
    fo = np.asarray(diag["first_order"], float)
    vals = np.asarray(diag[axis], float)
    ok = np.flatnonzero(np.isfinite(fo))
    if ok.size == 0:
        return None
    k = ok[np.argmin(vals[ok])]
    return float(fo[k]), float(vals[k])


END_POINT_CAPTION = (
    "The first-order line ends at a critical end point: for shorter sequences the weak- and "
    "strong-copy minima, and the barrier between them, merge (the spinodals meet), and the softmax "
    "transition becomes continuous (docs/theory.md §7)."
)


def _mark_end_point(ax, diag, axis, critical_end):
    """Mark the critical end point of the first-order line in the (P, ``axis``) panel: the given
    one (``critical_end``: ``{"P": ..., axis: ...}``, each a value or a (low, high) bracket), else
    where the computed line ends (its smallest ``axis`` value)."""
    if critical_end is not None:
        P, v = critical_end["P"], critical_end[axis]
        Pm, vm = np.mean(P), np.mean(v)
        xerr = None if np.ndim(P) == 0 else [[Pm - min(P)], [max(P) - Pm]]
        yerr = None if np.ndim(v) == 0 else [[vm - min(v)], [max(v) - vm]]
        if yerr is not None:
            where = f"{axis} = {min(v):g} to {max(v):g}"
        else:
            where = f"{axis} = {vm:.4g}" + ("" if xerr is not None else f", P = {Pm:.4g}")
    else:
        end = _first_order_end(diag, axis)
        if end is None:
            return None
        (Pm, vm), xerr, yerr = end, None, None
        where = f"computed line ends at {axis} = {vm:g}"
    ax.errorbar([Pm], [vm], xerr=xerr, yerr=yerr, fmt="*", ms=12, color="w", mec="k",
                ecolor="w", capsize=3, label=f"critical end point ({where})")  # fmt: skip
    return where


def order_parameter_transition(
    protocol,
    curve,
    diagram_L,
    diagram_V,
    activation,
    boundaries=None,
    networks="networks",
    critical_end=None,
):
    """Paper Figs. 3 (linear) and 4 (softmax): order parameters against P, networks and theory,
    and the phase diagrams of the loss per token over (P, L) and (P, V).

    Parameters
    ----------
    protocol : xarray.Dataset
        A protocol sweep at one (L, V, seed): ``adam_c1``, ``adam_cG``, ``sgld_c1``, ``sgld_cG``
        (activation, P, member); for softmax read them as (a1, aG).
    curve : xarray.Dataset
        The theory along a fine P grid (``phase_diagram`` at one L).
    diagram_L, diagram_V : xarray.Dataset
        ``phase_diagram`` over (L, P) and (V, P) with boundaries.
    boundaries : PhaseBoundaries, optional
        Marked on the order-parameter panel, with the spinodals in the legend. For softmax the
        theory curve is broken at the first-order P* (:func:`broken_at`): the global saddle jumps
        there.
    networks : str
        What the network points are, for the title (e.g. "networks of width 256").
    critical_end : dict, optional
        Softmax: the critical end point of the first-order line in the (P, L) plane, ``{"P": ...,
        "L": ...}``, each a value or a (low, high) bracket (from the theory; the plot computes
        nothing). Default: marked where the computed line ends (its smallest L with a first-order
        transition in ``diagram_L``). A caption under the panels says why the line ends
        (:data:`END_POINT_CAPTION`).
    """
    soft = activation == "softmax"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4 if soft else 4.0), constrained_layout=True)
    _transition_panel(axes[0], protocol, curve, activation, boundaries, networks)
    end = None
    for ax, diag, axis in ((axes[1], diagram_L, "L"), (axes[2], diagram_V, "V")):
        end = _diagram_panel(fig, ax, diag, axis, activation, critical_end) or end
    if end is not None:
        fig.get_layout_engine().set(rect=(0, 0.06, 1, 0.94))  # room for the caption
        fig.text(0.5, 0.01, END_POINT_CAPTION, ha="center", va="bottom", fontsize=8.5)
    return fig


def _transition_panel(ax, protocol, curve, activation, boundaries, networks) -> None:
    """The order parameters against P: the theory (broken at a first-order jump), the networks'
    Adam and SGLD means with their spread, the Level-1 MAP, and the boundaries."""
    names = _order_names(activation)
    soft = activation == "softmax"
    net = protocol.sel(activation=activation)
    P_lo, P_hi = 0.7 * float(net.P.min()), 2.0 * float(net.P.max())
    curve = curve.sel(P=(curve.P >= P_lo) & (curve.P <= P_hi))
    jump = boundaries.first_order if (soft and boundaries is not None) else None
    for k, (q, stored) in enumerate(zip(names, ("c1", "cG"), strict=True)):
        color = f"C{k}"
        ax.plot(*broken_at(curve.P, curve[q], jump), color=color, ls="--",
                label=f"{_LATEX[q]} theory")  # fmt: skip
        for stage, marker in (("adam", "o"), ("sgld", "D")):
            v = net[f"{stage}_{stored}"]
            ax.errorbar(
                v.P,
                v.mean("member"),
                v.std("member"),
                fmt=marker,
                mfc="none" if stage == "sgld" else color,
                color=color,
                ms=5,
                label=f"{_LATEX[q]} {'Adam' if stage == 'adam' else 'SGLD'}",
            )
    if boundaries is not None:
        if activation == "linear":
            _vline(ax, boundaries.second_order, color="k", lw=0.8, label="second-order P*")
            _vline(ax, boundaries.crossover, color="k", ls="--", lw=0.8, label="crossover")
        else:
            _vline(ax, boundaries.first_order, color="C3", lw=0.8, label="first-order P*")
            for i, x in enumerate(boundaries.spinodals):
                _vline(ax, x, color="C3", ls=":", lw=0.8, label="spinodals" if i == 0 else None)
    if "level1_cG" in net and np.isfinite(net["level1_cG"].values).any():
        for k, stored in enumerate(("c1", "cG")):
            v = net[f"level1_{stored}"]
            ax.plot(v.P, v, "x", color=f"C{k}", ms=6, label=f"{_LATEX[names[k]]} Level-1 MAP")
    ax.set(
        xscale="log",
        xlim=(P_lo, P_hi),
        xlabel="P (training sequences)",
        ylabel="order parameter",
        title=f"{activation} attention: {networks} and theory",
    )
    ax.title.set_fontsize(10)
    _plain_log_ticks(ax)
    ax.legend(fontsize=7, ncol=2)


def _diagram_panel(fig, ax, diag, axis: str, activation: str, critical_end):
    """The theory's loss per token over (P, ``axis``) with its boundary lines; for softmax over
    (P, L) the end point of the first-order line, which it returns (None otherwise)."""
    soft = activation == "softmax"
    lines = (
        (("second_order", "k", "-"), ("crossover", "w", "--"))
        if activation == "linear"
        else (("first_order", "w", "-"), ("spinodal_lower", "w", ":"), ("spinodal_upper", "w", ":"))
    )
    end = None
    im = ax.pcolormesh(diag.P, diag[axis], diag.loss, shading="auto", cmap="viridis")
    fig.colorbar(im, ax=ax, label="theory loss per token")
    for name, color, ls in lines:
        if name in diag:
            ax.plot(diag[name], diag[axis], color=color, ls=ls, lw=1.2, label=BOUNDARY_WORDS[name])
    if soft and axis == "L" and "first_order" in diag:
        end = _mark_end_point(ax, diag, axis, critical_end)
    ax.set(
        xscale="log",
        xlim=(float(diag.P.min()), float(diag.P.max())),
        xlabel="P (training sequences)",
        ylabel=axis,
        title=f"{activation}: loss over (P, {axis})",
    )
    ax.legend(fontsize=7, loc="upper left", facecolor="0.6", framealpha=0.8)
    return end
