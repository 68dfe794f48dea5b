"""Adam training curves of the two-layer induction network: the plateau and the jump.

At a fixed P, :func:`training_point` trains the two-layer network
(:func:`~bayes_attn.inference.adam.train_adam` on an
:class:`~bayes_attn.induction.InductionTask`) on the sweep's in-context Markov source and on the
same source with doubly-stochastic chains, and records along training both layers' order
parameters, the held-out loss and the KL to each reference strategy. :func:`plateau` reads the
plateau off a held-out loss curve, against the references measured on the same held-out set:

- ``entry_step``, the first recorded step at which the loss is below the midpoint of the uniform
  and in-context-unigram losses (the unigram stage is reached);
- ``jump_step``, the first recorded step below the midpoint of the unigram and bigram losses (the
  induction head has formed);
- ``plateau_steps = jump_step - entry_step`` (NaN where the loss never jumps).

Edelman et al. report that the plateau shortens with doubly-stochastic chains, whose unigram
statistics are uninformative (the stationary law is uniform), so the unigram stage is no lure.

With ``llc_every = k > 0`` a point also estimates the local learning coefficient at the weights
w(t) of every k-th recorded step (:func:`llc_along_training`): SGLD
(:func:`~bayes_attn.inference.llc.run_llc`) on
:func:`~bayes_attn.models.two_layer.two_layer_network_model`, the network Adam trains, on its
training set, localized at w(t) with the defaults of
:class:`~bayes_attn.inference.llc_settings.LLCSettings` (γ = 100, nβ = n / log n with n = P, ε
by the curvature rule 0.1 / h_max), as Hoogland et al. do along training. w(t) is not a minimum
of L_n (Adam is still moving and its minibatch noise keeps it off one), so the estimate carries
the gradient term of docs/theory.md ("Not a critical point"), which lowers it and can make it
negative; ``llc_grad_norm`` records |∇L_n(w(t))|.

References
----------
docs/theory.md §12-13; Edelman et al., "The evolution of statistical induction heads" (NeurIPS
2024), Sec. 4; J. Hoogland, G. Wang, M. Farrugia-Roberts, L. Carroll, S. Wei and D. Murfet, "The
developmental landscape of in-context learning" (2024), Sec. 4; docs/validation.md, "The
induction head: networks and training".
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bayes_attn._validation import check_bool, check_int, check_nonnegative
from bayes_attn.induction import SCORES  # the order parameters sgld_check summarises
from bayes_attn.inference.adam_nets import TWO_LAYER_SERIES

__all__ = [
    "DESCRIPTIONS",
    "TRAINING_DEFAULTS",
    "check_training",
    "llc_along_training",
    "plateau",
    "SGLD_DEFAULTS",
    "check_sgld",
    "sgld_check",
    "sgld_point",
    "training_point",
]

#: the options of the ``induction_training`` sweep kind, with their defaults
TRAINING_DEFAULTS = {
    "d_model": 64,
    "lr": 1e-2,
    "max_steps": 1200,
    "chunk": 50,
    "batch_size": 64,  # sequences per Adam step (0: the full batch)
    "num_test": 300,
    "train_embeddings": True,
    "doubly_stochastic": [0, 1],  # 1: doubly-stochastic chains (the file's dim: False/True)
    "llc_every": 0,  # k > 0: the LLC at w(t) of every k-th recorded step (0: none)
    "llc_chains": 4,  # its SGLD chains, draws and burn-in (LLCSettings' defaults otherwise)
    "llc_draws": 200,
    "llc_burnin": 0,
    "llc_sampler": "sgld",  # or "rmsprop" (RMSProp-preconditioned SGLD)
}

#: the LLC samplers the kind runs on the network (minibatch Langevin)
TRAINING_LLC_SAMPLERS = ("sgld", "rmsprop")

#: the two-layer record's series this kind writes (all but the objective)
_SERIES = tuple(name for name in TWO_LAYER_SERIES if name != "objective")
_REFS = ("loss_bigram", "loss_unigram", "loss_uniform")

#: the variables an ``induction_training`` sweep writes whose meaning here differs from the one
#: table, :data:`bayes_attn.experiments.kinds.DESCRIPTIONS` (which describes the rest)
DESCRIPTIONS = {
    "train_loss": ("1", "training loss per target position along training"),
    "test_loss": ("1", "held-out loss per target position along training"),
    "uniform1": ("1", "layer 1: L x mean attention off the previous-token line (held-out)"),
    **{
        f"kl_{ref}": ("nats", f"held-out mean KL({ref} || network's clipped output)")
        for ref in ("bigram", "unigram", "uniform")
    },
    "loss_bigram": ("1", "held-out loss of the Dirichlet bigram on the same held-out set"),
    "llc": ("1", "LLC by SGLD localized at Adam's weights w(t) (nan where not estimated)"),
    "llc_mcse": ("1", "Monte Carlo standard error of llc at w(t) (from the ESS)"),
    "llc_rhat": ("1", "R-hat of the per-draw LLC at w(t) across its SGLD chains"),
    "llc_grad_norm": ("1", "|grad L_n(w(t))|, L_n per sequence: w(t) is no critical point"),
    "llc_acceptance": ("1", "mean exact full-batch MALA acceptance of the LLC's SGLD steps"),
}

#: the per-snapshot variables of ``llc_every`` (NaN at the records without an estimate)
_LLC_VARS = ("llc", "llc_mcse", "llc_rhat", "llc_grad_norm", "llc_acceptance", "llc_step")


def plateau(steps, loss, loss_uniform: float, loss_unigram: float, loss_bigram: float) -> dict:
    """The plateau of one held-out loss curve (``loss`` at ``steps``): ``{"entry_step",
    "jump_step", "plateau_steps"}``, the first steps below the uniform-unigram and the
    unigram-bigram midpoints and their difference (NaN where a crossing never happens)."""
    steps, loss = np.asarray(steps, dtype=float), np.asarray(loss, dtype=float)

    def first_below(level: float) -> float:
        hit = np.flatnonzero(loss <= level)
        return float(steps[hit[0]]) if hit.size else float("nan")

    entry = first_below(0.5 * (loss_uniform + loss_unigram))
    jump = first_below(0.5 * (loss_unigram + loss_bigram))
    return {"entry_step": entry, "jump_step": jump, "plateau_steps": jump - entry}


def check_training(cfg, options: dict) -> dict:
    """The kind needs an in-context Markov source (the induction kinds' rule,
    :func:`~bayes_attn.experiments.induction.check_induction`); ``doubly_stochastic`` is a list
    of 0/1 flags."""
    from bayes_attn.experiments.induction import check_induction

    options = check_induction(cfg, options)
    flags = options["doubly_stochastic"]
    if not isinstance(flags, list | tuple) or not flags or any(f not in (0, 1) for f in flags):
        raise ValueError(f"doubly_stochastic must be a list of 0 and 1 flags, got {flags!r}")
    options["doubly_stochastic"] = [int(f) for f in flags]
    for name in ("d_model", "max_steps", "chunk", "num_test", "llc_chains", "llc_draws"):
        check_int(name, options[name], 1)
    for name in ("batch_size", "llc_every", "llc_burnin"):
        check_int(name, options[name], 0)
    if options["llc_sampler"] not in TRAINING_LLC_SAMPLERS:
        raise ValueError(
            f"llc_sampler must be one of {TRAINING_LLC_SAMPLERS}, got {options['llc_sampler']!r}"
        )
    return options


def training_point(cfg, pt, task, hyper) -> dict:
    """One grid point: Adam on the two-layer network at the point's (activation, L, V, P), seed
    ``pt["seed"]``, once per entry of ``doubly_stochastic``; the curves have dims
    (doubly_stochastic, chunk)."""
    from bayes_attn.induction import InductionTask
    from bayes_attn.inference.adam import AdamSettings, train_adam
    from bayes_attn.tokens import parse_tokens

    o = cfg.options
    settings = AdamSettings(
        lr=o["lr"],
        max_steps=o["max_steps"],
        patience=o["max_steps"],  # never stops early: every curve has every record
        chunk=o["chunk"],
        batch_size=o["batch_size"] or None,
        num_test=o["num_test"],
        train_embeddings=o["train_embeddings"],
    )
    src = parse_tokens(cfg.tokens)
    curves, llcs = [], []
    keep = _snapshot_steps(settings, o["llc_every"]) if o["llc_every"] else None
    for flag in o["doubly_stochastic"]:
        t = InductionTask(task.L, task.V, dataclasses.replace(src, doubly_stochastic=bool(flag)))
        r = train_adam(t, hyper, pt["activation"], o["d_model"], int(pt["P"]), members=1,
                       seed=int(pt["seed"]), settings=settings, keep_params_at=keep,
                       progress=False)  # fmt: skip
        curves.append(r.isel(member=0))
        if o["llc_every"]:  # the snapshots' weights are this run's (keep_params_at)
            llcs.append(llc_along_training(t, hyper, pt["activation"], o["d_model"], int(pt["P"]),
                                           seed=int(pt["seed"]), settings=settings,
                                           every=o["llc_every"], fit=r, **_llc_options(o)))  # fmt: skip
    # the source axis is labelled by its flags (files before 2026-12-07: by the list's index)
    ds = {"doubly_stochastic": np.array([bool(f) for f in o["doubly_stochastic"]])}
    out = {"train_step": (("chunk",), curves[0].step.values.astype(float))}
    for name in _SERIES:
        out[name] = (("doubly_stochastic", "chunk"), np.stack([c[name].values for c in curves]), ds)
    for name in _REFS:
        out[name] = (("doubly_stochastic",), np.array([c.attrs[name] for c in curves]), ds)
    marks = [
        plateau(c.step.values, c.test_loss.values, *(c.attrs[k] for k in _REFS[::-1]))
        for c in curves
    ]
    for name in ("entry_step", "jump_step", "plateau_steps"):
        out[name] = (("doubly_stochastic",), np.array([m[name] for m in marks]), ds)
    for name in _LLC_VARS if llcs else ():
        out[name] = (("doubly_stochastic", "chunk"), np.stack([r[name] for r in llcs]), ds)
    return out


def _llc_options(o: dict) -> dict:
    """The :class:`~bayes_attn.inference.llc_settings.LLCSettings` fields the kind's options set."""
    return {"num_chains": o["llc_chains"], "num_draws": o["llc_draws"],
            "num_burnin": o["llc_burnin"], "sampler": o["llc_sampler"]}  # fmt: skip


def _snapshot_steps(settings, every: int) -> list[int]:
    """The recorded steps of every ``every``-th record of a run with ``settings`` (train_adam
    records after each chunk, the last rounded up to a whole chunk)."""
    chunk = min(settings.chunk, settings.max_steps)
    records = -(-settings.max_steps // chunk)
    return [(i + 1) * chunk for i in range(every - 1, records, every)]


def _training_tokens(task, P: int, seed: int):
    """The training set ``train_adam(..., P, members=1, seed=seed)`` draws (its ``_datasets``)."""
    import jax

    from bayes_attn.inference.adam import adam_keys

    keys = jax.random.split(adam_keys(seed=seed).data, 1)
    return jax.vmap(lambda k: task.sample(k, P))(keys)[0]


def llc_along_training(task, hyper, activation: str, d_model: int, P: int, *, seed: int,
                       settings, every: int, fit=None, **llc) -> dict:  # fmt: skip
    """The LLC at Adam's weights w(t) of every ``every``-th record of the run
    ``train_adam(task, hyper, activation, d_model, P, members=1, seed=seed, settings=settings)``.

    The weights w(t) are that one run's at its records (``train_adam``'s ``keep_params_at``):
    ``fit``, the run's result kept at the snapshots' steps, or (None) the run trained here once.
    Each snapshot runs :func:`~bayes_attn.inference.llc.run_llc` (SGLD, ``llc``: fields of
    :class:`~bayes_attn.inference.llc_settings.LLCSettings`, its defaults otherwise: γ = 100,
    nβ = n / log n, the curvature step) on
    :func:`~bayes_attn.models.two_layer.two_layer_network_model` with the run's training set
    (held embeddings stay held: the model's ``embeddings``), localized at w(t), seeded by
    ``fold_in(run_key(seed), step)``. Returns ``{name: (records,)}`` of ``llc``, ``llc_mcse``,
    ``llc_rhat``, ``llc_grad_norm`` (|∇L_n(w(t))|), ``llc_acceptance``, ``llc_step`` and
    ``test_loss`` (the run's record at w(t)), NaN at the records without a snapshot.
    """
    import jax

    from bayes_attn.analysis.llc import llc_estimate
    from bayes_attn.inference.adam import train_adam
    from bayes_attn.inference.llc import run_llc
    from bayes_attn.keys import run_key
    from bayes_attn.models.two_layer import two_layer_network_model

    every = check_int("llc_every", every, 1)
    chunk = min(settings.chunk, settings.max_steps)
    records = -(-settings.max_steps // chunk)  # train_adam rounds up to whole chunks
    snapshots = _snapshot_steps(settings, every)
    if fit is None:
        fit = train_adam(task, hyper, activation, d_model, P, members=1, seed=seed,
                         settings=settings, keep_params_at=snapshots, progress=False)  # fmt: skip
    tokens = _training_tokens(task, P, seed)
    out = {name: np.full(records, np.nan) for name in (*_LLC_VARS, "test_loss")}
    for recorded in snapshots:
        i, step = recorded // chunk - 1, min(recorded, settings.max_steps)  # step: the key's fold
        at = fit.isel(member=0).sel(params_step=recorded)
        w = {n: np.asarray(at[f"{n}_at"].values) for n in ("W_emb", "p", "W_G1", "W_G2", "W_O")}
        test_loss = float(at.test_loss.sel(step=recorded, method="pad"))  # stopped: held
        kw = {}
        if not settings.train_embeddings:
            kw["embeddings"] = (w.pop("W_emb"), w.pop("p"))
        idata = run_llc(two_layer_network_model, w, model_args=(task, hyper, tokens, activation,
                        d_model), model_kwargs=kw, key=jax.random.fold_in(run_key(None, seed),
                        step), **llc)  # fmt: skip
        e = llc_estimate(idata)
        got = (e.llc_mean, e.mcse, e.rhat, e.grad_norm, e.acceptance, e.step_size, test_loss)
        for name, value in zip((*_LLC_VARS, "test_loss"), got, strict=True):
            out[name][i] = value
    return out


# --------------------------------------------------------------------------------------------------
# SGLD on the two-layer network, started from Adam (issue 43: "SGLD of the network at d = 256")


def sgld_check(
    task,
    hyper,
    P: int,
    activation: str = "softmax",
    *,
    seed: int = 0,
    d_model: int = 256,
    adam_steps: int = 1000,
    num_chains: int = 2,
    num_warmup: int = 500,
    num_samples: int = 1000,
    thinning: int = 10,
    step_size: float | None = None,
    preconditioner: str | None = None,
    integrate_readout: bool = False,
) -> dict:
    """SGLD (:func:`~bayes_attn.inference.sgld.run_sgld`, full batch) on
    :func:`~bayes_attn.models.two_layer.two_layer_network_model` at width ``d_model``, on the
    dataset :func:`~bayes_attn.experiments.induction.induction_map` draws for ``seed`` (so its
    kernel-limit MAP is the comparison), every chain started at an Adam solution of that dataset
    (``adam_steps`` steps, minibatches of 128). ``step_size`` defaults to the protocol's curvature
    rule at that start (:func:`~bayes_attn.inference.members.sgld_step_size`:
    min(5e-4 / d, 0.1 / the Hessian's largest eigenvalue)). ``preconditioner="site"``: a fixed
    diagonal G, one scale per site, and the step from the same rule in the coordinates it
    whitens (:func:`~bayes_attn.inference.sgld_precondition.site_preconditioner`).
    ``integrate_readout=True``: the chain runs on the network's posterior with W_O integrated
    out exactly (``two_layer_network_model(integrate_readout=True)``, the design's products in
    blocks), the same law for the other weights without the readout's stiff directions. Returns
    ``{name: float}``: each score's posterior mean, its spread over the draws, R-hat and bulk ESS
    (ArviZ), the Adam start's scores, R-hat and bulk ESS of the potential U (``U_rhat``,
    ``U_ess``), the sampler's mean |grad U| and the CPU ``seconds`` of the SGLD run."""
    import time

    from bayes_attn.inference.adam import train_adam
    from bayes_attn.inference.members import sgld_step_size
    from bayes_attn.inference.potential import flat_potential
    from bayes_attn.inference.sgld import run_sgld
    from bayes_attn.inference.sgld_precondition import site_preconditioner
    from bayes_attn.keys import dataset_key, run_key
    from bayes_attn.models.two_layer import BLOCK, two_layer_network_model

    P = check_int("P", P, 1)
    integrate_readout = check_bool("integrate_readout", integrate_readout)
    if preconditioner not in (None, "site"):
        raise ValueError(f"preconditioner must be None or 'site', got {preconditioner!r}")
    tokens = task.sample(dataset_key(run_key(None, seed)), P)
    fit = train_adam(task, hyper, activation, d_model, P, members=1, seed=seed,
                     tokens=np.asarray(tokens)[None], max_steps=adam_steps, patience=adam_steps,
                     batch_size=128, return_params=True, progress=False)  # fmt: skip
    last = fit.isel(member=0, step=-1)
    names = ("W_emb", "p", "W_G1", "W_G2") + (() if integrate_readout else ("W_O",))
    init = {n: np.repeat(fit[n].values, num_chains, axis=0) for n in names}
    args = (task, hyper, tokens, activation, d_model)
    kwargs = {"integrate_readout": True, "block": BLOCK} if integrate_readout else {}
    pot = flat_potential(two_layer_network_model, args, kwargs)
    start = pot.ravel({n: init[n][0] for n in names})[None]
    G = None
    if preconditioner == "site":  # G and the step from the curvatures at the Adam solution
        G, rule = site_preconditioner(pot, start[0])
        step_size = rule if step_size is None else step_size
    elif step_size is None:  # the curvature rule at the Adam solution (the protocol's)
        step_size = sgld_step_size(lambda m, z: pot.U(z), start, d_model)
    eps, t0 = float(step_size), time.process_time()
    idata = run_sgld(two_layer_network_model, model_args=args, model_kwargs=kwargs,
                     num_chains=num_chains, num_warmup=num_warmup, num_samples=num_samples,
                     thinning=thinning, step_size=eps, seed=seed, init_params=init,
                     preconditioner=G, progress=False)  # fmt: skip
    out = _sgld_summary(idata, last)
    return {"step_size": eps, "seconds": time.process_time() - t0, **out}


def _sgld_summary(idata, last) -> dict:
    """What :func:`sgld_check` reports of its run ``idata`` beside the Adam start ``last``: each
    score's mean, spread, R-hat and bulk ESS (ArviZ), U's R-hat and ESS, the mean |grad U|."""
    import arviz as az

    post, U = idata.posterior, idata.sample_stats.potential_energy.values
    rhat, ess = az.rhat(post[list(SCORES)]), az.ess(post[list(SCORES)])
    out = {"grad_norm": float(idata.sample_stats.grad_norm.mean()),
           "U_rhat": float(az.rhat(U)), "U_ess": float(az.ess(U))}  # fmt: skip
    for name in SCORES:
        out |= {name: float(post[name].mean()), f"{name}_sd": float(post[name].std()),
                f"{name}_rhat": float(rhat[name]), f"{name}_ess": float(ess[name]),
                f"{name}_adam": float(last[name])}  # fmt: skip
    out["adam_test_loss"] = float(last.test_loss)
    return out


#: the options of the ``induction_sgld`` sweep kind (:func:`sgld_check`'s), with their defaults:
#: the network at d = 256 from an Adam start, site-preconditioned SGLD on its posterior with the
#: readout integrated out (the sampler that mixes: docs/validation.md, "SGLD on the network")
SGLD_DEFAULTS = {
    "d_model": 256,
    "adam_steps": 1000,
    "num_chains": 2,
    "num_warmup": 500,
    "num_samples": 1500,
    "thinning": 10,
    "step_size": 0.0,  # 0: the curvature rule at the Adam start
    "preconditioner": "site",  # or "none"
    "integrate_readout": True,
}


def check_sgld(cfg, options: dict) -> dict:
    """An in-context Markov source (the induction kinds' rule,
    :func:`~bayes_attn.experiments.induction.check_induction`) and :func:`sgld_check`'s options,
    each refused naming it."""
    from bayes_attn.experiments.induction import check_induction

    options = check_induction(cfg, options)
    for name in ("d_model", "adam_steps", "num_chains", "num_samples", "thinning"):
        check_int(name, options[name], 1)
    check_int("num_warmup", options["num_warmup"], 0)
    check_nonnegative("step_size", options["step_size"], "0: the curvature rule")
    if options["preconditioner"] not in ("site", "none"):
        raise ValueError(
            f"preconditioner must be 'site' or 'none', got {options['preconditioner']!r}"
        )
    check_bool("integrate_readout", options["integrate_readout"])
    return options


def sgld_point(cfg, pt, task, hyper) -> dict:
    """One ``induction_sgld`` point: :func:`sgld_check` at the point's P, activation and seed
    (its dataset the MAP sweep's), every summary a scalar."""
    from bayes_attn.induction import InductionTask

    o = cfg.options
    out = sgld_check(InductionTask(task.L, task.V, task.tokens), hyper, pt["P"], pt["activation"],
                     seed=pt["seed"], d_model=o["d_model"], adam_steps=o["adam_steps"],
                     num_chains=o["num_chains"], num_warmup=o["num_warmup"],
                     num_samples=o["num_samples"], thinning=o["thinning"],
                     step_size=o["step_size"] or None,
                     preconditioner=None if o["preconditioner"] == "none" else "site",
                     integrate_readout=o["integrate_readout"])  # fmt: skip
    return {k: ((), np.float64(v)) for k, v in out.items()}
