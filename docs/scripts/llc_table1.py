"""λ̂ against P at Table 1 (issue 28, point 5): the exact LLC of the frozen-embedding network beside
SGLD on its weights, both activations, the paper's P values.

At each (activation, P): the dataset and frozen embeddings drawn from the seed, w* the exact MAP
(`experiments.llc.llc_problem("network", ...)`: the whitened Level-1 MAP mapped onto W_G, W_O), the
localized target at nβ = P / log P and γ; the exact value `exact_frozen_llc` (W_O integrated out,
NUTS over the (V+L)² = 900 numbers of the whitened gate, at any d) and SGLD on the d² + Vd
weights (d = 256 only; skip with `--exact-only`, for example at d = 10⁴). P = 1 has no n / log n
and is left out: 13 P per activation.

Resumable: one NetCDF per point, `<out>/<activation>_P<P>_d<d>.nc`, skipped when present; each
has the estimates and the provenance (command, settings, wall time) in its attrs. The figure
(λ̂ against P, the transitions marked) is drawn from whatever files exist.

Run:
    .venv/bin/python docs/scripts/llc_table1.py --quick         # 3 P per activation, few draws
    .venv/bin/python docs/scripts/llc_table1.py                 # the full study (hours)
    .venv/bin/python docs/scripts/llc_table1.py --d 10000 --exact-only
    .venv/bin/python docs/scripts/llc_table1.py --activation softmax --Ps 272,290,300  # a part
    .venv/bin/python docs/scripts/llc_table1.py --activation softmax --Ps 285 --phase weak

The default w* is L-BFGS's minimum from the global Level-2 saddle. The MAP of this network (d = 256,
seed 0) has two minima only for 280 < P < 290 (283-287 checked): `--phase weak|strong` starts from
that phase instead, and its files carry the phase in their name (`softmax_P285_weak_d256.nc`) and
are drawn as their own markers. Every file records w*'s order parameters (`a1_star`, `aG_star`)
and, from 2026-12-05 on, the mean of the exact draws' (`exact_a1_mean`, `exact_aG_mean`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

import bayes_attn as ba
from bayes_attn.analysis.llc import llc_estimate
from bayes_attn.experiments.llc import llc_problem, network_order
from bayes_attn.experiments.protocol import ProtocolConfig
from bayes_attn.inference.llc import exact_frozen_llc, run_llc
from bayes_attn.io import write_atomic
from bayes_attn.models.levels import order_parameters

ROOT = Path(__file__).resolve().parents[2]
#: the transitions of Table 1 (docs/validation.md): linear second-order P*, softmax first order
LINEAR_P_STAR = 22.76
SOFTMAX_P_STAR, SOFTMAX_WINDOW = 275.97, (264.97, 296.76)
#: where this network's MAP (d = 256, seed 0) has two minima (docs/validation.md, continuation)
MAP_WINDOW = (280.0, 290.0)
#: aG between the weak and the strong MAPs (weak <= 0.61, strong >= 3.02 on the continuation)
STRONG_AG = 1.8
#: the figure's third panel: softmax through the coexistence window, on a linear P axis
ZOOM = (240, 310)
#: below -SYMLOG the λ̂ axis turns logarithmic (symlog), so that the linear study's 0-11 stays legible
SYMLOG = 15.0
#: the study's points: the paper's P >= 2 for both activations, at the figure's width; the exact
#: values at the wide width are drawn beside them
STUDY_POINTS = 26
STUDY_D, WIDE_D = 256, 10_000
QUICK_PS = {"linear": (10, 20, 60), "softmax": (200, 275, 400)}


def settings(args) -> dict:
    # SGLD starts at w*: the directions held by γ alone relax in 1/(εγ) steps (5000 at the
    # defaults), so the burn-in is 1 (quick) or 5 (full) of those
    relax = 1 / (args.step * args.gamma)
    quick = dict(exact_draws=100, exact_burnin=100, sgld_draws=100, chains=2,
                 sgld_burnin=round(relax))  # fmt: skip
    full = dict(exact_draws=1000, exact_burnin=500, sgld_draws=2000, chains=4,
                sgld_burnin=round(5 * relax))  # fmt: skip
    s = quick if args.quick else full
    return {**s, "gamma": args.gamma, "step_size": args.step, "thinning": args.thinning,
            "d": args.d, "seed": args.seed, "exact_only": bool(args.exact_only)}  # fmt: skip


def order_at(task, hyper, args, kw, w_star, activation) -> dict:
    """The order parameters (c1, cG or a1, aG) the network records at ``w_star``."""
    order = network_order(task, hyper, args[2], activation, w_star, kw["embeddings"])
    return {f"{k}_star": v for k, v in order.items()}


def one_point(activation, P, s, path, phase=None):
    """Run the exact LLC (and SGLD) at one point and write its NetCDF."""
    cfg = ProtocolConfig.paper()
    task, hyper = cfg.task(), ba.Hyper.paper()
    t0 = time.perf_counter()
    model, args, kw, w_star, _ = llc_problem(
        "network", task, hyper, P, activation, d_model=s["d"], seed=s["seed"], phase=phase
    )
    t_map = time.perf_counter() - t0
    order = order_at(task, hyper, args, kw, w_star, activation)
    print(f"{activation} P = {P}{'' if phase is None else ' ' + phase}: w* {order}", flush=True)
    out = {}
    t0 = time.perf_counter()
    run = exact_frozen_llc(
        model, w_star, model_args=args, model_kwargs=kw, gamma=s["gamma"], num_chains=s["chains"],
        num_draws=s["exact_draws"], num_burnin=s["exact_burnin"], seed=s["seed"],
    )  # fmt: skip
    ex = llc_estimate(run)
    out["exact"] = (ex, time.perf_counter() - t0)
    # where the exact draws sit: the order parameters' mean over them (beside w*'s in the attrs)
    drawn = {
        f"exact_{n}_mean": float(run.posterior[n].mean()) for n in order_parameters(activation)
    }
    if not s["exact_only"]:
        t0 = time.perf_counter()
        sg = llc_estimate(run_llc(
            model, w_star, model_args=args, model_kwargs=kw, sampler="sgld", gamma=s["gamma"],
            step_size=s["step_size"], num_chains=s["chains"], num_draws=s["sgld_draws"],
            num_burnin=s["sgld_burnin"], thinning=s["thinning"], seed=s["seed"],
        ))  # fmt: skip
        out["sgld"] = (sg, time.perf_counter() - t0)
    data = dict(drawn)
    for name, (est, wall) in out.items():
        for field in ("llc_mean", "mcse", "rhat", "ess", "acceptance"):
            data[f"{name}_{field}"] = float(getattr(est, field))
        data[f"{name}_wall_s"] = wall
    ds = xr.Dataset(
        {k: v for k, v in data.items()},
        attrs={
            "command": shlex.join(sys.argv), "activation": activation, "P": P,
            "nbeta": ex.nbeta, "init_loss": ex.init_loss, "grad_norm": ex.grad_norm,
            "phase": phase or "map", **order,
            "map_wall_s": t_map, **{k: (int(v) if isinstance(v, bool) else v)
                                     for k, v in s.items()},
        },
    )  # fmt: skip
    write_atomic(ds, path)
    line = f"{activation} P = {P}{'' if phase is None else ' ' + phase}: exact {ex.llc_mean:.4g} ± {ex.mcse:.2g} ({out['exact'][1]:.0f} s)"
    if "sgld" in out:
        sg, wall = out["sgld"]
        line += f", SGLD {sg.llc_mean:.4g} ± {sg.mcse:.2g} (acc {sg.acceptance:.3f}, {wall:.0f} s)"
    print(line, flush=True)


def point_path(out_dir: Path, act: str, P: int, d: int, phase=None) -> Path:
    return out_dir / f"{act}_P{P}{'' if phase is None else '_' + phase}_d{d}.nc"


def collect(out_dir: Path, d: int) -> dict:
    """{activation or "softmax_weak"/"softmax_strong": Dataset over P} from the files present,
    grouped by each file's own record (``phase`` "map" or absent: the default w*)."""
    groups = {}
    for f in out_dir.glob(f"*_P*_d{d}.nc"):
        ds = xr.load_dataset(f)
        phase = ds.attrs.get("phase", "map")
        name = ds.attrs["activation"] + ("" if phase == "map" else f"_{phase}")
        star = {k: float(v) for k, v in ds.attrs.items() if k.endswith("_star")}
        groups.setdefault(name, []).append(ds.assign(star).expand_dims(P=[ds.attrs["P"]]))
    return {
        name: xr.concat(sorted(parts, key=lambda ds: int(ds.P[0])), "P", combine_attrs="drop")
        for name, parts in groups.items()
    }


def table(out_dir: Path) -> str:
    """The points present as a Markdown table (docs/validation.md): w*, where the exact draws sit,
    the exact λ̂ and SGLD's, and how many MCSE apart, one row per file."""
    rows = ["| activation | P | d | w* (order) | exact draws (order) | exact λ̂ ± MCSE (ESS) | "
            "SGLD λ̂ ± MCSE (acceptance, ESS, R-hat) | apart (MCSE) |", "|---" * 8 + "|"]  # fmt: skip
    files = [xr.load_dataset(f) for f in out_dir.glob("*_P*_d*.nc")]
    files.sort(key=lambda ds: (ds.attrs["activation"], int(ds.attrs["d"]), int(ds.attrs["P"]),
                               ds.attrs.get("phase", "map")))  # fmt: skip
    pairs = []  # (SGLD - exact, the same relative to |exact|, in combined MCSE) per point
    for ds in files:
        a = ds.attrs
        names = [k[:-5] for k in a if k.endswith("_star")]
        star = ", ".join(f"{round(a[n + '_star'], 3) + 0.0:.3f}" for n in names) or "–"
        drawn = ", ".join(f"{round(float(ds[f'exact_{n}_mean']), 3) + 0.0:.3f}" for n in names
                          if f"exact_{n}_mean" in ds) or "–"  # fmt: skip
        phase = "" if a.get("phase", "map") == "map" else f" ({a['phase']} MAP)"
        ex = f"{float(ds.exact_llc_mean):.4g} ± {float(ds.exact_mcse):.2g} ({float(ds.exact_ess):.0f})"
        sg, apart = "–", "–"
        if "sgld_llc_mean" in ds:
            sg = (f"{float(ds.sgld_llc_mean):.4g} ± {float(ds.sgld_mcse):.2g} "
                  f"({float(ds.sgld_acceptance):.3f}, {float(ds.sgld_ess):.1f}, "
                  f"{float(ds.sgld_rhat):.2f})")  # fmt: skip
            diff = float(ds.sgld_llc_mean - ds.exact_llc_mean)
            zs = diff / float(np.hypot(ds.sgld_mcse, ds.exact_mcse))
            apart = f"{zs:+.1f}"
            pairs.append((diff, diff / abs(float(ds.exact_llc_mean)), zs))
        rows.append(f"| {a['activation']}{phase} | {a['P']} | {a['d']} | {star} | {drawn} | {ex} | "
                    f"{sg} | {apart} |")  # fmt: skip
    if pairs:
        diff, rel, zs = (np.array(c) for c in zip(*pairs, strict=True))
        rows.append(
            f"\nSGLD - exact over the {len(zs)} points with both: {np.sum(diff > 0)} above; mean "
            f"{diff.mean():+.3f} (median {100 * np.median(rel):+.1f} % of the exact value); mean of the "
            f"(SGLD - exact) / combined MCSE {zs.mean():+.2f}, so their sum / √n = "
            f"{zs.sum() / np.sqrt(len(zs)):+.2f} (independent points: a standard normal without "
            "a bias)"
        )
    return "\n".join(rows)


def tick_labels(ticks: list[int], gap: float = 0.1, lines: int = 4) -> list[str]:
    """Labels for log-spaced ticks, every one shown: each on the first of ``lines`` text lines
    where it is at least ``gap`` (in log10 P) from the last label on that line (250, 275 and 285
    are 0.041 and 0.016 apart)."""
    out, last = [], [-np.inf] * lines
    for p in ticks:
        x = np.log10(p)
        line = next((i for i in range(lines) if x - last[i] >= gap), lines - 1)
        out.append("\n" * line + str(p))
        last[line] = x
    return out


def panel(ax, act: str, res: dict, d: int, wide: dict | None, zoom: tuple | None = None):
    """One panel: λ̂ against P for ``act`` (log P), or, with ``zoom`` (P from, to), that range of
    the softmax study on a linear axis, where the two phases' points sit side by side."""
    title = f"{act} attention (L = 25, V = 5, d = {d})"
    if zoom is not None:
        title = f"{act}: P = {zoom[0]}–{zoom[1]}, through the window"
    ax.set_title(title, fontsize=10)
    if zoom is None:
        ax.set_xscale("log")
    else:
        ax.set_xlim(*zoom)
    ax.set_xlabel("P (training sequences)")
    ax.set_ylabel("λ̂ (localized LLC, nβ = P / log P)")
    if act == "linear":
        ax.axvline(LINEAR_P_STAR, color="0.4", ls="--", lw=1,
                   label=f"second-order P* = {LINEAR_P_STAR}")  # fmt: skip
    else:
        ax.axvspan(*SOFTMAX_WINDOW, color="0.88",
                   label="Level-2 coexistence window 264.97–296.76")  # fmt: skip
        ax.axvspan(*MAP_WINDOW, facecolor="none", edgecolor="0.5", hatch="///", lw=0,
                   label="the MAP's two minima (d = 256, seed 0): 280 < P < 290")  # fmt: skip
        ax.axvline(SOFTMAX_P_STAR, color="0.4", ls="--", lw=1,
                   label=f"Level-2 first-order P* = {SOFTMAX_P_STAR}")  # fmt: skip
    ax.axhline(0, color="0.6", lw=0.8)
    if act not in res:
        return
    ds = res[act]
    if zoom is not None:
        ds = ds.sel(P=(ds.P >= zoom[0]) & (ds.P <= zoom[1]))
    P = ds["P"].values
    ax.errorbar(P, ds["exact_llc_mean"], yerr=2 * ds["exact_mcse"], fmt="ko", ms=4, capsize=2,
                label="exact (W_O integrated out, NUTS; ± 2 MCSE)")  # fmt: skip
    # the line joins points of one phase only: softmax w* jumps from weak to strong
    strong = np.asarray(ds["aG_star"] > STRONG_AG) if "aG_star" in ds else np.zeros(P.size, bool)
    for side in (False, True):
        part = strong == side
        ax.plot(P[part], ds["exact_llc_mean"].values[part], "k-", lw=1.2)
    if zoom is not None and strong.any() and not strong.all():
        i = int(np.argmax(strong))
        ax.annotate(f"global MAP strong\nfrom here (aG* {float(ds['aG_star'][i]):.2f})",
                    (P[i], float(ds["exact_llc_mean"][i])), xytext=(-12, 0),
                    textcoords="offset points", ha="right", va="center", fontsize=7,
                    arrowprops={"arrowstyle": "->", "lw": 0.6})  # fmt: skip
    if wide and act in wide:
        wd = wide[act]
        if zoom is not None:
            wd = wd.sel(P=(wd.P >= zoom[0]) & (wd.P <= zoom[1]))
        ax.errorbar(wd["P"], wd["exact_llc_mean"], yerr=2 * wd["exact_mcse"], fmt="--D",
                    color="0.45", ms=4, mfc="none", capsize=2,
                    label=f"exact at d = {spaced(int(wd.attrs.get('d', WIDE_D)))}")  # fmt: skip
    if "sgld_llc_mean" in ds:
        ax.errorbar(P, ds["sgld_llc_mean"], yerr=2 * ds["sgld_mcse"], fmt="s", ms=4, color="C3",
                    capsize=3, label="SGLD on the weights (± 2 MCSE)")  # fmt: skip
    for phase, mk, col in (("weak", "v", "C0"), ("strong", "^", "C2")):
        ph = res.get(f"{act}_{phase}")
        if ph is None:
            continue
        ax.errorbar(ph["P"], ph["exact_llc_mean"], yerr=2 * ph["exact_mcse"], fmt=mk, ms=6,
                    color=col, mfc="none", capsize=2,
                    label=f"exact at the {phase} MAP (a second minimum)")  # fmt: skip
        if "sgld_llc_mean" in ph:
            ax.errorbar(ph["P"], ph["sgld_llc_mean"], yerr=2 * ph["sgld_mcse"], fmt=mk, ms=6,
                        color=col, capsize=3, label=f"SGLD at the {phase} MAP")  # fmt: skip
    low = float(ds["exact_llc_mean"].min())
    if low < -SYMLOG:  # past the linear crossover λ̂ dives (w* held by the prior): keep 0-15 linear
        ax.set_yscale("symlog", linthresh=SYMLOG)
        ax.axhspan(-SYMLOG, SYMLOG, color="0.97", zorder=0, lw=0)
    if zoom is None:
        ticks = sorted({int(p) for name, r in res.items() if name.startswith(act)
                        for p in r["P"].values})  # fmt: skip
        ax.set_xticks(ticks, tick_labels(ticks), fontsize=8)
        ax.minorticks_off()


def study_points(res: dict) -> int:
    """How many of the study's points (both activations, at the global MAP) ``res`` holds."""
    return sum(res[a].sizes["P"] for a in ("linear", "softmax") if a in res)


def spaced(n: int) -> str:
    """``n`` with its thousands set apart by spaces (10 000)."""
    return f"{n:,}".replace(",", " ")


def figure(res: dict, d: int, path: Path, quick: bool, wide: dict | None = None):
    """λ̂ against P at width ``d``, with the exact values at the width of ``wide`` (d = 10⁴)
    beside them where present: linear, softmax, and softmax through its coexistence window."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 6.4), width_ratios=(1, 1, 0.8))
    notes = {}
    for ax, act, zoom in zip(axes, ("linear", "softmax", "softmax"), (None, None, ZOOM),
                             strict=True):  # fmt: skip
        panel(ax, act, res, d, wide, zoom)
        if zoom is not None:
            continue  # the middle panel's legend says it all
        note = None  # with the legend, so that the two never overlap
        if act in res and float(res[act]["exact_llc_mean"].min()) < 0:
            note = (
                "λ̂ < 0: the draws find L_n below L_n(w*): w* is a saddle\nof L_n (below P*) or, "
                "a MAP with the prior, not a critical\npoint of it (docs/theory.md §11)"
            )
            if ax.get_yscale() == "symlog":  # panel() chose it
                note += f"\nλ̂ axis: linear for |λ̂| < {SYMLOG:g} (shaded), logarithmic beyond"
        notes[ax] = note
    title = "λ̂ against P at the exact MAP (frozen embeddings, seed 0)"
    if quick:
        title += " — QUICK RUN: few draws, not the study"
    else:
        done = study_points(res)
        if done < STUDY_POINTS:
            title += f" — study in progress: {done} of {STUDY_POINTS} points"
        wide_done = study_points(wide or {})
        if wide and wide_done < STUDY_POINTS:
            title += (
                f" — exact line at d = {spaced(WIDE_D)} in progress: {wide_done} of "
                f"{STUDY_POINTS} points"
            )
    fig.suptitle(title, fontsize=11)
    # the panels on top, the legends below: each under its panel's lowest text (the staggered
    # tick labels take up to four lines, so a fixed offset would run into the axis label)
    fig.subplots_adjust(left=0.05, right=0.99, top=0.88, bottom=0.5, wspace=0.22)
    fig.canvas.draw()
    to_fig = fig.transFigure.inverted()
    for ax, note in notes.items():
        box = to_fig.transform_bbox(ax.get_tightbbox(fig.canvas.get_renderer()))
        ax.legend(fontsize=8, loc="upper center", title=note, title_fontsize=7,
                  bbox_to_anchor=((box.x0 + box.x1) / 2, box.y0 - 0.01),
                  bbox_transform=fig.transFigure)  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 P per activation, few draws")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--exact-only", action="store_true")
    ap.add_argument("--gamma", type=float, default=100.0)
    ap.add_argument("--step", type=float, default=2e-6, help="SGLD ε (package convention)")
    ap.add_argument("--thinning", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="folder of the per-point files")
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--figure-only", action="store_true", help="redraw from the files present")
    ap.add_argument("--table", action="store_true",
                    help="with --figure-only: print the points present as a Markdown table")  # fmt: skip
    ap.add_argument("--activation", choices=("linear", "softmax"), default=None,
                    help="one activation only (default both)")  # fmt: skip
    ap.add_argument("--Ps", default=None,
                    help="the P values, comma-separated, in the order to run (default the "
                    "paper's, P >= 2)")  # fmt: skip
    ap.add_argument("--phase", choices=("weak", "strong"), default=None,
                    help="softmax: w* from this phase's start (default the global saddle's)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.phase and args.activation != "softmax":
        ap.error("--phase needs --activation softmax (only softmax has two phases)")
    name = "llc_table1_quick" if args.quick else "llc_table1"
    out_dir = args.out or ROOT / "docs" / "figures" / "paper" / name
    fig_path = args.figure or ROOT / "docs" / "figures" / "paper" / f"{name}.png"
    out_dir.mkdir(parents=True, exist_ok=True)
    s = settings(args)
    Ps = [P for P in ProtocolConfig.paper().Ps if P >= 2]
    if args.Ps:
        Ps = [int(p) for p in args.Ps.split(",")]
        if min(Ps) < 2:
            ap.error(f"--Ps: nβ = n / log n needs P >= 2, got {min(Ps)}")
    acts = (args.activation,) if args.activation else ("linear", "softmax")
    for act in acts if not args.figure_only else ():
        for P in QUICK_PS[act] if args.quick and not args.Ps else Ps:
            path = point_path(out_dir, act, P, args.d, args.phase)
            if path.exists():
                print(f"{path.name}: present, skipped")
                continue
            one_point(act, P, s, path, args.phase)
    figure(collect(out_dir, STUDY_D), STUDY_D, fig_path, args.quick, collect(out_dir, WIDE_D))
    print(f"figure: {fig_path}")
    if args.table:
        print(table(out_dir))


if __name__ == "__main__":
    main()
