"""The phases' free-energy difference from the LLC, against the free-energy profile (issue 28,
point 5, "the free-energy identity"; docs/theory.md §11, "The free energy from the LLC").

At softmax P (default 285) of Table 1 the frozen-embedding network of width d (seed 0) has two
MAPs, weak and strong (``llc_problem(phase=...)``: at d = 256 they coexist for 280 < P < 290).
For each, ``llc_free_energy(exact=True)`` integrates the exact LLC over the data's weight t from
0 to n = P (β = 1, so that e^{-t L_n} is the likelihood), the prior included, localized by γ:

    F_k(n) - F_k(0) = n L_n(w*_k) + ∫_0^n λ̂_k(t)/t dt,

and F_k(0) = -log ∫ e^{-γ/2 |w - w*_k|²} prior(w) dw is Gaussian in closed form (the gate's
whitened M~ with prior variance g_W/χ, the readout's whitened w~ = √d U^T W_O^T with g_O/χ and
localization γ/d; the weights outside the embeddings' span are zero at both centres and cancel
in the difference). The difference ΔF_TI = F_strong - F_weak is compared with:

- the free-energy profile of the same posterior (the same network, data and β = 1: Level 1 with
  this network's Gram, umbrella sampling and MBAR along aG, ``run_landscape``), ΔF = log Z_weak -
  log Z_strong split at the profile's barrier;
- the first-order localization correction (γ/2)(E_s|M~ - M~*_s|² - E_w|M~ - M~*_w|²) from one more
  exact run at t = n per phase (the gate's part; docs/theory.md §11: the identity gives the
  posterior's ΔF as γ → 0 only while the localization neither cuts a basin nor reaches the other);
- the singular-learning-theory estimate n L_n(w*) + λ̂(n) log n per phase.

Parts (each resumable, one NetCDF per part under ``--out``): ``weak``, ``strong`` (the TI ladder
and the run at t = n), ``profile``, then ``summary`` (the table, from the files present) and
``figure`` (``llc_phases.png`` beside the folder: F(aG) with the centres marked).

The identity proper (docs/theory.md §11, "Taking the localization away") needs a posterior with
both basins. ``--centre mode`` centres each phase at the mode of the posterior density over the
gate (the readout integrated out), or at the phase's start where the phase has no mode (the
weak phase past the action's spinodal is held by the volume of the gate's directions, not by a
mode); ``--gamma-nodes K`` adds, per phase, a Gauss-Legendre ladder in γ at t = n
(``localization_free_energy``) that takes the localization away, so that F_strong - F_weak is
the basins' own difference, to be read against the profile split at its barrier.
``--profile FILE`` reads an existing profile of the same posterior (the landscape scan's file at
that P, Gram width and seed: the same network and data, ``seed_embeddings``).

Run: .venv/bin/python docs/scripts/llc_phases.py weak strong profile summary figure
     .venv/bin/python docs/scripts/llc_phases.py weak strong summary figure --P 290 --d 10000 \
         --centre mode --gamma-nodes 3 --draws 200 --burnin 200 \
         --profile docs/figures/paper/landscape_scan/kernel_P290_d0_g10000.nc \
         --figure docs/figures/paper/llc_phases_P290_d10000.png
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.analysis.llc import llc_estimate
from bayes_attn.experiments.coexistence import phase_starts
from bayes_attn.experiments.llc import (
    llc_free_energy,
    llc_problem,
    localization_free_energy,
    network_order,
    network_weights,
)
from bayes_attn.experiments.protocol import ProtocolConfig
from bayes_attn.inference.llc import exact_frozen_llc
from bayes_attn.io import write_atomic
from bayes_attn.theory.level1 import start_in_span

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("weak", "strong")
#: aG between the phases' basins at Table 1 (the profiles' barriers lie at 1.5-2.0)
DIVIDE_GUESS = 1.5


def problem(a, phase):
    """The network, its data and the centre w* of ``phase``: the joint MAP reached from the
    phase's start (``--centre map``), or the mode of the posterior density over the gate
    (``--centre mode``, the readout's log-determinant in) and, where that phase has no mode (the
    weak start falls to the strong one), the phase's start itself. Returns the centre's kind."""
    cfg = ProtocolConfig.paper()
    task, hyper = cfg.task(), ba.Hyper.paper()
    model, args, kw, w, _ = llc_problem(
        "network", task, hyper, a.P, "softmax", d_model=a.d, seed=a.seed, phase=phase,
        include_logdet=a.centre == "mode",
    )  # fmt: skip
    kind = a.centre
    if (
        phase is not None
        and a.centre == "mode"
        and not in_phase(phase, order(task, hyper, args, kw, w))
    ):
        emb = kw["embeddings"]
        R = algebra.gram_factor(algebra.embedding_gram(*emb), task.n_features)
        M0 = start_in_span(np.asarray(phase_starts(task, hyper, a.P, "kernel")[phase]["M"]), R)
        w, kind = network_weights(task, hyper, args[2], "softmax", M0, emb), "start"
    return task, hyper, model, args, kw, w, kind


def order(task, hyper, args, kw, w) -> float:
    """aG of the network at w."""
    return network_order(task, hyper, args[2], "softmax", w, kw["embeddings"])["aG"]


def in_phase(phase, aG) -> bool:
    return (aG < DIVIDE_GUESS) == (phase == "weak")


def log_z0(task, hyper, kw, w, gamma):
    """-F(0) up to the terms equal at both centres: the Gaussian bracket of docs/theory.md §11."""
    emb = kw["embeddings"]
    U = np.asarray(algebra.span_basis(*emb))
    d = U.shape[0]
    m = U.T @ np.asarray(w["W_G"]) @ U
    wo = math.sqrt(d) * U.T @ np.asarray(w["W_O"]).T
    s_m, s_o = hyper.g_w / hyper.chi, hyper.g_o / hyper.chi
    return -(np.sum(m**2) / (2 * (s_m + 1 / gamma)) + np.sum(wo**2) / (2 * (s_o + d / gamma)))


def run_phase(a, phase, path):
    """The TI ladder in t and the run at t = n (written as soon as they finish), then, with
    ``--gamma-nodes``, the ladder in γ merged into the same file. Resumable at both steps."""
    task, hyper, model, args, kw, w, kind = problem(a, phase)
    aG_star = order(task, hyper, args, kw, w)
    print(f"{phase}: w* ({kind}) aG = {aG_star:.4f}", flush=True)
    run = {"num_chains": a.chains, "num_draws": a.draws, "num_burnin": a.burnin}
    if path.exists():
        ds = xr.load_dataset(path)
        print(f"{path.name}: the t ladder is present", flush=True)
    else:
        ds = ti_ladder(a, phase, task, hyper, model, args, kw, w, kind, aG_star, run)
        write_atomic(ds, path)
    print(f"{phase}: F(n) - F(0) = {float(ds.delta_f):.3f} ± {float(ds.delta_f_se):.3f} "
          f"(half rule {float(ds.delta_f_half):.3f}); F(n) = {float(ds.free_energy):.3f}; "
          f"llc(n) = {float(ds.llc_top):.3f} ± {float(ds.llc_top_mcse):.3f}; E|M - M*|² = "
          f"{float(ds.distance2_top):.3f}", flush=True)  # fmt: skip
    if not a.gamma_nodes or "free_energy_basin" in ds:
        return
    t0 = time.perf_counter()
    loc = localization_free_energy(
        model, w, model_args=args, model_kwargs=kw, nbeta=float(a.P), gamma=a.gamma,
        include_prior=True, exact=True, num_nodes=a.gamma_nodes, seed=a.seed + 2000,
        scale=hyper.chi / hyper.g_w,  # the gate's prior precision: see localization_free_energy
        progress=True, **run,
    )  # fmt: skip
    ds = merge_localization(ds, loc)
    ds.attrs.update(wall_loc_s=time.perf_counter() - t0, gamma_nodes=a.gamma_nodes,
                    command_loc=shlex.join(sys.argv))  # fmt: skip
    write_atomic(ds, path)
    print(f"{phase}: F(γ) - F(0) = {float(ds.loc_delta_f):.3f} ± {float(ds.loc_delta_f_se):.3f} "
          f"(check {float(ds.loc_delta_f_half):.3f}); F(n) of the basin = "
          f"{float(ds.free_energy_basin):.3f}; n L_n over the γ nodes' draws "
          f"{a.P * float(ds.loc_loss_min.min()):.1f}-{a.P * float(ds.loc_loss_max.max()):.1f}",
          flush=True)  # fmt: skip


def where(a, phase):
    """Where the localized target's chains sit: aG of the draws and n E[L_n] at each ``--at t,g``
    (the data's weight, the localization), NUTS from the centre as the ladders' nodes are: a
    phase path that crosses the transition shows up as aG jumping between nodes."""
    task, hyper, model, args, kw, w, kind = problem(a, phase)
    aG_star = order(task, hyper, args, kw, w)
    for i, spec in enumerate(a.at):
        t, g = (float(v) for v in spec.split(","))
        run = exact_frozen_llc(model, w, model_args=args, model_kwargs=kw, nbeta=t, gamma=g,
                               include_prior=True, num_chains=a.chains, num_draws=a.draws,
                               num_burnin=a.burnin, seed=a.seed + 3000 + i)  # fmt: skip
        ag, loss = (np.asarray(run.posterior[k]) for k in ("aG", "loss"))
        init_loss = float(run.constant_data["init_loss"])
        print(f"{phase} ({kind}, aG* {aG_star:.3f}) at t = {t:g}, γ = {g:g}: aG per "
              f"chain {np.round(ag.mean(axis=1), 3)}, range {ag.min():.3f}-{ag.max():.3f}; "
              f"n E[L_n] = {a.P * loss.mean():.1f} (n L_n(w*) = {a.P * init_loss:.1f})",
              flush=True)  # fmt: skip


def ti_ladder(a, phase, task, hyper, model, args, kw, w, kind, aG_star, run) -> xr.Dataset:
    t0 = time.perf_counter()
    ds = llc_free_energy(
        model, w, model_args=args, model_kwargs=kw, nbeta=float(a.P), gamma=a.gamma,
        include_prior=True, exact=True, num_nodes=a.nodes, seed=a.seed,
        scale=a.gamma + hyper.chi / hyper.g_w,  # the gate's precision at t = 0
        log_z0=log_z0(task, hyper, kw, w, a.gamma), progress=True, **run,
    )  # fmt: skip
    wall_ti = time.perf_counter() - t0
    t0 = time.perf_counter()
    top = exact_frozen_llc(
        model, w, model_args=args, model_kwargs=kw, nbeta=float(a.P), gamma=a.gamma,
        include_prior=True, seed=a.seed + 1000, **run,
    )  # fmt: skip
    est = llc_estimate(top)
    ds["llc_top"], ds["llc_top_mcse"], ds["llc_top_rhat"] = est.llc_mean, est.mcse, est.rhat
    ds["distance2_top"] = float((top.posterior["distance"] ** 2).mean())
    ds["aG_top"] = float(top.posterior["aG"].mean())  # where the t = n draws sit
    return ds.assign_attrs(
        command=shlex.join(sys.argv), phase=phase, P=a.P, d=a.d, seed=a.seed, aG_star=aG_star,
        centre=kind, wall_ti_s=wall_ti, wall_top_s=time.perf_counter() - t0, **run,
    )  # fmt: skip


def merge_localization(ds: xr.Dataset, loc: xr.Dataset) -> xr.Dataset:
    """The γ ladder's variables beside the t ladder's, on their own dimensions (``loc_node``,
    ``loc_node_half``), and F(n) of the basin: the localized F(n) less F(γ) - F(0)."""
    names = {k: f"loc_{k}" for k in (*loc.data_vars, *loc.coords, *loc.dims)}
    loc = loc.drop_vars(["init_loss", "nbeta"]).rename(
        {k: v for k, v in names.items() if k not in ("init_loss", "nbeta")}
    )
    out = xr.merge([ds, loc], combine_attrs="drop_conflicts")
    out["free_energy_basin"] = out["free_energy"] - out["loc_delta_f"]
    return out.assign_attrs(ds.attrs)


def run_profile(a, path):
    from landscape import SCAN_CENTRES, UMBRELLA

    from bayes_attn.experiments.landscape import landscape_report, run_landscape, write_landscape

    task, hyper, model, args, kw, w, _ = problem(a, None)
    gram = algebra.embedding_gram(*kw["embeddings"])
    t0 = time.perf_counter()
    idata = run_landscape(task, hyper, a.P, "kernel", tokens=args[2], gram=gram,
                          centres=SCAN_CENTRES, seed=a.seed, **UMBRELLA)  # fmt: skip
    wall = time.perf_counter() - t0
    for g in ba._arviz.groups(idata):
        idata[g].attrs.update(command=shlex.join(sys.argv), wall_time_s=wall, d=a.d)
    write_landscape(idata, path)
    print(f"{profile_line(landscape_report(idata))}; {wall:.0f} s", flush=True)


def level2_divide(a) -> float:
    """Level 2's barrier in aG at this P: the divide the profile's ΔF is read at when the posterior
    has one minimum (no barrier of its own)."""
    from bayes_attn.theory.modes import phase_boundary

    return float(phase_boundary(ProtocolConfig.paper().task(), ba.Hyper.paper(), a.P))


def profile_line(prof) -> str:
    """ΔF = log Z_weak - log Z_strong at the profile's barrier, and the minima."""
    minima = ", ".join(f"{q:.3f}" for q in np.atleast_1d(prof.q_minimum.values))
    return (
        f"profile: ΔF = {float(prof.delta_F):.3f} ± {float(prof.delta_F_se):.3f} at the "
        f"divide aG = {float(prof.divide):.3f}; minima of F(aG) at {minima}; smallest "
        f"overlap {float(prof.min_overlap_next):.3f}, max R-hat {float(prof.r_hat.max()):.3f}"
    )


def phase_path(a, out, phase) -> Path:
    tail = "" if a.centre == "map" else f"_{a.centre}"
    return out / f"P{a.P}_d{a.d}_{phase}_g{a.gamma:g}{tail}.nc"


def profile_path(a, out) -> Path:
    return a.profile or out / f"P{a.P}_d{a.d}_profile.nc"


def load_phases(a, out) -> dict:
    """{phase: the TI Dataset} of the phases written at these settings."""
    files = {ph: phase_path(a, out, ph) for ph in PHASES}
    return {ph: xr.load_dataset(f) for ph, f in files.items() if f.exists()}


def phase_difference(rows, basin=False) -> tuple[float, float, float]:
    """F_strong - F_weak, its standard error and the quadrature checks combined: localized, or
    (``basin``) with the localization taken away by the γ ladder."""
    w, s = rows["weak"], rows["strong"]
    if not basin:
        return (float(s.free_energy) - float(w.free_energy),
                math.hypot(float(s.delta_f_se), float(w.delta_f_se)),
                math.hypot(float(s.quadrature_error), float(w.quadrature_error)))  # fmt: skip
    return (float(s.free_energy_basin) - float(w.free_energy_basin),
            math.hypot(float(s.delta_f_se), float(w.delta_f_se), float(s.loc_delta_f_se),
                       float(w.loc_delta_f_se)),
            math.hypot(float(s.quadrature_error), float(w.quadrature_error),
                       float(s.loc_quadrature_error), float(w.loc_quadrature_error)))  # fmt: skip


def has_basins(rows) -> bool:
    return len(rows) == 2 and all("free_energy_basin" in ds for ds in rows.values())


def read_profile(a, out):
    """The profile's report, split at its own barrier where F(aG) has two minima, else at Level
    2's barrier at this P."""
    from bayes_attn import _arviz as az
    from bayes_attn.analysis.free_energy import landscape_report

    idata = az.from_netcdf(profile_path(a, out))
    prof = landscape_report(idata)
    if np.atleast_1d(prof.q_minimum.values).size < 2:
        prof = landscape_report(idata, divide=level2_divide(a))
    return prof


def summary(a, out):
    rows = load_phases(a, out)
    n = a.P
    for phase, ds in rows.items():
        slt = n * float(ds.init_loss) + float(ds.llc_top) * math.log(n)
        print(f"{phase}: aG* {ds.attrs['aG_star']:.3f}, n L_n(w*) = {n * float(ds.init_loss):.3f}, "
              f"F(n) = {float(ds.free_energy):.3f} ± {float(ds.delta_f_se):.3f} "
              f"(quadrature check {float(ds.quadrature_error):.3f}); llc(n) = "
              f"{float(ds.llc_top):.3f} ± {float(ds.llc_top_mcse):.3f}; SLT n L_n + llc log n = "
              f"{slt:.3f}; E|M - M*|² = {float(ds.distance2_top):.3f}")  # fmt: skip
    if len(rows) == 2:
        w, s = rows["weak"], rows["strong"]
        dF, se, _ = phase_difference(rows)
        corr = a.gamma / 2 * (float(s.distance2_top) - float(w.distance2_top))
        slt = n * (float(s.init_loss) - float(w.init_loss)) + (
            float(s.llc_top) - float(w.llc_top)
        ) * math.log(n)
        print(f"ΔF_TI = F_strong - F_weak = {dF:.3f} ± {se:.3f}; first-order localization "
              f"correction {corr:.3f} -> {dF - corr:.3f}; SLT {slt:.3f}")  # fmt: skip
    if has_basins(rows):
        for phase, ds in rows.items():
            print(f"{phase}: ½E|w - w*|² at γ = {np.round(ds.loc_g.values, 3)}: "
                  f"{np.round(ds.loc_half_sq_distance.values, 3)} (R-hat max "
                  f"{float(ds.loc_rhat.max()):.3f}); F(γ) - F(0) = {float(ds.loc_delta_f):.3f} ± "
                  f"{float(ds.loc_delta_f_se):.3f} (check {float(ds.loc_delta_f_half):.3f}); "
                  f"n L_n over its draws {n * float(ds.loc_loss_min.min()):.1f}-"
                  f"{n * float(ds.loc_loss_max.max()):.1f}")  # fmt: skip
        dF, se, qerr = phase_difference(rows, basin=True)
        print(f"ΔF_TI of the basins (localization taken away) = {dF:.3f} ± {se:.3f} "
              f"(quadrature checks combined {qerr:.3f})")  # fmt: skip
    if profile_path(a, out).exists():
        print(profile_line(read_profile(a, out)))


def figure(a, out, path):
    """F(aG) of the posterior with the two MAPs marked and the TI's ΔF written on it."""
    import matplotlib.pyplot as plt

    prof = read_profile(a, out)
    divide = float(prof.divide)
    q, F, se = prof.q.values, prof.F.values - np.nanmin(prof.F.values), prof.F_se.values
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    ax.fill_between(q, F - 2 * se, F + 2 * se, color="C0", alpha=0.25, lw=0)
    ax.plot(q, F, "C0-", label="F(aG) of the posterior (umbrella + MBAR, ± 2 s.e.)")
    for i, m in enumerate(np.atleast_1d(prof.attrs.get("mode_q", []))):
        ax.axvline(m, color="0.45", ls=":", lw=1.2,
                   label=None if i else "modes of the posterior density over M (readout "
                   "integrated out): " + ", ".join(f"{v:.2f}" for v in np.atleast_1d(prof.attrs["mode_q"])))  # fmt: skip
    rows = load_phases(a, out)
    what = {"map": "MAP (weight decay's minimum)", "mode": "mode of the gate's density",
            "start": "phase start (no mode)"}  # fmt: skip
    for phase, ds in rows.items():
        ax.axvline(ds.attrs["aG_star"], color={"weak": "C2", "strong": "C3"}[phase], ls="--",
                   lw=1.2, label=f"{phase} centre: {what[ds.attrs.get('centre', 'map')]}, aG = "
                   f"{ds.attrs['aG_star']:.2f}")  # fmt: skip
    text = []
    if len(rows) == 2:
        dF, se2, qerr = phase_difference(rows)
        text.append(f"TI of the exact LLC, localized at each centre (γ = {a.gamma:g}, prior, "
                    f"β = 1):\nF_strong − F_weak = {dF:.1f} ± {se2:.1f} (quadrature check "
                    f"{qerr:.1f}) nats")  # fmt: skip
    if has_basins(rows):
        dF, se2, qerr = phase_difference(rows, basin=True)
        text.append(f"the same with the localization taken away (TI over γ):\n"
                    f"F_strong − F_weak = {dF:.1f} ± {se2:.1f} (quadrature checks {qerr:.1f}) nats")  # fmt: skip
    two = np.atleast_1d(prof.q_minimum.values).size > 1
    text.append(f"posterior: log P(aG < {divide:.2f}) − log P(aG > {divide:.2f}) = "
                f"{float(prof.delta_F):.1f} ± {float(prof.delta_F_se):.1f} nats\n"
                f"(the divide: {'the profile' if two else 'Level 2'}'s barrier at this P)")  # fmt: skip
    ax.axvline(divide, color="0.6", lw=0.8)
    ax.text(0.98, 0.04, "\n".join(text), transform=ax.transAxes, ha="right", va="bottom",
            fontsize=8, bbox={"facecolor": "white", "edgecolor": "0.7"})  # fmt: skip
    ax.set_xlabel("aG (copy order parameter)")
    ax.set_ylabel("F(aG) − min F (nats)")
    ax.set_title(f"softmax, P = {a.P}, frozen embeddings d = {a.d} (seed 0): the posterior's "
                 "F(aG) and the LLC's ΔF", fontsize=10)  # fmt: skip
    ax.set_ylim(top=1.5 * np.nanmax(F + 2 * se))  # room for the legend above the curve
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="+", choices=("weak", "strong", "profile", "summary", "figure",
                                                 "where-weak", "where-strong"))  # fmt: skip
    ap.add_argument("--P", type=int, default=285)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--gamma", type=float, default=4.0)
    ap.add_argument("--nodes", type=int, default=6)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--burnin", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--centre",
        choices=("map", "mode"),
        default="map",
        help="w* of each phase: the joint MAP from the phase's start, or the mode of "
        "the density over the gate (the phase's start where it has none)",
    )
    ap.add_argument(
        "--gamma-nodes",
        type=int,
        default=0,
        help="Gauss-Legendre nodes of the γ ladder that takes the localization away "
        "at t = n (0: none)",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="an existing profile of the same posterior (a landscape scan file)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "paper" / "llc_phases")
    ap.add_argument("--figure", type=Path, default=None, help="default: <out>.png")
    ap.add_argument(
        "--at",
        nargs="+",
        default=["290,4"],
        metavar="T,G",
        help="where-weak/where-strong: the (data weight, localization) pairs",
    )
    a = ap.parse_args(argv)
    if a.gamma_nodes == 1 or a.gamma_nodes < 0:
        ap.error(f"--gamma-nodes: 0 or at least 2, got {a.gamma_nodes}")
    if a.profile is not None and not a.profile.is_file():
        ap.error(f"--profile: no file {a.profile}")
    a.out.mkdir(parents=True, exist_ok=True)
    for part in a.parts:
        if part == "summary":
            summary(a, a.out)
            continue
        if part == "figure":
            figure(a, a.out, a.figure or a.out.with_suffix(".png"))
            continue
        if part.startswith("where-"):
            where(a, part.removeprefix("where-"))
            continue
        if part != "profile":
            run_phase(a, part, phase_path(a, a.out, part))  # resumes its own steps
        elif profile_path(a, a.out).exists():
            print(f"{profile_path(a, a.out).name}: present, skipped", flush=True)
        else:
            run_profile(a, profile_path(a, a.out))


if __name__ == "__main__":
    main()
