"""λ̂ against P at Table 1: the figure and the table of the ``llc_table1`` sweeps.

Reads the files of ``bayes_attn/configs/llc_table1*.toml`` (each file's config says its width and
phase): the exact LLC and SGLD at d = 256 (``llc_table1.toml``), the exact values at d = 10⁴
(``llc_table1_d10000.toml``) and at the weak and strong MAPs at P = 285 (``llc_table1_weak.toml``,
``llc_table1_strong.toml``). Linear, softmax, and softmax through its coexistence window.

    bayes-attn sweep --config bayes_attn/configs/llc_table1.toml --out docs/figures/paper/llc_table1_d256.nc
    python docs/scripts/llc_table1.py docs/figures/paper/llc_table1_{d256,d10000,weak,strong}.nc \
        --figure docs/figures/paper/llc_table1.png [--table]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import bayes_attn as ba
from bayes_attn.experiments.sweep import load_sweep
from bayes_attn.theory import phase_boundaries
from bayes_attn.theory.modes import phase_boundary

#: where this network's MAP (d = 256, seed 0) has two minima (docs/validation.md, continuation)
MAP_WINDOW = (280.0, 290.0)
ZOOM = (240, 310)  # the third panel: softmax through the coexistence window, linear P axis
SYMLOG = 15.0  # below -SYMLOG the λ̂ axis turns logarithmic, so that linear's 0-11 stays legible
STUDY_POINTS = 26  # the paper's P >= 2, both activations
FIELDS = ("exact_llc_mean", "exact_mcse", "sgld_llc_mean", "sgld_mcse")


def read(paths) -> dict:
    """{(activation, d, phase): Dataset over the finished P} from the sweep files."""
    out = {}
    for path in paths:
        ds = load_sweep(path)
        o = json.loads(ds.attrs["config"])["options"]
        for act in ds.activation.values:
            sub = ds.sel(activation=act).isel(L=0, V=0, seed=0)
            sub = sub.isel(P=np.flatnonzero(sub.done.values))
            if sub.sizes["P"]:
                out[(str(act), int(o["d_model"]), o["phase"])] = sub.assign_attrs(**o)
    return out


def errorbars(ax, ds, name, **kw):
    if name + "_llc_mean" in ds and np.isfinite(ds[name + "_llc_mean"]).any():
        ax.errorbar(ds.P, ds[name + "_llc_mean"], yerr=2 * ds[name + "_mcse"], capsize=2, **kw)


def panel(ax, act, res, marks, zoom=None):
    """λ̂ against P for ``act`` (log P), or softmax over ``zoom`` on a linear axis."""
    ax.set_title(f"{act} attention (L = 25, V = 5, d = 256)" if zoom is None else
                 f"{act}: P = {zoom[0]}–{zoom[1]}, through the window", fontsize=10)  # fmt: skip
    ax.set_xscale("log") if zoom is None else ax.set_xlim(*zoom)
    ax.set(xlabel="P (training sequences)", ylabel="λ̂ (localized LLC, nβ = P / log P)")
    if act == "linear":
        ax.axvline(marks["second_order"], color="0.4", ls="--", lw=1,
                   label=f"second-order P* = {marks['second_order']:.2f}")  # fmt: skip
    else:
        lo, hi = marks["spinodals"]
        ax.axvspan(lo, hi, color="0.88", label=f"Level-2 coexistence window {lo:.2f}–{hi:.2f}")
        ax.axvspan(*MAP_WINDOW, facecolor="none", edgecolor="0.5", hatch="///", lw=0,
                   label="the MAP's two minima (d = 256, seed 0): 280 < P < 290")  # fmt: skip
        ax.axvline(marks["first_order"], color="0.4", ls="--", lw=1,
                   label=f"Level-2 first-order P* = {marks['first_order']:.2f}")  # fmt: skip
    ax.axhline(0, color="0.6", lw=0.8)
    cut = (
        (lambda d: d) if zoom is None else (lambda d: d.sel(P=(d.P >= zoom[0]) & (d.P <= zoom[1])))
    )
    if (act, 256, "map") not in res:
        return
    ds = cut(res[(act, 256, "map")])
    P, y = ds.P.values, ds.exact_llc_mean.values
    errorbars(ax, ds, "exact", fmt="ko", ms=4, label="exact (W_O integrated out, NUTS; ± 2 MCSE)")
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
            errorbars(ax, cut(wide), "exact", fmt="--D", color="0.45", ms=4, mfc="none",
                      label=f"exact at d = {d:,}".replace(",", " "))  # fmt: skip
    errorbars(ax, ds, "sgld", fmt="s", ms=4, color="C3", label="SGLD on the weights (± 2 MCSE)")
    for phase, mk, col in (("weak", "v", "C0"), ("strong", "^", "C2")):
        if (act, 256, phase) in res:
            ph = res[(act, 256, phase)]
            errorbars(ax, ph, "exact", fmt=mk, ms=6, color=col, mfc="none",
                      label=f"exact at the {phase} MAP (a second minimum)")  # fmt: skip
            errorbars(ax, ph, "sgld", fmt=mk, ms=6, color=col, label=f"SGLD at the {phase} MAP")
    if y.min() < -SYMLOG:  # past the linear crossover λ̂ dives (w* held by the prior)
        ax.set_yscale("symlog", linthresh=SYMLOG)
        ax.axhspan(-SYMLOG, SYMLOG, color="0.97", zorder=0, lw=0)
    if zoom is None:
        ticks = sorted({int(p) for k, r in res.items() if k[0] == act for p in r.P.values})
        ax.set_xticks(ticks, tick_labels(ticks), fontsize=8)
        ax.minorticks_off()


def tick_labels(ticks, gap=0.1, lines=4) -> list[str]:
    """Every log-spaced tick labelled, each on the first of ``lines`` text lines where it is at
    least ``gap`` (in log10 P) from the last label there (250, 275 and 285 are close)."""
    out, last = [], [-np.inf] * lines
    for p in ticks:
        line = next((i for i in range(lines) if np.log10(p) - last[i] >= gap), lines - 1)
        out.append("\n" * line + str(p))
        last[line] = np.log10(p)
    return out


def figure(res, path, quick):
    import matplotlib.pyplot as plt

    task, hyper = ba.CopyTask(25, 5), ba.Hyper.paper()
    b = phase_boundaries(task, hyper)
    marks = {"second_order": b.second_order, "first_order": b.first_order,
             "spinodals": b.spinodals, "divide": phase_boundary(task, hyper, b.first_order)}  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(16, 6.4), width_ratios=(1, 1, 0.8))
    for ax, act, zoom in zip(axes, ("linear", "softmax", "softmax"), (None, None, ZOOM),
                             strict=True):  # fmt: skip
        panel(ax, act, res, marks, zoom)
    done = sum(r.sizes["P"] for k, r in res.items() if k[1:] == (256, "map"))
    title = "λ̂ against P at the exact MAP (frozen embeddings, seed 0)"
    title += (" — QUICK RUN: few draws, not the study" if quick else
              f" — study in progress: {done} of {STUDY_POINTS} points" if done < STUDY_POINTS
              else "")  # fmt: skip
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
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def table(res) -> str:
    """The points as a Markdown table (docs/validation.md), and SGLD - exact over them."""
    rows = ["| activation | P | d | w* (order) | exact draws (order) | exact λ̂ ± MCSE (ESS) | "
            "SGLD λ̂ ± MCSE (acceptance, ESS, R-hat) | apart (MCSE) |", "|---" * 8 + "|"]  # fmt: skip
    z = []
    for (act, d, phase), ds in sorted(res.items()):
        names = ("c1", "cG") if act == "linear" else ("a1", "aG")
        for p in ds.P.values:
            r = {k: float(v) for k, v in ds.sel(P=p).data_vars.items()}
            star = ", ".join(f"{round(r[n + '_star'], 3) + 0.0:.3f}" for n in names)
            drawn = ", ".join(f"{round(r[f'exact_{n}_mean'], 3) + 0.0:.3f}" for n in names)
            sg = apart = "–"
            if np.isfinite(r["sgld_llc_mean"]):
                sg = (f"{r['sgld_llc_mean']:.4g} ± {r['sgld_mcse']:.2g} ({r['sgld_acceptance']:.3f}, "
                      f"{r['sgld_ess']:.1f}, {r['sgld_rhat']:.2f})")  # fmt: skip
                diff = r["sgld_llc_mean"] - r["exact_llc_mean"]
                z.append((diff, diff / abs(r["exact_llc_mean"]), diff / np.hypot(r["sgld_mcse"],
                                                                                  r["exact_mcse"])))  # fmt: skip
                apart = f"{z[-1][2]:+.1f}"
            what = "" if phase == "map" else f" ({phase} MAP)"
            rows.append(f"| {act}{what} | {p} | {d} | {star} | {drawn.replace('nan', '–')} | "
                        f"{r['exact_llc_mean']:.4g} ± {r['exact_mcse']:.2g} ({r['exact_ess']:.0f}) "
                        f"| {sg} | {apart} |")  # fmt: skip
    if z:
        diff, rel, zs = (np.array(c) for c in zip(*z, strict=True))
        rows.append(f"\nSGLD - exact over the {len(zs)} points with both: {np.sum(diff > 0)} above; "
                    f"mean {diff.mean():+.3f} (median {100 * np.median(rel):+.1f} % of the exact "
                    f"value); mean of the (SGLD - exact) / combined MCSE {zs.mean():+.2f}, so their "
                    f"sum / √n = {zs.sum() / np.sqrt(len(zs)):+.2f} (independent points: a standard "
                    "normal without a bias)")  # fmt: skip
    return "\n".join(rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="llc_table1 sweep files")
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--table", action="store_true", help="print the points as a Markdown table")
    ap.add_argument("--quick", action="store_true", help="title the figure a quick run")
    args = ap.parse_args()
    res = read(args.files)
    if args.figure:
        figure(res, args.figure, args.quick)
    if args.table:
        print(table(res))
