"""The plots of ``bayes-attn diagnose`` (:mod:`bayes_attn.plotting.report` draws them): a run's
title, traces, an Adam ensemble's losses, a sweep's curves, the LLC calibration table and a
landscape's free-energy profile.

Data in, matplotlib Figure out.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from bayes_attn.models.levels import level_name
from bayes_attn.plotting._common import _LATEX, _plain_log_ticks
from bayes_attn.plotting.transition import BOUNDARY_WORDS


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


def llc_calibration(table, exact=None):
    """λ̂ against the step size ε, one line per nβ, from a calibration table
    (:func:`bayes_attn.experiments.llc.calibrate_llc`): error bars of 2 MCSE, the steps whose exact
    MALA acceptance is below the table's threshold hollow, the chosen step ringed.

    ``exact``: the exact LLC at each nβ (a table of
    :func:`bayes_attn.experiments.llc_studies.calibration_tables`: its ``exact_llc``), drawn
    dotted in its nβ's colour; the title then names the network of the table's attrs
    ``d_model`` and ``P`` where it has them."""
    fig, ax = plt.subplots(figsize=(6, 4))
    steps = np.asarray(table["step_size"], dtype=float)
    low = float(table.attrs.get("min_acceptance", 0.9))
    lines = []
    for i, nbeta in enumerate(np.asarray(table["nbeta"], dtype=float)):
        row = table.isel(nbeta=i)
        llc, se = np.asarray(row["llc"]), np.asarray(row["mcse"])
        (line,) = ax.plot(steps, llc, "-", label=f"nβ = {nbeta:.4g}")
        lines.append(line)
        ax.errorbar(steps, llc, yerr=2 * se, fmt="none", color=line.get_color(), capsize=3)
        ok = np.asarray(row["acceptance"]) >= low
        ax.plot(steps[ok], llc[ok], "o", color=line.get_color())
        ax.plot(steps[~ok], llc[~ok], "o", mfc="none", color=line.get_color())
        if "chosen" in row and np.isfinite(float(row["chosen"])):
            j = int(np.argmin(np.abs(steps - float(row["chosen"]))))
            ax.plot(steps[j], llc[j], "o", ms=14, mfc="none", color="k")
    title = f"LLC calibration (hollow: acceptance < {low:g}; ringed: chosen)"
    if exact is not None:
        for i, (ex, line) in enumerate(zip(np.asarray(exact, float), lines, strict=True)):
            ax.axhline(ex, ls=":", color=line.get_color(), label="exact" if i == 0 else None)
        a = table.attrs
        where = f" on the network (d = {a['d_model']}, P = {a['P']})" if "d_model" in a else ""
        title = (f"calibrate_llc{where}; dotted: exact\n"
                 f"(hollow: acceptance < {low:g}; ringed: chosen)")  # fmt: skip
    ax.set(xscale="log", xlabel="step size ε", ylabel="λ̂ (llc)")
    ax.set_title(title, fontsize=10)
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
