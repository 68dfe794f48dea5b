"""Posterior and theory figures: the posteriors across P with their phases
(:func:`posteriors_across`, :func:`posterior_panel`), the phase weights
(:func:`phase_weight_curve`), the theory's order parameters (:func:`order_parameters`), the
action landscapes, the hysteresis loop and the precursors.

Data in, matplotlib Figure out; nothing here computes theory.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from bayes_attn.models.levels import level_name
from bayes_attn.plotting._common import _LATEX, _order_names, _plain_log_ticks, _vline


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
    titles = {
        "c1": "linear: fluctuations grow towards P* (2nd order)",
        "aG": "softmax: finite up to the jump (1st order)",
    }
    for ax, (q, title) in zip(axes, titles.items(), strict=True):
        ax.set(xscale="log", yscale="log", xlabel="P (training sequences)",
               ylabel=f"{ylabel} of {q}", title=title)  # fmt: skip
        _plain_log_ticks(ax)
    _vline(axes[0], boundaries.second_order, color="grey", lw=0.8, label="P*")
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
