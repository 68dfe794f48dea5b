"""NUTS over any of the package's NumPyro models, returning ArviZ InferenceData.

Two metrics (``run_nuts(..., metric=...)``):

* ``"adapt"`` (default): NumPyro's windowed warm-up adapts a diagonal mass matrix and the step.
* ``"laplace"``: the mode is found first (:func:`~bayes_attn.inference.potential.find_mode`),
  the dense inverse mass matrix is the Laplace covariance there
  (:func:`~bayes_attn.inference.members.laplace_metric`, the one that
  :func:`~bayes_attn.inference.members.member_nuts` uses), held fixed, and only the step adapts;
  the chains start at independent draws of the Laplace approximation around the mode, so a short
  warm-up suffices. In the metric's coordinates a near-Gaussian posterior is near-isotropic and
  correlations cost nothing. Any fixed metric leaves the posterior invariant: the choice costs
  nothing but efficiency, and a posterior far from Gaussian, or with several modes, may still
  need ``"adapt"`` or SMC. Measured on the README's d = 10^4 network (Level 1 with its Gram, 900
  dimensions, P = 400), 2 chains x (150 + 150): 15 gradients per draw against 23 for ``"adapt"``
  with the same warm-up, at the same ESS (594 and 586 of 300 draws for aG). What made the
  default call slow there was its length (4 chains x 2000 iterations), not its metric.

Both announce their cost before they start (``progress_bar=True``; :mod:`bayes_attn.progress`).

References
----------
NumPyro's ``MCMC``/``NUTS`` with vectorised chains; ArviZ ``from_numpyro``. Hoffman & Gelman
(2014) for NUTS; Betancourt (2017), "A conceptual introduction to Hamiltonian Monte Carlo", §4.2,
for the metric as the inverse of the posterior's curvature.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import initialize_model

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int
from bayes_attn.inference._call import model_call
from bayes_attn.inference.convert import from_mcmc
from bayes_attn.inference.members import LAPLACE_GRADIENTS, laplace_metric
from bayes_attn.inference.potential import find_mode, flat_potential, unconstrained_init
from bayes_attn.inference.record import RunRecord
from bayes_attn.keys import resolve_key
from bayes_attn.progress import announce, say, seconds_per_call

__all__ = ["METRICS", "LaplaceStart", "laplace_start", "run_nuts"]

METRICS = ("adapt", "laplace")

#: gradients per NUTS transition assumed by the cost estimate, (low, high) per metric: "adapt",
#: trees of depth 3 to 10 (NumPyro's maximum); "laplace", members.LAPLACE_GRADIENTS
GRADIENTS_PER_DRAW = {"adapt": (7, 1023), "laplace": LAPLACE_GRADIENTS}


class LaplaceStart(NamedTuple):
    """The mode of a model's potential and its Laplace approximation (:func:`laplace_start`).

    Attributes
    ----------
    mode : bayes_attn.inference.potential.Mode
        The mode (flat unconstrained ``mode.x``; ``mode.sites()`` its constrained values).
    inverse_mass_matrix : numpy.ndarray (dim, dim)
        The Laplace covariance at the mode, in NumPyro's unconstrained space (sites sorted by
        name, as ``MCMC`` ravels them).
    chain_starts : dict
        Unconstrained starting values per latent site with a leading chain axis (none when
        ``num_chains == 1``): independent draws of N(mode, inverse_mass_matrix).
    """

    mode: object
    inverse_mass_matrix: np.ndarray
    chain_starts: dict


def _default_start(pot, key) -> dict:
    """NumPyro's own initial value (uniform in [-2, 2] in the unconstrained space), constrained."""
    info = initialize_model(
        key, pot.model, model_args=pot.model_args, model_kwargs=pot.model_kwargs
    )
    sites = pot.sites(pot.ravel(info.param_info.z))
    return {n: sites[n] for n in pot.shapes}


def laplace_start(
    model,
    model_args=(),
    model_kwargs=None,
    *,
    start: dict | None = None,
    num_chains: int = 1,
    key=None,
    chunk: int = 30,
    progress: bool = False,
) -> LaplaceStart:
    """The mode of ``model``'s posterior from ``start``, its Laplace covariance and chain starts.

    Parameters
    ----------
    model, model_args, model_kwargs
        The NumPyro model and its arguments.
    start : dict, optional
        Constrained values of every latent site, inside the basin of the wanted mode (for
        example the Level-1 MAP, :func:`bayes_attn.theory.level1_map`). Default: NumPyro's
        initial value (uniform in [-2, 2] in the unconstrained space, drawn from ``key``).
    num_chains : int
        How many starting points to draw from N(mode, covariance).
    key : jax PRNG key
    chunk : int
        Hessian-vector products per batch (:func:`~bayes_attn.inference.potential.hessian`).
    progress : bool
        Say when the mode search stops before its tolerance.

    Raises
    ------
    ValueError
        When the start's log density is not finite.
    """
    num_chains = check_int("num_chains", num_chains, 1)
    key = jax.random.key(0) if key is None else key
    k_start, k_draw = jax.random.split(key)
    pot = flat_potential(model, model_args, model_kwargs)
    start = _default_start(pot, k_start) if start is None else start
    mode = find_mode(model, start=start, model_args=pot.model_args, model_kwargs=pot.model_kwargs)
    if not mode.converged:
        say("the mode search stopped before its tolerance (U = %.6g)", mode.U, enabled=progress)
    cov = laplace_metric(lambda x: pot.log_density(x), mode.x, chunk=chunk)
    root = np.linalg.cholesky(cov + 1e-12 * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0]))
    z = np.asarray(jax.random.normal(k_draw, (num_chains, pot.dim)))
    x = mode.x[None, :] + z @ root.T
    starts = jax.vmap(pot.unravel)(x)
    if num_chains == 1:
        starts = jax.tree.map(lambda a: a[0], starts)
    return LaplaceStart(mode, cov, starts)


def _announce_cost(model, model_args, model_kwargs, metric, num_chains, num_warmup, num_samples):
    """Say what the run costs before it starts: one timed gradient times the gradients it takes."""
    pot = flat_potential(model, model_args, model_kwargs)
    x0 = pot.unconstrain(_default_start(pot, jax.random.key(0)))
    seconds = seconds_per_call(jax.jit(jax.grad(pot.U)), x0)
    lo, hi = GRADIENTS_PER_DRAW[metric]
    draws = num_chains * (num_warmup + num_samples)
    extra = 0
    what = f"run_nuts: {num_chains} chains x ({num_warmup} warm-up + {num_samples}) draws"
    what += f" in {pot.dim} dimensions, {lo} to {hi} gradients per draw"
    if metric == "laplace":
        extra = 4 * pot.dim  # the Hessian: dim Hessian-vector products, ~4 gradients each
        what += f", after the mode and its {pot.dim} x {pot.dim} Hessian"
    announce(what, (extra + lo * draws, extra + hi * draws), seconds)


def run_nuts(
    model,
    *args,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_samples: int = 1000,
    seed: int | None = None,
    key=None,
    progress_bar: bool = True,
    target_accept: float = 0.8,
    init_params: dict | None = None,
    metric: str = "adapt",
    start: dict | None = None,
    **kwargs,
) -> az.InferenceData:
    """Sample ``model(*model_args, **model_kwargs)`` with NUTS, chains vectorised.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.order_param_model`.
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from the sampler's options. (The old form
        ``run_nuts(model, *model_args, ..., **model_kwargs)`` still works and warns.)
    num_chains, num_warmup, num_samples : int
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given).
    progress_bar : bool
        NumPyro's progress bar, and the cost announced before the run starts.
    init_params : dict, optional
        Starting values per site in the constrained space (the sites' own values), with a leading
        chain axis when ``num_chains > 1`` (for example to start chains in different phases).
    metric : {"adapt", "laplace"}
        ``"adapt"``: NumPyro's adapted diagonal mass matrix. ``"laplace"``: a dense inverse mass
        matrix, the Laplace covariance at the mode found from ``start`` (module docstring; for
        Level 1 and the frozen-embedding networks: fewer gradients per draw, and a short warm-up
        since there is no metric to learn); the chains start at draws of the Laplace
        approximation unless ``init_params`` is given.
    start : dict, optional
        With ``metric="laplace"``: constrained values of the latent sites in the basin of the
        mode (default: the first chain's ``init_params``, else NumPyro's initial value).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (sites and derived order parameters), ``sample_stats`` (``diverging``,
        ``energy``, ``tree_depth``, ``step_size``, ...), ``observed_data`` (``tokens``, when the model
        is given a dataset) and ``attrs``: the run's record (:mod:`bayes_attn.inference.record`:
        sampler, seed, chains, warm-up, draws, level, model options, versions; ``metric``).
    """
    model_args, model_kwargs = model_call("run_nuts", args, kwargs, model_args, model_kwargs)
    num_chains = check_int("num_chains", num_chains, 1)
    num_warmup = check_int("num_warmup", num_warmup, 0)
    num_samples = check_int("num_samples", num_samples, 1)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if start is not None and metric != "laplace":
        raise ValueError("start: only used with metric='laplace'")
    rng, seed, key_attrs = resolve_key(key, seed)
    if progress_bar:
        _announce_cost(model, model_args, model_kwargs, metric, num_chains, num_warmup, num_samples)
    init = unconstrained_init(model, model_args, model_kwargs, init_params, num_chains)
    settings = {"target_accept": target_accept, "init_given": init_params is not None, **key_attrs}
    settings["metric"] = metric
    if metric == "laplace":
        rng, k_laplace = jax.random.split(rng)
        if start is None and init_params is not None:
            start = {k: (v[0] if num_chains > 1 else v) for k, v in init_params.items()}
        lap = laplace_start(
            model, model_args, model_kwargs, start=start, num_chains=num_chains, key=k_laplace,
            progress=progress_bar,
        )  # fmt: skip
        init = lap.chain_starts if init is None else init
        kernel = NUTS(
            model,
            target_accept_prob=target_accept,
            dense_mass=True,
            inverse_mass_matrix=lap.inverse_mass_matrix,
            adapt_mass_matrix=False,
        )
        settings.update(mode_potential=lap.mode.U, mode_converged=lap.mode.converged)
    else:
        kernel = NUTS(model, target_accept_prob=target_accept)
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        progress_bar=progress_bar,
    )
    mcmc.run(
        rng,
        *model_args,
        extra_fields=("diverging", "energy", "num_steps", "adapt_state.step_size"),
        init_params=init,
        **model_kwargs,
    )
    record = RunRecord("nuts", seed, num_chains, num_warmup, num_samples, settings=settings)
    return from_mcmc(mcmc, record, model, model_args, model_kwargs)
