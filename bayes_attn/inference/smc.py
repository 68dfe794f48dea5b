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

The mutation: how many moves, and how big
----------------------------------------
BlackJAX's adaptive tempered kernel (``blackjax.adaptive_tempered_smc``) picks each lambda
increment so that the ESS of the incremental weights is ``target_ess`` times the number of
particles (default 0.9), resamples (systematic) and moves the particles with an MCMC kernel that
leaves ``pi_lambda`` invariant. Both the number of moves and the kernel adapt to the particles:

* **Moves until the particles forget where they started.** After each move the *mixing
  statistic* is the larger of (a) the Pearson correlation, across particles, between each
  unconstrained coordinate at the start of the step's moves and now, averaged over the
  coordinates, and (b) the rank (Spearman) correlation between the particles' tempered log
  densities at the start and now ((b) catches a slow drift of the cloud along the density that
  (a) averages away). Moves continue until it is at most ``mixing_target`` (0.05), with at least
  ``num_mcmc_steps`` (2) and at most ``max_mcmc_steps`` (200) moves; the count per step is in
  ``attrs["num_moves"]``. This is in the spirit of the adaptive move counts of the SMC-sampler
  literature (e.g. Buchholz, Chopin & Jacob 2021; South, Pettitt & Drovandi 2019), which stop on
  how far the particles have moved; here the measure is a correlation with the start, which needs
  no scale. It enters BlackJAX through the tempered kernel's ``update_strategy`` hook.
  BlackJAX's own strategy, ``blackjax.smc.base.update_and_take_last``, runs a fixed number of moves
  per particle (a ``lax.scan`` of static length, one chain per particle), and no BlackJAX block
  stops on a statistic of the whole cloud, so the strategy here is a ``lax.while_loop`` around
  BlackJAX's kernel mapped over all particles (``blackjax.smc.base.map_kernel``).
* **A step tuned to the cloud and the acceptance rate.** After every tempering step
  ``blackjax.smc.inner_kernel_tuning`` rebuilds the kernel's parameters from the weighted cloud,
  and the scale follows BlackJAX's ``smc.tuning.from_kernel_info.update_scale_from_acceptance_rate``
  (``scale x exp(acc - target)``, ``acc`` the mean acceptance of the step's moves; kept within
  [1e-4, 10] times its start). The cloud's moments are weighted here (the weights of the last
  reweighting), which ``blackjax.smc.tuning.from_particles`` (unweighted) is not.

  - ``"rwm"`` (default up to 10 unconstrained dimensions): Gaussian random-walk Metropolis with
    proposal covariance ``scale^2 Cov_w(particles)`` (dense), ``scale`` starting at
    2.38/sqrt(d), target acceptance 0.3. This is robust for the 1-2-D multimodal reduced models:
    the cloud covariance sets the shape, and when the cloud spans two separated modes the
    acceptance rate shrinks the scale to the width of a mode. Mode weights are carried by the
    importance weights along the path, not by the moves.
  - ``"hmc"`` (default above 10 dimensions): HMC with inverse mass matrix ``Cov_w(particles)``
    (dense when ``num_particles >= 10 d``, else its diagonal), ``num_integration_steps`` (L)
    leapfrog steps, step size starting at ``min(0.5 d^(-1/4), pi / (2 L))``, target acceptance
    0.65, and two guards against a resonant trajectory:

    * the step is at most ``pi / (2 L)``: in the cloud's metric the target has unit scale, and
      a trajectory of a quarter period carries a Gaussian direction from position to momentum,
      the most a single move can decorrelate. In high dimension the acceptance rule alone grows
      the step past that: on a 900-dimensional standard Gaussian the acceptance is still 0.91 at
      step 0.41, where 8 steps make a half period and every move sends ``x`` to about ``-x``, so
      the log density keeps a rank correlation of 0.42 with the start after 40 moves, against 5
      moves to reach 0.05 at step 0.2 (measured; Level 1 hit 125 moves per tempering step so);
    * each particle's step is jittered by ``U(0.8, 1.2)`` at every move (Neal 2011, section 5.4),
      which keeps directions whose period the trajectory matches from resonating.

    One move costs
    ``num_integration_steps`` gradient evaluations per particle, so a run costs about
    ``num_particles x (moves per step) x num_integration_steps x (tempering steps)`` gradients,
    far more than NUTS needs for one mode at the paper's Level-0/1 sizes; ``batch_size`` bounds
    memory (particles ``batch_size`` at a time with ``jax.lax.map``, and the runs one after the
    other, instead of one ``vmap``).

Why (docs/theory.md, "Tempered SMC: why the evidence was biased and what adapts"): the product of
the incremental weights is an unbiased estimate of Z for any invariant kernel, but when the moves
leave the particles near where resampling put them, the cloud lags behind ``pi_lambda`` and the
estimate becomes heavy-tailed: most runs come out low, and the error bar from a few runs does not
show it. Measured on the 7-parameter AR(5) regression of tests/test_smc.py (exact log Z -181.642):
the earlier defaults (one run of 2000 particles, 10 RWM moves per step, target ESS 0.5) gave
-186.84, -187.58, -188.80, -183.84 (seeds 0-3), with 6-17 of the 2000 initial particles still
having descendants; 50 moves per step -181.46 ... -184.03; 200 moves -182.10, -181.27. Tracking
the exact log Z along the path, the error builds up where the posterior of the noise scale moves
fastest (lambda 0.01 ... 0.05), and it shrinks both with more moves and with finer steps: with the
mixing rule at target ESS 0.5 the bias stayed at -0.25 (4 runs, se 0.05); with target ESS 0.9 it
is within the runs' spread (below).

Runs, error bars and warnings
-----------------------------
``num_runs`` (4) independent runs of ``num_particles`` (1000) are made in one call, vectorised over
the run keys (``vmap``; ``lax.map`` when ``batch_size > 0``). ``log_evidence`` is the log of the
mean of the runs' Z: each run's estimate is unbiased for Z, so their mean is too, and its log has
a Jensen bias about ``num_runs`` times smaller than the mean of the runs' log Z.
``log_evidence_se`` is the standard deviation of the runs' log Z over ``sqrt(num_runs)`` (the
delta-method standard error of that log). Per run: ``log_evidence_runs``, ``log_evidence_run_se``
(the run's own genealogy estimate of the relative variance of its Z, Lee & Whiteley 2018,
``1 - (N / (N - 1))^(n + 1) (1 - sum_e W_e^2)`` with ``W_e`` the final weight carried by the
descendants of initial particle ``e`` after ``n`` resamplings; derived for multinomial
resampling, it is often 0 (negative, clipped) for healthy runs with systematic resampling and
approaches 1 when the lineages collapse), ``num_eve_lineages`` (initial particles with
descendants at the end), ``num_tempering_steps``.

:func:`run_smc` warns (:class:`SMCWarning`, :func:`smc_problems`) when

* any run's draws descend from fewer than ``min_lineages`` of its initial particles (default
  ``min(20, ceil(num_particles / 100))``: 1% of the particles, at most 20): the genealogy has
  collapsed, the regime in which the evidence came out low above;
* the runs disagree: ``X2 = sum_r (log Z_r - mean)^2 / (mean_r v_r + evidence_tolerance^2)`` on
  ``num_runs - 1`` degrees of freedom has ``p < 1e-3`` (``v_r``: the runs' own variance estimates
  above; ``evidence_tolerance`` = 0.1 nats, the spread below which disagreement does not matter).

Neither can see a bias that every run shares (a mode no run finds, a tail no run samples); the
tests check the defaults against exact evidences (tests/test_smc.py, docs/validation.md).

Output
------
After lambda reaches 1 one more resample-and-move step at lambda = 1 (increment 0) leaves
``num_particles`` equally weighted draws per run, shuffled (so that the draw order carries no
genealogy); the posterior has one chain per run. ``attrs`` holds the per-step record of all runs
concatenated in run order (``tempering_schedule``, ``log_evidence_increments``,
``acceptance_rate``, ``num_moves``, ``mixing_correlation``, ``ess``; split with
``num_tempering_steps``, or read as a table with :func:`tempering_steps`).

References
----------
Del Moral, Doucet & Jasra (2006), "Sequential Monte Carlo samplers"; Jasra et al. (2011) and Zhou,
Johansen & Aston (2016) for the adaptive (ESS-based) schedule and high ESS targets for evidence;
Buchholz, Chopin & Jacob (2021), "Adaptive tuning of Hamiltonian Monte Carlo within sequential
Monte Carlo", and South, Pettitt & Drovandi (2019) for tuning the moves from the particles; Lee &
Whiteley (2018), "Variance estimation in the particle filter". BlackJAX
``blackjax.smc.adaptive_tempered``, ``blackjax.smc.inner_kernel_tuning``.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer.util import constrain_fn
from scipy import stats

from bayes_attn import _arviz as az
from bayes_attn import _deprecation
from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference import potential
from bayes_attn.inference._call import model_call, resolve_key
from bayes_attn.inference.convert import from_draws
from bayes_attn.inference.record import RunRecord
from bayes_attn.progress import announce, say, seconds_per_call

__all__ = [
    "MoveInfo",
    "SMCWarning",
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


_RWM_TARGET = 0.3
_HMC_TARGET = 0.65
_HMC_MAX_TIME = math.pi / 2  # HMC: the longest nominal integration time, in the cloud's metric
_HMC_JITTER = 0.2  # HMC: each particle's step is the tuned one times U(1 - 0.2, 1 + 0.2)
_AUTO_RWM_MAX_DIM = 10
_DENSE_PARTICLES_PER_DIM = 10  # HMC: dense metric when num_particles >= 10 d
_RUNS_ALPHA = 1e-3  # level of the runs' agreement test
_FLOOR = -1e100  # stands in for -inf / nan log densities (0 * floor = 0 at lambda = 0)


def _map(fn, xs, batch_size):
    return jax.lax.map(fn, xs, batch_size=batch_size) if batch_size else jax.vmap(fn)(xs)


def _over_runs(fn, sequential: bool):
    """``fn`` mapped over the leading (run) axis of its arguments: one vmap, or lax.map."""
    if not sequential:
        return jax.vmap(fn)
    return lambda *args: jax.lax.map(lambda t: fn(*t), args)


# --------------------------------------------------------------------------------------------------
# MCMC moves, their tuning from the particle cloud, and the adaptive number of moves


class _StepInfo(NamedTuple):
    """What one move reports: its acceptance probability and the scale it used."""

    acceptance_rate: jax.Array
    knob: jax.Array


class MoveInfo(NamedTuple):
    """What the moves of one tempering step report (``SMCInfo.update_info`` of :func:`run_smc`).

    Attributes
    ----------
    acceptance_rate : scalar
        Mean acceptance probability over particles and moves.
    num_moves : scalar int
        Moves made (between ``num_mcmc_steps`` and ``max_mcmc_steps``).
    correlation : scalar
        The mixing statistic after the last move (module docstring, "The mutation").
    knob : scalar
        The RWM scale or HMC step size the moves used.
    """

    acceptance_rate: jax.Array
    num_moves: jax.Array
    correlation: jax.Array
    knob: jax.Array


def _weighted_moments(x, w):
    mean = w @ x
    xc = x - mean
    return mean, (w[:, None] * xc).T @ xc


# BlackJAX is imported where it is used: importing it starts the JAX backend, which must wait
# for bayes_attn.distributed.initialize_distributed on a multi-process run.


def _rwm_step(rng_key, state, logdensity_fn, chol, scale):
    from blackjax.mcmc import random_walk as bj_rw

    step = bj_rw.build_additive_step()
    new_state, info = step(rng_key, state, logdensity_fn, bj_rw.normal(scale * chol))
    return new_state, _StepInfo(info.acceptance_rate, scale)


def _rwm_params(x, w, scale):
    d = x.shape[1]
    _, cov = _weighted_moments(x, w)
    jitter = 1e-10 * (jnp.trace(cov) / d + 1e-30)
    chol = jnp.linalg.cholesky(cov + jitter * jnp.eye(d))
    return {"chol": chol[None], "scale": jnp.reshape(scale, (1,))}


def _hmc_step(rng_key, state, logdensity_fn, inverse_mass_matrix, step_size, num_integration_steps):
    """One HMC move with the step jittered by U(1 - 0.2, 1 + 0.2), drawn per particle and move.

    The jitter (Neal 2011, section 5.4; Stan's ``stepsize_jitter``) is independent of the state, so
    the move still leaves the target invariant; it keeps a direction whose period the trajectory
    matches from being carried back to where it started, move after move.
    """
    from blackjax.mcmc import hmc as bj_hmc

    k_jitter, k_move = jax.random.split(rng_key)
    jitter = jax.random.uniform(k_jitter, minval=1.0 - _HMC_JITTER, maxval=1.0 + _HMC_JITTER)
    new_state, info = bj_hmc.build_kernel()(
        k_move, state, logdensity_fn, step_size * jitter, inverse_mass_matrix,
        num_integration_steps,
    )  # fmt: skip
    return new_state, _StepInfo(info.acceptance_rate, step_size)


def _hmc_params(x, w, step_size, dense):
    d = x.shape[1]
    _, cov = _weighted_moments(x, w)
    if dense:
        inv_mass = cov + 1e-10 * (jnp.trace(cov) / d + 1e-30) * jnp.eye(d)
    else:
        var = jnp.diag(cov)
        inv_mass = var + 1e-10 * (jnp.mean(var) + 1e-30)
    return {"inverse_mass_matrix": inv_mass[None], "step_size": jnp.reshape(step_size, (1,))}


def _centred_ranks(x):
    """Ranks of a vector, centred (ties broken by position)."""
    return jnp.argsort(jnp.argsort(x)) - 0.5 * (x.shape[0] - 1)


def _correlation(a, b):
    """Pearson correlation of each column pair of ``a``, ``b`` (n, k) (0 for a constant column)."""
    a = a - jnp.mean(a, axis=0)
    b = b - jnp.mean(b, axis=0)
    den = jnp.sqrt(jnp.sum(a * a, axis=0) * jnp.sum(b * b, axis=0))
    return jnp.where(den > 0, jnp.sum(a * b, axis=0) / jnp.where(den > 0, den, 1.0), 0.0)


def _mixing_strategy(min_moves: int, max_moves: int, target: float):
    """A BlackJAX ``update_strategy`` that moves until the particles forget their start.

    ``blackjax.smc.base.update_and_take_last`` runs a fixed number of moves per particle (a
    ``lax.scan`` of static length, one chain per particle). The stopping rule here is a statistic
    of the whole particle cloud, so the loop is a ``lax.while_loop`` around the moves of all
    particles at once; each move is BlackJAX's kernel mapped over the particles
    (``blackjax.smc.base.map_kernel``).
    """

    def strategy(
        mcmc_init_fn,
        logposterior_fn,
        shared_mcmc_step_fn,
        n_particles,
        num_mcmc_steps=None,
        batch_size=0,
    ):
        from blackjax.smc.base import map_fn, map_kernel

        del num_mcmc_steps  # the bounds are min_moves, max_moves
        init = map_fn(lambda x: mcmc_init_fn(x, logposterior_fn), batch_size)
        step = map_kernel(lambda k, s: shared_mcmc_step_fn(k, s, logposterior_fn), batch_size)

        def update_fn(keys, particles, unshared_parameters):
            if unshared_parameters:
                raise ValueError("run_smc shares every MCMC parameter between the particles")
            state = init(particles)
            r0 = _centred_ranks(state.logdensity)

            def statistic(s):
                rho_x = jnp.mean(_correlation(particles, s.position))
                rho_l = _correlation(r0[:, None], _centred_ranks(s.logdensity)[:, None])[0]
                return jnp.maximum(rho_x, rho_l)

            def cond(carry):
                n, _, rho, _, _ = carry
                return (n < min_moves) | ((n < max_moves) & (rho > target))

            def body(carry):
                n, s, _, acc, _ = carry
                move_keys = jax.vmap(jax.random.fold_in, (0, None))(keys, n)
                s, info = step(move_keys, s)
                return n + 1, s, statistic(s), acc + jnp.mean(info.acceptance_rate), info.knob[0]

            one = jnp.ones((), particles.dtype)
            carry = (jnp.zeros((), jnp.int32), state, one, 0.0 * one, jnp.nan * one)
            n, state, rho, acc, knob = jax.lax.while_loop(cond, body, carry)
            return state.position, MoveInfo(acc / n, n, rho, knob)

        return update_fn, n_particles

    return strategy


def _lineage_variance(eve, weights, num_resamplings):
    """Lee & Whiteley (2018) estimate of Var(Z_hat / Z) from one run's genealogy.

    ``1 - (N / (N - 1))^(n + 1) (1 - sum_e W_e^2)``, with ``W_e`` the total final weight of the
    particles descending from initial particle ``e`` and ``n`` resamplings. Derived for
    multinomial resampling; may come out negative (then 0).
    """
    n = weights.size
    w_e = np.bincount(eve, weights=weights, minlength=n)
    v = 1.0 - (n / (n - 1.0)) ** (num_resamplings + 1) * (1.0 - float(np.sum(w_e**2)))
    return max(v, 0.0)


def default_min_lineages(num_particles: int) -> int:
    """The lineage count below which :func:`run_smc` warns: 1% of the particles, at most 20."""
    return int(min(20, math.ceil(0.01 * num_particles)))


# --------------------------------------------------------------------------------------------------
# The sampler


def run_smc(
    model,
    *args,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    num_particles: int = 1000,
    num_runs: int = 4,
    num_mcmc_steps: int = 2,
    max_mcmc_steps: int = 200,
    mixing_target: float = 0.05,
    target_ess: float = 0.9,
    seed: int | None = None,
    key=None,
    kernel: str = "auto",
    num_integration_steps: int = 8,
    reference_loc: float = 0.0,
    reference_scale: float = 10.0,
    batch_size: int = 0,
    max_tempering_steps: int = 1000,
    min_lineages: int | None = None,
    evidence_tolerance: float = 0.1,
    progress_bar: bool = False,
    **kwargs,
) -> az.InferenceData:
    """Sample ``model(*model_args, **model_kwargs)`` by adaptive tempered SMC and estimate its evidence.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.order_param_model`. Minibatched likelihoods
        (``network_model(..., batch_size=...)``) are refused: SMC needs the exact density.
    num_particles : int
        Particles per run (>= 2); also the number of draws per run.
    num_runs : int
        Independent runs in this call (>= 1), vectorised; their spread gives the standard error
        of the log evidence (module docstring, "Runs, error bars and warnings").
    num_mcmc_steps : int
        The fewest MCMC moves per particle per tempering step (it used to be the fixed number;
        the default was 10).
    max_mcmc_steps : int
        The most moves per tempering step (>= ``num_mcmc_steps``).
    mixing_target : float
        In [0, 1): moves stop once the mixing statistic (the particles' correlation with their
        start, module docstring) is at most this. Lower is stricter and costs more moves.
    target_ess : float
        In (0, 1): each lambda increment keeps this fraction of effective particles. Higher means
        finer tempering steps (more of them) and a less biased evidence.
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from the sampler's options (the old positional form warns).
        A minibatched likelihood (``model_kwargs={"batch_size": ...}`` for ``network_model``) is
        refused.
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given); run r uses the r-th split of the key.
    kernel : {"auto", "rwm", "hmc"}
        The move (module docstring). ``"auto"``: RWM up to 10 unconstrained dimensions, else HMC.
    num_integration_steps : int
        Leapfrog steps per HMC move.
    reference_loc, reference_scale : float
        The Normal reference in unconstrained space for latent sites with an improper base.
    batch_size : int
        Particles, not sequences. 0: ``vmap`` over all particles and runs; > 0: ``jax.lax.map``
        over batches of this many particles, and over the runs one at a time (bounds memory for
        the Level-0/1 models).
    max_tempering_steps : int
        Give up (RuntimeError) after this many tempering steps in any run (it was ``max_steps``,
        which is deprecated: in :func:`~bayes_attn.inference.train_adam` that name counts
        optimiser steps).
    min_lineages : int, optional
        Warn when a run's draws descend from fewer initial particles than this (default
        ``min(20, ceil(num_particles / 100))``).
    evidence_tolerance : float
        Nats of disagreement between runs that the agreement test allows on top of the runs' own
        errors (module docstring).
    progress_bar : bool
        Log lambda, the moves and the acceptance of every run after each step (logger
        ``"bayes_attn"``, level INFO).

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
        weights after the moves), ``move_scale`` (the RWM scale or HMC step before jitter); the
        settings: ``kernel``, ``dense_metric``,
        ``num_particles``, ``num_runs``, ``num_mcmc_steps``, ``max_mcmc_steps``,
        ``mixing_target``, ``target_ess``, ``min_lineages``, ``evidence_tolerance``,
        ``reference``, ``improper_sites``, ``seed``, ``wall_time_s``.

    Warns
    -----
    SMCWarning
        When a run's lineages collapse or the runs disagree (:func:`smc_problems`).
    """
    if "max_steps" in kwargs:
        warnings.warn(
            "run_smc(max_steps=...) is deprecated: use max_tempering_steps",
            DeprecationWarning,
            stacklevel=2,
        )
        max_tempering_steps = kwargs.pop("max_steps")
    model_args, model_kwargs = model_call("run_smc", args, kwargs, model_args, model_kwargs)
    rng, seed, key_attrs = resolve_key(key, seed)
    opts = _Options.checked(
        num_particles=num_particles,
        num_runs=num_runs,
        num_mcmc_steps=num_mcmc_steps,
        max_mcmc_steps=max_mcmc_steps,
        mixing_target=mixing_target,
        target_ess=target_ess,
        kernel=kernel,
        num_integration_steps=num_integration_steps,
        batch_size=batch_size,
        max_tempering_steps=max_tempering_steps,
        min_lineages=min_lineages,
        evidence_tolerance=evidence_tolerance,
    )
    if model_kwargs.get("batch_size") is not None:
        raise ValueError(
            "model_kwargs: run_smc needs the full likelihood, but the model's batch_size is "
            f"{model_kwargs['batch_size']} (a minibatch); leave it out (batch_size=None)"
        )
    reference_scale = check_positive("reference_scale", reference_scale)
    t_start = time.perf_counter()

    split = potential.split_log_density(
        model,
        model_args,
        model_kwargs,
        reference_loc=reference_loc,
        reference_scale=reference_scale,
    )
    flat0, unravel = ravel_pytree({n: jnp.zeros(sh) for n, sh in split.shapes.items()})
    dim = int(flat0.shape[0])
    opts = opts.for_dimension(dim)
    if progress_bar:
        _announce(split.log_parts, unravel, flat0, dim, opts)
    program = _program(split, unravel, dim, opts)

    key, k_init = jax.random.split(rng)
    state = program.initial(jax.random.split(k_init, opts.num_runs))
    eve = jnp.tile(jnp.arange(opts.num_particles), (opts.num_runs, 1))
    state, eve, records, key = _temper(program.advance, state, eve, key, opts, progress_bar)
    # the genealogy's variance estimate, from the last reweighting (before the rejuvenation)
    weights, eve_np = np.asarray(state.sampler_state.weights), np.asarray(eve)
    run_var = np.array(
        [
            _lineage_variance(eve_np[r], w, len(rec))
            for r, (w, rec) in enumerate(zip(weights, records, strict=True))
        ]
    )
    # rejuvenate at lambda = 1 (increment 0; equal weights after it), then shuffle the draws
    key, k_last, k_perm = jax.random.split(key, 3)
    state, eve, last = program.advance(jax.random.split(k_last, opts.num_runs), state, eve, True)
    perm = jax.vmap(lambda k: jax.random.permutation(k, opts.num_particles))(
        jax.random.split(k_perm, opts.num_runs)
    )
    x = jnp.take_along_axis(state.sampler_state.particles, perm[:, :, None], axis=1)
    eve = np.asarray(jnp.take_along_axis(eve, perm, axis=1))

    def values(xi):
        u = unravel(xi)
        out = constrain_fn(model, model_args, model_kwargs, u, return_deterministic=True)
        return out, split.log_parts(u)[1]

    over_runs = functools.partial(_over_runs, sequential=opts.batch_size > 0)
    draws, lp = jax.jit(over_runs(lambda xs: _map(values, xs, opts.batch_size)))(x)
    attrs = _smc_attrs(records, run_var, last, eve, opts, split.improper)
    attrs["reference"] = (
        f"proper priors; Normal({reference_loc}, {reference_scale}) in unconstrained space for "
        "improper sites"
    )
    attrs["wall_time_s"] = time.perf_counter() - t_start
    for problem in smc_problems(attrs):
        warnings.warn(f"run_smc: {problem}", SMCWarning, stacklevel=2)
    record = RunRecord("smc", seed, opts.num_runs, 0, opts.num_particles, settings=key_attrs)
    idata = from_draws(draws, {"lp": lp, "eve": eve}, record, model, model_args, model_kwargs)
    for group in az.groups(idata):
        idata[group].attrs.update(attrs)
    return idata


class _Options(NamedTuple):
    """:func:`run_smc`'s sampler options, checked; ``kernel`` and ``dense`` are resolved per
    dimension by :meth:`for_dimension`."""

    num_particles: int
    num_runs: int
    num_mcmc_steps: int
    max_mcmc_steps: int
    mixing_target: float
    target_ess: float
    kernel: str
    num_integration_steps: int
    batch_size: int
    max_tempering_steps: int
    min_lineages: int
    evidence_tolerance: float
    dense: bool = False

    @classmethod
    def checked(cls, **o) -> _Options:
        """Every option checked, each error naming its parameter, before any work starts."""
        o["num_particles"] = check_int("num_particles", o["num_particles"], 2)
        o["num_runs"] = check_int("num_runs", o["num_runs"], 1)
        o["num_mcmc_steps"] = check_int("num_mcmc_steps", o["num_mcmc_steps"], 1)
        o["max_mcmc_steps"] = check_int("max_mcmc_steps", o["max_mcmc_steps"], o["num_mcmc_steps"])
        o["num_integration_steps"] = check_int(
            "num_integration_steps", o["num_integration_steps"], 1
        )
        o["batch_size"] = check_int("batch_size", o["batch_size"], 0)
        o["max_tempering_steps"] = check_int("max_tempering_steps", o["max_tempering_steps"], 1)
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
        return cls(**o)

    def for_dimension(self, dim: int) -> _Options:
        """``"auto"``: RWM up to 10 unconstrained dimensions, else HMC; HMC's metric is dense when
        there are at least 10 particles per dimension (RWM's always)."""
        kernel = self.kernel
        if kernel == "auto":
            kernel = "rwm" if dim <= _AUTO_RWM_MAX_DIM else "hmc"
        dense = kernel == "rwm" or _DENSE_PARTICLES_PER_DIM * dim <= self.num_particles
        return self._replace(kernel=kernel, dense=dense)


class _Program(NamedTuple):
    """The jitted pieces of one SMC run, over the run axis: the initial clouds and one step."""

    initial: Callable  # keys (runs,) -> state
    advance: Callable  # (keys, state, eve, force) -> (state, eve, record)


def _program(split: potential.SplitDensity, unravel, dim: int, opts: _Options) -> _Program:
    """BlackJAX's adaptive tempered SMC with tuned inner moves, vectorised over the runs.

    The moves' parameters come from the weighted particle cloud (its covariance, or diagonal, as
    the metric) and their scale from the last step's acceptance (``inner_kernel_tuning``); the
    number of moves per step from the mixing statistic (:func:`_mixing_strategy`). A run already at
    lambda = 1 stays put unless ``force`` (the rejuvenation at lambda = 1).
    """
    from blackjax import adaptive_tempered_smc
    from blackjax.mcmc import hmc as bj_hmc
    from blackjax.mcmc import random_walk as bj_rw
    from blackjax.smc import inner_kernel_tuning, resampling
    from blackjax.smc.inner_kernel_tuning import StateWithParameterOverride
    from blackjax.smc.tempered import TemperedSMCState
    from blackjax.smc.tuning.from_kernel_info import update_scale_from_acceptance_rate

    log_parts = split.log_parts

    def logprior_fn(x):
        return log_parts(unravel(x))[0]

    def loglikelihood_fn(x):
        log_ref, log_joint = log_parts(unravel(x))
        v = log_joint - log_ref
        return jnp.where(jnp.isfinite(v), v, _FLOOR)

    if opts.kernel == "rwm":
        step_fn, init_fn, target_acc = _rwm_step, bj_rw.init, _RWM_TARGET
        make_params, knob0 = _rwm_params, 2.38 / math.sqrt(dim)
    else:
        step_fn = functools.partial(_hmc_step, num_integration_steps=opts.num_integration_steps)
        init_fn, target_acc = bj_hmc.init, _HMC_TARGET
        make_params = functools.partial(_hmc_params, dense=opts.dense)
        knob0 = 0.5 * dim**-0.25
    # the HMC step's ceiling: a nominal trajectory of at most a quarter period of a unit-variance
    # direction in the cloud's metric (module docstring, "The mutation")
    knob_max = 10.0 * knob0
    if opts.kernel == "hmc":
        knob_max = min(knob_max, _HMC_MAX_TIME / opts.num_integration_steps)
        knob0 = min(knob0, knob_max)

    def update_parameters(rng_key, state, info):
        """inner_kernel_tuning's update: the cloud's moments, the scale from the acceptance."""
        del rng_key
        moves = info.update_info
        knob = update_scale_from_acceptance_rate(
            jnp.reshape(moves.knob, (1,)), jnp.reshape(moves.acceptance_rate, (1,)), target_acc
        )[0]
        knob = jnp.clip(knob, 1e-4 * knob0, knob_max)
        return make_params(state.particles, state.weights, knob)

    smc_kernel = inner_kernel_tuning.build_kernel(
        adaptive_tempered_smc,
        logprior_fn,
        loglikelihood_fn,
        step_fn,
        init_fn,
        resampling.systematic,
        update_parameters,
        num_mcmc_steps=opts.num_mcmc_steps,
        target_ess=opts.target_ess,
        update_strategy=_mixing_strategy(
            opts.num_mcmc_steps, opts.max_mcmc_steps, opts.mixing_target
        ),
        batch_size=opts.batch_size,
    )
    over_runs = functools.partial(_over_runs, sequential=opts.batch_size > 0)

    def one_step(key, state, eve, force):
        """One tempering step of one run; a run already at lambda = 1 stays put unless forced."""
        new_state, info = smc_kernel(key, state)
        moves = info.update_info
        record = (
            new_state.sampler_state.tempering_param,
            info.log_likelihood_increment,
            moves.acceptance_rate,
            moves.num_moves,
            moves.correlation,
            1.0 / jnp.sum(new_state.sampler_state.weights**2),
            moves.knob,
        )
        keep = (state.sampler_state.tempering_param >= 1.0) & ~force
        new_state = jax.tree.map(lambda a, b: jnp.where(keep, a, b), state, new_state)
        return new_state, jnp.where(keep, eve, eve[info.ancestors]), record

    def initial_state(key):
        x0 = _map(
            lambda kk: ravel_pytree(split.draw_reference(kk))[0],
            jax.random.split(key, opts.num_particles),
            opts.batch_size,
        )
        w0 = jnp.full((opts.num_particles,), 1.0 / opts.num_particles, dtype=x0.dtype)
        params = make_params(x0, w0, jnp.asarray(knob0, dtype=x0.dtype))
        sampler_state = TemperedSMCState(x0, w0, jnp.zeros((), dtype=x0.dtype))
        return StateWithParameterOverride(sampler_state, params)

    advance = jax.jit(
        lambda keys, state, eve, force: over_runs(functools.partial(one_step, force=force))(
            keys, state, eve
        )
    )
    return _Program(jax.jit(over_runs(initial_state)), advance)


def _temper(advance, state, eve, key, opts: _Options, progress_bar: bool):
    """Step every run until all reach lambda = 1; per run the list of its steps' records."""
    lam = np.zeros(opts.num_runs)
    records = [[] for _ in range(opts.num_runs)]
    while (lam < 1.0).any():
        if max(len(r) for r in records) >= opts.max_tempering_steps:
            raise RuntimeError(
                f"max_tempering_steps: lambda reached only {lam.min():.3g} after "
                f"{opts.max_tempering_steps} tempering steps"
            )
        key, sub = jax.random.split(key)
        state, eve, rec = advance(jax.random.split(sub, opts.num_runs), state, eve, False)
        rec = [np.asarray(r) for r in rec]
        for r in np.flatnonzero(lam < 1.0):
            records[r].append(tuple(float(v[r]) for v in rec))
        lam = rec[0]
        if not np.isfinite(lam).all():
            raise RuntimeError("the adaptive schedule failed (lambda is nan): non-finite weights")
        if progress_bar:
            say(
                "smc step %d: lambda = %s, moves = %s, acceptance = %s, %s = %s",
                max(len(r) for r in records),
                np.array2string(lam, precision=4),
                np.array2string(rec[3]),
                np.array2string(rec[2], precision=3),
                "step" if opts.kernel == "hmc" else "scale",
                np.array2string(rec[6], precision=3),
            )
    return state, eve, records, key


def _smc_attrs(records, run_var, last, eve, opts: _Options, improper) -> dict:
    """The evidence, the per-run and per-step diagnostics and the settings (run_smc's attrs)."""
    steps = [np.asarray(r) for r in records]  # per run: (steps, 7)
    log_z = np.array([float(np.sum(s[:, 1])) for s in steps])
    per_step = ("tempering_schedule", "log_evidence_increments", "acceptance_rate", "num_moves",
                "mixing_correlation", "ess", "move_scale")  # fmt: skip
    attrs = {
        **_evidence_summary(log_z, run_var, opts.evidence_tolerance),
        "num_runs": opts.num_runs,
        "num_tempering_steps": np.array([s.shape[0] for s in steps]),
        **{name: np.concatenate([s[:, i] for s in steps]) for i, name in enumerate(per_step)},
        "ess_final": np.array([s[-1, 5] for s in steps]),
        "final_acceptance_rate": np.asarray(last[2], dtype=np.float64),
        "final_num_moves": np.asarray(last[3], dtype=np.int64),
        "kernel": opts.kernel,
        "dense_metric": int(opts.dense),
        "num_particles": opts.num_particles,
        "num_mcmc_steps": opts.num_mcmc_steps,
        "max_mcmc_steps": opts.max_mcmc_steps,
        "mixing_target": opts.mixing_target,
        "target_ess": opts.target_ess,
        "improper_sites": ",".join(sorted(improper)),
        "num_eve_lineages": np.array([np.unique(e).size for e in eve]),
        "min_lineages": opts.min_lineages,
        "evidence_tolerance": opts.evidence_tolerance,
    }
    attrs["num_moves"] = attrs["num_moves"].astype(np.int64)
    return attrs


def _announce(log_parts, unravel, flat0, dim, opts: _Options):
    """Say what the run will do and what a tempering step costs, before the first one."""
    seconds = seconds_per_call(jax.jit(jax.grad(lambda x: log_parts(unravel(x))[1])), flat0)
    leapfrog = (opts.num_integration_steps + 1) if opts.kernel == "hmc" else 1
    per_move = opts.num_runs * opts.num_particles * leapfrog
    lo, hi = opts.num_mcmc_steps, opts.max_mcmc_steps
    announce(
        f"run_smc: {opts.num_runs} runs x {opts.num_particles} particles in {dim} dimensions, "
        f"{opts.kernel} moves; each tempering step ({lo}-{hi} moves; a run takes typically 5-40 "
        "steps)",
        (per_move * lo, per_move * hi),
        seconds,
    )


def _evidence_summary(log_z, run_var, tolerance):
    k = log_z.size
    mean = float(np.logaddexp.reduce(log_z) - math.log(k))
    if k > 1:
        se = float(np.std(log_z, ddof=1) / math.sqrt(k))
        scale2 = float(np.mean(run_var)) + tolerance**2
        chi2 = float(np.sum((log_z - log_z.mean()) ** 2) / scale2)
        p_value = float(stats.chi2.sf(chi2, k - 1))
    else:
        se, chi2, p_value = math.nan, math.nan, math.nan
    return {
        "log_evidence": mean,
        "log_evidence_se": se,
        "log_evidence_runs": log_z,
        "log_evidence_run_se": np.sqrt(run_var),
        "runs_chi2": chi2,
        "runs_p_value": p_value,
    }


class SMCWarning(UserWarning):
    """:func:`run_smc` found a sign that its log evidence or error bar cannot be trusted."""


def smc_problems(attrs) -> list[str]:
    """The warnings of :func:`run_smc` for a result's attrs (module docstring, "Warnings").

    A run whose draws descend from fewer than ``min_lineages`` of its initial particles, and runs
    whose log evidences disagree (``runs_p_value < 1e-3``), are reported; the list is empty
    otherwise.
    """
    out = []
    lineages = np.atleast_1d(np.asarray(attrs["num_eve_lineages"]))
    n = int(attrs["num_particles"])
    thr = int(attrs.get("min_lineages", default_min_lineages(n)))
    low = np.flatnonzero(lineages < thr)
    if low.size:
        which = ", ".join(f"run {r}: {int(lineages[r])}" for r in low)
        out.append(
            f"the draws descend from fewer than {thr} of the {n} initial particles ({which}): "
            "the particles collapsed onto a few lineages, so the log evidence is likely biased "
            "low and its standard error too small; lower mixing_target or raise max_mcmc_steps "
            "(more decorrelating moves per tempering step), or raise num_particles"
        )
    p = float(attrs.get("runs_p_value", math.nan))
    if math.isfinite(p) and p < _RUNS_ALPHA:
        runs = np.atleast_1d(np.asarray(attrs["log_evidence_runs"]))
        se = np.atleast_1d(np.asarray(attrs["log_evidence_run_se"]))
        out.append(
            f"the {runs.size} runs disagree on log Z ({', '.join(f'{v:.3f}' for v in runs)}; "
            f"chi2 = {float(attrs['runs_chi2']):.3g} on {runs.size - 1} dof, p = {p:.2g}, against "
            f"the runs' own genealogy errors (median {float(np.median(se)):.3g}) plus "
            f"{float(attrs.get('evidence_tolerance', 0.1)):g} nats): the moves do not mix enough "
            "for the evidence; lower mixing_target or raise max_mcmc_steps, or raise num_particles"
        )
    return out


def tempering_steps(idata):
    """The per-step record of an SMC result as a table, one row per (run, tempering step).

    Columns: ``run``, ``step``, ``lambda``, ``log_evidence_increment``, ``acceptance_rate``,
    ``num_moves``, ``mixing_correlation``, ``ess`` (of the incremental weights), ``move_scale``
    (the RWM scale or HMC step of the step's moves; absent in files written before it was
    recorded).
    """
    import pandas as pd

    a = idata.posterior.attrs
    counts = np.atleast_1d(np.asarray(a["num_tempering_steps"]))
    run = np.repeat(np.arange(counts.size), counts)
    step = np.concatenate([np.arange(c) for c in counts])
    cols = {
        "lambda": "tempering_schedule",
        "log_evidence_increment": "log_evidence_increments",
        "acceptance_rate": "acceptance_rate",
        "num_moves": "num_moves",
        "mixing_correlation": "mixing_correlation",
        "ess": "ess",
        "move_scale": "move_scale",
    }
    data = {"run": run, "step": step}
    data.update({k: np.asarray(a[v]) for k, v in cols.items() if v in a})
    return pd.DataFrame(data)
