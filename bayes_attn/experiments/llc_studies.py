"""The LLC studies as sweep kinds (registered in :mod:`bayes_attn.experiments.kinds`).

``llc_table1``: λ̂ against P at Table 1 (docs/validation.md, "λ̂ against P at Table 1"). At each
grid point the frozen-embedding network of width ``d_model`` at the exact MAP
(:func:`~bayes_attn.experiments.llc.llc_problem`, optionally from one ``phase``'s start), then
:func:`~bayes_attn.experiments.llc.llc_point`: the exact LLC (W_O integrated out, NUTS over the
whitened gate) and SGLD on the weights (unless ``exact_only``), with the order parameters at w*
and the exact draws' mean. Configs: ``bayes_attn/configs/llc_table1*.toml``; figure and table:
``docs/scripts/llc_table1.py``.

``llc_phases``: the phases' free-energy difference from the LLC (docs/theory.md §11, "The free
energy from the LLC"). At a softmax point, for each phase's centre w*_k,
:func:`~bayes_attn.experiments.llc_ti.llc_free_energy` (exact, prior included, β = 1) gives
F_k(n) - F_k(0) = n L_n(w*_k) + ∫_0^n λ̂_k(t)/t dt with F_k(0) Gaussian in closed form
(:func:`gaussian_log_z0`), one more exact run at t = n gives λ̂(n) and E|M - M*|², and, with
``gamma_nodes``, :func:`~bayes_attn.experiments.llc_ti.localization_free_energy` takes the
localization away. Configs: ``bayes_attn/configs/llc_phases*.toml``; summary and figure:
``docs/scripts/llc_phases.py`` (the profile beside it from ``bayes-attn landscape``).

``llc_calibration``: :func:`~bayes_attn.experiments.llc.calibrate_llc` on the frozen-embedding
network with the exact LLC beside each nβ's verdict (docs/validation.md, "``calibrate_llc`` on the
network"). The network is :func:`benchmark_problem`'s (``layout = "benchmark"``: the one of
``benchmarks/llc_exact.py``) or :func:`~bayes_attn.experiments.llc.llc_problem`'s at the point's
seed (``layout = "seed"``). Config: ``bayes_attn/configs/llc_calibration.toml``; its file read
back as ``calibrate_llc``'s tables by :func:`calibration_tables`, printed
(:func:`bayes_attn.analysis.llc.calibration_markdown`) and drawn
(:func:`bayes_attn.plotting.plots.llc_calibration`) by ``docs/scripts/llc_calibration.py``.
"""

from __future__ import annotations

import math
import time

import jax
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn.analysis.llc import llc_estimate
from bayes_attn.analysis.llc_exploration import LIMITS
from bayes_attn.experiments import results
from bayes_attn.experiments.coexistence import PHASES, phase_starts
from bayes_attn.experiments.llc import (
    calibrate_llc,
    llc_free_energy,
    llc_point,
    llc_problem,
    localization_free_energy,
    network_order,
    network_weights,
)
from bayes_attn.inference.llc import EXACT_SETTINGS, exact_frozen_llc
from bayes_attn.models.levels import ORDER_PARAMETERS
from bayes_attn.models.network import init_embeddings, network_model
from bayes_attn.theory.level1 import level1_map, start_in_span
from bayes_attn.theory.modes import phase_boundary

__all__ = [
    "BENCHMARK_KEYS",
    "CALIBRATION_DEFAULTS",
    "PHASES_DEFAULTS",
    "TABLE1_DEFAULTS",
    "benchmark_problem",
    "calibration_point",
    "calibration_tables",
    "gaussian_log_z0",
    "phases_point",
    "table1_point",
]

#: the options of an ``llc_table1`` sweep: the study's full settings (2026-12-05). SGLD starts at
#: w*, where the directions held by γ alone relax in 1/(εγ) = 5000 steps: its burn-in is 5 of them
TABLE1_DEFAULTS = dict(
    d_model=256,
    phase="map",  # w* from the global Level-2 saddle's start, or "weak" / "strong" (softmax)
    gamma=100.0,
    step_size=2e-6,
    thinning=4,
    num_chains=4,
    num_draws=2000,
    num_burnin=25_000,
    exact_draws=1000,
    exact_burnin=500,
    exact_only=False,
)

#: the options of an ``llc_phases`` sweep (docs/validation.md, "the free-energy identity")
PHASES_DEFAULTS = dict(
    d_model=256,
    gamma=4.0,
    nodes=6,  # Gauss-Legendre nodes of the ladder in t (and nodes // 2 as its check)
    num_chains=4,
    num_draws=200,
    num_burnin=200,
    centre="map",  # or "mode": the gate's density's mode (the readout integrated out)
    gamma_nodes=0,  # nodes of the ladder in γ at t = n (0: none)
    gamma_draws=0,  # the γ ladder's draws and burn-in per chain (0: num_draws, num_burnin)
    gamma_burnin=0,
)

#: the runs of ``llc_phases`` beside the t ladder (seeded from the point's seed): the run at t = n
#: and the γ ladder, as the study ran them
TOP_SEED, LOCALIZATION_SEED = 1000, 2000
#: ``centre`` as stored: the joint MAP, the gate's mode, the phase's start (the phase has no mode)
CENTRES = ("map", "mode", "start")
_FIELDS = ("llc_mean", "mcse", "rhat", "ess", "acceptance")


def check_table1(cfg, options: dict) -> dict:
    """Refuse an ``llc_table1`` sweep that cannot run: an unknown phase, a phase of linear
    attention, or P < 2 (nβ = n / log n)."""
    if options["phase"] not in ("map", *PHASES):
        raise ValueError(f"phase must be 'map' or one of {PHASES}, got {options['phase']!r}")
    if options["phase"] != "map" and set(cfg.activation) != {"softmax"}:
        raise ValueError("phase: only softmax attention has two phases; list only softmax")
    if min(cfg.P) < 2:
        raise ValueError(f"P: nβ = n / log n needs P >= 2, got {min(cfg.P)}")
    return options


def table1_point(cfg, pt, task, hyper) -> dict:
    """The exact LLC and SGLD's at one (activation, P, seed) of Table 1, with the order
    parameters at w* (``<q>_star``) and the exact draws' mean (``exact_<q>_mean``)."""
    o, act, P = cfg.options, pt["activation"], pt["P"]
    phase = None if o["phase"] == "map" else o["phase"]
    problem = llc_problem("network", task, hyper, P, act, d_model=o["d_model"], seed=pt["seed"],
                          phase=phase)  # fmt: skip
    _, args, kw, w_star, _ = problem
    star = network_order(task, hyper, args[2], act, w_star, kw["embeddings"])
    run = {k: o[k] for k in ("gamma", "step_size", "num_chains", "num_draws", "num_burnin",
                             "thinning")}  # fmt: skip
    idata, ex = llc_point(
        "network", task, hyper, P, act, d_model=o["d_model"], seed=pt["seed"], phase=phase,
        problem=problem, exact=True, exact_only=bool(o["exact_only"]),
        exact_draws=o["exact_draws"], exact_burnin=o["exact_burnin"], progress=False,
        sampler="sgld", **run,
    )  # fmt: skip
    out = {f"{q}_star": float(star.get(q, math.nan)) for q in ORDER_PARAMETERS}
    for q in ORDER_PARAMETERS:
        out[f"exact_{q}_mean"] = float(ex.posterior[q].mean()) if q in star else math.nan
    e = llc_estimate(ex)
    s = None if idata is None else llc_estimate(idata)
    for f in _FIELDS:
        out[f"exact_{f}"] = float(getattr(e, f))
        out[f"sgld_{f}"] = math.nan if s is None else float(getattr(s, f))
    out.update(nbeta=e.nbeta, init_loss=e.init_loss, grad_norm=e.grad_norm)
    return {k: ((), np.float64(v)) for k, v in out.items()}


def check_phases(cfg, options: dict) -> dict:
    """Refuse an ``llc_phases`` sweep that cannot run."""
    if set(cfg.activation) != {"softmax"}:
        raise ValueError("activation: the phases are softmax's; list only softmax")
    if options["centre"] not in CENTRES[:2]:
        raise ValueError(f"centre must be 'map' or 'mode', got {options['centre']!r}")
    if options["gamma_nodes"] == 1 or options["gamma_nodes"] < 0:
        raise ValueError(f"gamma_nodes: 0 or at least 2, got {options['gamma_nodes']}")
    return options


def gaussian_log_z0(hyper, embeddings, w, gamma) -> float:
    """-F(0) at the centre ``w`` up to the terms equal at every centre: the Gaussian bracket of
    docs/theory.md §11 (the gate's whitened M~ with prior variance g_W/χ, the readout's
    w~ = √d U^T W_O^T with g_O/χ, localization γ/d; the weights outside the span cancel)."""
    U = np.asarray(algebra.span_basis(*embeddings))
    d = U.shape[0]
    m = U.T @ np.asarray(w["W_G"]) @ U
    wo = math.sqrt(d) * U.T @ np.asarray(w["W_O"]).T
    s_m, s_o = hyper.g_w / hyper.chi, hyper.g_o / hyper.chi
    return float(
        -(np.sum(m**2) / (2 * (s_m + 1 / gamma)) + np.sum(wo**2) / (2 * (s_o + d / gamma)))
    )


def phase_centre(task, hyper, P, phase, *, d_model, seed, centre="map"):
    """``(problem, aG at w*, centre)`` of ``phase``: the joint MAP from the phase's start
    (``"map"``), or the mode of the gate's density (``"mode"``, the readout's log-determinant in)
    and, where that mode lies across the package's phase divide
    (:func:`~bayes_attn.theory.modes.phase_boundary`: the phase has no mode), the start itself."""
    problem = llc_problem("network", task, hyper, P, "softmax", d_model=d_model, seed=seed,
                          phase=phase, include_logdet=centre == "mode")  # fmt: skip
    model, args, kw, w, n = problem
    aG = network_order(task, hyper, args[2], "softmax", w, kw["embeddings"])["aG"]
    if centre == "mode" and (aG < phase_boundary(task, hyper, P)) != (phase == "weak"):
        emb = kw["embeddings"]
        R = algebra.gram_factor(algebra.embedding_gram(*emb), task.n_features)
        M0 = start_in_span(np.asarray(phase_starts(task, hyper, P, "kernel")[phase]["M"]), R)
        w, centre = network_weights(task, hyper, args[2], "softmax", M0, emb), "start"
        problem = (model, args, kw, w, n)
        aG = network_order(task, hyper, args[2], "softmax", w, emb)["aG"]
    return problem, float(aG), centre


def _one_phase(o, task, hyper, P, seed, phase) -> dict:
    """One phase's ladders: {name: (dims, value)}."""
    (model, args, kw, w, _), aG_star, centre = phase_centre(
        task, hyper, P, phase, d_model=o["d_model"], seed=seed, centre=o["centre"]
    )
    run = {k: o[k] for k in ("num_chains", "num_draws", "num_burnin")}
    common = dict(model_args=args, model_kwargs=kw, nbeta=float(P), gamma=o["gamma"],
                  include_prior=True, **run)  # fmt: skip
    ti = llc_free_energy(
        model, w, **common, exact=True, num_nodes=o["nodes"], seed=seed,
        scale=o["gamma"] + hyper.chi / hyper.g_w,  # the gate's precision at t = 0
        log_z0=gaussian_log_z0(hyper, kw["embeddings"], w, o["gamma"]),
    )  # fmt: skip
    top = exact_frozen_llc(model, w, **common, seed=seed + TOP_SEED)
    est = llc_estimate(top)
    out = {k: ((), float(ti[k])) for k in ("delta_f", "delta_f_se", "delta_f_half",
                                           "quadrature_error", "free_energy", "log_z0",
                                           "init_loss", "nbeta")}  # fmt: skip
    out.update({f"ti_{k}": (("node",), ti[k].values) for k in ("t", "llc", "mcse", "rhat")})
    out.update(
        aG_star=((), aG_star), centre=((), float(CENTRES.index(centre))),
        llc_top=((), est.llc_mean), llc_top_mcse=((), est.mcse), llc_top_rhat=((), est.rhat),
        distance2_top=((), float((top.posterior["distance"] ** 2).mean())),
        aG_top=((), float(top.posterior["aG"].mean())),
    )  # fmt: skip
    if o["gamma_nodes"]:
        loc_run = dict(num_draws=o["gamma_draws"] or o["num_draws"],
                       num_burnin=o["gamma_burnin"] or o["num_burnin"])  # fmt: skip
        loc = localization_free_energy(
            model, w, **{**common, **loc_run}, exact=True, num_nodes=o["gamma_nodes"],
            seed=seed + LOCALIZATION_SEED,
            scale=hyper.chi / hyper.g_w,  # the gate's prior precision (localization_free_energy)
        )  # fmt: skip
        for k in ("g", "half_sq_distance", "mcse", "rhat", "loss_min", "loss_max"):
            out[f"loc_{k}"] = (("loc_node",), loc[k].values)
        for k in ("delta_f", "delta_f_se", "delta_f_half", "quadrature_error"):
            out[f"loc_{k}"] = ((), float(loc[k]))
        out["free_energy_basin"] = ((), float(ti["free_energy"]) - float(loc["delta_f"]))
    return out


def phases_point(cfg, pt, task, hyper) -> dict:
    """Both phases' ladders at one softmax point, on the dimension ``phase`` (weak, strong)."""
    rows = [_one_phase(cfg.options, task, hyper, pt["P"], pt["seed"], ph) for ph in PHASES]
    return {
        k: (("phase", *dims), np.stack([np.asarray(r[k][1], dtype=float) for r in rows]))
        for k, (dims, _) in rows[0].items()
    }


#: the named key layout of ``benchmarks/llc_exact.py``'s network (docs/validation.md, "The local
#: learning coefficient against exact values"): its dataset from ``key(1)``, its embeddings from
#: ``key(2)``, whatever the run's seed. It predates the package's scheme (:mod:`bayes_attn.keys`,
#: a fold of the seed's key) and keeps the committed numbers of that section and of the
#: calibration figure; the samplers still draw from the point's seed.
BENCHMARK_KEYS = (1, 2)

#: the options of an ``llc_calibration`` sweep: the d = 64 study of 2026-12-05
#: (docs/figures/llc_calibration_d64.nc). The network's W_G curvature grows with d: the steps
#: scale as 16 / d (these are 1.25e-4 ... 1e-3 at d = 16) and each kept draw is d / 16 steps
#: after the last
CALIBRATION_DEFAULTS = dict(
    d_model=64,
    layout="benchmark",  # BENCHMARK_KEYS, or "seed": llc_problem's network at the point's seed
    gamma=100.0,
    step_sizes=[3.125e-5, 6.25e-5, 1.25e-4, 2.5e-4],  # a halving ladder (calibrate_llc)
    nbetas=["n/log n", "n"],  # the nβ of each row: n / log n (run_llc's default) or n
    sampler="sgld",
    num_chains=4,
    num_draws=5000,
    num_burnin=1000,
    thinning=4,
    exact_draws=1000,  # the exact LLC's NUTS draws per chain
    exact_burnin=EXACT_SETTINGS.num_burnin,  # and its warm-up (exact_frozen_llc's default)
)
LAYOUTS = ("benchmark", "seed")
NBETAS = ("n/log n", "n")


def benchmark_problem(task, hyper, P: int, activation: str = "softmax", *, d_model: int):
    """:func:`~bayes_attn.experiments.llc.llc_problem`'s tuple ``(model, model_args,
    model_kwargs, w_star, n)`` for the network of ``benchmarks/llc_exact.py``: P sequences from
    ``key(1)``, frozen embeddings of width ``d_model`` from ``key(2)`` (:data:`BENCHMARK_KEYS`),
    w* the exact MAP from the global saddle (the readout profiled out) as weights."""
    data_key, emb_key = (jax.random.key(k) for k in BENCHMARK_KEYS)
    tokens = task.sample(data_key, P)
    emb = init_embeddings(emb_key, task, hyper, d_model)
    M = level1_map(task, hyper, tokens, activation, gram=algebra.embedding_gram(*emb)).M
    w_star = network_weights(task, hyper, tokens, activation, M, emb)
    kw = {"train_embeddings": False, "embeddings": emb}
    return network_model, (task, hyper, tokens, activation, d_model), kw, w_star, None


def check_calibration(cfg, options: dict) -> dict:
    """Refuse an ``llc_calibration`` sweep that cannot run."""
    if options["layout"] not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {options['layout']!r}")
    bad = [nb for nb in options["nbetas"] if nb not in NBETAS]
    if bad or not options["nbetas"]:
        raise ValueError(f"nbetas: a list of {NBETAS}, got {options['nbetas']!r}")
    if len(options["step_sizes"]) < 2:
        raise ValueError(f"step_sizes: a halving ladder of at least 2, got {options['step_sizes']}")
    if min(cfg.P) < 2:
        raise ValueError(f"P: nβ = n / log n needs P >= 2, got {min(cfg.P)}")
    return options


def calibration_point(cfg, pt, task, hyper) -> dict:
    """:func:`~bayes_attn.experiments.llc.calibrate_llc` at one point, the exact LLC at each nβ
    beside it, on the dimensions ``temperature`` (the nβ of ``nbetas``) and ``rung`` (the steps,
    smallest first), with each stage's wall time."""
    o, P, seed = cfg.options, pt["P"], pt["seed"]
    if o["layout"] == "benchmark":
        problem = benchmark_problem(task, hyper, P, pt["activation"], d_model=o["d_model"])
    else:
        problem = llc_problem("network", task, hyper, P, pt["activation"], d_model=o["d_model"],
                              seed=seed)  # fmt: skip
    model, args, kw, w_star, _ = problem
    nbetas = [None if nb == "n/log n" else float(P) for nb in o["nbetas"]]
    t0 = time.perf_counter()
    exact = [
        llc_estimate(llc_point(
            "network", task, hyper, P, pt["activation"], seed=seed, problem=problem,
            exact_only=True, exact_draws=o["exact_draws"], exact_burnin=o["exact_burnin"],
            progress=False, nbeta=nb, gamma=o["gamma"],
        )[1])
        for nb in nbetas
    ]  # fmt: skip
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    run = {k: o[k] for k in ("sampler", "num_chains", "num_draws", "num_burnin", "thinning")}
    table = calibrate_llc(model, w_star, model_args=args, model_kwargs=kw, nbetas=nbetas,
                          step_sizes=o["step_sizes"], gamma=o["gamma"], seed=seed, **run)  # fmt: skip
    t_cal = time.perf_counter() - t0
    grid, row = ("temperature", "rung"), ("temperature",)
    out = {k: (grid, table[k].values) for k in ("llc", "mcse", "rhat", "acceptance", "passes",
                                                 "llc_extrapolated", "llc_extrapolated_se")}  # fmt: skip
    out.update(
        nbeta=(row, table["nbeta"].values), step_size=(("rung",), table["step_size"].values),
        chosen=(row, table["chosen"].values),
        exact_llc=(row, [e.llc_mean for e in exact]), exact_mcse=(row, [e.mcse for e in exact]),
        exact_seconds=((), t_exact), calibration_seconds=((), t_cal),
    )  # fmt: skip
    return out


#: the variables of calibrate_llc's table, over (nbeta, step_size) or nbeta alone
_GRID, _ROW = ("llc", "mcse", "rhat", "acceptance", "passes"), ("chosen", "exact_llc", "exact_mcse")


def calibration_tables(ds) -> list:
    """The ``llc_calibration`` sweep file ``ds`` as :func:`~bayes_attn.experiments.llc.calibrate_llc`'s
    tables, one per finished grid point: ``llc``, ``mcse``, ``rhat``, ``acceptance`` and
    ``passes`` over (``nbeta``, ``step_size``), ``chosen``, ``exact_llc`` and ``exact_mcse``
    over ``nbeta``; attrs ``min_acceptance``, ``d_model``, ``P``, ``activation``, ``seed`` and the
    two stages' wall times (``exact_seconds``, ``calibration_seconds``)."""
    d_model = results.options(ds)["d_model"]
    grid = [d for d in ("activation", "L", "V", "P", "seed") if d in ds.dims]
    out = []
    for idx in np.ndindex(*(ds.sizes[d] for d in grid)):
        pt = ds.isel(dict(zip(grid, idx, strict=True)))
        if not bool(pt.done):
            continue
        table = xr.Dataset(
            {k: (("nbeta", "step_size"), pt[k].values) for k in _GRID}
            | {k: (("nbeta",), pt[k].values) for k in _ROW},
            coords={"nbeta": pt.nbeta.values, "step_size": pt.step_size.values},
        )
        table["passes"] = table.passes > 0.5
        out.append(table.assign_attrs(
            min_acceptance=LIMITS.min_acceptance, d_model=d_model, P=int(pt.P),
            activation=str(pt.activation.values), seed=int(pt.seed) if "seed" in pt else 0,
            exact_seconds=float(pt.exact_seconds), calibration_seconds=float(pt.calibration_seconds),
        ))  # fmt: skip
    return out
