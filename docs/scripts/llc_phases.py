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
``figure`` (``llc_phases.png`` beside the folder: F(aG) with the MAPs marked).

Run: .venv/bin/python docs/scripts/llc_phases.py weak strong profile summary figure
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
from bayes_attn.experiments.llc import llc_free_energy, llc_problem
from bayes_attn.experiments.protocol import ProtocolConfig
from bayes_attn.inference.llc import exact_frozen_llc
from bayes_attn.io import write_atomic

sys.path.insert(0, str(Path(__file__).parent))
from llc_table1 import order_at  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("weak", "strong")


def problem(a, phase):
    cfg = ProtocolConfig.paper()
    task, hyper = cfg.task(), ba.Hyper.paper()
    model, args, kw, w, _ = llc_problem(
        "network", task, hyper, a.P, "softmax", d_model=a.d, seed=a.seed, phase=phase
    )
    return task, hyper, model, args, kw, w


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
    task, hyper, model, args, kw, w = problem(a, phase)
    tr = order_at(model, args, kw, w)
    print(f"{phase}: w* aG = {tr['aG_star']:.4f}", flush=True)
    run = {"num_chains": a.chains, "num_draws": a.draws, "num_burnin": a.burnin}
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
    dist2 = float((top.posterior["distance"] ** 2).mean())
    ds["llc_top"], ds["llc_top_mcse"], ds["llc_top_rhat"] = est.llc_mean, est.mcse, est.rhat
    ds["distance2_top"] = dist2
    ds.attrs.update(
        command=shlex.join(sys.argv), phase=phase, P=a.P, d=a.d, seed=a.seed, aG_star=tr["aG_star"],
        wall_ti_s=wall_ti, wall_top_s=time.perf_counter() - t0, **run,
    )  # fmt: skip
    write_atomic(ds, path)
    print(f"{phase}: F(n) - F(0) = {float(ds.delta_f):.3f} ± {float(ds.delta_f_se):.3f} "
          f"(half rule {float(ds.delta_f_half):.3f}); F(n) = {float(ds.free_energy):.3f}; "
          f"llc(n) = {est.llc_mean:.3f} ± {est.mcse:.3f}; E|M - M*|² = {dist2:.3f}; "
          f"{wall_ti:.0f} s + {float(ds.attrs['wall_top_s']):.0f} s", flush=True)  # fmt: skip


def run_profile(a, path):
    from landscape import SCAN_CENTRES, UMBRELLA

    from bayes_attn.experiments.landscape import landscape_report, run_landscape, write_landscape

    task, hyper, model, args, kw, w = problem(a, None)
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


def load_phases(a, out) -> dict:
    """{phase: the TI Dataset} of the phases written at these settings."""
    files = {ph: out / f"P{a.P}_d{a.d}_{ph}_g{a.gamma:g}.nc" for ph in PHASES}
    return {ph: xr.load_dataset(f) for ph, f in files.items() if f.exists()}


def phase_difference(rows) -> tuple[float, float, float]:
    """F_strong - F_weak, its standard error and the two quadrature checks combined."""
    w, s = rows["weak"], rows["strong"]
    return (float(s.free_energy) - float(w.free_energy),
            math.hypot(float(s.delta_f_se), float(w.delta_f_se)),
            math.hypot(float(s.quadrature_error), float(w.quadrature_error)))  # fmt: skip


def summary(a, out):
    from bayes_attn.analysis.free_energy import landscape_report

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
    prof_path = out / f"P{a.P}_d{a.d}_profile.nc"
    if prof_path.exists():
        from bayes_attn import _arviz as az

        prof = landscape_report(az.from_netcdf(prof_path), divide=level2_divide(a))
        print(profile_line(prof))


def figure(a, out, path):
    """F(aG) of the posterior with the two MAPs marked and the TI's ΔF written on it."""
    import matplotlib.pyplot as plt

    from bayes_attn import _arviz as az
    from bayes_attn.analysis.free_energy import landscape_report

    divide = level2_divide(a)
    prof = landscape_report(az.from_netcdf(out / f"P{a.P}_d{a.d}_profile.nc"), divide=divide)
    q, F, se = prof.q.values, prof.F.values - np.nanmin(prof.F.values), prof.F_se.values
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    ax.fill_between(q, F - 2 * se, F + 2 * se, color="C0", alpha=0.25, lw=0)
    ax.plot(q, F, "C0-", label="F(aG) of the posterior (umbrella + MBAR, ± 2 s.e.)")
    for i, m in enumerate(np.atleast_1d(prof.attrs.get("mode_q", []))):
        ax.axvline(m, color="0.45", ls=":", lw=1.2,
                   label=None if i else "modes of the posterior density over M (readout "
                   "integrated out): " + ", ".join(f"{v:.2f}" for v in prof.attrs["mode_q"]))  # fmt: skip
    rows = load_phases(a, out)
    for phase, ds in rows.items():
        ax.axvline(ds.attrs["aG_star"], color={"weak": "C2", "strong": "C3"}[phase], ls="--",
                   lw=1.2, label=f"{phase} MAP (weight decay's minimum), aG = "
                   f"{ds.attrs['aG_star']:.2f}")  # fmt: skip
    text = []
    if len(rows) == 2:
        dF, se2, qerr = phase_difference(rows)
        text.append(f"TI of the exact LLC, localized at each MAP (γ = {a.gamma:g}, prior, β = 1):\n"
                    f"F_strong − F_weak = {dF:.1f} ± {se2:.1f} (quadrature check {qerr:.1f}) nats")  # fmt: skip
    text.append(f"posterior: log P(aG < {divide:.2f}) − log P(aG > {divide:.2f}) = "
                f"{float(prof.delta_F):.1f} ± {float(prof.delta_F_se):.1f} nats\n"
                f"(the divide: Level 2's barrier at this P)")  # fmt: skip
    ax.axvline(divide, color="0.6", lw=0.8)
    ax.text(0.98, 0.04, "\n".join(text), transform=ax.transAxes, ha="right", va="bottom",
            fontsize=8, bbox={"facecolor": "white", "edgecolor": "0.7"})  # fmt: skip
    ax.set_xlabel("aG (copy order parameter)")
    ax.set_ylabel("F(aG) − min F (nats)")
    ax.set_title(f"softmax, P = {a.P}, frozen embeddings d = {a.d} (seed 0): the posterior "
                 "against its MAPs", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="+", choices=("weak", "strong", "profile", "summary", "figure"))
    ap.add_argument("--P", type=int, default=285)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--gamma", type=float, default=4.0)
    ap.add_argument("--nodes", type=int, default=6)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--burnin", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "paper" / "llc_phases")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    for part in a.parts:
        if part == "summary":
            summary(a, a.out)
            continue
        if part == "figure":
            figure(a, a.out, a.out.with_suffix(".png"))
            continue
        name = "profile" if part == "profile" else f"{part}_g{a.gamma:g}"
        path = a.out / f"P{a.P}_d{a.d}_{name}.nc"
        if path.exists():
            print(f"{path.name}: present, skipped", flush=True)
            continue
        run_profile(a, path) if part == "profile" else run_phase(a, part, path)


if __name__ == "__main__":
    main()
