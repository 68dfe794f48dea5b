"""Figures. Each function takes computed data (xarray objects, dataclasses) and returns a Figure.

Nothing here computes theory: pass what :mod:`bayes_attn.theory` returned.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from bayes_attn.models.levels import level_name
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
                if r == len(acts) - 1 and k == 1:
                    ax.set_xlabel("key b", fontsize=8)
        cax = fig.add_subplot(grid[2 * r : 2 * r + 2, len(Ps)])
        fig.colorbar(im, cax=cax, label=f"{act} attention A[a, b]")
    ax = fig.add_subplot(grid[:, len(Ps) + 1 :])
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
    return fig


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
    names = _order_names(activation)
    soft = activation == "softmax"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4 if soft else 4.0), constrained_layout=True)
    ax = axes[0]
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
    lines = (
        (("second_order", "k", "-"), ("crossover", "w", "--"))
        if activation == "linear"
        else (("first_order", "w", "-"), ("spinodal_lower", "w", ":"), ("spinodal_upper", "w", ":"))
    )
    end = None
    for ax, diag, axis in ((axes[1], diagram_L, "L"), (axes[2], diagram_V, "V")):
        im = ax.pcolormesh(diag.P, diag[axis], diag.loss, shading="auto", cmap="viridis")
        fig.colorbar(im, ax=ax, label="theory loss per token")
        for name, color, ls in lines:
            if name in diag:
                ax.plot(
                    diag[name], diag[axis], color=color, ls=ls, lw=1.2, label=BOUNDARY_WORDS[name]
                )
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
    if end is not None:
        fig.get_layout_engine().set(rect=(0, 0.06, 1, 0.94))  # room for the caption
        fig.text(0.5, 0.01, END_POINT_CAPTION, ha="center", va="bottom", fontsize=8.5)
    return fig


def _phase_words(phases, hdi_prob: float) -> str:
    """One line per phase: its weight (with its error), mean and interval."""
    lines = []
    for phase, row in phases.iterrows():
        pct = f"{100 * hdi_prob:.0f}%"
        if phase == "posterior":
            lines.append(
                f"mean {row['mean']:.3g}, {pct} HDI {row['hdi_low']:.3g} to {row['hdi_high']:.3g}"
            )
            continue
        se = f" ± {row['weight_se']:.3f}" if np.isfinite(row["weight_se"]) else ""
        if row["n_draws"] == 0:
            lines.append(f"{phase}: weight 0 (no draw)")
            continue
        lines.append(
            f"{phase}: weight {row['weight']:.3f}{se}, mean {row['mean']:.3g}, "
            f"{pct} HDI {row['hdi_low']:.3g} to {row['hdi_high']:.3g}"
        )
    return "\n".join(lines)


def posterior_panel(label: str, idata, var: str | None = None, refs=()) -> dict:
    """One panel of :func:`posteriors_across` from a posterior: ``label`` and the panel data of
    :func:`bayes_attn.experiments.figures.posterior_panel` (the draws of ``var``, default folded
    ``c1`` for linear attention and ``aG`` for softmax, their phases and the reference lines
    ``refs``, (value, label) pairs, e.g. the theory's minima at that P)."""
    from bayes_attn.experiments.figures import posterior_panel as panel_data

    return dict(label=label, **panel_data(idata, var, refs))


def _old_panels(idatas, var_names, ref_vals) -> dict:
    """The panels of the old call ``posteriors_across({act: [(label, idata), ...]}, var_names,
    ref_vals)``: folded c1 (linear) or aG (softmax); a reference value is kept only where it
    belongs to the variable shown (softmax aG: the global saddle)."""
    import warnings

    warnings.warn(
        "posteriors_across({activation: [(label, idata), ...]}, ref_vals=...) is deprecated: pass "
        "panels built by plots.posterior_panel(label, idata, refs=[(value, label), ...])",
        DeprecationWarning,
        stacklevel=3,
    )
    panels = {}
    for act, items in idatas.items():
        panels[act] = []
        for c, (label, idata) in enumerate(items):
            var = (var_names or {}).get(act)
            ref = None if ref_vals is None else ref_vals[act][c]
            shown = var or ("c1" if act == "linear" else "aG")
            old = _order_names(act)[1]  # the old default variable, which ref_vals were for
            keep = ref is not None and shown == old
            refs = [(ref, "theory: global saddle")] if keep else []
            panels[act].append(posterior_panel(label, idata, var, refs))
    return panels


def posteriors_across(panels, var_names=None, ref_vals=None, *, bins: int = 80):
    """The posterior of an order parameter at several P, one row per activation, one column per P.

    Each panel is a histogram of the draws with its reference lines, labelled in a legend, and,
    written in the panel, each phase's weight, mean and highest density interval: a bimodal
    posterior is reported phase by phase (:func:`bayes_attn.analysis.diagnostics.phase_summary`),
    not by one mean and one interval across both modes.

    Parameters
    ----------
    panels : dict
        activation -> list of panels (dicts), in the order of the columns, each with

        * ``label``: where it is (e.g. "P = 45.5 (2 × the second-order P*)");
        * ``var``: the variable's name (``c1``, ``cG``, ``a1``, ``aG``);
        * ``draws``: its draws, any shape (folded onto one Z2 image for linear attention above P*);
        * ``phases``: the :func:`~bayes_attn.analysis.diagnostics.phase_summary` table of those
          draws (its ``attrs["boundary"]``, when finite, is drawn as the phase boundary);
        * ``refs`` (optional): a list of (value, label) reference lines, e.g. the theory's minima.
    bins : int
        Histogram bins per panel.
    var_names, ref_vals
        Only for the deprecated call with ``{activation: [(label, idata), ...]}``.
    """
    first = next(iter(panels.values()))[0]
    if isinstance(first, tuple):  # the old call: (label, idata) pairs
        panels = _old_panels(panels, var_names, ref_vals)
    acts = list(panels)
    ncols = max(len(v) for v in panels.values())
    fig, axes = plt.subplots(
        len(acts),
        ncols,
        figsize=(4.4 * ncols, 3.3 * len(acts)),
        squeeze=False,
        constrained_layout=True,
    )
    styles = [("k", "--"), ("C3", "-."), ("C2", ":"), ("C4", "--")]
    for r, act in enumerate(acts):
        for c, panel in enumerate(panels[act]):
            ax = axes[r, c]
            x = np.ravel(np.asarray(panel["draws"], float))
            x = x[np.isfinite(x)]
            ax.hist(x, bins=bins, density=True, color="C0", alpha=0.55, lw=0)
            phases = panel["phases"]
            cut = phases.attrs.get("boundary", math.nan)
            if math.isfinite(cut):
                ax.axvline(cut, color="0.5", lw=1, ls=(0, (1, 1)),
                           label=f"phase boundary {cut:.3g}")  # fmt: skip
            for k, (value, words) in enumerate(panel.get("refs", ())):
                color, ls = styles[k % len(styles)]
                ax.axvline(value, color=color, ls=ls, lw=1.1, label=f"{words}: {value:.3g}")
            top = ax.get_ylim()[1]
            ax.set_ylim(0, 1.75 * top)  # room for the words above the histogram
            ax.text(0.02, 0.97, _phase_words(phases, phases.attrs.get("hdi_prob", 0.94)),
                    transform=ax.transAxes, va="top", ha="left", fontsize=7,
                    bbox=dict(facecolor="w", alpha=0.8, lw=0))  # fmt: skip
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6.5, loc="center right", framealpha=0.8)
            var = panel["var"]
            ax.set_xlabel(_LATEX.get(var, var))
            ax.set_ylabel("posterior density")
            ax.set_title(f"{act}: {_LATEX.get(var, var)}, {panel['label']}", fontsize=9)
        for c in range(len(panels[act]), ncols):
            axes[r, c].set_visible(False)
    return fig


def phase_weight_curve(weights, crossing=None, boundaries=None):
    """The weight of the strong-copy softmax phase against P: exact quadrature and Laplace.

    ``weights`` is :func:`bayes_attn.theory.phase_weights` output; ``crossing`` a
    :class:`~bayes_attn.theory.WeightCrossing`; the first-order P* and spinodals come from
    ``boundaries``.
    """
    fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
    ax.plot(weights.P, weights.strong_weight, color="C3", label="exact (quadrature)")
    ax.plot(weights.P, weights.strong_weight_laplace, color="k", ls=":", label="Laplace")
    if crossing is not None:
        _vline(ax, crossing.P_cross, color="C3", ls="--", lw=0.8, label="equal weights")
    if boundaries is not None:
        _vline(ax, boundaries.first_order, color="C0", lw=0.8, label="equal action P*")
    ax.set(
        xlabel="P (training sequences)",
        ylabel="weight of the strong-copy phase",
        ylim=(-0.02, 1.02),
        title=f"softmax phase weights at chi = {weights.attrs.get('chi', '?')}",
    )
    ax.legend(fontsize=8)
    return fig


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


def hysteresis_loop(ds, boundaries, theory=None, jumps=None, label=None, ax=None):
    """The order parameter against P for the up and the down sweep, with the transition marked.

    Parameters
    ----------
    ds : xarray.Dataset
        A sweep over (direction, P, member) with ``qG`` (``experiments.hysteresis.hysteresis_sweep``).
        Drawn as the member mean with a band of +- one standard deviation over members.
    boundaries : PhaseBoundaries
        Its ``spinodals`` (dotted) and ``first_order`` P* (solid) are marked (any object with
        these two attributes, e.g. ``analysis.WeightCrossing``).
    theory : xarray.Dataset, optional
        The Level-2 loop in the same layout (``experiments.hysteresis.theory_sweep``): its up branch
        is the weak-copy minimum followed to where it disappears, its down branch the strong one.
    jumps : dict, optional
        ``experiments.hysteresis.jump_points(ds)``; the up and down jumps are marked with triangles.
        When ``ds`` has the SGLD branch (``sgld_qG``, ``hysteresis_sweep(..., sgld_steps=...)``),
        its member mean is drawn dashed with open markers.
    label : str, optional
        Legend name of ``ds`` (default "network", or "Level 2" for a ``theory_sweep``).
    ax : matplotlib Axes, optional
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    else:
        fig = ax.figure
    name = ds.attrs.get("order_parameter", "qG")
    ylabel = {"aG": r"$\hat a_G$", "cG": r"$\hat c_G$"}.get(name, name)
    if label is None:
        label = "Level 2" if level_name(ds.attrs.get("level", "")) == "reduced" else "network"
    styles = {"up": ("C0", "o", "sweep up"), "down": ("C3", "s", "sweep down")}
    for direction, (color, marker, text) in styles.items():
        q = ds.qG.sel(direction=direction)
        mean, sd = q.mean("member").values, q.std("member").values
        ax.plot(ds.P, mean, marker=marker, ms=3, color=color, label=f"{label}, {text}")
        ax.fill_between(ds.P, mean - sd, mean + sd, color=color, alpha=0.2, lw=0)
        if "sgld_qG" in ds:
            s = ds.sgld_qG.sel(direction=direction).mean("member")
            ax.plot(
                ds.P,
                s,
                marker=marker,
                ms=4,
                mfc="none",
                ls="--",
                lw=0.8,
                color=color,
                label=f"SGLD, {text}",
            )
    if theory is not None:
        for direction, ls in (("up", "-"), ("down", "--")):
            q = theory.qG.sel(direction=direction).isel(member=0)
            ax.plot(theory.P, q, color="k", ls=ls, lw=0.9, label=f"Level 2, {direction}")
    if jumps is not None:
        top = float(ds.qG.max())
        for direction, marker in (("up", "^"), ("down", "v")):
            x = jumps.get(direction)
            if x is not None and math.isfinite(x):
                ax.plot([x], [top], marker=marker, color=styles[direction][0], ls="none")
    _vline(ax, boundaries.first_order, color="C2", ls="-", lw=0.8, label="first-order P*")
    for k, s in enumerate(boundaries.spinodals):
        _vline(ax, s, color="C2", ls=":", lw=0.9, label="spinodals" if k == 0 else None)
    meta = ", ".join(f"{k} = {ds.attrs[k]}" for k in ("d_model", "L", "V") if k in ds.attrs)
    ax.set(xlabel="P (training sequences)", ylabel=ylabel, title=f"hysteresis loop ({meta})")
    ax.legend(fontsize=7)
    return fig


def precursors(ds_linear, ds_softmax, boundaries, scaled: bool = True):
    """Posterior variance of the order parameter against P: linear (c1) beside softmax (aG).

    Parameters
    ----------
    ds_linear, ds_softmax : xarray.Dataset or list of them
        ``experiments.precursors`` output, one per chi (e.g. chi = 30 and 3000). Drawn: the exact
        (quadrature) variance, solid; Laplace, dashed (black, chi-free when ``scaled``); NUTS with
        +- 2 MCSE, where present. For softmax the variance within the global phase is solid and
        that of the whole (two-phase) posterior thin.
    boundaries : PhaseBoundaries
        ``second_order`` is marked on the left, ``first_order`` and ``spinodals`` on the right.
    scaled : bool
        Plot chi times the variance, so that a finite-curvature phase collapses onto the Laplace
        curve and a second-order point shows as a chi-dependent peak.
    """
    lin = ds_linear if isinstance(ds_linear, list | tuple) else [ds_linear]
    soft = ds_softmax if isinstance(ds_softmax, list | tuple) else [ds_softmax]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, group, exact in ((axes[0], lin, "var_exact"), (axes[1], soft, "var_exact_global")):
        for k, ds in enumerate(group):
            chi = float(ds.attrs["chi"])
            f = chi if scaled else 1.0
            color = f"C{k}"
            ax.plot(ds.P, f * ds[exact], color=color, label=f"exact, chi = {chi:g}")
            if "var_exact_global" in ds and exact == "var_exact_global":
                ax.plot(ds.P, f * ds.var_exact, color=color, lw=0.6, alpha=0.7)
            lap = np.where(np.isfinite(ds.var_laplace), ds.var_laplace, np.nan)
            if k == 0 or not scaled:
                ax.plot(
                    ds.P, f * lap, "k--", lw=0.9, label="Laplace (chi H)^-1" if k == 0 else None
                )
            if "var_nuts" in ds:
                ok = np.isfinite(ds.var_nuts.values)
                ax.errorbar(
                    ds.P.values[ok],
                    f * ds.var_nuts.values[ok],
                    2 * f * ds.mcse_nuts.values[ok],
                    fmt="o",
                    ms=3,
                    color=color,
                    label=f"NUTS +- 2 MCSE, chi = {chi:g}",
                )
    ylabel = "chi x posterior variance" if scaled else "posterior variance"
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="P (training sequences)",
        ylabel=f"{ylabel} of c1",
        title="linear: fluctuations grow towards P* (2nd order)",
    )
    _vline(axes[0], boundaries.second_order, color="grey", lw=0.8, label="P*")
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel="P (training sequences)",
        ylabel=f"{ylabel} of aG",
        title="softmax: finite up to the jump (1st order)",
    )
    for ax in axes:
        _plain_log_ticks(ax)
    _vline(axes[1], boundaries.first_order, color="C3", lw=0.8, label="first-order P*")
    for k, s in enumerate(boundaries.spinodals):
        _vline(axes[1], s, color="C3", ls=":", lw=0.8, label="spinodals" if k == 0 else None)
    for ax, group, exact in ((axes[0], lin, "var_exact"), (axes[1], soft, "var_exact_global")):
        # the y range of the exact curves: Laplace diverges at the linear P*, and the two-phase
        # variance spikes at the softmax one; both are clipped
        vals = np.concatenate(
            [(float(d.attrs["chi"]) if scaled else 1.0) * d[exact].values for d in group]
        )
        vals = vals[np.isfinite(vals) & (vals > 0)]
        if vals.size:
            ax.set_ylim(vals.min() / 2, vals.max() * 5)
    for ax in axes:
        ax.legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------------------------------
# The plots of ``bayes-attn diagnose``


def run_title(attrs) -> str:
    """ "softmax, level reduced, P = 276" from a result's attrs (what is there of it)."""
    parts = [str(attrs[k]) for k in ("sampler", "trainer") if k in attrs][:1]
    if "activation" in attrs:
        parts.append(str(attrs["activation"]))
    if "level" in attrs:
        parts.append(f"level {level_name(str(attrs['level']))}")
    for key in ("P", "d_model"):
        if key in attrs:
            parts.append(f"{'d' if key == 'd_model' else key} = {np.asarray(attrs[key]).item():g}")
    return ", ".join(parts)


def _label(name: str) -> str:
    return _LATEX.get(name, name)


def trace(idata, var_names):
    """``az.plot_trace`` (``plot_trace_dist`` under ArviZ 1.x) with the run in the title and every
    axis labelled."""
    from bayes_attn import _arviz as az

    n = len(var_names)
    fig, axes = az.plot_trace(idata, var_names=var_names, figsize=(9, 2.3 * n + 0.6))
    for row, var in zip(axes, var_names, strict=False):
        row[0].set(xlabel=_label(var), ylabel="density", title=f"{_label(var)}: posterior")
        row[1].set(xlabel="draw", ylabel=_label(var), title=f"{_label(var)}: trace per chain")
    fig.suptitle(run_title(idata.posterior.attrs) or "trace")
    return fig


def _readable_y(ax, values) -> None:
    """A linear y axis, or a log one labelled with plain numbers at 1, 2 and 5 times the powers
    of ten where the values span more than a decade."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size and v.min() > 0 and v.max() / v.min() > 10:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())


def adam_loss(ds):
    """What Adam minimises beside what it is judged by, per member against the step.

    Panels: the train loss per token (1/2 |y - f|^2 per token), with the theory's loss at the
    Level-2 global saddle when ``ds`` has it (:func:`~bayes_attn.analysis.classify_minima`); the
    objective per token that Adam minimises (the chi-scaled negative log-posterior,
    ``objective = (chi / sigma^2) train_loss + prior / (P L)``); and its prior part
    ``objective - (chi / sigma^2) train_loss``. The objective can fall while the train loss rises,
    when the weights shrink faster than the fit worsens. Points are marked when there are at most
    30 records, so a history of one record still shows. Each panel has its own linear axis (log,
    with plain numbers, where its values span more than a decade).
    """
    parts = "objective" in ds and {"chi", "sigma2"} <= set(ds.attrs)
    panels = ["train_loss"] + (["objective"] if "objective" in ds else []) + (["prior"] * parts)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 0.8, 3.6),
                             squeeze=False, constrained_layout=True)  # fmt: skip
    steps = np.asarray(ds.step)
    marker = "o" if steps.size <= 30 else None
    n = ds.sizes["member"]
    data = {"train_loss": ds.train_loss}
    if "objective" in ds:
        data["objective"] = ds.objective
    if parts:
        data["prior"] = (
            ds.objective - float(ds.attrs["chi"]) / float(ds.attrs["sigma2"]) * ds.train_loss
        )
    words = {
        "train_loss": ("train loss per token", "train loss (what the filter judges)"),
        "objective": ("objective per token", "objective (minimised): -log posterior"),
        "prior": ("prior part per token", "its prior part: objective - (chi/sigma^2) loss"),
    }
    for ax, name in zip(axes[0], panels, strict=True):
        values = data[name]
        for m in range(n):
            ax.plot(steps, values.isel(member=m), marker=marker, ms=4, lw=1, color=f"C{m % 10}",
                    label=f"member {m}")  # fmt: skip
        shown = np.ravel(np.asarray(values))
        if name == "train_loss" and "theory_loss" in ds:
            theory = float(ds["theory_loss"])
            ax.hlines(theory, steps.min(), steps.max(), colors="k", linestyles="--", lw=1,
                      label="theory (Level-2 global saddle)")  # fmt: skip
            shown = np.append(shown, theory)
        _readable_y(ax, shown)
        ax.set(xlabel="Adam step", ylabel=words[name][0], title=words[name][1])
        ax.title.set_fontsize(10)
    first = axes[0][0]
    handles, labels = first.get_legend_handles_labels()
    keep = [(h, lab) for h, lab in zip(handles, labels, strict=True)
            if n <= 10 or not lab.startswith("member")]  # fmt: skip
    if keep:
        first.legend(*zip(*keep, strict=True), fontsize=7)
    fig.suptitle(run_title(ds.attrs), fontsize=10)
    return fig


_SKIP = {"done", "divergences", "n_minima", "global_min", "steps", "step"}
_SOURCE = {"adam_": "Adam ", "sgld_": "SGLD ", "theory_": "theory ", "level1_": "Level-1 MAP "}


def _curve_label(name: str) -> str:
    """Words for a sweep variable: ``sgld_cG`` -> "SGLD ĉ_G", ``c1_mean`` -> "posterior mean ĉ_1"."""
    source = next((w for p, w in _SOURCE.items() if name.startswith(p)), "")
    base = name.removeprefix(next((p for p in _SOURCE if name.startswith(p)), ""))
    if base.endswith("_mean"):
        return f"{source}posterior mean {_label(base.removesuffix('_mean'))}".strip()
    words = {"loss": "loss", "train_loss": "train loss", "test_loss": "held-out loss"}
    words.update({"meta_q": "metastable minimum", "meta_loss": "metastable loss"})
    words.update(BOUNDARY_WORDS)
    return f"{source}{words.get(base, _label(base))}".strip()


def sweep_curves(ds):
    """Every per-point scalar of a sweep against P: order parameters (left) and losses (right),
    one line style per activation, members averaged with their standard error as bars; the first
    L, V and the mean over seeds."""
    ds = ds.where(ds["done"])
    for d in ("L", "V"):
        if d in ds.dims:
            ds = ds.isel({d: 0})
    names = [
        v
        for v in ds.data_vars
        if v not in _SKIP
        and "P" in ds[v].dims
        and set(ds[v].dims) <= {"activation", "P", "seed", "member"}
        and not v.endswith(("_sd", "_mcse", "_r_hat", "_ess"))
        and not any(b in v for b in BOUNDARY_WORDS)
    ]
    order = [v for v in names if any(q in v for q in ("c1", "cG", "a1", "aG", "meta_q"))]
    losses = [v for v in names if "loss" in v]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    styles = {"linear": "-", "softmax": "--"}
    for ax, group, ylabel in (
        (axes[0], order, "order parameter"),
        (axes[1], losses, "loss per token"),
    ):
        for k, v in enumerate(group):
            da = ds[v].mean("seed") if "seed" in ds[v].dims else ds[v]
            for act in np.atleast_1d(ds.activation.values):
                y = da.sel(activation=act) if "activation" in da.dims else da
                err = None
                if "member" in y.dims:
                    n = y.count("member")
                    err = y.std("member") / np.sqrt(np.maximum(n, 1))
                    y = y.mean("member")
                if not np.isfinite(np.asarray(y)).any():  # e.g. a1 in a linear row
                    continue
                ax.errorbar(
                    y.P, y, yerr=err, color=f"C{k % 10}", ls=styles.get(str(act), "-"),
                    marker="o", ms=3, capsize=2, label=f"{_curve_label(v)}, {act}",
                )  # fmt: skip
        ax.set(xscale="log", xlabel="P (training sequences)", ylabel=ylabel)
        _plain_log_ticks(ax)
        if ds.sizes["P"] <= 8:
            ax.set_xticks(np.asarray(ds.P), [f"{p:g}" for p in np.asarray(ds.P)])
        if group:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, f"no {ylabel} in this sweep", ha="center", transform=ax.transAxes)
    kind = ds.attrs.get("kind", "?")
    what = {k: v for k, v in ds.attrs.items() if k != "sampler" or kind not in ("theory", v)}
    fig.suptitle(f"{kind} sweep: {run_title(what)}")
    return fig


def llc_calibration(table):
    """λ̂ against the step size ε, one line per nβ, from a calibration table
    (:func:`bayes_attn.experiments.llc.calibrate_llc`): error bars of 2 MCSE, the steps whose exact
    MALA acceptance is below the table's threshold hollow, the chosen step ringed."""
    fig, ax = plt.subplots(figsize=(6, 4))
    steps = np.asarray(table["step_size"], dtype=float)
    low = float(table.attrs.get("min_acceptance", 0.9))
    for i, nbeta in enumerate(np.asarray(table["nbeta"], dtype=float)):
        row = table.isel(nbeta=i)
        llc, se = np.asarray(row["llc"]), np.asarray(row["mcse"])
        (line,) = ax.plot(steps, llc, "-", label=f"nβ = {nbeta:.4g}")
        ax.errorbar(steps, llc, yerr=2 * se, fmt="none", color=line.get_color(), capsize=3)
        ok = np.asarray(row["acceptance"]) >= low
        ax.plot(steps[ok], llc[ok], "o", color=line.get_color())
        ax.plot(steps[~ok], llc[~ok], "o", mfc="none", color=line.get_color())
        if "chosen" in row and np.isfinite(float(row["chosen"])):
            j = int(np.argmin(np.abs(steps - float(row["chosen"]))))
            ax.plot(steps[j], llc[j], "o", ms=14, mfc="none", color="k")
    ax.set(xscale="log", xlabel="step size ε", ylabel="λ̂ (llc)")
    ax.set_title(f"LLC calibration (hollow: acceptance < {low:g}; ringed: chosen)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


#: a landscape's level in the legend (the posterior whose F is drawn)
_PROFILE_OF = {"reduced": "Level-2 posterior", "kernel": "Level-1 posterior"}


def _profile_label(attrs) -> str:
    """What the points are the free energy of: the level's posterior (a network's, for Level 1
    with the Gram of embeddings of a width), by umbrella sampling + MBAR."""
    level = level_name(str(attrs.get("landscape_level", attrs.get("level", ""))))
    width = int(np.asarray(attrs.get("gram_width", 0)))
    if level == "kernel" and width > 0:
        what = f"network posterior (d = {width}, frozen embeddings)"
    elif level == "kernel" and width < 0:
        what = "Level-1 posterior (a given Gram)"
    else:
        what = _PROFILE_OF.get(level, "posterior")
    return f"{what}, umbrella + MBAR (±1 s.e.)"


def landscape_profile(prof, ax=None, *, label: str | None = None, level2: bool = True):
    """F(q) of an umbrella run (points with ±1 s.e. bars, shifted so the lowest is 0), the exact
    Level-2 profile on the same bins (line, shifted alike), the two phases shaded either side
    of the divide, and hatched where neighbouring windows do not overlap (MBAR's overlap below
    ``min_overlap``: F there is not to be trusted). The axis covers every window's centre.
    ``prof``: :func:`bayes_attn.analysis.free_energy.landscape_report`'s Dataset."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(6.0, 4.0))
    q, F, se = prof.q.values, prof.F.values, prof.F_se.values
    ok = np.isfinite(F)
    base = np.nanmin(F[ok])
    ax.errorbar(q[ok], F[ok] - base, yerr=np.where(np.isfinite(se[ok]), se[ok], 0.0), fmt="o",
                ms=3, capsize=2, label=label or _profile_label(prof.attrs))  # fmt: skip
    if level2 and "F_level2" in prof:
        F2 = prof.F_level2.values
        ax.plot(q, F2 - np.nanmin(F2), "-", color="0.2", label="Level 2 (quadrature)")
    lo = min(float(prof.edge_lo.values[0]), float(np.min(prof.centre.values)))
    hi = max(float(prof.edge_hi.values[-1]), float(np.max(prof.centre.values)))
    divide = float(prof.divide)
    if math.isfinite(divide):
        ax.axvspan(lo, divide, color="tab:blue", alpha=0.08, label="weak-copy phase")
        ax.axvspan(divide, hi, color="tab:red", alpha=0.08, label="strong-copy phase")
    limit = float(prof.attrs.get("min_overlap", 0.03))
    c, over = prof.centre.values, prof.overlap_next.values
    gaps = [k for k in range(len(c) - 1) if not over[k] >= limit]
    for n, k in enumerate(gaps):
        ax.axvspan(c[k], c[k + 1], facecolor="none", edgecolor="0.4", hatch="///", lw=0,
                   label=f"windows do not overlap (< {limit:g}): F not to be trusted"
                   if n == 0 else None)  # fmt: skip
    pad = 0.02 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)
    cv = prof.attrs.get("cv", "q")
    ax.set_xlabel(_label(cv) if cv in ("aG", "a1", "cG", "c1") else cv)
    ax.set_ylabel(f"F({cv}) - min  [nats]")
    ax.legend(fontsize=8)
    title = []
    if "P" in prof.attrs:
        title.append(f"P = {float(np.asarray(prof.attrs['P'])):g}")
    if "level" in prof.attrs:
        title.append(f"level {level_name(str(prof.attrs['level']))}")
    ax.set_title(", ".join(title))
    fig.tight_layout()
    return fig
