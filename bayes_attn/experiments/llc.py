"""The local learning coefficient at one point of the copy task, and the calibration of its step.

:func:`llc_point` is what ``bayes-attn llc`` and the ``llc`` sweep kind run: a dataset drawn from
the seed (as every sweep point's), the point w* the exact Level-1 MAP (at ``network`` level with
frozen embeddings, mapped onto the network's weights: W_G = U M~ U^T, W_O = w~^T U^T / √d, so
that the network's logits and readout are the MAP's), then :func:`~bayes_attn.inference.llc.run_llc`
there, and optionally the exact value beside it (:func:`~bayes_attn.inference.llc.exact_frozen_llc`).
:func:`calibrate_llc` runs a ladder of halving step sizes at each nβ and returns the table that
:func:`bayes_attn.analysis.llc.calibration_verdict` judges.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive
from bayes_attn.analysis.llc import calibration_verdict, llc_estimate
from bayes_attn.analysis.llc_exploration import LIMITS
from bayes_attn.experiments.coexistence import PHASES, phase_starts
from bayes_attn.experiments.llc_ti import (  # the ladders' home; re-exported here
    _full_batch,
    _node_order,  # noqa: F401
    llc_free_energy,
    localization_free_energy,
)
from bayes_attn.inference import resolve_key
from bayes_attn.inference.llc import (
    EXACT_SETTINGS,
    LLCSettings,
    exact_frozen_llc,
    frozen_llc_target,
    llc_schedule,
    llc_target,
    run_llc,
)
from bayes_attn.models.levels import (
    EMBEDDINGS_FOLD,
    model_with_data,
    order_parameters,
    seed_embeddings,
)
from bayes_attn.progress import announce, say, seconds_per_call
from bayes_attn.theory.level1 import level1_fit, level1_map, start_in_span

__all__ = [
    "EMBEDDINGS_FOLD",
    "calibrate_llc",
    "llc_free_energy",
    "llc_point",
    "llc_problem",
    "localization_free_energy",
    "network_weights",
]


def network_weights(task, hyper, tokens, activation: str, M, embeddings) -> dict:
    """The network's weights that a whitened gate ``M`` stands for with frozen ``embeddings``:
    W_G = U M U^T and the readout profiled out, W_O = w~^T U^T / √d (:func:`level1_fit`), so that
    the network's logits and readout are the Level-1 form's."""
    d = int(np.shape(embeddings[0])[0])
    g, U = algebra.embedding_gram(*embeddings), np.asarray(algebra.span_basis(*embeddings))
    w = level1_fit(M, tokens, task, hyper, activation, gram=g)["w"]
    return {"W_G": U @ np.asarray(M) @ U.T, "W_O": w.T @ U.T / math.sqrt(d)}


def network_order(task, hyper, tokens, activation: str, w, embeddings) -> dict:
    """The order parameters the frozen-embedding network records at the weights ``w``
    (``c1``/``cG``, or ``a1``/``aG`` for softmax: the projection of the mean attention on
    ``tokens``), read from the whitened gate U^T W_G U, so without a pass over the d x d weights."""
    g, U = algebra.embedding_gram(*embeddings), np.asarray(algebra.span_basis(*embeddings))
    fit = level1_fit(U.T @ np.asarray(w["W_G"]) @ U, tokens, task, hyper, activation, gram=g)
    names = order_parameters(activation)
    return {names[0]: fit["c1"], names[1]: fit["cG"]}


def llc_problem(level: str, task, hyper, P: int, activation: str, *, d_model=None, seed=0,
                batch_size=None, phase: str | None = None, include_logdet: bool = False):  # fmt: skip
    """``(model, model_args, model_kwargs, w_star, n)`` of the LLC at a point.

    ``network``: the network (``d_model`` wide; None: V + L, the narrowest frozen-embedding
    network) with its embeddings frozen at a prior draw from the seed
    (:func:`~bayes_attn.models.levels.seed_embeddings`: the same network as the landscape's
    ``gram_width=d`` at that seed), w* the exact MAP of that network (the readout
    profiled out), as weights. ``kernel``: Level 1, w* its MAP; its likelihood is the evidence
    with the readout integrated out (a ``numpyro.factor``), so n = P is given explicitly.

    The MAP is L-BFGS's minimum from the global Level-2 saddle (``phase`` None), or, for softmax,
    from the ``"weak"`` or ``"strong"`` phase's start
    (:func:`~bayes_attn.experiments.coexistence.phase_starts`): in the coexistence window the two
    starts reach the two minima; outside it, where one phase has no minimum, both may reach the
    same one (read w*'s ``aG``). ``include_logdet`` minimises the action with the readout's
    log-determinant instead: w* is then a mode of the posterior density over the gate (the
    readout integrated out), not of the joint density over gate and readout.
    """
    if level not in ("network", "kernel"):
        raise ValueError(f"level must be 'network' or 'kernel', got {level!r}")
    P = check_int("P", P, 2)
    key = jax.random.key(check_int("seed", seed, 0))
    M0 = None
    if phase is not None:
        if phase not in PHASES:
            raise ValueError(f"phase must be None or one of {PHASES}, got {phase!r}")
        if activation != "softmax":
            raise ValueError(f"phase: only softmax attention has two phases, got {activation!r}")
        M0 = np.asarray(phase_starts(task, hyper, P, "kernel")[phase]["M"])
    if level == "kernel":
        model, args, kw = model_with_data("kernel", task, hyper, P, activation, key=key)
        M = level1_map(task, hyper, args[2], activation, M0=M0, include_logdet=include_logdet).M
        return model, args, kw, {"M": M}, P
    d = task.n_features if d_model is None else check_int("d_model", d_model, task.n_features)
    emb = seed_embeddings(task, hyper, d, key=key)
    model, args, kw = model_with_data(
        "network", task, hyper, P, activation, key=key, embeddings=emb, batch_size=batch_size
    )
    g = algebra.embedding_gram(*emb)
    if M0 is not None:
        M0 = start_in_span(M0, algebra.gram_factor(g, task.n_features))
    M = level1_map(task, hyper, args[2], activation, M0=M0, gram=g, include_logdet=include_logdet).M
    return model, args, kw, network_weights(task, hyper, args[2], activation, M, emb), None


def _point_digest(level, task, hyper, P, activation, d_model, seed, batch_size, options) -> str:
    """What determines a point's run: its values and the run's settings (the key of ``keep``)."""
    from bayes_attn.inference.smc_checkpoint import digest

    opts = {k: v for k, v in options.items() if k not in ("progress", "progress_bar")}
    return digest("llc_point/1", level, task, hyper, P, activation, d_model, seed, batch_size, opts)


def _kept_run(path, key):
    """The run that ``path`` holds when it was made with the same arguments (``key``), else None."""
    if path is None or not Path(path).exists():
        return None
    try:
        idata = az.from_netcdf(path)
        same = az.dataset(idata).attrs.get("llc_point") == key
    except Exception:  # noqa: BLE001 - an unreadable or foreign file is simply not reused
        return None
    return idata if same else None


def _announce_run(what, target, steps, chains, per_step, enabled):
    """:func:`bayes_attn.progress.announce` of ``steps`` steps of ``chains`` chains, each step
    ``per_step`` (low, high) gradients of ``target``'s log density (timed once)."""
    if not enabled:
        return
    grad = jax.jit(jax.grad(target.log_density))
    seconds = seconds_per_call(grad, target.x_star)
    n = steps * chains
    announce(what, (n * per_step[0], n * per_step[1]), seconds)


def _announce_llc(model, w_star, args, kw, n, options, enabled):
    """Announce the cost of :func:`run_llc` on the point's target with ``options`` (SMC
    announces its own, by tempering step)."""
    if not enabled or options.get("sampler") == "smc":
        return
    target = llc_target(
        model, w_star, model_args=args, model_kwargs=kw, n=n,
        **{k: options[k] for k in ("nbeta", "gamma", "include_prior") if k in options},
    )  # fmt: skip
    o = {**dataclasses.asdict(LLCSettings()), **options}
    _, burnin = llc_schedule(target, o["sampler"], o["step_size"], o["num_burnin"])
    per_step = (7, 127) if o["sampler"] == "nuts" else (1, 2)
    if o["sampler"] == "nuts" and o["metric"] == "laplace":  # as run_llc: the step alone adapts
        from bayes_attn.inference.hmc import LAPLACE_GRADIENTS
        from bayes_attn.inference.llc_nuts import LAPLACE_WARMUP

        per_step = LAPLACE_GRADIENTS
        burnin = LAPLACE_WARMUP if o["num_burnin"] == "auto" else burnin
    steps = burnin + o["num_draws"] * o["thinning"]
    _announce_run(f"llc by {o['sampler']}, {o['num_chains']} chains x {steps} steps",
                  target, steps, o["num_chains"], per_step, True)  # fmt: skip


def _sampled_run(problem, seed, progress, keep, digest, options):
    """:func:`run_llc` at the point (``problem``: :func:`llc_problem`'s tuple), or the run that
    ``keep`` holds for the same arguments (``digest``); written to ``keep`` when it finishes."""
    model, args, kw, w_star, n = problem
    idata = _kept_run(keep, digest)
    if idata is not None:
        say("llc: %s holds this run (same arguments); kept", keep, enabled=progress)
        return idata
    _announce_llc(model, w_star, args, kw, n, options, progress)
    sampler = options.get("sampler", "sgld")  # SMC keeps no checkpoint; the others do
    kept = sampler != "smc" and keep is not None
    ckpt = Path(keep).with_name(Path(keep).stem + f"_{sampler}.ckpt.npz") if kept else None
    idata = run_llc(
        model, w_star, model_args=args, model_kwargs=kw, n=n, seed=seed,
        progress=progress, checkpoint=ckpt, **options,
    )  # fmt: skip
    if keep is not None:
        from bayes_attn.io import write_atomic

        idata["posterior"].attrs["llc_point"] = digest
        write_atomic(idata, keep)
    return idata


def _exact_run(problem, seed, progress, keep, draws, burnin, options):
    """:func:`exact_frozen_llc` at the point, at the nβ, γ, prior choice and chains of
    ``options``, ``draws`` draws per chain after ``burnin`` (None: its default)."""
    model, args, kw, w_star, _ = problem
    shared = {
        k: options[k] for k in ("nbeta", "gamma", "include_prior", "num_chains") if k in options
    }
    if burnin is not None:
        shared["num_burnin"] = burnin
    checkpoint = None
    if keep is not None:
        checkpoint = Path(keep).with_name(Path(keep).stem + "_exact.ckpt.npz")
    if progress:
        target = frozen_llc_target(
            model, w_star, model_args=args, model_kwargs=_full_batch(kw),
            **{k: v for k, v in shared.items() if k not in ("num_chains", "num_burnin")},
        )  # fmt: skip
        chains = shared.get("num_chains", EXACT_SETTINGS.num_chains)
        steps = shared.get("num_burnin", EXACT_SETTINGS.num_burnin) + draws
        _announce_run(f"exact llc by NUTS, {chains} chains x {steps} steps", target, steps,
                      chains, (7, 127), True)  # fmt: skip
    return exact_frozen_llc(
        model, w_star, model_args=args, model_kwargs=_full_batch(kw), num_draws=draws,
        seed=seed, progress=progress, checkpoint=checkpoint, **shared,
    )  # fmt: skip


def llc_point(
    level: str,
    task,
    hyper,
    P: int,
    activation: str,
    *,
    d_model: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    phase: str | None = None,
    exact: bool = False,
    exact_only: bool = False,
    exact_draws: int = 1000,
    exact_burnin: int | None = None,
    problem: tuple | None = None,
    progress: bool = True,
    keep=None,
    **options,
):
    """The LLC at one point: ``(idata or None, exact_idata or None)``.

    ``options`` go to :func:`~bayes_attn.inference.llc.run_llc` (sampler, chains, draws, burn-in,
    step size, nβ, γ, include_prior). ``exact`` (``network`` only) adds
    :func:`~bayes_attn.inference.llc.exact_frozen_llc` at the same nβ, γ, prior choice and
    chains, with ``exact_draws`` draws per chain after ``exact_burnin`` (None: its default);
    ``exact_only`` runs that alone (``idata`` is None). ``phase`` (softmax: ``"weak"`` or
    ``"strong"``) takes w* from that phase's start (:func:`llc_problem`); ``problem``, the tuple
    :func:`llc_problem` returned for these arguments, saves finding w* again. ``progress``
    announces each run's cost before it starts (:func:`bayes_attn.progress.announce`: one timed
    gradient of its target times the gradients it takes) and shows its progress bar.

    ``keep`` (a path: the CLI's ``--out``) keeps finished stages: the run is written there as
    soon as it finishes, with the digest of this call's arguments in its attrs (``llc_point``),
    and a call with the same arguments reads it back instead of running it again; the exact run
    keeps its state in ``<keep stem>_exact.ckpt.npz`` every 30 s of steps
    (:func:`~bayes_attn.inference.llc.exact_frozen_llc`'s ``checkpoint``; the run, SMC apart, in
    ``<keep stem>_<sampler>.ckpt.npz``), so that a rerun after an interrupt resumes it,
    and refuses one made with other arguments.
    """
    if (exact or exact_only) and level != "network":
        raise ValueError("exact: the exact LLC is the frozen-embedding network's (level network)")
    if problem is None:
        problem = llc_problem(level, task, hyper, P, activation, d_model=d_model, seed=seed,
                              batch_size=batch_size, phase=phase)  # fmt: skip
    idata = None
    if not exact_only:
        opts = {**options, **({"phase": phase} if phase is not None else {})}
        digest = _point_digest(level, task, hyper, P, activation, d_model, seed, batch_size, opts)
        idata = _sampled_run(problem, seed, progress, keep, digest, options)
    if not (exact or exact_only):
        return idata, None
    return idata, _exact_run(problem, seed, progress, keep, exact_draws, exact_burnin, options)


def calibrate_llc(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    step_sizes=(1e-6, 2e-6, 4e-6, 8e-6),
    nbetas=(None,),
    burnin: int = 0,
    min_acceptance: float = LIMITS.min_acceptance,
    num_seeds: int = 1,
    seed: int | None = None,
    **options,
) -> xr.Dataset:
    """λ̂ on a grid of (nβ, ε), each ε the half of the next, and the verdict per nβ.

    Every cell is ``num_seeds`` :func:`~bayes_attn.inference.llc.run_llc` runs (``options``:
    sampler, chains, draws, burn-in, γ, ...) with the seeds ``seed``, ``seed + 1``, ... (the same
    seeds in every cell). Returns ``llc``, ``mcse``, ``rhat`` and ``acceptance`` over (``nbeta``,
    ``step_size``) with the verdict of :func:`~bayes_attn.analysis.llc.calibration_verdict`
    (``chosen``, ``passes``): the largest step whose exact MALA acceptance is at least
    ``min_acceptance`` and whose λ̂ agrees with that at half the step within 2 combined MCSE.
    ``nbetas`` may hold None (n / log n).

    With one seed ``mcse`` is the run's own (ArviZ's ESS), which understates the error of a
    slowly mixing chain (docs/validation.md: by about 30 % on the d = 64 network). With
    ``num_seeds`` ≥ 3 ``llc`` is the seeds' mean and ``mcse`` the larger of the seeds' standard
    error (their spread / √k) and the runs' own combined MCSE; ``llc_seeds`` keeps each run's
    value. ``llc_extrapolated`` (with ``llc_extrapolated_se``), over the same grid, is
    2 λ̂(ε/2) − λ̂(ε) at every step ε with a half (NaN at the smallest): the step bias is first
    order in ε, so this removes it, at twice the error of the half step.
    """
    steps = sorted(check_positive("step_sizes", s) for s in step_sizes)
    num_seeds = check_int("num_seeds", num_seeds, 1)
    base = resolve_key(None, seed)[1]
    shape = (len(nbetas), len(steps))
    cells = {k: np.full(shape, np.nan) for k in ("llc", "mcse", "rhat", "acc")}
    per_seed = np.full((*shape, num_seeds), np.nan)
    nb_values = []
    for i, nbeta in enumerate(nbetas):
        for j, eps in enumerate(steps):
            est = [
                llc_estimate(run_llc(
                    model, w_star, model_args=model_args, model_kwargs=model_kwargs,
                    step_size=eps, nbeta=nbeta, seed=base + s, **options,
                ), burnin=burnin)
                for s in range(num_seeds)
            ]  # fmt: skip
            vals = np.array([e.llc_mean for e in est])
            own = math.sqrt(sum(e.mcse**2 for e in est)) / num_seeds
            spread = vals.std(ddof=1) / math.sqrt(num_seeds) if num_seeds >= 3 else 0.0
            per_seed[i, j] = vals
            cells["llc"][i, j], cells["mcse"][i, j] = vals.mean(), max(own, spread)
            cells["rhat"][i, j] = max(e.rhat for e in est)
            cells["acc"][i, j] = np.mean([e.acceptance for e in est])
        nb_values.append(est[0].nbeta)
    dims = ("nbeta", "step_size")
    table = xr.Dataset(
        {
            "llc": (dims, cells["llc"]),
            "mcse": (dims, cells["mcse"]),
            "rhat": (dims, cells["rhat"]),
            "acceptance": (dims, cells["acc"]),
            "llc_seeds": ((*dims, "seed"), per_seed),
        },
        coords={"nbeta": nb_values, "step_size": steps, "seed": base + np.arange(num_seeds)},
    )
    verdict = calibration_verdict(table, min_acceptance=min_acceptance)
    llc, se = cells["llc"], cells["mcse"]
    extra, extra_se = np.full(shape, np.nan), np.full(shape, np.nan)
    extra[:, 1:] = 2 * llc[:, :-1] - llc[:, 1:]  # the steps are sorted: [:, j-1] is the half of j
    extra_se[:, 1:] = np.hypot(2 * se[:, :-1], se[:, 1:])
    return table.assign(
        chosen=verdict["chosen"], passes=verdict["passes"],
        llc_extrapolated=(dims, extra), llc_extrapolated_se=(dims, extra_se),
    ).assign_attrs(
        kind="llc calibration", min_acceptance=min_acceptance, burnin=burnin, num_seeds=num_seeds
    )  # fmt: skip
