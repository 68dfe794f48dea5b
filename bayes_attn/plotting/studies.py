"""The figures of the studies in docs/validation.md, each drawn from the result files that the
study's drawing script in ``docs/scripts/`` reads (and from the theory numbers it passes): λ̂
against P at Table 1 (:func:`llc_against_P`), the phases' ΔF from the LLC on the posterior's
profile (:func:`llc_phases_profile`), the free-energy scan of the softmax transition
(:func:`free_energy_scan`) and linear attention's profiles (:func:`linear_profiles`), P* with
structured tokens (:func:`tokens_pstar`) and the scaling of P*(L, V) (:func:`pstar_scaling`).

Data in, matplotlib Figure out: nothing here computes theory or reads a file.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from bayes_attn.analysis.tokens_tables import pstar_per_x
from bayes_attn.plotting._common import _shifted_profiles

#: the third panel of :func:`llc_against_P`: softmax through the coexistence window, linear P axis
ZOOM = (240, 310)
#: below -SYMLOG the λ̂ axis turns logarithmic, so that linear's 0-11 stays legible
SYMLOG = 15.0


# --------------------------------------------------------------------------------------------------
# λ̂ against P at Table 1 (docs/scripts/llc_table1.py)


def _errorbars(ax, ds, name, **kw):
    if name + "_llc_mean" in ds and np.isfinite(ds[name + "_llc_mean"]).any():
        ax.errorbar(ds.P, ds[name + "_llc_mean"], yerr=2 * ds[name + "_mcse"], capsize=2, **kw)


def _tick_labels(ticks, gap=0.1, lines=4) -> list[str]:
    """Every log-spaced tick labelled, each on the first of ``lines`` text lines where it is at
    least ``gap`` (in log10 P) from the last label there (250, 275 and 285 are close)."""
    out, last = [], [-np.inf] * lines
    for p in ticks:
        line = next((i for i in range(lines) if np.log10(p) - last[i] >= gap), lines - 1)
        out.append("\n" * line + str(p))
        last[line] = np.log10(p)
    return out


def _llc_marks(ax, act, marks, map_window):
    """The theory's transition (linear) or coexistence window, the MAP's and P* (softmax)."""
    if act == "linear":
        ax.axvline(marks["second_order"], color="0.4", ls="--", lw=1,
                   label=f"second-order P* = {marks['second_order']:.2f}")  # fmt: skip
        return
    lo, hi = marks["spinodals"]
    ax.axvspan(lo, hi, color="0.88", label=f"Level-2 coexistence window {lo:.2f}–{hi:.2f}")
    ax.axvspan(*map_window, facecolor="none", edgecolor="0.5", hatch="///", lw=0,
               label=f"the MAP's two minima (d = 256, seed 0): {map_window[0]:g} < P < "
               f"{map_window[1]:g}")  # fmt: skip
    ax.axvline(marks["first_order"], color="0.4", ls="--", lw=1,
               label=f"Level-2 first-order P* = {marks['first_order']:.2f}")  # fmt: skip


def _llc_panel(ax, act, res, marks, map_window, zoom=None):
    """λ̂ against P for ``act`` (log P), or softmax over ``zoom`` on a linear axis."""
    ax.set_title(f"{act} attention (L = 25, V = 5, d = 256)" if zoom is None else
                 f"{act}: P = {zoom[0]}–{zoom[1]}, through the window", fontsize=10)  # fmt: skip
    ax.set_xscale("log") if zoom is None else ax.set_xlim(*zoom)
    ax.set(xlabel="P (training sequences)", ylabel="λ̂ (localized LLC, nβ = P / log P)")
    _llc_marks(ax, act, marks, map_window)
    ax.axhline(0, color="0.6", lw=0.8)
    cut = (
        (lambda d: d) if zoom is None else (lambda d: d.sel(P=(d.P >= zoom[0]) & (d.P <= zoom[1])))
    )
    if (act, 256, "map") not in res:
        return
    ds = cut(res[(act, 256, "map")])
    P, y = ds.P.values, ds.exact_llc_mean.values
    _errorbars(ax, ds, "exact", fmt="ko", ms=4, label="exact (W_O integrated out, NUTS; ± 2 MCSE)")
    strong = ds.aG_star.values > marks["divide"]  # softmax w* jumps from weak to strong
    for side in (False, True):  # the line joins points of one phase only
        ax.plot(P[strong == side], y[strong == side], "k-", lw=1.2)
    if zoom is not None and strong.any() and not strong.all():
        i = int(np.argmax(strong))
        ax.annotate(f"global MAP strong\nfrom here (aG* {ds.aG_star.values[i]:.2f})", (P[i], y[i]),
                    xytext=(-12, 0), textcoords="offset points", ha="right", va="center",
                    fontsize=7, arrowprops={"arrowstyle": "->", "lw": 0.6})  # fmt: skip
    for (a, d, phase), wide in res.items():
        if a == act and d != 256 and phase == "map":
            _errorbars(ax, cut(wide), "exact", fmt="--D", color="0.45", ms=4, mfc="none",
                       label=f"exact at d = {d:,}".replace(",", " "))  # fmt: skip
    _errorbars(ax, ds, "sgld", fmt="s", ms=4, color="C3", label="SGLD on the weights (± 2 MCSE)")
    for phase, mk, col in (("weak", "v", "C0"), ("strong", "^", "C2")):
        if (act, 256, phase) in res:
            ph = res[(act, 256, phase)]
            _errorbars(ax, ph, "exact", fmt=mk, ms=6, color=col, mfc="none",
                       label=f"exact at the {phase} MAP (a second minimum)")  # fmt: skip
            _errorbars(ax, ph, "sgld", fmt=mk, ms=6, color=col, label=f"SGLD at the {phase} MAP")
    if y.min() < -SYMLOG:  # past the linear crossover λ̂ dives (w* held by the prior)
        ax.set_yscale("symlog", linthresh=SYMLOG)
        ax.axhspan(-SYMLOG, SYMLOG, color="0.97", zorder=0, lw=0)
    if zoom is None:
        ticks = sorted({int(p) for k, r in res.items() if k[0] == act for p in r.P.values})
        ax.set_xticks(ticks, _tick_labels(ticks), fontsize=8)
        ax.minorticks_off()


def llc_against_P(res, marks, title: str, map_window=(280.0, 290.0)):
    """λ̂ against P: linear and softmax on a log P axis, and softmax through its coexistence
    window (``ZOOM``), each panel's legend below it.

    ``res``: ``{(activation, d, phase): Dataset over P}`` of the ``llc_table1`` sweeps (phase
    ``map``, ``weak`` or ``strong``; ``exact_llc_mean``, ``exact_mcse``, ``sgld_*``, ``aG_star``);
    ``marks``: Level 2's ``second_order``, ``first_order``, ``spinodals`` and the phase
    ``divide`` in aG at P*; ``map_window``: where the d = 256 MAP has two minima."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 6.4), width_ratios=(1, 1, 0.8))
    for ax, act, zoom in zip(axes, ("linear", "softmax", "softmax"), (None, None, ZOOM),
                             strict=True):  # fmt: skip
        _llc_panel(ax, act, res, marks, map_window, zoom)
    fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(left=0.05, right=0.99, top=0.88, bottom=0.5, wspace=0.22)
    fig.canvas.draw()
    to_fig = fig.transFigure.inverted()
    for ax, act in zip(axes[:2], ("linear", "softmax"), strict=True):  # the third: the second's
        neg = (act, 256, "map") in res and float(res[(act, 256, "map")].exact_llc_mean.min()) < 0
        note = ("λ̂ < 0: the draws find L_n below L_n(w*): w* is a saddle\nof L_n (below P*) or, "
                "a MAP with the prior, not a critical\npoint of it (docs/theory.md §11)"
                if neg else None)  # fmt: skip
        if note and ax.get_yscale() == "symlog":
            note += f"\nλ̂ axis: linear for |λ̂| < {SYMLOG:g} (shaded), logarithmic beyond"
        box = to_fig.transform_bbox(ax.get_tightbbox(fig.canvas.get_renderer()))
        ax.legend(fontsize=8, loc="upper center", title=note, title_fontsize=7,
                  bbox_to_anchor=((box.x0 + box.x1) / 2, box.y0 - 0.01),
                  bbox_transform=fig.transFigure)  # fmt: skip
    return fig


# --------------------------------------------------------------------------------------------------
# the phases' ΔF from the LLC against the posterior's profile (docs/scripts/llc_phases.py)

_CENTRE_WORDS = {"map": "MAP (weight decay's minimum)", "mode": "mode of the gate's density",
                 "start": "phase start (no mode)"}  # fmt: skip


def llc_phases_profile(ds, prof, P: int, options: dict, delta_f, delta_f_basin=None):
    """F(aG) of the posterior (``prof``, :func:`bayes_attn.analysis.free_energy.landscape_report`)
    with its modes, the phases' centres of an ``llc_phases`` sweep at one P (``ds``, dim
    ``phase``) and the ΔF's as text: ``delta_f`` (F_strong − F_weak, its s.e. and quadrature
    check, localized) and ``delta_f_basin`` (the same with the localization taken away; None
    where the sweep has no γ ladder). ``options``: the sweep's (``gamma``, ``d_model``)."""
    from bayes_attn.experiments.llc_studies import CENTRES

    q, F, se = prof.q.values, prof.F.values - np.nanmin(prof.F.values), prof.F_se.values
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    ax.fill_between(q, F - 2 * se, F + 2 * se, color="C0", alpha=0.25, lw=0)
    ax.plot(q, F, "C0-", label="F(aG) of the posterior (umbrella + MBAR, ± 2 s.e.)")
    modes = np.atleast_1d(prof.attrs.get("mode_q", []))
    for i, m in enumerate(modes):
        ax.axvline(m, color="0.45", ls=":", lw=1.2, label=None if i else "modes of the posterior "
                   "density over M (readout integrated out): " + ", ".join(f"{v:.2f}" for v in modes))  # fmt: skip
    for ph, col in zip(ds.phase.values, ("C2", "C3"), strict=True):
        r = ds.sel(phase=ph)
        ax.axvline(float(r.aG_star), color=col, ls="--", lw=1.2, label=f"{ph} centre: "
                   f"{_CENTRE_WORDS[CENTRES[int(r.centre)]]}, aG = {float(r.aG_star):.2f}")  # fmt: skip
    text = ["TI of the exact LLC, localized at each centre (γ = {:g}, prior, β = 1):\nF_strong − "
            "F_weak = {:.1f} ± {:.1f} (quadrature check {:.1f}) nats".format(options["gamma"],
                                                                           *delta_f)]  # fmt: skip
    if delta_f_basin is not None:
        text.append("the same with the localization taken away (TI over γ):\nF_strong − F_weak = "
                    "{:.1f} ± {:.1f} (quadrature checks {:.1f}) nats".format(*delta_f_basin))  # fmt: skip
    divide, two = float(prof.divide), np.atleast_1d(prof.q_minimum.values).size > 1
    text.append(f"posterior: log P(aG < {divide:.2f}) − log P(aG > {divide:.2f}) = "
                f"{float(prof.delta_F):.1f} ± {float(prof.delta_F_se):.1f} nats\n"
                f"(the divide: {'the profile' if two else 'Level 2'}'s barrier at this P)")  # fmt: skip
    ax.axvline(divide, color="0.6", lw=0.8)
    ax.text(0.98, 0.04, "\n".join(text), transform=ax.transAxes, ha="right", va="bottom",
            fontsize=8, bbox={"facecolor": "white", "edgecolor": "0.7"})  # fmt: skip
    ax.set(xlabel="aG (copy order parameter)", ylabel="F(aG) − min F (nats)")
    ax.set_title(f"softmax, P = {P}, frozen embeddings d = {options['d_model']} (seed 0): the "
                 "posterior's F(aG) and the LLC's ΔF", fontsize=10)  # fmt: skip
    ax.set_ylim(top=1.5 * np.nanmax(F + 2 * se))  # room for the legend above the curve
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------------
# the free-energy scan of the softmax transition, linear attention's profiles
# (docs/scripts/landscape_figure.py)


def _at_272(a, b, at, smc):
    """P = 272: the profile, and Delta F as the divide moves against SMC's at its divide."""
    from bayes_attn.plotting.runs import landscape_profile

    cut = float(smc.attrs["boundary_aG"])
    if at is not None:
        landscape_profile(at, a, label="Level 1, g = I (umbrella + MBAR)")
        a.set_title("F(aG) at Table 1, P = 272, dataset 0")
        ok = at.delta_F_divide_se.notnull()
        b.errorbar(at.divide_q[ok], at.delta_F_divide[ok], yerr=at.delta_F_divide_se[ok],
                   fmt="o", ms=3, capsize=2, label="Level 1: umbrella + MBAR")  # fmt: skip
    b.errorbar([cut], [float(smc.delta_F)], yerr=[float(smc.delta_F_se)], fmt="s", color="k",
               ms=6, label="Level 1: SMC per basin at its divide")  # fmt: skip
    b.axhline(float(smc.delta_F_level2), color="0.4", ls="--", label="Level 2 (exact, logdet)")
    b.set(xlabel="divide $a_G$", ylabel=r"$\Delta F = F_{strong} - F_{weak}$ [nats]",
          title="P = 272: ΔF as the divide moves")  # fmt: skip
    b.legend(fontsize=8)


def _scan_profiles(c, plain, divide, cmap):
    """The profiles across the scan, each shifted to its minimum: six of them where the scan has
    more (far below, at 272, at the shoulder 284, with both minima 290 and 300, far above)."""
    Ps = sorted(plain)
    if len(Ps) > 6:
        Ps = [P for P in (260, 272, 284, 290, 300, 320) if P in plain] or Ps[:: len(Ps) // 6 + 1]
    colours = _shifted_profiles(c, plain, Ps, cmap)
    for P, col in colours.items():
        prof = plain[P]
        if "F_level2" in prof:
            F2 = prof.F_level2.values
            c.plot(prof.q.values, F2 - np.nanmin(F2), "-", color=col, lw=0.8, alpha=0.7)
    c.axvline(divide, color="0.5", ls=":", lw=1)
    c.set(xlabel="$a_G$", ylabel="F(aG) − min [nats]", ylim=(-2, 100),
          title="Level 1 (g = I, points) and Level 2 (lines) at six P")  # fmt: skip
    c.legend(fontsize=7, ncol=2)


def token_profiles(panels, divide: float = 2.0):
    """F(aG) of the full Level-1 posterior for structured tokens, one panel per source:
    ``panels`` ``{title: {P: landscape report}}``, each profile shifted to its minimum, the fixed
    divide marked (ΔF across it is the table's)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.4), squeeze=False)
    for ax, (title, reps) in zip(axes[0], panels.items(), strict=True):
        _scan_profiles(ax, reps, divide, plt.get_cmap("viridis"))
        ax.set(title=title, ylim=(-2, 80))
    fig.tight_layout()
    return fig


def free_energy_scan(at, smc, scans, divide, level2, coexistence, p_star):
    """Four panels: F(aG) at P = 272 (``at``, a landscape report, or None) and ΔF there as the
    divide moves against SMC per basin (``smc``: a ``delta_f`` result with ``boundary_aG``);
    the first scan's profiles across P; ΔF(P) at ``divide`` for each scan (``scans``: ``{label:
    {P: landscape report}}``) against Level 2 (``level2``: the P grid and its ΔF), with Level 2's
    ``coexistence`` window and ``p_star``."""
    fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=(12.0, 8.6))
    _at_272(a, b, at, smc)
    _scan_profiles(c, next(iter(scans.values())), divide, plt.get_cmap("viridis"))
    for (kind, reps), fmt in zip(scans.items(), "os", strict=True):
        if reps:
            P = np.array(sorted(reps))
            dF, se = (np.array([float(reps[p][v]) for p in P]) for v in ("delta_F", "delta_F_se"))
            d.errorbar(P, dF, yerr=se, fmt=fmt + "-", ms=4, capsize=2, label=kind)
    d.plot(*level2, "-", color="0.3", label="Level 2 (quadrature, logdet)")
    d.axhline(0.0, color="0.6", lw=0.8)
    d.axvspan(*coexistence, color="tab:orange", alpha=0.08, label="Level-2 coexistence")
    d.axvline(p_star, color="tab:orange", ls=":", lw=1)
    d.set(xlabel="P", ylabel=f"ΔF at aG = {divide:.2f} [nats]",
          title="ΔF(P) at Level 2's divide at its P*")  # fmt: skip
    d.legend(fontsize=8)
    fig.tight_layout()
    return fig


def linear_profiles(panels):
    """Linear attention's F(cG), one panel per profile: ``panels`` of dicts with ``prof`` (a
    landscape report), ``map`` (the MAP's cG), ``mean`` (the profile's mean) and ``level2_min``
    (where Level 2's own F(cG) is lowest; nan if the report has no Level 2)."""
    from bayes_attn.plotting.runs import landscape_profile

    fig, axes = plt.subplots(1, len(panels), figsize=(max(7.0, 4.6 * len(panels)), 4.2),
                             squeeze=False)  # fmt: skip
    for ax, p in zip(axes[0], panels, strict=True):
        landscape_profile(p["prof"], ax, label="Level 1, member 0, d = 10⁴ Gram")
        ax.axvline(p["map"], color="tab:red", ls="--", lw=1, label=f"MAP {p['map']:.3f}")
        ax.axvline(p["mean"], color="tab:green", ls=":", lw=1.5,
                   label=f"posterior mean {p['mean']:.3f}")  # fmt: skip
        if np.isfinite(p["level2_min"]):
            ax.axvline(p["level2_min"], color="k", ls=":", lw=1,
                       label=f"Level 2's minimum {p['level2_min']:.3f}")  # fmt: skip
        ax.set_ylim(-1, 56)  # room for the legend above the points
        ax.legend(fontsize=7, loc="upper center", ncol=2)
    fig.suptitle("Linear attention: F(cG) of the full posterior (points) and Level 2 (line)",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------------
# P* with structured tokens (docs/scripts/tokens_study.py)

_TOKENS_LABEL = {"linear": "linear: second-order P*", "softmax": "softmax: equal-action P*",
                 "crossover": "linear: crossover, max dĉG/dlog P"}  # fmt: skip


def _tokens_label(ds, act, width) -> str:
    """The legend of one file's curve: softmax points where the search met one minimum only
    (``ds.crossover``) are where the MAP's aG passes ``aG_split``, not an equal-action P*."""
    label = _TOKENS_LABEL["crossover" if ds.attrs.get("measure") == "crossover" else act]
    if act == "softmax" and "crossover" in ds:
        ran = np.isfinite(ds.pstar.sel(activation=act).values)
        cross = ds.crossover.sel(activation=act).values[ran]
        if cross.size and cross.all():
            split = ds.attrs.get("aG_split", 2.0)
            label = f"softmax: where aG passes {split:g}, one minimum"
    return label + (f" (network d = {width})" if width else " (Level 1)")


def _one_minimum_x(ds, act) -> list:
    """The values of ``x`` at which every finished softmax search met one minimum only."""
    if act != "softmax" or "crossover" not in ds:
        return []
    p, cross = ds.pstar.sel(activation=act), ds.crossover.sel(activation=act)
    out = []
    for x in np.unique(ds.x.values):
        ran = np.isfinite(p.where(ds.x == x).values)
        c = cross.broadcast_like(p).where(ds.x == x).values[ran]
        if c.size and c.astype(bool).all():
            out.append(x)
    return out


def _tokens_file(ax, ds, level2, fam):
    """One ``tokens`` file on its panel: the datasets as dots, their mean as a line, and Level 2
    where ``level2`` holds it (crosses, their mean over chains dashed)."""
    width = ds.attrs.get("gram_width", 0)
    for k, act in enumerate(("linear", "softmax")):
        if act not in ds.activation.values:
            continue
        color = f"C{k}"
        p = ds.pstar.sel(activation=act)
        if not np.isfinite(p.values).any():  # a point not run yet
            continue
        xs = ds.x.broadcast_like(p).transpose(*p.dims).values
        jitter = 1.0 + 0.04 * (np.random.default_rng(0).random(p.shape) - 0.5)
        xj = xs * jitter if fam == "markov" else xs + 0.03 * (jitter - 1.0) * 25
        what = "crossover" if ds.attrs.get("measure") == "crossover" else act
        mark = "s" if width else ("D" if what == "crossover" else "o")
        ax.scatter(xj.ravel(), p.values.ravel(), s=10, color=color, alpha=0.45, marker=mark,
                   lw=0)  # fmt: skip
        rows = pstar_per_x(ds, act)
        label = _tokens_label(ds, act, width)
        ax.plot([r[0] for r in rows], [r[1] for r in rows], color=color, marker=mark,
                ls="-." if width else "-", label=label,
                mfc="white" if "one minimum" in label or mark == "D" else color)  # fmt: skip
        one = _one_minimum_x(ds, act) if "one minimum" not in label else []
        if one:  # a pooled file: the x whose searches all met one minimum, hollow
            split = ds.attrs.get("aG_split", 2.0)
            ax.plot(*zip(*[(r[0], r[1]) for r in rows if r[0] in one], strict=True), ls="none",
                    marker=mark, color=color, mfc="white",
                    label=f"softmax: where aG passes {split:g}, one minimum"
                    + (f" (network d = {width})" if width else " (Level 1)"))  # fmt: skip
        pts = [(x, level2[what, spec]) for spec, x in zip(ds.source.values, ds.x.values,
               strict=True) if np.isfinite(level2.get((what, spec), np.nan))]  # fmt: skip
        if pts and not width:
            xs2, ys2 = np.array(pts).T
            ax.scatter(xs2, ys2, marker="x", s=22, color=color, lw=0.9)
            ux = np.unique(xs2)
            ax.plot(ux, [ys2[xs2 == u].mean() for u in ux], color=color, ls="--", lw=1,
                    label=f"Level 2, these tokens ({what})")  # fmt: skip


def _join_files(ax, files):
    """A thin line through the means of files split by source (a chain's α per file), per
    activation, width and measure, so that P*(α) reads as one curve."""
    for k, act in enumerate(("linear", "softmax")):
        for kind in {(ds.attrs.get("gram_width", 0), ds.attrs.get("measure")) for ds in files}:
            rows = sorted(r[:2] for ds in files
                          if (ds.attrs.get("gram_width", 0), ds.attrs.get("measure")) == kind
                          and act in ds.activation.values for r in pstar_per_x(ds, act)
                          if np.isfinite(r[1]))  # fmt: skip
            if len({r[0] for r in rows}) > 1:
                ax.plot(*zip(*rows, strict=True), color=f"C{k}", lw=0.7, alpha=0.5, zorder=1)


def tokens_pstar(files, reference, task, hyper, level2=None):
    """P*(s) and P*(α), both activations: every dataset and chain as a dot, the mean as a line;
    Level 2 where it holds as crosses (its mean over chains dashed), and Level 2 for uniform
    tokens dotted.

    ``files``: ``tokens`` sweeps with coordinates ``family`` (zipf, markov), ``x`` and
    ``source`` and the attr ``gram_width``; ``reference``: Level 2's uniform ``linear`` and
    ``softmax`` P*; ``level2``: ``{file index: {(activation, source): P*}}``; ``task``, ``hyper``:
    the preset, for the title."""
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 7.2), sharey=True)
    for ax, fam in zip(axes, ("zipf", "markov"), strict=True):
        for j, ds in enumerate(files):
            if str(ds.family.values[0]) == fam:
                _tokens_file(ax, ds, (level2 or {}).get(j, {}), fam)
        for k, act in enumerate(("linear", "softmax")):
            ax.axhline(reference[act], color=f"C{k}", lw=0.8, ls=":",
                       label=f"Level 2, uniform tokens ({act})")  # fmt: skip
        if any(ds.attrs.get("measure") == "crossover" for ds in files) and "crossover" in reference:
            ax.axhline(reference["crossover"], color="C0", lw=0.8, ls=(0, (1, 4)),
                       label="Level 2, uniform tokens (crossover)")  # fmt: skip
        ax.set_yscale("log")
        if fam == "markov":
            ax.set_xscale("log")
            ax.set_xlabel("concentration α of the global chain (5 chains each)")
            ax.set_title("global Markov chain: P*(α)")
        else:
            ax.set_xlabel("Zipf exponent s (s = 0: uniform)")
            ax.set_title("i.i.d. Zipf tokens: P*(s)")
        _join_files(ax, [ds for ds in files if str(ds.family.values[0]) == fam])
    axes[0].set_ylabel("P* (sequences)")
    rows = 0
    for ax in axes:  # one entry per label (a chain's α may come in a file of its own)
        handles, labels = ax.get_legend_handles_labels()
        keep = {lab: h for h, lab in zip(handles, labels, strict=True)}
        ax.legend(keep.values(), keep.keys(), fontsize=6.5, loc="upper center",
                  bbox_to_anchor=(0.5, -0.11), ncol=1, frameon=False)  # fmt: skip
        rows = max(rows, len(keep))
    fig.suptitle(f"Where the copy transition moves with the tokens (L = {task.L}, V = {task.V}, "
                 f"σ² = {hyper.sigma2:g}; dots: datasets and chains)", fontsize=10)  # fmt: skip
    # the legends hang below the panels: room for their rows (tight_layout would shrink the axes)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.9, wspace=0.08, bottom=0.1 + 0.024 * rows)
    return fig


# --------------------------------------------------------------------------------------------------
# the scaling of P*(L, V) (docs/scripts/scaling_figure.py)

_SCALING_STYLE = {
    "second_order": dict(ls="-", label="second order"),
    "crossover": dict(ls="--", label="crossover"),
    "first_order": dict(ls="-", label="first order"),
    "spinodal_lower": dict(ls=":", label="spinodals"),
    "spinodal_upper": dict(ls=":", label=None),
}


def pstar_scaling(ds, slopes):
    """P* against L and against V (four values of the other each), per activation, of
    :func:`bayes_attn.theory.scaling.pstar_grid`'s grid; ``slopes``: per activation ``(tag,
    {region: (b, c)})``, the exponents the titles quote (derived or fitted)."""
    from bayes_attn.theory.scaling import TRANSITIONS

    fig, axes = plt.subplots(2, 2, figsize=(10, 8), constrained_layout=True)
    Vsel = ds["V"].values[[0, 4, 8, 11]]
    Lsel = ds["L"].values[[0, 4, 8, 11]]
    colours = plt.cm.viridis(np.linspace(0, 0.85, 4))
    for row, (act, vars_) in enumerate(TRANSITIONS.items()):
        for col, (axis, sel) in enumerate((("L", Vsel), ("V", Lsel))):
            ax = axes[row, col]
            other = "V" if axis == "L" else "L"
            for k, val in enumerate(sel):
                for var in vars_:
                    style = dict(_SCALING_STYLE[var])
                    style["label"] = f"{other} = {val}" if var == vars_[0] else None
                    ax.plot(ds[axis], ds[var].sel({other: val}), color=colours[k], marker=".",
                            **style)  # fmt: skip
            ax.set(xscale="log", yscale="log", xlabel=axis, ylabel="P*")
            ax.legend(fontsize=7, loc="upper left")
            kinds = ", ".join(f"{_SCALING_STYLE[v]['label']} ({_SCALING_STYLE[v]['ls']})"
                              for v in vars_ if _SCALING_STYLE[v]["label"])  # fmt: skip
            tag, by_region = slopes[act]
            text = ", ".join(f"{r}: {s[col]:+.2f}" for r, s in by_region.items())
            ax.set_title(f"{act}: P* against {axis}; {kinds}\n{tag} slope in {axis}: {text}",
                         fontsize=9)  # fmt: skip
    fig.suptitle(
        "Level 2, uniform tokens, Table-1 scales (σ² = 30, g_W = g_O = 1); "
        "slopes in the titles: derived (linear, second order), fitted (softmax, first order)",
        fontsize=9,
    )
    return fig


# --------------------------------------------------------------------------------------------------
# the paper's protocol at several widths (docs/scripts/protocol_widths.py, frozen_protocol.py)


def protocol_widths(runs, theory):
    """Per activation, the order parameters against P: the Level-2 saddle (``theory``: per
    activation the P grid and :func:`bayes_attn.theory.phase_diagram`'s Dataset on it), the
    Level-1 MAP, and the Adam (filtered by the loss) and SGLD ensemble means of each protocol
    sweep in ``runs`` (``{d_model: Dataset}``)."""
    from bayes_attn.experiments.results import filtered

    first = next(iter(runs.values()))
    acts = list(first.activation.values)
    fig, axes = plt.subplots(len(acts), 2, figsize=(10, 4 * len(acts)), squeeze=False)
    colors = plt.cm.viridis(np.linspace(0.1, 0.8, len(runs)))
    for r, act in enumerate(acts):
        Pf, th = theory[act]
        names = ("c1", "cG") if act == "linear" else ("a1", "aG")
        for c, (name, v) in enumerate(zip(names, ("c1", "cG"), strict=True)):
            ax, sub = axes[r, c], first.sel(activation=act)
            ax.plot(Pf, th[name], "k-", lw=1.5, label="Level 2 saddle")
            if np.isfinite(sub[f"level1_{v}"]).any():
                ax.plot(sub.P, sub[f"level1_{v}"], "kx", ms=7, label="Level 1 MAP")
            for color, (d, ds) in zip(colors, runs.items(), strict=True):
                s = ds.sel(activation=act)
                m, sd, _ = filtered(s, f"adam_{v}")
                ax.errorbar(s.P, m, sd, fmt="o", color=color, ms=4, capsize=2, label=f"Adam d={d}")
                ax.plot(s.P, filtered(s, f"sgld_{v}")[0], "s", mfc="none", color=color, ms=6,
                        label=f"SGLD d={d}")  # fmt: skip
            ax.set(xscale="log", xlabel="P", ylabel=name, title=f"{act}: {name}", xlim=(1, 3000))
        axes[r, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _frozen_panel(ax, runs, explicit, i, var):
    """One order parameter of one activation (index ``i``) for :func:`frozen_protocol`."""
    from bayes_attn.experiments.results import filtered

    ref = next(iter(runs.values()))
    Ps = ref.P.values
    ax.plot(Ps, ref[f"theory_{var}"].values[i], "k-", lw=1.5, label="Level 2 (theory)")
    for (d, ds), marker in zip(runs.items(), ("s", "o", "^", "v"), strict=False):
        ds = ds.isel(activation=i)
        keep = ds.exact_global_min > 0.5
        m, sd, _ = filtered(ds, f"exact_{var}", keep)
        ax.errorbar(Ps, m, sd, marker=marker, ls="none", ms=5, capsize=2, mfc="none",
                    label=f"exact MAP, d = {d} (frozen embeddings)")  # fmt: skip
        if f"exact_post_{var}" in ds:
            m, sd, _ = filtered(ds, f"exact_post_{var}", keep)
            ax.errorbar(Ps * 1.04, m, sd, marker=marker, ls="none", ms=4, capsize=2,
                        color="C2", label=f"exact posterior mean, d = {d} (NUTS)")  # fmt: skip
    if explicit is not None:
        m, sd, _ = filtered(explicit.isel(activation=i), f"adam_{var}")
        ax.errorbar(Ps, m, sd, marker="x", ls="none", ms=6, capsize=2, color="C3",
                    label=f"Adam, d = {explicit.attrs['d_model']} (explicit)")  # fmt: skip


def frozen_protocol(runs, explicit=None):
    """The paper's protocol through the frozen-embedding identity at each width (``runs``:
    ``{d_model: frozen sweep}``; the exact MAP's and, where drawn, the exact posterior's
    filtered means ± sd) beside Level 2 and, with ``explicit`` (a protocol sweep with attr
    ``d_model``), the explicit network's Adam members."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), constrained_layout=True, sharex=True)
    ref = next(iter(runs.values()))
    for i, act in enumerate(ref.activation.values):
        names = ("ĉ1", "ĉG") if act == "linear" else ("â1", "âG")
        for row, (var, label) in enumerate(zip(("c1", "cG"), names, strict=True)):
            ax = axes[row, i]
            _frozen_panel(ax, runs, explicit, i, var)
            ax.set(xscale="log", ylabel=label, **({"title": f"{act} attention (Table 1, σ² = 30)"}
                   if row == 0 else {"xlabel": "training sequences P"}))  # fmt: skip
            if row == 0 and i == 0:
                ax.legend(fontsize=8, title="members past the loss filter: mean ± sd",
                          title_fontsize=8)  # fmt: skip
    return fig
