"""Stochastic-gradient Langevin dynamics (SGLD) as a NumPyro MCMC kernel.

One step moves the unconstrained latent vector z by

    z <- z - eps_t grad U_batch(z) + sqrt(2 eps_t T) xi,    xi ~ N(0, I),

with U the potential energy (negative log joint in unconstrained space), T the temperature and
U_batch its minibatch estimate: a likelihood under ``numpyro.plate(name, N, subsample_size=b)`` sees
fresh indices every step, scaled by N / b by NumPyro, so U_batch is unbiased for U. Without a
subsample plate the gradient is the full-batch one and the kernel is the unadjusted Langevin
algorithm (ULA). There is no Metropolis correction: at a constant step size the chain is biased at
O(eps) (on a Gaussian with variance v, ULA's stationary variance is v / (1 - eps / (2 v))), and the
Welling-Teh decay (:func:`polynomial_decay`) removes the bias as eps_t -> 0.

Postprocessing (constrained values, deterministic sites) and ArviZ's ``observed_data`` and
``log_likelihood`` run the model with every subsample plate at full size (:attr:`SGLD.model`), so the
order parameters and the pointwise log likelihood describe the whole dataset.

References
----------
M. Welling and Y. W. Teh, "Bayesian learning via stochastic gradient Langevin dynamics", ICML 2011.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import xarray as xr
from jax import random
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions import biject_to
from numpyro.infer import MCMC
from numpyro.infer.initialization import init_to_uniform
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import (
    constrain_fn,
    initialize_model,
    log_likelihood,
    potential_energy,
)
from numpyro.util import is_prng_key, not_jax_tracer

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference._call import model_call, resolve_key
from bayes_attn.inference.convert import from_mcmc
from bayes_attn.inference.potential import full_plates
from bayes_attn.inference.record import RunRecord, tokens_of

StepSize = float | Callable[[jax.Array], jax.Array]

SAMPLE_STATS = ("potential_energy", "grad_norm", "step_size")
"""The state fields :func:`run_sgld` collects into ``sample_stats``."""


class SGLDState(NamedTuple):
    """State of one SGLD chain.

    Attributes
    ----------
    i : int array
        Number of steps taken (the schedule is evaluated at ``i`` for the next step).
    z : dict
        Unconstrained latent values (the sample field).
    z_grad : dict
        Minibatch gradient of the potential at ``z``, used by the next step.
    potential_energy : array
        Minibatch estimate of the potential energy at ``z`` (unbiased under a subsample plate).
    grad_norm : array
        Euclidean norm of ``z_grad`` over all unconstrained coordinates.
    step_size : array
        The step size of the move that produced ``z`` (0 at initialisation).
    rng_key : jax.Array
    """

    i: jax.Array
    z: dict
    z_grad: dict
    potential_energy: jax.Array
    grad_norm: jax.Array
    step_size: jax.Array
    rng_key: jax.Array


def _check_temperature(temperature) -> float:
    """Return ``temperature`` as a float, or raise if it is not finite and >= 0."""
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        t = math.nan
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    return t


def polynomial_decay(
    step_size: float, t0: float, gamma: float = 0.55
) -> Callable[[jax.Array], jax.Array]:
    """Welling and Teh's decaying step size, eps_t = step_size (1 + t / t0)^(-gamma).

    With 0.5 < gamma <= 1, sum_t eps_t diverges and sum_t eps_t^2 converges, so the chain forgets
    its start and the O(eps) discretisation bias vanishes. Any callable ``t -> eps_t`` works as
    ``SGLD(step_size=...)``, optax schedules (``optax.exponential_decay``, ...) included.

    Parameters
    ----------
    step_size : float
        eps_0 > 0.
    t0 : float
        Steps over which the step size stays near eps_0 (> 0).
    gamma : float
        Decay exponent in (0.5, 1].
    """
    step_size = check_positive("step_size", step_size)
    t0 = check_positive("t0", t0)
    if not 0.5 < gamma <= 1:
        raise ValueError(f"gamma must lie in (0.5, 1], got {gamma!r}")

    def schedule(t: jax.Array) -> jax.Array:
        return step_size * (1.0 + t / t0) ** (-gamma)

    return schedule


class SGLD(MCMCKernel):
    """Stochastic-gradient Langevin dynamics over a NumPyro model (module docstring for the update).

    Works with every ``chain_method`` of :class:`numpyro.infer.MCMC`, ``"vectorized"`` included.
    Warm-up steps are ordinary steps (nothing is adapted); a step-size schedule is evaluated at the
    total step count, warm-up included.

    Parameters
    ----------
    model : callable
        A NumPyro model. A likelihood under ``numpyro.plate(..., subsample_size=b)`` gives minibatch
        gradients with fresh indices every step.
    step_size : float or callable
        A constant eps > 0, or a schedule ``t -> eps_t`` of the step count (e.g.
        :func:`polynomial_decay` or an optax schedule).
    temperature : float
        T >= 0; the chain targets exp(-U / T). T = 0 is (stochastic) gradient descent.
    init_strategy : callable
        NumPyro init strategy for chains that ``MCMC.run(init_params=...)`` does not place.

    Notes
    -----
    ``init_params`` given to ``MCMC.run`` are *constrained* site values (e.g. an Adam solution),
    with a leading chain axis when there are several chains; sites left out start from
    ``init_strategy``. (NumPyro's HMC takes unconstrained values; they coincide for real sites.)

    Collect diagnostics with ``mcmc.run(..., extra_fields=("potential_energy", "grad_norm",
    "step_size"))``; see :class:`SGLDState`. ArviZ reports ``potential_energy`` as ``lp`` (negated).
    """

    sample_field = "z"
    default_fields = ("z",)

    def __init__(
        self,
        model: Callable,
        step_size: StepSize = 1e-4,
        temperature: float = 1.0,
        *,
        init_strategy: Callable = init_to_uniform,
    ):
        if callable(step_size):
            check_positive("step_size", step_size(0))
        else:
            step_size = check_positive("step_size", step_size)
        self._temperature = _check_temperature(temperature)
        self._model = model
        self._full_model = full_plates(model)
        self._step_size = step_size
        self._init_strategy = init_strategy
        self._batched = False

    @property
    def model(self) -> Callable:
        """The model with every subsample plate at full size: what :meth:`postprocess_fn` and
        ArviZ (observed data, pointwise log likelihood) see."""
        return self._full_model

    def get_diagnostics_str(self, state: SGLDState) -> str:
        return f"step size {state.step_size:.2e}, |grad U| {state.grad_norm:.2e}"

    def postprocess_fn(self, model_args, model_kwargs) -> Callable[[dict], dict]:
        """Unconstrained z -> constrained sites and deterministic sites, on the full data.

        Jitted: ``MCMC`` also calls it outside its compiled loop, where an eager replay of the
        model would compile every operation on its own.
        """
        constrain = partial(constrain_fn, self._full_model, model_args, model_kwargs or {})
        return jax.jit(partial(constrain, return_deterministic=True))

    def _per_chain(self, fn: Callable) -> Callable:
        """``fn`` over one chain, mapped over the leading chain axis under vectorized chains."""
        return jax.vmap(fn) if self._batched else fn

    def _eps(self, i: jax.Array) -> jax.Array:
        eps = self._step_size(i) if callable(self._step_size) else self._step_size
        return jnp.asarray(eps, dtype=float)

    def _potential_and_grad(self, z, rng_key, model_args, model_kwargs):
        """Minibatch potential and its gradient; ``rng_key`` draws the subsample indices."""
        model = handlers.seed(self._model, rng_key)
        return jax.value_and_grad(partial(potential_energy, model, model_args, model_kwargs))(z)

    def _init_one(self, z, rng_key, model_args, model_kwargs) -> SGLDState:
        rng_key, key_batch = random.split(rng_key)
        pe, z_grad = self._potential_and_grad(z, key_batch, model_args, model_kwargs)
        grad_norm = jnp.linalg.norm(ravel_pytree(z_grad)[0])
        return SGLDState(jnp.array(0), z, z_grad, pe, grad_norm, jnp.array(0.0), rng_key)

    def _step(self, state: SGLDState, model_args, model_kwargs) -> SGLDState:
        eps = self._eps(state.i)
        rng_key, key_noise, key_batch = random.split(state.rng_key, 3)
        flat, unravel = ravel_pytree(state.z)
        grad = ravel_pytree(state.z_grad)[0]
        noise = random.normal(key_noise, flat.shape, flat.dtype)
        z = unravel(flat - eps * grad + jnp.sqrt(2.0 * eps * self._temperature) * noise)
        pe, z_grad = self._potential_and_grad(z, key_batch, model_args, model_kwargs)
        grad_norm = jnp.linalg.norm(ravel_pytree(z_grad)[0])
        return SGLDState(state.i + 1, z, z_grad, pe, grad_norm, eps, rng_key)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs) -> SGLDState:
        """Initial state; under vectorized chains ``rng_key`` is a batch of keys, one per chain."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        self._batched = not is_prng_key(rng_key)
        init_one = partial(self._init_one, model_args=model_args, model_kwargs=model_kwargs)

        def init_all(rng_key, init_params):
            # compiled as one program: run eagerly, each operation of the model compiles on its own
            if self._batched:
                rng_key, key_init = jnp.swapaxes(jax.vmap(random.split)(rng_key), 0, 1)
            else:
                rng_key, key_init = random.split(rng_key)
            info = initialize_model(
                key_init,
                self._full_model,
                init_strategy=self._init_strategy,
                model_args=model_args,
                model_kwargs=model_kwargs,
                validate_grad=False,  # init_one computes the gradient, checked below
            )
            z = info.param_info.z
            if init_params is not None:
                supports = {
                    name: site["fn"].support
                    for name, site in info.model_trace.items()
                    if site["type"] == "sample" and not site["is_observed"]
                }
                unknown = sorted(set(init_params) - set(supports))
                if unknown:
                    raise ValueError(f"init_params has no latent site(s) {unknown} in the model")

                def unconstrain(values):
                    return {
                        k: biject_to(supports[k]).inv(jnp.asarray(v)) for k, v in values.items()
                    }

                z = {**z, **self._per_chain(unconstrain)(init_params)}
            return self._per_chain(init_one)(z, rng_key)

        state = jax.jit(init_all)(rng_key, init_params)
        if not_jax_tracer(state.potential_energy):
            finite = np.isfinite(state.potential_energy) & np.isfinite(state.grad_norm)
            if not np.all(finite):
                bad = np.flatnonzero(~np.atleast_1d(finite)).tolist()
                raise RuntimeError(
                    f"SGLD cannot start chain(s) {bad}: the potential energy or its gradient is "
                    "not finite at the initial values"
                )
        return state

    def sample(self, state: SGLDState, model_args, model_kwargs) -> SGLDState:
        """One SGLD step per chain."""
        step = partial(self._step, model_args=model_args, model_kwargs=model_kwargs)
        return self._per_chain(step)(state)


def _log_likelihood(mcmc: MCMC, model_args, model_kwargs, dims) -> xr.Dataset | None:
    """Pointwise log likelihood of every observed site over the full data (the kernel's model)."""
    samples = mcmc.get_samples(group_by_chain=True)
    ll = log_likelihood(mcmc.sampler.model, samples, *model_args, batch_ndims=2, **model_kwargs)
    if not ll:
        return None
    data = {k: np.asarray(v) for k, v in ll.items()}
    return az.dict_to_dataset(data, library=numpyro, dims=dims)


def run_sgld(
    model,
    *args,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_samples: int = 1000,
    step_size: StepSize = 1e-4,
    temperature: float = 1.0,
    seed: int | None = None,
    key=None,
    thinning: int = 1,
    progress_bar: bool = True,
    init_params: dict | None = None,
    **kwargs,
) -> az.InferenceData:
    """Sample ``model(*model_args, **model_kwargs)`` with :class:`SGLD`, chains vectorised.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.network_model` with ``batch_size`` set.
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from the sampler's options (the old positional form warns).
    num_chains, num_warmup, num_samples, thinning : int
        Warm-up steps are discarded (no adaptation); every ``thinning``-th later step is kept.
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given).
    step_size : float or callable
        Constant step size or schedule, see :class:`SGLD`.
    temperature : float
    init_params : dict, optional
        Constrained starting values per site (e.g. an Adam solution), with a leading chain axis
        when ``num_chains > 1``.

    Returns
    -------
    arviz.InferenceData
        As :func:`bayes_attn.inference.run_nuts`: ``posterior`` (sites and deterministic order
        parameters over the full data), ``observed_data`` (``tokens``, when the model is given a
        dataset) and ``attrs``; ``sample_stats`` with ``potential_energy`` (the minibatch estimate;
        ``lp`` is its negative), ``grad_norm`` and ``step_size``; and ``log_likelihood`` over every
        data point (dim ``sequence`` for a token dataset), when the model has observed sites.
    """
    model_args, model_kwargs = model_call("run_sgld", args, kwargs, model_args, model_kwargs)
    rng, seed, key_attrs = resolve_key(key, seed)
    num_chains = check_int("num_chains", num_chains, 1)
    num_warmup = check_int("num_warmup", num_warmup, 0)
    thinning = check_int("thinning", thinning, 1)
    num_samples = check_int("num_samples", num_samples, thinning)
    mcmc = MCMC(
        SGLD(model, step_size, temperature),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        thinning=thinning,
        chain_method="vectorized",
        progress_bar=progress_bar,
    )
    mcmc.run(
        rng,
        *model_args,
        extra_fields=SAMPLE_STATS,
        init_params=init_params,
        **model_kwargs,
    )
    tokens = tokens_of(model, model_args, model_kwargs)
    step = step_size if isinstance(step_size, int | float) else f"schedule {step_size!r}"
    record = RunRecord(
        "sgld",
        seed,
        num_chains,
        num_warmup,
        num_samples // thinning,
        thinning,
        settings={
            "step_size": step,
            "temperature": temperature,
            "init_given": init_params is not None,
            **key_attrs,
        },
    )
    idata = from_mcmc(mcmc, record, model, model_args, model_kwargs)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    potential = np.asarray(extra["potential_energy"])
    az.set_variable(idata, "sample_stats", "potential_energy", ("chain", "draw"), potential)
    dims = None if tokens is None else {"y": ["sequence"]}
    loglik = _log_likelihood(mcmc, model_args, model_kwargs, dims)
    if loglik is not None:
        loglik.attrs.update(idata.posterior.attrs)
        az.set_group(idata, "log_likelihood", loglik)
    return idata
