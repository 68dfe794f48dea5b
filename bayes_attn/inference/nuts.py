"""NUTS over any of the package's NumPyro models, returning ArviZ InferenceData.

References
----------
NumPyro's ``MCMC``/``NUTS`` with vectorised chains; ArviZ ``from_numpyro``.
"""

from __future__ import annotations

import arviz as az
import jax
from numpyro.infer import MCMC, NUTS

from bayes_attn._validation import check_int
from bayes_attn.inference.convert import from_mcmc
from bayes_attn.inference.record import RunRecord


def run_nuts(
    model,
    *model_args,
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_samples: int = 1000,
    seed: int = 0,
    progress_bar: bool = True,
    target_accept: float = 0.8,
    init_params: dict | None = None,
    **model_kwargs,
) -> az.InferenceData:
    """Sample ``model(*model_args, **model_kwargs)`` with NUTS, chains vectorised.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.order_param_model`.
    num_chains, num_warmup, num_samples, seed : int
    init_params : dict, optional
        Starting values per site, with a leading chain axis (for example to start chains in
        different phases).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (sites and derived order parameters), ``sample_stats`` (``diverging``,
        ``energy``, ``tree_depth``, ``step_size``, ...), ``observed_data`` (``tokens``, when the model
        is given a dataset) and ``attrs``: the run's record (:mod:`bayes_attn.inference.record`:
        sampler, seed, chains, warm-up, draws, level, model options, versions).
    """
    num_chains = check_int("num_chains", num_chains, 1)
    num_warmup = check_int("num_warmup", num_warmup, 0)
    num_samples = check_int("num_samples", num_samples, 1)
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
        jax.random.key(seed),
        *model_args,
        extra_fields=("diverging", "energy", "num_steps", "adapt_state.step_size"),
        init_params=init_params,
        **model_kwargs,
    )
    record = RunRecord(
        "nuts",
        seed,
        num_chains,
        num_warmup,
        num_samples,
        settings={"target_accept": target_accept, "init_given": init_params is not None},
    )
    return from_mcmc(mcmc, record, model, model_args, model_kwargs)
