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

import math
import time

import jax
import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive
from bayes_attn.analysis.llc import calibration_verdict, llc_estimate
from bayes_attn.experiments.coexistence import PHASES, phase_starts
from bayes_attn.inference import resolve_key
from bayes_attn.inference.llc import (
    exact_frozen_llc,
    frozen_llc_target,
    llc_schedule,
    llc_target,
    run_llc,
)
from bayes_attn.models.levels import (
    EMBEDDINGS_FOLD,
    ORDER_PARAMETERS,
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

    opts = {k: v for k, v in options.items() if k != "progress_bar"}
    return digest("llc_point/1", level, task, hyper, P, activation, d_model, seed, batch_size, opts)


def _kept_run(path, key):
    """The run that ``path`` holds when it was made with the same arguments (``key``), else None."""
    from pathlib import Path

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
    exact: bool = False,
    exact_draws: int = 1000,
    progress: bool = True,
    keep=None,
    **options,
):
    """The LLC at one point: ``(idata, exact_idata or None)``.

    ``options`` go to :func:`~bayes_attn.inference.llc.run_llc` (sampler, chains, draws, burn-in,
    step size, nβ, γ, include_prior). ``exact`` (``network`` only) adds
    :func:`~bayes_attn.inference.llc.exact_frozen_llc` at the same nβ, γ and prior choice, with
    ``exact_draws`` draws per chain. ``progress`` announces each run's cost before it starts
    (:func:`bayes_attn.progress.announce`: one timed gradient of its target times the gradients
    it takes) and shows its progress bar.

    ``keep`` (a path: the CLI's ``--out``) keeps finished stages: the run is written there as
    soon as it finishes, with the digest of this call's arguments in its attrs (``llc_point``),
    and a call with the same arguments reads it back instead of running it again; the exact run
    keeps its state in ``<keep stem>_exact.ckpt.npz`` every 30 s of steps
    (:func:`~bayes_attn.inference.llc.exact_frozen_llc`'s ``checkpoint``; a NUTS run, ``sampler
    "nuts"``, in ``<keep stem>_nuts.ckpt.npz``), so that a rerun after an interrupt resumes it,
    and refuses one made with other arguments.
    """
    from pathlib import Path

    if exact and level != "network":
        raise ValueError("exact: the exact LLC is the frozen-embedding network's (level network)")
    model, args, kw, w_star, n = llc_problem(
        level, task, hyper, P, activation, d_model=d_model, seed=seed, batch_size=batch_size
    )
    key = _point_digest(level, task, hyper, P, activation, d_model, seed, batch_size, options)
    idata = _kept_run(keep, key)
    if idata is not None:
        say("llc: %s holds this run (same arguments); kept", keep, enabled=progress)
    else:
        if progress:
            target = llc_target(
                model, w_star, model_args=args, model_kwargs=kw, n=n,
                **{k: options[k] for k in ("nbeta", "gamma", "include_prior") if k in options},
            )  # fmt: skip
            import inspect

            o = {k: p.default for k, p in inspect.signature(run_llc).parameters.items()}
            o.update(options)
            _, burnin = llc_schedule(target, o["sampler"], o["step_size"], o["num_burnin"])
            steps = burnin + o["num_draws"] * o["thinning"]
            per_step = (7, 127) if o["sampler"] == "nuts" else (1, 2)
            _announce_run(f"llc by {o['sampler']}, {o['num_chains']} chains x {steps} steps",
                          target, steps, o["num_chains"], per_step, True)  # fmt: skip
        nuts = options.get("sampler") == "nuts" and keep is not None
        ckpt = Path(keep).with_name(Path(keep).stem + "_nuts.ckpt.npz") if nuts else None
        idata = run_llc(
            model, w_star, model_args=args, model_kwargs=kw, n=n, seed=seed,
            progress_bar=progress, checkpoint=ckpt, **options,
        )  # fmt: skip
        if keep is not None:
            from bayes_attn.io import write_atomic

            idata["posterior"].attrs["llc_point"] = key
            write_atomic(idata, keep)
    if not exact:
        return idata, None
    shared = {
        k: options[k] for k in ("nbeta", "gamma", "include_prior", "num_chains") if k in options
    }
    checkpoint = None
    if keep is not None:
        checkpoint = Path(keep).with_name(Path(keep).stem + "_exact.ckpt.npz")
    if progress:
        target = frozen_llc_target(
            model, w_star, model_args=args, model_kwargs=_full_batch(kw),
            **{k: v for k, v in shared.items() if k != "num_chains"},
        )  # fmt: skip
        import inspect

        defaults = inspect.signature(exact_frozen_llc).parameters
        chains = shared.get("num_chains", defaults["num_chains"].default)
        steps = defaults["num_burnin"].default + exact_draws
        _announce_run(f"exact llc by NUTS, {chains} chains x {steps} steps", target, steps,
                      chains, (7, 127), True)  # fmt: skip
    ex = exact_frozen_llc(
        model, w_star, model_args=args, model_kwargs=_full_batch(kw), num_draws=exact_draws,
        seed=seed, progress_bar=progress, checkpoint=checkpoint, **shared,
    )  # fmt: skip
    return idata, ex


def calibrate_llc(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    step_sizes=(1e-6, 2e-6, 4e-6, 8e-6),
    nbetas=(None,),
    burnin: int = 0,
    min_acceptance: float = 0.9,
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


def _ti_nodes(nbeta: float, scale: float, num_nodes: int):
    """Gauss-Legendre nodes in u = log(1 + t / scale) on [0, log(1 + nβ / scale)]: the data
    weights t and the weights of ∫ g(t) dt = ∫ g(t) (scale + t) du."""
    x, w = np.polynomial.legendre.leggauss(num_nodes)
    top = math.log1p(nbeta / scale)
    u = (x + 1) * top / 2
    t = scale * np.expm1(u)
    return t, w * top / 2 * (scale + t)


def _ti_ladder(run_one, nbeta, scale, num_nodes, key, burnin, progress=False):
    """λ̂ and its MCSE at the nodes of one Gauss-Legendre rule, and the integral
    ∫_0^nβ (E_t[L_n] - L_n(w*)) dt = ∫ λ̂(t)/t dt with its standard error (independent runs);
    last, :func:`_node_order` of the nodes."""
    t, w = _ti_nodes(nbeta, scale, num_nodes)
    est, orders = [], []
    for i, ti in enumerate(t):
        start = time.perf_counter()
        run = run_one(float(ti), jax.random.fold_in(key, i))
        est.append(llc_estimate(run, burnin=burnin))
        orders.append(_node_order(run))
        say("llc free energy: node %d of %d, t = %.4g: llc %.4g ± %.2g, R-hat %.3f%s (%.0f s)",
            i + 1, num_nodes, ti, est[-1].llc_mean, est[-1].mcse, est[-1].rhat,
            _order_line(orders[-1]), time.perf_counter() - start, enabled=progress)  # fmt: skip
    llc = np.array([e.llc_mean for e in est])
    se = np.array([e.mcse for e in est])
    rhat = np.array([e.rhat for e in est])
    integral = float(np.sum(w * llc / t))
    se_int = float(np.sqrt(np.sum((w * se / t) ** 2)))
    return t, llc, se, rhat, integral, se_int, est[0].init_loss, _stack_orders(orders)


def _node_order(run) -> dict:
    """{name_mean, name_min, name_max} of each order parameter a ladder node's draws record
    (the exact runs' a1/aG or c1/cG): where the node's chains sit, so that a ladder whose path
    crosses a transition shows it. Empty when the run records none."""
    post = az.dataset(run)
    out = {}
    for name in ORDER_PARAMETERS:
        if name in post:
            v = np.asarray(post[name])
            out.update({f"{name}_mean": v.mean(), f"{name}_min": v.min(), f"{name}_max": v.max()})
    return out


def _order_line(order: dict) -> str:
    """``_node_order`` for a progress line: ", aG mean [min, max]" per order parameter."""
    return "".join(f", {n} {order[n + '_mean']:.3f} [{order[n + '_min']:.3f}, "
                   f"{order[n + '_max']:.3f}]" for n in ORDER_PARAMETERS if n + "_mean" in order)  # fmt: skip


def _stack_orders(orders: list[dict]) -> dict:
    """The nodes' :func:`_node_order` as arrays over the nodes (keys every node has)."""
    keys = set.intersection(*(set(o) for o in orders)) if orders else set()
    return {k: np.array([o[k] for o in orders], dtype=float) for k in sorted(keys)}


def _full_batch(model_kwargs: dict) -> dict:
    """The model's keywords without a minibatch: the exact LLC is full-batch."""
    return {k: v for k, v in model_kwargs.items() if k != "batch_size"}


def _base_target(model, w_star, model_args, model_kwargs, nbeta, gamma, include_prior, n, exact):
    """The target at the top of a ladder (its nβ, n, L_n(w*)): with ``exact`` the frozen
    network's (gate only, no pass over the d x d weights, so cheap at any width)."""
    if exact:
        return frozen_llc_target(model, w_star, model_args=model_args,
                                 model_kwargs=_full_batch(model_kwargs), nbeta=nbeta, gamma=gamma,
                                 include_prior=include_prior)  # fmt: skip
    return llc_target(model, w_star, model_args=model_args, model_kwargs=model_kwargs,
                      nbeta=nbeta, gamma=gamma, include_prior=include_prior, n=n)  # fmt: skip


def _node_runner(model, w_star, model_args, model_kwargs, exact, n, vary, fixed, options):
    """``run(value, key)``: one node of a ladder, the run at ``vary`` (``"nbeta"`` or
    ``"gamma"``) = value and the ``fixed`` settings, by :func:`exact_frozen_llc` (``exact``) or
    :func:`run_llc` (whose ``step_size`` in ``options`` may be a function of the value)."""
    if exact:
        full = _full_batch(model_kwargs)

        def run_one(value, key):
            return exact_frozen_llc(model, w_star, model_args=model_args, model_kwargs=full,
                                    **fixed, **{vary: value}, key=key, **options)  # fmt: skip

        return run_one
    step = options.pop("step_size", 1e-4)

    def run_one(value, key):
        eps = step(value) if callable(step) else step
        return run_llc(model, w_star, model_args=model_args, model_kwargs=model_kwargs, **fixed,
                       **{vary: value}, n=n, key=key, step_size=eps, **options)  # fmt: skip

    return run_one


def llc_free_energy(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
    n: int | None = None,
    num_nodes: int = 8,
    scale: float | None = None,
    exact: bool = False,
    log_z0: float | None = None,
    burnin: int = 0,
    seed: int | None = None,
    key=None,
    progress: bool = False,
    **options,
) -> xr.Dataset:
    """The localized free energy at ``w_star`` by thermodynamic integration of the LLC over the
    temperature (docs/theory.md §11, "The free energy from the LLC").

    With Z(t) = ∫ exp(-t L_n(w) - γ/2 |w - w*|²) [prior] dw and t = nβ the data's weight,
    d log Z / dt = -E_t[L_n], so

        F(nβ) - F(0) = nβ L_n(w*) + ∫_0^nβ λ̂(t)/t dt,     λ̂(t) = t (E_t[L_n] - L_n(w*)).

    The integral runs over u = log(1 + t / scale) by Gauss-Legendre with ``num_nodes`` nodes
    (λ̂(t)(1 + scale/t) is bounded and smooth in u: for a quadratic direction of curvature
    scale it is 1/2), every node one :func:`~bayes_attn.inference.llc.run_llc` (``options``:
    sampler, chains, draws, burn-in, step size; ``step_size`` may be a function of t, since the
    target's curvature grows from γ to nβ H + γ along the ladder) or, with ``exact``,
    :func:`~bayes_attn.inference.llc.exact_frozen_llc`, from its own key. The same integral with
    ``num_nodes // 2`` nodes (more runs) checks the quadrature. ``scale`` defaults to γ (1 when
    γ = 0). F(0) = -log Z(0): -(D/2) log(2π/γ) without the prior (D the flat dimension); with
    the prior it is the user's ``log_z0`` (NaN when not given). ``progress`` logs each node's
    λ̂ and time as it finishes (a ladder of exact runs on the Table-1 network takes minutes a node).

    Returns a Dataset: ``llc``, ``mcse``, ``rhat`` at the nodes ``t`` (dimension ``node``) and at
    the half rule's (``node_half``); scalars ``delta_f`` (F(nβ) - F(0)), ``delta_f_se`` (from the
    MCSEs), ``delta_f_half`` (the half rule), ``quadrature_error`` (|delta_f - delta_f_half|),
    ``log_z0`` and ``free_energy`` (F(nβ) = delta_f - log_z0), ``init_loss``, ``nbeta``; with
    ``exact``, where each node's draws sit: ``aG_mean``, ``aG_min``, ``aG_max`` (and a1's; c1/cG
    for linear attention) at the nodes.
    """
    num_nodes = check_int("num_nodes", num_nodes, 2)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    base = _base_target(model, w_star, model_args, model_kwargs, nbeta, gamma, include_prior, n,
                        exact)  # fmt: skip
    scale = (gamma if gamma > 0 else 1.0) if scale is None else check_positive("scale", scale)
    rng = resolve_key(key, seed)[0]
    run_one = _node_runner(model, w_star, model_args, model_kwargs, exact, base.n, "nbeta",
                           {"gamma": gamma, "include_prior": include_prior}, options)  # fmt: skip

    rule = _ti_ladder(
        run_one, base.nbeta, scale, num_nodes, jax.random.fold_in(rng, 0), burnin, progress
    )
    half = _ti_ladder(
        run_one, base.nbeta, scale, num_nodes // 2, jax.random.fold_in(rng, 1), burnin, progress
    )
    if log_z0 is None:
        log_z0 = math.nan if include_prior else base.x_star.size / 2 * math.log(2 * math.pi / gamma)
    delta_f = base.nbeta * base.init_loss + rule[4]
    delta_half = base.nbeta * base.init_loss + half[4]
    return xr.Dataset(
        {
            "llc": ("node", rule[1]), "mcse": ("node", rule[2]), "rhat": ("node", rule[3]),
            "llc_half": ("node_half", half[1]), "mcse_half": ("node_half", half[2]),
            "delta_f": delta_f, "delta_f_se": rule[5], "delta_f_half": delta_half,
            "quadrature_error": abs(delta_f - delta_half), "log_z0": float(log_z0),
            "free_energy": delta_f - float(log_z0), "init_loss": base.init_loss,
            "nbeta": base.nbeta, **{k: ("node", v) for k, v in rule[7].items()},
        },
        coords={"t": ("node", rule[0]), "t_half": ("node_half", half[0])},
        attrs={"kind": "llc free energy", "gamma": float(gamma), "scale": scale,
               "include_prior": int(include_prior), "exact": int(exact), "burnin": burnin},
    )  # fmt: skip


def localization_free_energy(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
    n: int | None = None,
    num_nodes: int = 4,
    scale: float | None = None,
    exact: bool = False,
    seed: int | None = None,
    key=None,
    progress: bool = False,
    **options,
) -> xr.Dataset:
    """F(γ) - F(0) at fixed nβ: the free energy the localization adds, by thermodynamic
    integration over γ (docs/theory.md §11, "Taking the localization away").

    With Z(g) = ∫ exp(-nβ L_n(w) - g/2 |w - w*|²) [prior] dw, d(-log Z)/dg = ½ E_g|w - w*|², so

        F(γ) - F(0) = ∫_0^γ ½ E_g|w - w*|² dg,

    by Gauss-Legendre on [0, γ] with ``num_nodes`` nodes (and ``num_nodes // 2`` as the check),
    or, with ``scale``, in u = log(1 + g/scale) (a direction held by a precision p has integrand
    ½/(p + g), constant in u when scale = p: pass the prior's precision when γ is above it),
    each node one :func:`~bayes_attn.inference.llc.run_llc` (``options``) or, with ``exact``,
    :func:`~bayes_attn.inference.llc.exact_frozen_llc` (|w - w*|² in the span, the readout's part
    integrated), from its own key. F(0) is the free energy without localization: the target at
    γ = 0 must be proper (the prior, or a loss that holds every direction). Added to
    :func:`llc_free_energy`'s F(nβ) at γ it gives the unlocalized F(nβ); where the γ = 0 target
    has several basins, each node's chains stay in the basin they start in (w*'s) only while the
    barrier holds them: read ``loss_min``/``loss_max`` at the nodes against the other basin's
    loss.

    Returns a Dataset: ``half_sq_distance`` (½ E|w - w*|²), its ``mcse``, ``rhat``, ``loss_min``
    and ``loss_max`` (the draws' extremes of L_n) at the nodes ``g`` (dimension ``node``) and at
    the check rule's (``node_half``); scalars ``delta_f`` (F(γ) - F(0)), ``delta_f_se``,
    ``delta_f_half`` and ``quadrature_error``; with ``exact``, the order parameters' mean, min and
    max at the nodes, as in :func:`llc_free_energy`.
    """
    num_nodes = check_int("num_nodes", num_nodes, 2)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    gamma = check_positive("gamma", gamma)
    base = _base_target(model, w_star, model_args, model_kwargs, nbeta, gamma, include_prior, n,
                        exact)  # fmt: skip
    if scale is not None:
        scale = check_positive("scale", scale)
    rng = resolve_key(key, seed)[0]
    run_one = _node_runner(model, w_star, model_args, model_kwargs, exact, base.n, "gamma",
                           {"nbeta": base.nbeta, "include_prior": include_prior}, options)  # fmt: skip

    def ladder(m, k):
        if scale is None:
            x, wts = np.polynomial.legendre.leggauss(m)
            g, wts = (x + 1) * gamma / 2, wts * gamma / 2
        else:
            g, wts = _ti_nodes(gamma, scale, m)
        rows, orders = [], []
        for i, gi in enumerate(g):
            start = time.perf_counter()
            run = run_one(float(gi), jax.random.fold_in(k, i))
            post = run.posterior
            half = 0.5 * np.asarray(post["distance"]) ** 2
            loss = np.asarray(post["loss"])
            rows.append((half.mean(), float(az.mcse(half)), float(az.rhat(half)), loss.min(),
                         loss.max()))  # fmt: skip
            orders.append(_node_order(run))
            say("localization free energy: node %d of %d, γ = %.4g: ½E|w - w*|² %.4g ± %.2g, "
                "R-hat %.3f%s (%.0f s)", i + 1, m, gi, *rows[-1][:3], _order_line(orders[-1]),
                time.perf_counter() - start, enabled=progress)  # fmt: skip
        cols = [np.array(c, dtype=float) for c in zip(*rows, strict=True)]
        integral = float(np.sum(wts * cols[0]))
        return g, cols, integral, float(np.sqrt(np.sum((wts * cols[1]) ** 2))), orders

    g, cols, delta, se, orders = ladder(num_nodes, jax.random.fold_in(rng, 0))
    g_half, cols_half, delta_half, _, _ = ladder(num_nodes // 2, jax.random.fold_in(rng, 1))
    names = ("half_sq_distance", "mcse", "rhat", "loss_min", "loss_max")
    return xr.Dataset(
        {**{k: ("node", c) for k, c in zip(names, cols, strict=True)},
         **{f"{k}_half": ("node_half", c) for k, c in zip(names[:2], cols_half[:2], strict=True)},
         "delta_f": delta, "delta_f_se": se, "delta_f_half": delta_half,
         "quadrature_error": abs(delta - delta_half), "init_loss": base.init_loss,
         "nbeta": base.nbeta, **{k: ("node", v) for k, v in _stack_orders(orders).items()}},
        coords={"g": ("node", g), "g_half": ("node_half", g_half)},
        attrs={"kind": "localization free energy", "gamma": gamma,
               "scale": math.nan if scale is None else scale,
               "include_prior": int(include_prior), "exact": int(exact)},
    )  # fmt: skip
