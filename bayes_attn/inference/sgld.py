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
With a fixed diagonal G (``preconditioner=``) the step is z - eps_t G grad U + sqrt(2 eps_t T G) xi,
with the same stationary law (:mod:`~bayes_attn.inference.sgld_precondition`).

Postprocessing (constrained values, deterministic sites) and ArviZ's ``observed_data`` and
``log_likelihood`` run the model with every subsample plate at full size (:attr:`SGLD.model`), so the
order parameters and the pointwise log likelihood describe the whole dataset.

References
----------
M. Welling and Y. W. Teh, "Bayesian learning via stochastic gradient Langevin dynamics", ICML 2011.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
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
from bayes_attn._validation import SamplerDiverged, check_int, check_positive
from bayes_attn.inference import sgld_precondition as pre
from bayes_attn.inference._call import sampler_call
from bayes_attn.inference.convert import from_draws
from bayes_attn.inference.potential import full_plates
from bayes_attn.inference.record import RunRecord, tokens_of
from bayes_attn.keys import resolve_key
from bayes_attn.progress import bar as make_bar

StepSize = float | Callable[[jax.Array], jax.Array]

SAMPLE_STATS = ("potential_energy", "grad_norm", "step_size")
"""The state fields :func:`run_sgld` collects into ``sample_stats``."""

BLOWUP = 1e3
"""A chain has blown up when its potential energy rises more than ``BLOWUP (D + 10) max(T, 1)``
above its start (D the unconstrained dimension): in equilibrium it sits O(D T) above the mode."""


@dataclasses.dataclass(frozen=True)
class SGLDSettings:
    """:func:`run_sgld`'s options and their defaults (the one place they are set; the CLI's
    options and the ``sgld`` sweep's ``DEFAULTS`` read them); :meth:`checked` checks the counts
    and ``dtype``, :class:`SGLD` the step, the temperature and ``noise_dtype``.

    Attributes
    ----------
    num_chains : int
        Chains, vectorised (default 4).
    num_warmup : int
        Discarded warm-up steps, no adaptation (default 1000).
    num_samples : int
        Steps after the warm-up (default 1000), at least ``thinning``.
    step_size : float or callable
        A constant step size (default 1e-4), or a schedule ``t -> eps_t`` (:class:`SGLD`).
    temperature : float
        T >= 0 (default 1); the chains target exp(-U / T).
    thinning : int
        Every ``thinning``-th step after the warm-up is kept (default 1).
    dtype : {"float64", "float32"}
        float32 runs the whole run with JAX's 64-bit mode off (about twice as fast on CPU, for
        work where float64 is not needed; the theory's comparisons need float64). Default
        ``"float64"``.
    fused, noise_dtype : bool, {None, "float32"}
        Faster steps with the same stationary law (:class:`SGLD`), off by default: the defaults
        keep the draws equal to NumPyro ``MCMC``'s to the bit.
    preconditioner : dict, optional
        A fixed diagonal G, ``{site: scale > 0}`` (:class:`SGLD`); default None (G = I).
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    step_size: StepSize = 1e-4
    temperature: float = 1.0
    thinning: int = 1
    dtype: str = "float64"
    fused: bool = False
    noise_dtype: str | None = None
    preconditioner: dict | None = None

    def checked(self) -> SGLDSettings:
        """The counts (as ints) and ``dtype`` checked before any work starts."""
        thinning = check_int("thinning", self.thinning, 1)
        counts = dict(num_chains=check_int("num_chains", self.num_chains, 1),
                      num_warmup=check_int("num_warmup", self.num_warmup, 0), thinning=thinning,
                      num_samples=check_int("num_samples", self.num_samples, thinning))  # fmt: skip
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        return dataclasses.replace(self, **counts)


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
    fused : bool
        Add the noise site by site (each site's slice of the one flat draw) instead of through
        flat copies of z and the gradient: the same noise and the same update, so the same
        chain, but rounded in another order (draws differ from the default's in the last bits).
        Faster for large sites (docs/performance.md).
    noise_dtype : {None, "float32"}
        Draw xi in float32 and cast it to the latent dtype (half the cost of a float64 normal on
        a CPU). xi is still N(0, I), up to float32 rounding and a tail cut at about 5.4 sd
        (mass ~1e-7): the stationary law is unchanged far below any Monte Carlo error.
    preconditioner : dict, optional
        A fixed diagonal G, ``{site: scale > 0}`` (a scalar or the site's unconstrained shape;
        sites left out at 1): :mod:`~bayes_attn.inference.sgld_precondition`. Default None.

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
        fused: bool = False,
        noise_dtype: str | None = None,
        preconditioner: dict | None = None,
    ):
        if noise_dtype not in (None, "float32"):
            raise ValueError(f"noise_dtype must be None or 'float32', got {noise_dtype!r}")
        self._fused, self._noise_dtype = bool(fused), noise_dtype
        self._G = pre.check_preconditioner(preconditioner)
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

    def _move(self, state: SGLDState, eps, key_noise) -> dict:
        """z - eps grad U + sqrt(2 eps T) xi, with xi one flat normal draw of all the sites."""
        flat, unravel = ravel_pytree(state.z)
        noise = random.normal(key_noise, flat.shape, self._noise_dtype or flat.dtype)
        if self._noise_dtype is not None:
            noise = noise.astype(flat.dtype)
        scale = jnp.sqrt(2.0 * eps * self._temperature)
        if self._G is not None:
            return unravel(
                pre.preconditioned_move(state.z, state.z_grad, noise, self._G, eps, scale)
            )
        if self._fused:  # site by site: no concatenated copies of z and the gradient
            move = lambda x, g, xi: x - eps * g + scale * xi  # noqa: E731
            return jax.tree.map(move, state.z, state.z_grad, unravel(noise))
        return unravel(flat - eps * ravel_pytree(state.z_grad)[0] + scale * noise)

    def _norm(self, z_grad) -> jax.Array:
        if self._fused:
            return jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(z_grad)))
        return jnp.linalg.norm(ravel_pytree(z_grad)[0])

    def _step(self, state: SGLDState, model_args, model_kwargs) -> SGLDState:
        eps = self._eps(state.i)
        rng_key, key_noise, key_batch = random.split(state.rng_key, 3)
        z = self._move(state, eps, key_noise)
        pe, z_grad = self._potential_and_grad(z, key_batch, model_args, model_kwargs)
        return SGLDState(state.i + 1, z, z_grad, pe, self._norm(z_grad), eps, rng_key)

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
        pre.check_sites(self._G, state.z)
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


def _log_likelihood(model, samples, model_args, model_kwargs, dims) -> xr.Dataset | None:
    """Pointwise log likelihood of every observed site over the full data (the kernel's model);
    ``samples`` are constrained, grouped by chain."""
    ll = log_likelihood(model, samples, *model_args, batch_ndims=2, **model_kwargs)
    if not ll:
        return None
    data = {k: np.asarray(v) for k, v in ll.items()}
    return az.dict_to_dataset(data, library=numpyro, dims=dims)


def _chunks(total: int, parts: int = 20) -> list[int]:
    """``total`` split into at most ``parts`` nearly equal pieces (the progress bar's updates)."""
    size = max(1, -(-total // parts))
    return [min(size, total - i) for i in range(0, total, size)]


def _in_jax_types(init_params):
    """The starting values in JAX's types: float64 kept under 64-bit mode; under float32 the
    values in JAX's 32-bit types, without a warning."""
    if init_params is not None and jax.config.jax_enable_x64:
        return jax.tree.map(
            lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), init_params
        )
    if init_params is not None:
        return jax.tree.map(jnp.asarray, init_params)
    return None


def _drive(kernel: SGLD, rng, num_chains, num_warmup, num_samples, thinning, init_params,
           model_args, model_kwargs, progress):  # fmt: skip
    """The chains' kept states, (draw, [chain,] ...) per field, stepping as NumPyro's ``MCMC``
    does (the same keys, the same steps, the draw kept at the end of every ``thinning`` steps),
    without post-processing every step: the sites and order parameters are formed afterwards,
    for the kept draws only. Each chunk carries per chain the first step (from 1) whose
    potential or gradient is not finite or has blown up (:data:`BLOWUP`); after a chunk in which
    one did, :class:`~bayes_attn._validation.SamplerDiverged`."""
    init_params = _in_jax_types(init_params)
    if num_chains > 1:
        rng = random.split(rng, num_chains)
    state = kernel.init(rng, num_warmup, init_params, model_args, model_kwargs)
    dim = ravel_pytree(state.z)[0].size // num_chains
    temperature = max(kernel._temperature, 1.0)
    ceiling = state.potential_energy + BLOWUP * (dim + 10) * temperature
    bad = jnp.zeros(jnp.shape(state.potential_energy), dtype=int)
    done = 0

    draws = num_samples // thinning
    first = num_warmup + num_samples % thinning  # MCMC's collection starts there
    size = max(_chunks(draws))

    @jax.jit
    def advance(state, bad, n_draws, n_inner, first):
        """``n_draws`` draws of ``n_inner`` steps each, recorded in a buffer of ``size`` rows;
        the counts are traced, so every chunk (burn-in included) runs one compiled program."""

        def one(_, carry):
            s, bad, k = carry
            s = kernel.sample(s, model_args, model_kwargs)
            k = k + 1
            finite = jnp.isfinite(s.potential_energy) & jnp.isfinite(s.grad_norm)
            wrong = ~finite | (s.potential_energy > ceiling)
            return s, jnp.where((bad == 0) & wrong, k, bad), k

        def fields(s):
            return (s.z, s.potential_energy, s.grad_norm, s.step_size)

        def draw(i, carry):
            s, bad, buf, k = carry
            s, bad, k = jax.lax.fori_loop(0, n_inner, one, (s, bad, k))
            return s, bad, jax.tree.map(lambda b, r: b.at[i].set(r), buf, fields(s)), k

        buf = jax.tree.map(lambda r: jnp.zeros((size, *r.shape), r.dtype), fields(state))
        s, bad, buf, _ = jax.lax.fori_loop(0, n_draws, draw, (state, bad, buf, first))
        return s, bad, buf

    def checked(state, bad, n_draws, n_inner):
        nonlocal done
        state, bad, rec = advance(state, bad, n_draws, n_inner, done)
        b = np.atleast_1d(np.asarray(bad))
        if b.any():
            step = kernel._step_size
            raise SamplerDiverged(
                "sgld", int(b[b > 0].min()), step if not callable(step) else f"schedule {step!r}",
                np.flatnonzero(b) if num_chains > 1 else (),
                hint="halve step_size (the step must stay below 2 / the largest curvature)",
            )  # fmt: skip
        done += n_draws * n_inner
        return state, bad, rec

    kept = []
    with make_bar(first + draws * thinning, "sgld", progress) as bar:
        for steps in _chunks(first):
            state, bad, _ = checked(state, bad, 1, steps)
            bar.update(steps)
        for steps in _chunks(draws):
            state, bad, rec = checked(state, bad, steps, thinning)
            kept.append(jax.tree.map(lambda a, n=steps: a[:n], rec))
            bar.update(steps * thinning)
    return jax.tree.map(lambda *a: jnp.concatenate(a), *kept)


def _by_chain(x, num_chains):
    """(draw, chain, ...) -> (chain, draw, ...); one chain: (draw, ...) -> (1, draw, ...); leaf by
    leaf."""
    return jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1) if num_chains > 1 else a[None], x)


def _postprocess(kernel: SGLD, z, model_args, model_kwargs) -> dict:
    """Constrained sites and deterministic sites of every kept draw, (chain, draw, ...), one
    draw at a time (unbatched, as ``MCMC`` forms them, so the values are the same to the bit)."""
    pp = kernel.postprocess_fn(model_args, model_kwargs)
    lead = jax.tree.leaves(z)[0].shape[:2]
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), z)
    out = jax.jit(lambda f: jax.lax.map(pp, f))(flat)
    return jax.tree.map(lambda a: np.asarray(a).reshape(*lead, *a.shape[1:]), out)


def run_sgld(
    model, *args, model_args: tuple = (), model_kwargs: dict | None = None,
    settings: SGLDSettings | None = None,
    seed: int | None = None, key=None, progress: bool = True,
    init_params: dict | None = None, progress_bar: bool | None = None, **changes,
) -> az.InferenceData:  # fmt: skip
    """Sample ``model(*model_args, **model_kwargs)`` with :class:`SGLD`, chains vectorised.

    The chains step as NumPyro's ``MCMC`` would step them (the same keys and updates, so the
    same draws), in one compiled loop that keeps only the unconstrained state of the kept
    draws; the sites and the order parameters are formed afterwards, for those draws only
    (``MCMC`` post-processes every step, warm-up and thinned steps included).

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.network_model` with ``batch_size`` set.
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from the sampler's options (the old positional form warns).
    settings, **changes
        The fields of :class:`SGLDSettings` (its docstring lists them with their defaults):
        ``num_chains``, ``num_warmup``, ``num_samples``, ``step_size``, ``temperature``,
        ``thinning``, ``dtype``, ``fused``, ``noise_dtype``, ``preconditioner``. An unknown
        keyword is a TypeError naming it.
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given).
    init_params : dict, optional
        Constrained starting values per site (e.g. an Adam solution), with a leading chain axis
        when ``num_chains > 1``.
    progress : bool
        One progress bar over the steps (:func:`bayes_attn.progress.bar`); ``progress_bar`` is
        its old name (deprecated).

    Returns
    -------
    arviz.InferenceData
        As :func:`bayes_attn.inference.run_nuts`: ``posterior`` (sites and deterministic order
        parameters over the full data), ``observed_data`` (``tokens``, when the model is given a
        dataset) and ``attrs``; ``sample_stats`` with ``potential_energy`` (the minibatch estimate;
        ``lp`` is its negative), ``grad_norm`` and ``step_size``; and ``log_likelihood`` over every
        data point (dim ``sequence`` for a token dataset), when the model has observed sites.
    """
    s, model_args, model_kwargs, progress = sampler_call(
        "run_sgld", SGLDSettings, settings, changes, args, model_args, model_kwargs, progress,
        progress_bar,
    )  # fmt: skip
    rng, seed, key_attrs = resolve_key(key, seed)
    kernel = SGLD(model, s.step_size, s.temperature, fused=s.fused, noise_dtype=s.noise_dtype,
                  preconditioner=s.preconditioner)  # fmt: skip
    with jax.enable_x64(s.dtype == "float64"), warnings.catch_warnings():
        # float32: the model's float64 constants and arguments are truncated, as asked
        warnings.filterwarnings("ignore", "Explicitly requested dtype float64", UserWarning)
        kept = _drive(
            kernel, rng, s.num_chains, s.num_warmup, s.num_samples, s.thinning, init_params,
            model_args, model_kwargs, progress,
        )  # fmt: skip
        z, potential, grad_norm, eps = (_by_chain(a, s.num_chains) for a in kept)
        samples = _postprocess(kernel, z, model_args, model_kwargs)
        tokens = tokens_of(model, model_args, model_kwargs)
        dims = None if tokens is None else {"y": ["sequence"]}
        loglik = _log_likelihood(kernel.model, samples, model_args, model_kwargs, dims)
    step_size = s.step_size
    settings = {
        "step_size": step_size if isinstance(step_size, int | float) else f"schedule {step_size!r}",
        "temperature": s.temperature,
        "init_given": init_params is not None,
        **({"dtype": s.dtype} if s.dtype != "float64" else {}),
        **({"fused": True} if s.fused else {}),
        **({"noise_dtype": s.noise_dtype} if s.noise_dtype else {}),
        **({"preconditioner": "diagonal"} if s.preconditioner is not None else {}),
        **key_attrs,
    }
    draws = s.num_samples // s.thinning
    record = RunRecord("sgld", seed, s.num_chains, s.num_warmup, draws, s.thinning,
                       settings=settings)  # fmt: skip
    stats = {"grad_norm": grad_norm, "step_size": eps, "potential_energy": np.asarray(potential)}
    return _result(model, model_args, model_kwargs, samples, stats, record, loglik)


def _result(model, model_args, model_kwargs, samples, stats, record, loglik):
    """The run's ``InferenceData``: the draws, ``sample_stats`` (``lp`` is the negative potential
    energy) and the pointwise log likelihood, when there is one."""
    potential = stats["potential_energy"]
    stats = {
        "grad_norm": stats["grad_norm"],
        "lp": -potential,
        "step_size": stats["step_size"],
        "potential_energy": potential,
    }
    idata = from_draws(samples, stats, record, model, model_args, model_kwargs)
    if loglik is not None:
        loglik.attrs.update(idata.posterior.attrs)
        az.set_group(idata, "log_likelihood", loglik)
    return idata
