"""Adaptive tempered SMC (BlackJAX) over any of the package's NumPyro models, with its log evidence.

What is tempered
----------------
The sampler works in NumPyro's unconstrained space ``u`` (every latent site pushed through
``biject_to(support)``), where the target is ``pi(u) = exp(log_joint(u))``: the model's log joint
plus the log-Jacobians, i.e. minus NumPyro's potential energy. The path runs from a normalised
*reference* ``q`` (lambda = 0) to the target (lambda = 1)::

    log pi_lambda(u) = log q(u) + lambda [log_joint(u) - log q(u)]

so BlackJAX's ``logprior_fn`` is ``log q`` and its ``loglikelihood_fn`` is ``log_joint - log q``.
Because ``q`` is normalised, the product of the normalising-constant increments is the model's
evidence ``Z = int exp(log_joint(u)) du`` (the same number in any parameterisation).

The reference is split site by site from a trace of the model:

* a latent site with a proper prior keeps that prior (its log density at the constrained value plus
  the log-Jacobian of its transform), so for :func:`~bayes_attn.models.kernel_limit_model` (Normal
  prior on M, likelihood = the factor ``evidence``) and
  :func:`~bayes_attn.models.network_model` (Normal priors, Gaussian likelihood ``y``) the path is the
  usual prior-to-posterior one and the increments multiply to the marginal likelihood;
* a latent site with an improper base (``ImproperUniform``: ``c1``, ``cG``, ``aG`` of
  :func:`~bayes_attn.models.order_param_model`, whose whole density is the factor ``action``) gets
  an independent ``Normal(reference_loc, reference_scale)`` in unconstrained space. Its
  log-Jacobian then belongs to the target, not to the reference. The default scale 10 covers every
  mode of the reduced models at the paper's scales (softmax: the whole support of ``aG`` maps to
  |u| < ~6; linear: the a-priori bounds on every minimum, docs/theory.md section 7, give
  |cG| < 5 and |c1 + cG/L| < 6 up to P ~ 3000) while costing only a few extra tempering steps
  (each step gains ~ -log(target_ess) nats of information, 0.1 at the default 0.9, and the volume
  ratio is ~ log(reference_scale / posterior width) per dimension).

Observed sites and ``numpyro.factor`` sites always count as likelihood. For the order-parameter
model the log evidence is therefore ``log int exp(-chi s(c)) dc`` (plus the Jacobian where the
model samples ``aG``), the same normaliser as :func:`bayes_attn.theory.modes`' basin masses
(their ``logsumexp(log_weight)``).

The parts
---------
The sampler is split the way BlackJAX splits its own:

* :mod:`bayes_attn.inference.smc_kernel`: the moves (random-walk Metropolis, HMC), how many of
  them and how big (its docstring, "The mutation"), as BlackJAX-style pieces: ``init`` (one run's
  :class:`~bayes_attn.inference.smc_kernel.RunState`) and ``build_kernel`` (one tempering step,
  reporting a :class:`~bayes_attn.inference.smc_kernel.StepRecord`);
* :mod:`bayes_attn.inference.smc_evidence`: the runs' evidence, its standard error, the runs'
  agreement test, the lineages, the warnings (:func:`smc_problems`) and the tempering table
  (:func:`tempering_steps`), also used by :func:`bayes_attn.inference.basin_evidence`;
* :mod:`bayes_attn.inference.smc_checkpoint`: the checkpoint file of a run;
* :mod:`bayes_attn.inference.smc_progress`: what a run says while it runs (its cost, the bar);
* this module: the driver, :func:`run_smc`: its settings (:class:`SMCSettings`), the runs mapped
  and jitted, the loop over tempering steps, the rejuvenation at lambda = 1, progress,
  checkpoints and the output.

Runs and error bars
-------------------
``num_runs`` (4) independent runs of ``num_particles`` (1000) are made in one call, vectorised over
the run keys (``vmap``; ``lax.map`` when ``batch_size > 0``). ``log_evidence`` is the log of the
mean of the runs' Z and ``log_evidence_se`` the standard deviation of the runs' log Z over
``sqrt(num_runs)``; per run: ``log_evidence_runs``, ``log_evidence_run_se`` (the run's genealogy
estimate), ``num_eve_lineages`` (initial particles with descendants at the end),
``num_tempering_steps``. :func:`run_smc` warns (:class:`SMCWarning`, :func:`smc_problems`) when a
run's lineages collapse or the runs disagree (:mod:`bayes_attn.inference.smc_evidence`, "Runs,
error bars and warnings", has the rules and the estimators).

Progress and checkpoints
------------------------
With ``progress=True`` the run announces its cost (one timed gradient times the gradients a
tempering step takes) and shows one progress bar (tqdm, on stderr) that advances with lambda (the
smallest over the runs; :mod:`bayes_attn.inference.smc_progress`); each tempering step's lambda, moves, acceptance and move scale per run go
to the logger ``"bayes_attn"`` at DEBUG. The rejuvenation at lambda = 1, which can take as long as
several tempering steps (35 minutes at Level 1, Table 1, P = 272), is announced with its cost before it
starts and reported when it ends. With ``checkpoint=path`` the state is written after every
tempering step and after the rejuvenation, and a rerun with the same arguments resumes from it
(:mod:`bayes_attn.inference.smc_checkpoint`).

Output
------
After lambda reaches 1 one more resample-and-move step at lambda = 1 (increment 0) leaves
``num_particles`` equally weighted draws per run, shuffled (so that the draw order carries no
genealogy); the posterior has one chain per run. ``attrs`` holds the per-step record of all runs
concatenated in run order (``tempering_schedule``, ``log_evidence_increments``,
``acceptance_rate``, ``num_moves``, ``mixing_correlation``, ``ess``, ``move_scale``,
``mean_log_likelihood``; split with ``num_tempering_steps``, or read as a table with
:func:`tempering_steps`).

References
----------
Del Moral, Doucet & Jasra (2006), "Sequential Monte Carlo samplers"; Jasra et al. (2011) and Zhou,
Johansen & Aston (2016) for the adaptive (ESS-based) schedule and high ESS targets for evidence;
Buchholz, Chopin & Jacob (2021) and South, Pettitt & Drovandi (2019) for tuning the moves from the
particles; Lee & Whiteley (2018), "Variance estimation in the particle filter". BlackJAX
``blackjax.smc.adaptive_tempered``, ``blackjax.smc.inner_kernel_tuning``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer.util import constrain_fn

from bayes_attn import _arviz as az
from bayes_attn import _deprecation
from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference import potential, smc_checkpoint, smc_evidence, smc_kernel
from bayes_attn.inference._call import sampler_call
from bayes_attn.inference.convert import from_draws
from bayes_attn.inference.record import RunRecord
from bayes_attn.inference.smc_checkpoint import REJUVENATED, TEMPERING, Saved
from bayes_attn.inference.smc_evidence import (
    SMCWarning,
    default_min_lineages,
    smc_problems,
    tempering_steps,
)
from bayes_attn.inference.smc_kernel import MoveInfo, StepRecord
from bayes_attn.inference.smc_progress import Progress, announce_cost
from bayes_attn.keys import resolve_key

__all__ = [
    "MoveInfo",
    "SMCSettings",
    "SMCWarning",
    "StepRecord",
    "default_min_lineages",
    "run_smc",
    "smc_problems",
    "tempering_steps",
]

__getattr__ = _deprecation.moved(
    __name__,
    {
        "split_log_density": "bayes_attn.inference.potential",
        "SplitDensity": "bayes_attn.inference.potential",
    },
)

_AUTO_RWM_MAX_DIM = 10
_DENSE_PARTICLES_PER_DIM = 10  # HMC: dense metric when num_particles >= 10 d


@dataclasses.dataclass(frozen=True)
class SMCSettings:
    """:func:`run_smc`'s sampler options and their defaults (the one place they are set).

    :meth:`checked` checks them, each error naming its field, and :meth:`for_dimension` resolves
    ``kernel="auto"`` and ``dense`` (HMC's dense metric) for the model's unconstrained dimension.

    Attributes
    ----------
    num_particles : int
        Particles per run (>= 2; default 1000); also the number of draws per run.
    num_runs : int
        Independent runs in one call (>= 1; default 4), vectorised; their spread gives the
        standard error of the log evidence (module docstring, "Runs and error bars").
    num_mcmc_steps : int
        The fewest MCMC moves per particle per tempering step (default 2; it used to be the
        fixed number, and the default was 10).
    max_mcmc_steps : int
        The most moves per tempering step (>= ``num_mcmc_steps``; default 200).
    mixing_target : float
        In [0, 1) (default 0.05): moves stop once the mixing statistic (the particles'
        correlation with their start, :mod:`~bayes_attn.inference.smc_kernel`) is at most this.
        Lower is stricter and costs more moves.
    target_ess : float
        In (0, 1) (default 0.9): each lambda increment keeps this fraction of effective
        particles. Higher means finer tempering steps (more of them) and a less biased evidence.
    kernel : {"auto", "rwm", "hmc"}
        The move (:mod:`~bayes_attn.inference.smc_kernel`). ``"auto"`` (the default): RWM up to
        10 unconstrained dimensions, else HMC.
    num_integration_steps : int
        Leapfrog steps per HMC move (default 8).
    reference_loc, reference_scale : float
        The Normal reference in unconstrained space for latent sites with an improper base
        (defaults 0 and 10).
    batch_size : int
        Particles, not sequences. 0 (the default): ``vmap`` over all particles and runs; > 0:
        ``jax.lax.map`` over batches of this many particles, and over the runs one at a time
        (bounds memory for the Level-0/1 models).
    max_tempering_steps : int
        Give up (RuntimeError) after this many tempering steps in any run (default 1000; it was
        ``max_steps``, which is deprecated: in :func:`~bayes_attn.inference.train_adam` that
        name counts optimiser steps).
    min_lineages : int, optional
        Warn when a run's draws descend from fewer initial particles than this (default None:
        ``min(20, ceil(num_particles / 100))``).
    evidence_tolerance : float
        Nats of disagreement between runs that the agreement test allows on top of the runs' own
        errors (default 0.1; :mod:`~bayes_attn.inference.smc_evidence`).
    dense : bool
        HMC's dense metric: not an option, :meth:`for_dimension` sets it.
    """

    num_particles: int = 1000
    num_runs: int = 4
    num_mcmc_steps: int = 2
    max_mcmc_steps: int = 200
    mixing_target: float = 0.05
    target_ess: float = 0.9
    kernel: str = "auto"
    num_integration_steps: int = 8
    reference_loc: float = 0.0
    reference_scale: float = 10.0
    batch_size: int = 0
    max_tempering_steps: int = 1000
    min_lineages: int | None = None
    evidence_tolerance: float = 0.1
    dense: bool = False

    def checked(self) -> SMCSettings:
        """Every option checked before any work starts; ``min_lineages`` None gets its default."""
        o = dataclasses.asdict(self)
        for name, low in [("num_particles", 2), ("num_runs", 1), ("num_mcmc_steps", 1),
                          ("num_integration_steps", 1), ("batch_size", 0),
                          ("max_tempering_steps", 1)]:  # fmt: skip
            o[name] = check_int(name, o[name], low)
        o["max_mcmc_steps"] = check_int("max_mcmc_steps", o["max_mcmc_steps"], o["num_mcmc_steps"])
        o["evidence_tolerance"] = check_positive("evidence_tolerance", o["evidence_tolerance"])
        o["mixing_target"] = float(o["mixing_target"])
        if not 0.0 <= o["mixing_target"] < 1.0:
            raise ValueError(f"mixing_target must be in [0, 1), got {o['mixing_target']}")
        o["target_ess"] = float(o["target_ess"])
        if not 0.0 < o["target_ess"] < 1.0:
            raise ValueError(f"target_ess must be in (0, 1), got {o['target_ess']}")
        if o["kernel"] not in ("auto", "rwm", "hmc"):
            raise ValueError(f"kernel must be 'auto', 'rwm' or 'hmc', got {o['kernel']!r}")
        if o["min_lineages"] is None:
            o["min_lineages"] = default_min_lineages(o["num_particles"])
        o["min_lineages"] = check_int("min_lineages", o["min_lineages"], 0)
        o["reference_scale"] = check_positive("reference_scale", o["reference_scale"])
        return SMCSettings(**o)

    def for_dimension(self, dim: int) -> SMCSettings:
        """``"auto"``: RWM up to 10 unconstrained dimensions, else HMC; HMC's metric is dense when
        there are at least 10 particles per dimension (RWM's always)."""
        kernel = self.kernel
        if kernel == "auto":
            kernel = "rwm" if dim <= _AUTO_RWM_MAX_DIM else "hmc"
        dense = kernel == "rwm" or _DENSE_PARTICLES_PER_DIM * dim <= self.num_particles
        return dataclasses.replace(self, kernel=kernel, dense=dense)

    def of_the_draws(self) -> dict:
        """The settings that change the draws (a checkpoint's fingerprint): all but
        ``max_tempering_steps``, ``min_lineages`` and ``evidence_tolerance``."""
        o = dataclasses.asdict(self)
        for name in ("max_tempering_steps", "min_lineages", "evidence_tolerance"):
            del o[name]
        return o


# the driver's pieces under the names inference.llc_smc calls them by (now in smc_progress)
_announce, _Progress = announce_cost, Progress


# --------------------------------------------------------------------------------------------------
# The program: one run's init and tempering step, mapped over the runs and jitted


def _over_runs(fn, sequential: bool):
    """``fn`` mapped over the leading (run) axis of its arguments: one vmap, or lax.map."""
    if not sequential:
        return jax.vmap(fn)
    return lambda *args: jax.lax.map(lambda t: fn(*t), args)


class _Program(NamedTuple):
    """The jitted pieces of the runs: their initial states, and one tempering step of each."""

    init: Callable  # keys (runs,) -> RunState (runs, ...)
    step: Callable  # (keys (runs,), RunState, force) -> (RunState, StepRecord of (runs,) arrays)


def _compile(split: potential.SplitDensity, unravel, dim: int, s: SMCSettings) -> _Program:
    """:func:`~bayes_attn.inference.smc_kernel.init` and
    :func:`~bayes_attn.inference.smc_kernel.build_kernel` for these settings, over the runs."""
    moves = smc_kernel.build_moves(
        s.kernel, dim, num_integration_steps=s.num_integration_steps, dense=s.dense
    )
    kernel = smc_kernel.build_kernel(
        *smc_kernel.tempered_log_densities(split, unravel),
        moves,
        num_mcmc_steps=s.num_mcmc_steps,
        max_mcmc_steps=s.max_mcmc_steps,
        mixing_target=s.mixing_target,
        target_ess=s.target_ess,
        batch_size=s.batch_size,
    )
    init = functools.partial(
        smc_kernel.init,
        draw_reference=split.draw_reference,
        moves=moves,
        num_particles=s.num_particles,
        batch_size=s.batch_size,
    )
    over_runs = functools.partial(_over_runs, sequential=s.batch_size > 0)
    step = jax.jit(
        lambda keys, state, force: over_runs(functools.partial(kernel, force=force))(keys, state)
    )
    return _Program(jax.jit(over_runs(init)), step)


# --------------------------------------------------------------------------------------------------
# The driver: temper, rejuvenate, resume


def _temper(program: _Program, saved: Saved, s: SMCSettings, store, progress) -> Saved:
    """Step every run until all reach lambda = 1, checkpointing after each step."""
    state, records, key = saved.state, saved.records, saved.key
    lam = np.asarray(state.smc.sampler_state.tempering_param)
    while (lam < 1.0).any():
        if max(len(r) for r in records) >= s.max_tempering_steps:
            raise RuntimeError(
                f"max_tempering_steps: lambda reached only {lam.min():.3g} after "
                f"{s.max_tempering_steps} tempering steps"
            )
        key, sub = jax.random.split(key)
        state, rec = program.step(jax.random.split(sub, s.num_runs), state, False)
        rec = StepRecord(*(np.asarray(v) for v in rec))
        for r in np.flatnonzero(lam < 1.0):
            records[r].append(StepRecord(*(float(v[r]) for v in rec)))
        lam = rec.tempering_param
        if not np.isfinite(lam).all():
            raise RuntimeError("the adaptive schedule failed (lambda is nan): non-finite weights")
        progress.step(max(len(r) for r in records), lam, rec)
        if store is not None:
            store.save(Saved(TEMPERING, key, state, records))
    return Saved(TEMPERING, key, state, records)


def _rejuvenate(program: _Program, tempered: Saved, s: SMCSettings, store, progress) -> Saved:
    """The genealogy's variance estimates (from the last reweighting), then one more resample and
    move at lambda = 1 (increment 0, equal weights after it)."""
    weights = np.asarray(tempered.state.smc.sampler_state.weights)
    eve = np.asarray(tempered.state.eve)
    run_var = np.array(
        [
            smc_evidence.lineage_variance(eve[r], weights[r], len(rec))
            for r, rec in enumerate(tempered.records)
        ]
    )
    _, k_last, k_perm = jax.random.split(tempered.key, 3)
    progress.rejuvenation_starts(tempered.records)
    t0 = time.perf_counter()
    state, last = program.step(jax.random.split(k_last, s.num_runs), tempered.state, True)
    last = StepRecord(*(np.asarray(v) for v in last))
    progress.rejuvenation_done(last, time.perf_counter() - t0)
    done = Saved(REJUVENATED, k_perm, state, tempered.records, run_var, last)
    if store is not None:
        store.save(done)
    return done


def _sample(program: _Program, rng, s: SMCSettings, store, progress) -> Saved:
    """The runs from their start, or from the checkpoint, to the rejuvenated draws."""
    saved = None
    if store is not None:
        template = jax.eval_shape(program.init, jax.random.split(rng, s.num_runs))
        saved = store.load(template, jax.random.key_impl(rng))
        if saved is not None:
            progress.resumed(store.path, saved)
    if saved is None:
        key, k_init = jax.random.split(rng)
        state = program.init(jax.random.split(k_init, s.num_runs))
        saved = Saved(TEMPERING, key, state, [[] for _ in range(s.num_runs)])
    if saved.stage == TEMPERING:
        saved = _temper(program, saved, s, store, progress)
        saved = _rejuvenate(program, saved, s, store, progress)
    return saved


def _draws(model, model_args, model_kwargs, split, unravel, done: Saved, s: SMCSettings):
    """The rejuvenated particles shuffled within each run, as constrained draws (latent and
    deterministic sites), with their log joint and eves."""
    perm = jax.vmap(lambda k: jax.random.permutation(k, s.num_particles))(
        jax.random.split(done.key, s.num_runs)
    )
    x = jnp.take_along_axis(done.state.smc.sampler_state.particles, perm[:, :, None], axis=1)
    eve = np.asarray(jnp.take_along_axis(done.state.eve, perm, axis=1))

    def values(xi):
        u = unravel(xi)
        out = constrain_fn(model, model_args, model_kwargs, u, return_deterministic=True)
        return out, split.log_parts(u)[1]

    over_runs = functools.partial(_over_runs, sequential=s.batch_size > 0)
    map_values = over_runs(lambda xs: smc_kernel.map_particles(values, xs, s.batch_size))
    draws, lp = jax.jit(map_values)(x)
    return draws, lp, eve


def _attrs(done: Saved, eve, s: SMCSettings, improper) -> dict:
    """The evidence, the per-run and per-step diagnostics and the settings (run_smc's attrs)."""
    log_z = smc_evidence.run_log_evidences(done.records)
    return {
        **smc_evidence.evidence_summary(log_z, done.run_var, s.evidence_tolerance),
        "num_runs": s.num_runs,
        **smc_evidence.step_attrs(done.records),
        "final_acceptance_rate": np.asarray(done.last.acceptance_rate, dtype=np.float64),
        "final_num_moves": np.asarray(done.last.num_moves, dtype=np.int64),
        "kernel": s.kernel,
        "dense_metric": int(s.dense),
        "num_particles": s.num_particles,
        "num_mcmc_steps": s.num_mcmc_steps,
        "max_mcmc_steps": s.max_mcmc_steps,
        "mixing_target": s.mixing_target,
        "target_ess": s.target_ess,
        "improper_sites": ",".join(sorted(improper)),
        "num_eve_lineages": np.array([np.unique(e).size for e in eve]),
        "min_lineages": s.min_lineages,
        "evidence_tolerance": s.evidence_tolerance,
        "reference": (
            f"proper priors; Normal({s.reference_loc}, {s.reference_scale}) in unconstrained "
            "space for improper sites"
        ),
    }


def _density(model, model_args, model_kwargs, s: SMCSettings):
    """The model's split density (:func:`~bayes_attn.inference.potential.split_log_density`), a
    flat zero point of its unconstrained space and the map back to the sites."""
    split = potential.split_log_density(
        model,
        model_args,
        model_kwargs,
        reference_loc=s.reference_loc,
        reference_scale=s.reference_scale,
    )
    flat0, unravel = ravel_pytree({n: jnp.zeros(sh) for n, sh in split.shapes.items()})
    return split, flat0, unravel


def _store(path, model, model_args, model_kwargs, split, unravel, dim, rng, s: SMCSettings):
    """The run's checkpoint (:class:`~bayes_attn.inference.smc_checkpoint.Checkpoint`) at
    ``path``, fingerprinted by the arguments that change the draws; None without a path."""
    if path is None:
        return None
    fingerprint = smc_checkpoint.fingerprint(
        model, model_args, model_kwargs, split.log_parts, unravel, dim,
        jax.random.key_data(rng), s.of_the_draws(),
    )  # fmt: skip
    return smc_checkpoint.Checkpoint(path, fingerprint)


def _legacy_max_steps(changes: dict) -> dict:
    """``changes`` with the deprecated ``max_steps`` (which wins, as it did) renamed."""
    if "max_steps" not in changes:
        return changes
    warnings.warn(
        "run_smc(max_steps=...) is deprecated: use max_tempering_steps",
        DeprecationWarning,
        stacklevel=3,
    )
    changes = dict(changes)
    changes["max_tempering_steps"] = changes.pop("max_steps")
    return changes


def _check_full_likelihood(model_kwargs: dict) -> None:
    if model_kwargs.get("batch_size") is not None:
        raise ValueError(
            "model_kwargs: run_smc needs the full likelihood, but the model's batch_size is "
            f"{model_kwargs['batch_size']} (a minibatch); leave it out (batch_size=None)"
        )


def run_smc(
    model, *args, model_args: tuple = (), model_kwargs: dict | None = None,
    settings: SMCSettings | None = None,
    seed: int | None = None, key=None, progress: bool = False, checkpoint=None,
    progress_bar: bool | None = None, **changes,
) -> az.InferenceData:  # fmt: skip
    """Sample ``model(*model_args, **model_kwargs)`` by adaptive tempered SMC and estimate its evidence.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.order_param_model`. Minibatched likelihoods
        (``network_model(..., batch_size=...)``) are refused: SMC needs the exact density.
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from the sampler's options (the old positional form warns).
        A minibatched likelihood (``model_kwargs={"batch_size": ...}`` for ``network_model``) is
        refused.
    settings, **changes
        The fields of :class:`SMCSettings` (its docstring lists them with their defaults):
        ``num_particles``, ``num_runs``, ``num_mcmc_steps``, ``max_mcmc_steps``,
        ``mixing_target``, ``target_ess``, ``kernel``, ``num_integration_steps``,
        ``reference_loc``, ``reference_scale``, ``batch_size``, ``max_tempering_steps``,
        ``min_lineages``, ``evidence_tolerance`` (``max_steps`` is the deprecated name of
        ``max_tempering_steps``). An unknown keyword is a TypeError naming it.
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given); run r uses the r-th split of the key.
    progress : bool
        Announce the cost, show one progress bar (tqdm, stderr) advancing with lambda, announce
        the rejuvenation at lambda = 1 with its cost and report when it ends (logger
        ``"bayes_attn"``, INFO); each tempering step's lambda, moves, acceptance and move scale
        per run at DEBUG (:mod:`~bayes_attn.inference.smc_progress`). ``progress_bar`` is its
        old name (deprecated).
    checkpoint : str or path, optional
        A file to write the run's state to after every tempering step and after the
        rejuvenation (atomically). When it exists, the run resumes from it and ends with the
        result an uninterrupted run would have, bit for bit; a file written with other
        arguments (model arguments, seed or key, settings) is refused (ValueError naming
        ``checkpoint``). It is removed when the run completes
        (:mod:`~bayes_attn.inference.smc_checkpoint`).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``num_particles`` equally weighted draws per run as (chain=num_runs,
        draw=num_particles), latent and deterministic sites. ``sample_stats``: ``lp`` (log joint of
        each draw, the unconstrained-space log density without its normaliser) and ``eve`` (the
        index of each draw's ancestor among its run's lambda = 0 draws, for genealogy-based
        standard errors, as in :func:`bayes_attn.analysis.phases.phase_occupancy`). ``attrs``
        (every group): those of :func:`run_nuts` (task, hyperparameters, activation, level,
        version), and ``sampler`` = "smc"; the evidence: ``log_evidence`` (log of the mean Z over
        runs), ``log_evidence_se``, ``log_evidence_runs``, ``log_evidence_run_se``, ``runs_chi2``
        and ``runs_p_value`` (the runs' agreement test); per run: ``num_tempering_steps``,
        ``num_eve_lineages``, ``ess_final`` (ESS of the last reweighting),
        ``final_acceptance_rate`` and ``final_num_moves`` (of the rejuvenation at lambda = 1);
        per tempering step, all runs concatenated in run order: ``tempering_schedule`` (lambda
        after the step), ``log_evidence_increments``, ``acceptance_rate``, ``num_moves``,
        ``mixing_correlation`` (the statistic after the last move), ``ess`` (of the incremental
        weights after the moves), ``move_scale`` (the RWM scale or HMC step before jitter),
        ``mean_log_likelihood`` (the weighted mean of the tempered part after the step: its
        expectation at that lambda, read off the weights); the settings: ``kernel``,
        ``dense_metric``,
        ``num_particles``, ``num_runs``, ``num_mcmc_steps``, ``max_mcmc_steps``,
        ``mixing_target``, ``target_ess``, ``min_lineages``, ``evidence_tolerance``,
        ``reference``, ``improper_sites``, ``seed``, ``wall_time_s`` (of this call).

    Warns
    -----
    SMCWarning
        When a run's lineages collapse or the runs disagree (:func:`smc_problems`).
    """
    s, model_args, model_kwargs, progress = sampler_call(
        "run_smc", SMCSettings, settings, _legacy_max_steps(changes), args, model_args,
        model_kwargs, progress, progress_bar,
    )  # fmt: skip
    if "dense" in changes:
        raise TypeError("run_smc: dense is not an option (SMCSettings.for_dimension sets it)")
    rng, seed, key_attrs = resolve_key(key, seed)
    _check_full_likelihood(model_kwargs)
    path = smc_checkpoint.check_path(checkpoint)
    t_start = time.perf_counter()

    split, flat0, unravel = _density(model, model_args, model_kwargs, s)
    dim = int(flat0.shape[0])
    s = s.for_dimension(dim)
    seconds = announce_cost(split.log_parts, unravel, flat0, s) if progress else float("nan")
    program = _compile(split, unravel, dim, s)
    store = _store(path, model, model_args, model_kwargs, split, unravel, dim, rng, s)
    with Progress(progress, s, seconds) as bar:
        done = _sample(program, rng, s, store, bar)
    draws, lp, eve = _draws(model, model_args, model_kwargs, split, unravel, done, s)
    attrs = _attrs(done, eve, s, split.improper)
    attrs["wall_time_s"] = time.perf_counter() - t_start
    for problem in smc_problems(attrs):
        warnings.warn(f"run_smc: {problem}", SMCWarning, stacklevel=2)
    record = RunRecord("smc", seed, s.num_runs, 0, s.num_particles, settings=key_attrs)
    idata = from_draws(draws, {"lp": lp, "eve": eve}, record, model, model_args, model_kwargs)
    for group in az.groups(idata):
        idata[group].attrs.update(attrs)
    if store is not None:
        store.remove()
    return idata
