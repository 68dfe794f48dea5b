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
  (each step gains ~ -log(target_ess) nats of information, and the volume ratio is
  ~ log(reference_scale / posterior width) per dimension).

Observed sites and ``numpyro.factor`` sites always count as likelihood. For the order-parameter
model the log evidence is therefore ``log int exp(-chi s(c)) dc`` (plus the Jacobian where the
model samples ``aG``), the same normaliser as :func:`bayes_attn.analysis.modes`' basin masses
(their ``logsumexp(log_weight)``).

The MCMC move
-------------
BlackJAX's adaptive tempered kernel picks each lambda increment so that the ESS of the incremental
weights is ``target_ess`` times the number of particles; particles are resampled (systematic) and
then moved by ``num_mcmc_steps`` steps of an MCMC kernel that leaves ``pi_lambda`` invariant. The
kernel's parameters are re-tuned after every step from the weighted particle cloud (the
``inner_kernel_tuning`` idea, written out here because the scale update also needs the previous
scale and the acceptance rate):

* ``"rwm"`` (default up to 10 unconstrained dimensions): Gaussian random-walk Metropolis with
  proposal covariance ``scale^2 Cov_w(particles)`` (dense; its Cholesky factor is recomputed every
  step), ``scale`` starting at 2.38/sqrt(d) and multiplied by ``exp(acc - 0.3)`` after each step
  (``acc``: the mean acceptance rate of the step's moves; kept within [1e-4, 10] times its start).
  This is robust for the 1-2-D multimodal reduced models: the cloud covariance sets the shape, and
  when the cloud spans two separated modes the acceptance rate shrinks the scale to the width of a
  mode. Mode weights are carried by the importance weights along the path, not by the moves.
* ``"hmc"`` (default above 10 dimensions): HMC with diagonal inverse mass matrix
  ``Var_w(particles)``, ``num_integration_steps`` leapfrog steps, step size starting at
  ``0.5 d^(-1/4)`` and multiplied by ``exp(acc - 0.65)`` after each step. One move costs
  ``num_integration_steps`` gradient evaluations per particle, so one SMC run costs about
  ``num_particles x num_mcmc_steps x num_integration_steps x (number of tempering steps)``
  gradients: for :func:`network_model` or :func:`kernel_limit_model` at the paper's sizes, with
  tempering steps growing with the dimension (measured: 8-9 steps in 1-D, 24 for a 49-D M, 28 for a
  56-D network, 256 particles), this is far more than NUTS needs for one mode; use
  ``batch_size`` to bound memory (particles are then processed ``batch_size`` at a time with
  ``jax.lax.map`` instead of one ``vmap``).

Output
------
After lambda reaches 1 one more resample-and-move step at lambda = 1 (increment 0) leaves
``num_particles`` equally weighted draws, returned as one chain.

References
----------
Del Moral, Doucet & Jasra (2006), "Sequential Monte Carlo samplers"; Jasra et al. (2011) for the
adaptive (ESS-based) schedule; Buchholz, Chopin & Jacob (2021) for tuning the move from the
particles. BlackJAX ``blackjax.smc.adaptive_tempered``.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import xarray as xr
from blackjax.mcmc import hmc as bj_hmc
from blackjax.mcmc import random_walk as bj_rw
from blackjax.smc import adaptive_tempered, resampling
from blackjax.smc.tempered import TemperedSMCState
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import constrain_fn

import bayes_attn
from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference.nuts import _coords, _describe

__all__ = ["SplitDensity", "run_smc", "split_log_density"]

_RWM_TARGET = 0.3
_HMC_TARGET = 0.65
_AUTO_RWM_MAX_DIM = 10
_FLOOR = -1e100  # stands in for -inf / nan log densities (0 * floor = 0 at lambda = 0)


# --------------------------------------------------------------------------------------------------
# Splitting a NumPyro model into reference and target


def _base(fn):
    """Strip ExpandedDistribution / Independent / MaskedDistribution wrappers."""
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    return fn


def _is_improper(fn) -> bool:
    return isinstance(_base(fn), dist.ImproperUniform)


def _site_log_prob(site):
    lp = site["fn"].log_prob(site["value"])
    if site["scale"] is not None:
        lp = site["scale"] * lp
    return jnp.sum(lp)


class SplitDensity(NamedTuple):
    """The reference / target split that :func:`run_smc` tempers along (:func:`split_log_density`).

    Attributes
    ----------
    log_parts : callable
        ``log_parts(u) -> (log_ref, log_joint)`` for a dict ``u`` of unconstrained values.
        ``log_joint`` is minus NumPyro's potential energy; ``log_ref`` is the normalised reference
        (proper priors in unconstrained space, ``Normal(reference_loc, reference_scale)`` for
        improper sites).
    draw_reference : callable
        ``draw_reference(key) -> u``: one draw from the reference (prior draws of proper sites,
        the Normal for improper ones), in unconstrained space.
    shapes : dict
        Latent site name -> shape of its unconstrained value.
    improper : tuple of str
        The latent sites with an improper base distribution.
    """

    log_parts: Callable
    draw_reference: Callable
    shapes: dict
    improper: tuple


def split_log_density(
    model, model_args=(), model_kwargs=None, *, reference_loc=0.0, reference_scale=10.0
) -> SplitDensity:
    """Split ``model``'s log joint (unconstrained space) into a normalised reference and the rest.

    Latent sites are the sample sites that are not observed; observed sites and ``numpyro.factor``
    sites are likelihood. The model is only traced abstractly here (``jax.eval_shape``), so this
    costs no model evaluation.
    """
    model_args = tuple(model_args)
    model_kwargs = dict(model_kwargs or {})
    ref = dist.Normal(reference_loc, reference_scale)
    found: dict = {}

    def draw_reference(key):
        u = {}

        def sub(site):
            if site["type"] != "sample" or site["is_observed"]:
                return None
            name = site["name"]
            improper = _is_improper(site["fn"])
            found[name] = improper
            if not improper:  # sample the prior, unconstrain below
                return None
            t = biject_to(site["fn"].support)
            u[name] = ref.sample(site["kwargs"]["rng_key"], t.inverse_shape(site["fn"].shape()))
            return t(u[name])

        tr = handlers.trace(
            handlers.substitute(handlers.seed(model, rng_seed=key), substitute_fn=sub)
        ).get_trace(*model_args, **model_kwargs)
        for name, site in tr.items():
            if name in found and name not in u:
                u[name] = biject_to(site["fn"].support).inv(site["value"])
        return u

    shapes = jax.tree.map(lambda a: a.shape, jax.eval_shape(draw_reference, jax.random.key(0)))
    improper = tuple(sorted(n for n, flag in found.items() if flag))

    def log_parts(u):
        jac = {}

        def sub(site):
            name = site["name"]
            if site["type"] == "sample" and name in u:
                t = biject_to(site["fn"].support)
                x = u[name]
                v = t(x)
                ld = jnp.sum(t.log_abs_det_jacobian(x, v))
                jac[name] = ld if site["scale"] is None else site["scale"] * ld
                return v
            return None

        tr = handlers.trace(handlers.substitute(model, substitute_fn=sub)).get_trace(
            *model_args, **model_kwargs
        )
        log_ref = jnp.zeros(())
        log_joint = jnp.zeros(())
        for name, site in tr.items():
            if site["type"] != "sample":
                continue
            lp = _site_log_prob(site)
            if name in u:
                lp = lp + jac[name]
                log_ref = log_ref + (jnp.sum(ref.log_prob(u[name])) if name in improper else lp)
            log_joint = log_joint + lp
        return log_ref, log_joint

    return SplitDensity(log_parts, draw_reference, shapes, improper)


def _map(fn, xs, batch_size):
    return jax.lax.map(fn, xs, batch_size=batch_size) if batch_size else jax.vmap(fn)(xs)


# --------------------------------------------------------------------------------------------------
# MCMC moves and their tuning from the particle cloud


def _weighted_moments(x, w):
    mean = w @ x
    xc = x - mean
    return mean, (w[:, None] * xc).T @ xc


def _rwm_step(rng_key, state, logdensity_fn, chol, scale):
    return bj_rw.build_additive_step()(rng_key, state, logdensity_fn, bj_rw.normal(scale * chol))


def _rwm_params(x, w, scale):
    d = x.shape[1]
    _, cov = _weighted_moments(x, w)
    jitter = 1e-10 * (jnp.trace(cov) / d + 1e-30)
    chol = jnp.linalg.cholesky(cov + jitter * jnp.eye(d))
    return {"chol": chol[None], "scale": jnp.reshape(scale, (1,))}


def _hmc_step(rng_key, state, logdensity_fn, inverse_mass_matrix, step_size, num_integration_steps):
    return bj_hmc.build_kernel()(
        rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, num_integration_steps
    )


def _hmc_params(x, w, step_size):
    var = w @ (x - w @ x) ** 2
    var = var + 1e-10 * (jnp.mean(var) + 1e-30)
    return {"inverse_mass_matrix": var[None], "step_size": jnp.reshape(step_size, (1,))}


# --------------------------------------------------------------------------------------------------
# The sampler


def run_smc(
    model,
    *model_args,
    num_particles: int = 2000,
    num_mcmc_steps: int = 10,
    target_ess: float = 0.5,
    seed: int = 0,
    kernel: str = "auto",
    num_integration_steps: int = 8,
    reference_loc: float = 0.0,
    reference_scale: float = 10.0,
    batch_size: int = 0,
    max_steps: int = 1000,
    progress_bar: bool = False,
    **model_kwargs,
) -> az.InferenceData:
    """Sample ``model(*model_args, **model_kwargs)`` by adaptive tempered SMC and estimate its evidence.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.order_param_model`. Minibatched likelihoods
        (``network_model(..., batch_size=...)``) are refused: SMC needs the exact density.
    num_particles : int
        Particles (>= 2); also the number of draws returned.
    num_mcmc_steps : int
        MCMC moves per particle per tempering step.
    target_ess : float
        In (0, 1): each lambda increment keeps this fraction of effective particles.
    seed : int
    kernel : {"auto", "rwm", "hmc"}
        The move (module docstring). ``"auto"``: RWM up to 10 unconstrained dimensions, else HMC.
    num_integration_steps : int
        Leapfrog steps per HMC move.
    reference_loc, reference_scale : float
        The Normal reference in unconstrained space for latent sites with an improper base.
    batch_size : int
        0: ``vmap`` over all particles; > 0: ``jax.lax.map`` over batches of this size (bounds
        memory for the Level-0/1 models).
    max_steps : int
        Give up (RuntimeError) after this many tempering steps.
    progress_bar : bool
        Print lambda after each step.

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``num_particles`` equally weighted draws as (chain=1, draw=num_particles),
        latent and deterministic sites. ``sample_stats``: ``lp`` (log joint of each draw, the
        unconstrained-space log density without its normaliser) and ``eve`` (the index of each
        draw's ancestor among the lambda = 0 draws, for genealogy-based standard errors, as in
        :func:`bayes_attn.analysis.phases.phase_occupancy`). ``attrs`` (every group): those of
        :func:`run_nuts` (task, hyperparameters, activation, level, version), and ``sampler`` =
        "smc", ``log_evidence`` (sum of the log normalising-constant increments),
        ``num_tempering_steps``, ``tempering_schedule`` (lambda after each step, ending at 1),
        ``log_evidence_increments``, ``acceptance_rate`` and ``ess`` (ESS of the incremental
        weights) per step, ``ess_final`` (that of the last reweighting), ``kernel``,
        ``num_particles``, ``num_mcmc_steps``, ``target_ess``, ``reference``, ``improper_sites``,
        ``num_eve_lineages`` (distinct lambda = 0 ancestors left), ``seed``, ``wall_time_s``.
    """
    num_particles = check_int("num_particles", num_particles, 2)
    num_mcmc_steps = check_int("num_mcmc_steps", num_mcmc_steps, 1)
    num_integration_steps = check_int("num_integration_steps", num_integration_steps, 1)
    batch_size = check_int("batch_size", batch_size, 0)
    max_steps = check_int("max_steps", max_steps, 1)
    reference_scale = check_positive("reference_scale", reference_scale)
    target_ess = float(target_ess)
    if not 0.0 < target_ess < 1.0:
        raise ValueError(f"target_ess must be in (0, 1), got {target_ess}")
    if kernel not in ("auto", "rwm", "hmc"):
        raise ValueError(f"kernel must be 'auto', 'rwm' or 'hmc', got {kernel!r}")
    if model_kwargs.get("batch_size") is not None:
        raise ValueError("run_smc needs the full likelihood: pass batch_size=None to the model")
    t_start = time.perf_counter()

    split = split_log_density(
        model,
        model_args,
        model_kwargs,
        reference_loc=reference_loc,
        reference_scale=reference_scale,
    )
    log_parts, improper = split.log_parts, split.improper
    flat0, unravel = ravel_pytree({n: jnp.zeros(sh) for n, sh in split.shapes.items()})
    dim = int(flat0.shape[0])
    if kernel == "auto":
        kernel = "rwm" if dim <= _AUTO_RWM_MAX_DIM else "hmc"

    def logprior_fn(x):
        return log_parts(unravel(x))[0]

    def loglikelihood_fn(x):
        log_ref, log_joint = log_parts(unravel(x))
        v = log_joint - log_ref
        return jnp.where(jnp.isfinite(v), v, _FLOOR)

    if kernel == "rwm":
        step_fn, init_fn, target_acc = _rwm_step, bj_rw.init, _RWM_TARGET
        make_params, knob0 = _rwm_params, 2.38 / math.sqrt(dim)
    else:
        step_fn = functools.partial(_hmc_step, num_integration_steps=num_integration_steps)
        init_fn, target_acc = bj_hmc.init, _HMC_TARGET
        make_params, knob0 = _hmc_params, 0.5 * dim**-0.25

    smc_kernel = adaptive_tempered.build_kernel(
        logprior_fn,
        loglikelihood_fn,
        step_fn,
        init_fn,
        resampling.systematic,
        target_ess,
        batch_size=batch_size,
    )

    @jax.jit
    def one_step(key, state, knob):
        params = make_params(state.particles, state.weights, knob)
        new_state, info = smc_kernel(key, state, num_mcmc_steps, params)
        acc = jnp.mean(info.update_info.acceptance_rate)
        new_knob = jnp.clip(knob * jnp.exp(acc - target_acc), 1e-4 * knob0, 10.0 * knob0)
        ess = 1.0 / jnp.sum(new_state.weights**2)
        return new_state, new_knob, info.log_likelihood_increment, acc, ess, info.ancestors

    key = jax.random.key(seed)
    key, k_init = jax.random.split(key)
    x0 = jax.jit(
        lambda k: _map(
            lambda kk: ravel_pytree(split.draw_reference(kk))[0],
            jax.random.split(k, num_particles),
            batch_size,
        )
    )(k_init)
    state = TemperedSMCState(
        x0,
        jnp.asarray(np.full(num_particles, 1.0 / num_particles)),
        jnp.asarray(0.0, dtype=x0.dtype),
    )
    knob = jnp.asarray(knob0, dtype=x0.dtype)
    schedule, increments, accs, esss = [], [], [], []
    eve = np.arange(num_particles)  # index of each particle's ancestor among the lambda = 0 draws
    while float(state.tempering_param) < 1.0:
        if len(schedule) >= max_steps:
            raise RuntimeError(
                f"max_steps: lambda reached only {float(state.tempering_param):.3g} after "
                f"{max_steps} tempering steps"
            )
        key, sub = jax.random.split(key)
        state, knob, inc, acc, ess, anc = one_step(sub, state, knob)
        eve = eve[np.asarray(anc)]
        lam = float(state.tempering_param)
        if not math.isfinite(lam):
            raise RuntimeError("the adaptive schedule failed (lambda is nan): non-finite weights")
        schedule.append(lam)
        increments.append(float(inc))
        accs.append(float(acc))
        esss.append(float(ess))
        if progress_bar:
            print(f"smc step {len(schedule)}: lambda = {lam:.6g}, acceptance = {float(acc):.3f}")
    ess_final = esss[-1]
    # rejuvenate at lambda = 1 (increment 0), then resample to equal weights
    key, k_last, k_res = jax.random.split(key, 3)
    state, knob, inc, acc, _, anc = one_step(k_last, state, knob)
    idx = resampling.systematic(k_res, state.weights, num_particles)
    x = state.particles[idx]
    eve = eve[np.asarray(anc)][np.asarray(idx)]

    def values(xi):
        u = unravel(xi)
        out = constrain_fn(model, model_args, model_kwargs, u, return_deterministic=True)
        return out, log_parts(u)[1]

    draws, lp = jax.jit(lambda xs: _map(values, xs, batch_size))(x)
    log_z = float(np.sum(increments) + float(inc))
    attrs = {
        "sampler": "smc",
        "log_evidence": log_z,
        "num_tempering_steps": len(schedule),
        "tempering_schedule": np.asarray(schedule),
        "log_evidence_increments": np.asarray(increments),
        "acceptance_rate": np.asarray(accs),
        "ess": np.asarray(esss),
        "ess_final": ess_final,
        "final_acceptance_rate": float(acc),
        "kernel": kernel,
        "num_particles": num_particles,
        "num_mcmc_steps": num_mcmc_steps,
        "target_ess": target_ess,
        "reference": f"proper priors; Normal({reference_loc}, {reference_scale}) in unconstrained "
        "space for improper sites",
        "improper_sites": ",".join(sorted(improper)),
        "num_eve_lineages": int(np.unique(eve).size),
        "seed": int(seed),
        "wall_time_s": time.perf_counter() - t_start,
    }
    return _to_inference_data(draws, lp, eve, model, model_args, model_kwargs, attrs)


def _to_inference_data(draws, lp, eve, model, model_args, model_kwargs, extra) -> az.InferenceData:
    task = next((a for a in model_args if isinstance(a, bayes_attn.CopyTask)), None)
    coords, dims = _coords(task)
    posterior = {k: np.asarray(v)[None] for k, v in draws.items()}
    dims = {k: v for k, v in dims.items() if k in posterior}
    idata = az.from_dict(
        posterior=posterior,
        sample_stats={"lp": np.asarray(lp)[None], "eve": np.asarray(eve)[None]},
        coords=coords,
        dims=dims,
    )
    tokens = next(
        (a for a in model_args if hasattr(a, "ndim") and getattr(a, "ndim", 0) == 2), None
    )
    if tokens is not None:
        idata.add_groups(
            {
                "observed_data": xr.Dataset(
                    {"tokens": (("sequence", "position"), np.asarray(tokens))}
                )
            }
        )
    attrs = {**_describe(model, model_args, model_kwargs), **extra}
    for group in idata.groups():
        idata[group].attrs.update(attrs)
    return idata
