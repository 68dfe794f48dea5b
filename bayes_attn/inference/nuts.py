"""NUTS over any of the package's NumPyro models, returning ArviZ InferenceData.

References
----------
NumPyro's ``MCMC``/``NUTS`` with vectorised chains; ArviZ ``from_numpyro``.
"""

from __future__ import annotations

from numpyro.infer import MCMC, NUTS

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int
from bayes_attn.inference._call import model_call, resolve_key
from bayes_attn.inference.convert import from_mcmc
from bayes_attn.inference.potential import unconstrained_init
from bayes_attn.inference.record import RunRecord


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
    init_params : dict, optional
        Starting values per site in the constrained space (the sites' own values), with a leading
        chain axis when ``num_chains > 1`` (for example to start chains in different phases).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (sites and derived order parameters), ``sample_stats`` (``diverging``,
        ``energy``, ``tree_depth``, ``step_size``, ...), ``observed_data`` (``tokens``, when the model
        is given a dataset) and ``attrs``: the run's record (:mod:`bayes_attn.inference.record`:
        sampler, seed, chains, warm-up, draws, level, model options, versions).
    """
    model_args, model_kwargs = model_call("run_nuts", args, kwargs, model_args, model_kwargs)
    num_chains = check_int("num_chains", num_chains, 1)
    num_warmup = check_int("num_warmup", num_warmup, 0)
    num_samples = check_int("num_samples", num_samples, 1)
    rng, seed, key_attrs = resolve_key(key, seed)
    init = unconstrained_init(model, model_args, model_kwargs, init_params, num_chains)
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
    settings = {"target_accept": target_accept, "init_given": init_params is not None, **key_attrs}
    record = RunRecord("nuts", seed, num_chains, num_warmup, num_samples, settings=settings)
    return from_mcmc(mcmc, record, model, model_args, model_kwargs)
