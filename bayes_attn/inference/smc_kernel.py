"""The moves of tempered SMC and one tempering step, as BlackJAX-style pieces: ``init`` and
``build_kernel``.

This module holds what one run of :func:`bayes_attn.inference.run_smc` does between two
tempering steps; the driver (:mod:`bayes_attn.inference.smc`) maps it over the runs, jits it,
loops, checkpoints and reports, and :mod:`bayes_attn.inference.smc_evidence` turns the per-step
records into the evidence and its warnings.

* :func:`tempered_log_densities`: BlackJAX's ``logprior_fn`` and ``loglikelihood_fn`` from the
  reference / target split of :func:`bayes_attn.inference.potential.split_log_density`.
* :func:`build_moves` -> :class:`Moves`: the MCMC move (random-walk Metropolis or HMC) for a
  dimension, with how its parameters follow from the weighted particle cloud.
* :func:`mixing_strategy`: BlackJAX's ``update_strategy`` hook that moves until the particles
  forget their start.
* :func:`init` -> :class:`RunState` and :func:`build_kernel` -> ``kernel(rng_key, state, force)
  -> (RunState, StepRecord)``: one run's state and one tempering step. Nothing here is jitted;
  the caller jits (as BlackJAX leaves it to its caller).

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
is within the runs' spread.

References
----------
Del Moral, Doucet & Jasra (2006), "Sequential Monte Carlo samplers"; Buchholz, Chopin & Jacob
(2021), "Adaptive tuning of Hamiltonian Monte Carlo within sequential Monte Carlo"; South, Pettitt
& Drovandi (2019); Neal (2011), "MCMC using Hamiltonian dynamics". BlackJAX
``blackjax.smc.adaptive_tempered``, ``blackjax.smc.inner_kernel_tuning``, ``blackjax.smc.base``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

__all__ = [
    "MoveInfo",
    "Moves",
    "RunState",
    "StepRecord",
    "build_kernel",
    "build_moves",
    "init",
    "map_particles",
    "mixing_strategy",
    "tempered_log_densities",
]

_RWM_TARGET = 0.3
_HMC_TARGET = 0.65
_HMC_MAX_TIME = math.pi / 2  # HMC: the longest nominal integration time, in the cloud's metric
_HMC_JITTER = 0.2  # HMC: each particle's step is the tuned one times U(1 - 0.2, 1 + 0.2)
_FLOOR = -1e100  # stands in for -inf / nan log densities (0 * floor = 0 at lambda = 0)

# BlackJAX is imported where it is used: importing it starts the JAX backend, which must wait
# for bayes_attn.distributed.initialize_distributed on a multi-process run.


class _StepInfo(NamedTuple):
    """What one move reports: its acceptance probability and the scale it used."""

    acceptance_rate: jax.Array
    knob: jax.Array


class MoveInfo(NamedTuple):
    """What the moves of one tempering step report (``SMCInfo.update_info``).

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


class StepRecord(NamedTuple):
    """What one tempering step of one run reports (the Info of :func:`build_kernel`'s kernel).

    Attributes
    ----------
    tempering_param : scalar
        lambda after the step.
    log_increment : scalar
        The log of the step's normalising-constant increment.
    acceptance_rate, num_moves, correlation : scalar
        Of the step's moves (:class:`MoveInfo`).
    ess : scalar
        The ESS of the incremental weights after the moves (``1 / sum w^2``).
    move_scale : scalar
        The RWM scale or the HMC step (before jitter) of the step's moves.
    mean_log_likelihood : scalar
        The weighted mean of the tempered part ``loglikelihood_fn`` over the particles after the
        step: its expectation under pi_lambda at the new lambda. It is read off the weights, with
        no new evaluation: the weights are ``w_i = exp(dl l_i) / sum_j exp(dl l_j)`` with ``dl``
        the step's increment of lambda, and the log increment is ``log mean_j exp(dl l_j)``, so
        ``dl l_i = log w_i + log_increment + log N`` and ``sum_i w_i l_i = (sum_i w_i log w_i +
        log_increment + log N) / dl``. NaN for a step that does not move lambda (the
        rejuvenation at lambda = 1).
    """

    tempering_param: jax.Array
    log_increment: jax.Array
    acceptance_rate: jax.Array
    num_moves: jax.Array
    correlation: jax.Array
    ess: jax.Array
    move_scale: jax.Array
    mean_log_likelihood: jax.Array = math.nan  # absent from records made before it


class RunState(NamedTuple):
    """One run's state, carried from tempering step to tempering step.

    Attributes
    ----------
    smc : blackjax.smc.inner_kernel_tuning.StateWithParameterOverride
        ``sampler_state`` (``TemperedSMCState``: particles (N, d), weights (N,), lambda) and
        ``parameter_override`` (the moves' parameters for the next step).
    eve : (N,) int
        Each particle's ancestor among the run's lambda = 0 particles.
    """

    smc: object
    eve: jax.Array


class Moves(NamedTuple):
    """The MCMC move of a run (:func:`build_moves`).

    Attributes
    ----------
    kind : {"rwm", "hmc"}
    step_fn : callable
        ``step_fn(rng_key, state, logdensity_fn, **params) -> (state, _StepInfo)``: one move.
    init_fn : callable
        BlackJAX's ``init`` of the move.
    make_params : callable
        ``make_params(particles, weights, scale) -> params``: the parameters from the weighted
        cloud (its covariance or diagonal) and the scale.
    target_acceptance : float
    scale0, scale_max : float
        The scale's start and ceiling (the floor is ``1e-4 scale0``).
    """

    kind: str
    step_fn: Callable
    init_fn: Callable
    make_params: Callable
    target_acceptance: float
    scale0: float
    scale_max: float


def _weighted_moments(x, w):
    mean = w @ x
    xc = x - mean
    return mean, (w[:, None] * xc).T @ xc


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


def build_moves(
    kind: str, dim: int, *, num_integration_steps: int = 8, dense: bool = True
) -> Moves:
    """The move ``kind`` ("rwm" or "hmc") in ``dim`` unconstrained dimensions (module docstring).

    RWM: scale from 2.38/sqrt(d), dense covariance, target acceptance 0.3. HMC: step from
    ``min(0.5 d^(-1/4), pi / (2 L))``, at most ``pi / (2 L)`` (a quarter period in the cloud's
    metric), the cloud's covariance (``dense``) or its diagonal as inverse mass, target 0.65.
    """
    from blackjax.mcmc import hmc as bj_hmc
    from blackjax.mcmc import random_walk as bj_rw

    if kind == "rwm":
        scale0 = 2.38 / math.sqrt(dim)
        return Moves(kind, _rwm_step, bj_rw.init, _rwm_params, _RWM_TARGET, scale0, 10.0 * scale0)
    if kind != "hmc":
        raise ValueError(f"kernel must be 'rwm' or 'hmc', got {kind!r}")
    scale0 = 0.5 * dim**-0.25
    scale_max = min(10.0 * scale0, _HMC_MAX_TIME / num_integration_steps)
    return Moves(
        kind,
        functools.partial(_hmc_step, num_integration_steps=num_integration_steps),
        bj_hmc.init,
        functools.partial(_hmc_params, dense=dense),
        _HMC_TARGET,
        min(scale0, scale_max),
        scale_max,
    )


def _centred_ranks(x):
    """Ranks of a vector, centred (ties broken by position)."""
    return jnp.argsort(jnp.argsort(x)) - 0.5 * (x.shape[0] - 1)


def _correlation(a, b):
    """Pearson correlation of each column pair of ``a``, ``b`` (n, k) (0 for a constant column)."""
    a = a - jnp.mean(a, axis=0)
    b = b - jnp.mean(b, axis=0)
    den = jnp.sqrt(jnp.sum(a * a, axis=0) * jnp.sum(b * b, axis=0))
    return jnp.where(den > 0, jnp.sum(a * b, axis=0) / jnp.where(den > 0, den, 1.0), 0.0)


def mixing_strategy(min_moves: int, max_moves: int, target: float):
    """A BlackJAX ``update_strategy`` that moves until the particles forget their start.

    ``blackjax.smc.base.update_and_take_last`` runs a fixed number of moves per particle (a
    ``lax.scan`` of static length, one chain per particle). The stopping rule here is a statistic
    of the whole particle cloud (module docstring, "The mutation"), so the loop is a
    ``lax.while_loop`` around the moves of all particles at once; each move is BlackJAX's kernel
    mapped over the particles (``blackjax.smc.base.map_kernel``). Its info is a :class:`MoveInfo`.
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


def tempered_log_densities(split, unravel) -> tuple[Callable, Callable]:
    """BlackJAX's ``(logprior_fn, loglikelihood_fn)`` over flat ``x`` from a
    :class:`~bayes_attn.inference.potential.SplitDensity`: the reference, and the log joint minus
    the reference (non-finite values floored at -1e100, so that lambda = 0 weighs them 0)."""
    log_parts = split.log_parts

    def logprior_fn(x):
        return log_parts(unravel(x))[0]

    def loglikelihood_fn(x):
        log_ref, log_joint = log_parts(unravel(x))
        v = log_joint - log_ref
        return jnp.where(jnp.isfinite(v), v, _FLOOR)

    return logprior_fn, loglikelihood_fn


def map_particles(fn, xs, batch_size: int = 0):
    """``fn`` over the leading (particle) axis of ``xs``: one ``vmap`` (``batch_size`` 0), or
    ``jax.lax.map`` over batches of ``batch_size``."""
    return jax.lax.map(fn, xs, batch_size=batch_size) if batch_size else jax.vmap(fn)(xs)


def init(
    rng_key, draw_reference, moves: Moves, *, num_particles: int, batch_size: int = 0
) -> RunState:
    """One run's initial state: ``num_particles`` draws from the reference (``draw_reference(key)
    -> dict of unconstrained values``, flattened), equal weights, lambda = 0, the moves'
    parameters from that cloud at the scale's start, and each particle its own eve."""
    from blackjax.smc.inner_kernel_tuning import StateWithParameterOverride
    from blackjax.smc.tempered import TemperedSMCState

    x0 = map_particles(
        lambda kk: ravel_pytree(draw_reference(kk))[0],
        jax.random.split(rng_key, num_particles),
        batch_size,
    )
    w0 = jnp.full((num_particles,), 1.0 / num_particles, dtype=x0.dtype)
    params = moves.make_params(x0, w0, jnp.asarray(moves.scale0, dtype=x0.dtype))
    sampler_state = TemperedSMCState(x0, w0, jnp.zeros((), dtype=x0.dtype))
    return RunState(StateWithParameterOverride(sampler_state, params), jnp.arange(num_particles))


def _mean_log_likelihood(weights, log_increment, delta):
    """The weighted mean of ``loglikelihood_fn`` after a step, from its weights alone
    (:class:`StepRecord`); NaN where ``delta`` (the step's increment of lambda) is 0."""
    w_log_w = jnp.sum(
        jnp.where(weights > 0, weights * jnp.log(jnp.where(weights > 0, weights, 1.0)), 0.0)
    )
    n = weights.shape[0]
    safe = jnp.where(delta > 0, delta, 1.0)
    return jnp.where(delta > 0, (w_log_w + log_increment + jnp.log(n)) / safe, jnp.nan)


def build_kernel(
    logprior_fn: Callable,
    loglikelihood_fn: Callable,
    moves: Moves,
    *,
    num_mcmc_steps: int,
    max_mcmc_steps: int,
    mixing_target: float,
    target_ess: float,
    batch_size: int = 0,
) -> Callable:
    """One tempering step of one run: ``kernel(rng_key, state, force) -> (RunState, StepRecord)``.

    BlackJAX's adaptive tempered SMC (systematic resampling, ``target_ess``) wrapped in
    ``inner_kernel_tuning``: after each step the moves' parameters come from the weighted cloud
    and their scale from the step's acceptance (:class:`Moves`), and the number of moves per step
    from the mixing statistic (:func:`mixing_strategy`). A run already at lambda = 1 stays put
    (state and eves unchanged) unless ``force``: the rejuvenation at lambda = 1.
    """
    from blackjax import adaptive_tempered_smc
    from blackjax.smc import inner_kernel_tuning, resampling
    from blackjax.smc.tuning.from_kernel_info import update_scale_from_acceptance_rate

    def update_parameters(rng_key, state, info):
        """inner_kernel_tuning's update: the cloud's moments, the scale from the acceptance."""
        del rng_key
        m = info.update_info
        scale = update_scale_from_acceptance_rate(
            jnp.reshape(m.knob, (1,)), jnp.reshape(m.acceptance_rate, (1,)), moves.target_acceptance
        )[0]
        scale = jnp.clip(scale, 1e-4 * moves.scale0, moves.scale_max)
        return moves.make_params(state.particles, state.weights, scale)

    smc_kernel = inner_kernel_tuning.build_kernel(
        adaptive_tempered_smc,
        logprior_fn,
        loglikelihood_fn,
        moves.step_fn,
        moves.init_fn,
        resampling.systematic,
        update_parameters,
        num_mcmc_steps=num_mcmc_steps,
        target_ess=target_ess,
        update_strategy=mixing_strategy(num_mcmc_steps, max_mcmc_steps, mixing_target),
        batch_size=batch_size,
    )

    def kernel(rng_key, state: RunState, force) -> tuple[RunState, StepRecord]:
        new, info = smc_kernel(rng_key, state.smc)
        m = info.update_info
        record = StepRecord(
            tempering_param=new.sampler_state.tempering_param,
            log_increment=info.log_likelihood_increment,
            acceptance_rate=m.acceptance_rate,
            num_moves=m.num_moves,
            correlation=m.correlation,
            ess=1.0 / jnp.sum(new.sampler_state.weights**2),
            move_scale=m.knob,
            mean_log_likelihood=_mean_log_likelihood(
                new.sampler_state.weights,
                info.log_likelihood_increment,
                new.sampler_state.tempering_param - state.smc.sampler_state.tempering_param,
            ),
        )
        keep = (state.smc.sampler_state.tempering_param >= 1.0) & ~force
        new = jax.tree.map(lambda a, b: jnp.where(keep, a, b), state.smc, new)
        return RunState(new, jnp.where(keep, state.eve, state.eve[info.ancestors])), record

    return kernel
