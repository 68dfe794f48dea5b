"""NUTS over any of the package's NumPyro models, returning ArviZ InferenceData.

References
----------
NumPyro's ``MCMC``/``NUTS`` with vectorised chains; ArviZ ``from_numpyro``.
"""

from __future__ import annotations

import json

import arviz as az
import jax
import numpy as np
import xarray as xr
from numpyro.infer import MCMC, NUTS

import bayes_attn
from bayes_attn._validation import check_int

_LEVELS = {
    "order_param_model": "order_parameters",
    "kernel_limit_model": "kernel_limit",
    "network_model": "network",
}


def _describe(model, model_args, model_kwargs) -> dict:
    """attrs for the InferenceData: task, hyperparameters, activation, level, version."""
    attrs = {
        "level": _LEVELS.get(getattr(model, "__name__", ""), getattr(model, "__name__", "?")),
        "bayes_attn_version": bayes_attn.__version__,
    }
    task = next((a for a in model_args if isinstance(a, bayes_attn.CopyTask)), None)
    hyper = next((a for a in model_args if isinstance(a, bayes_attn.Hyper)), None)
    if task is not None:
        attrs.update(L=task.L, V=task.V)
    if hyper is not None:
        attrs.update(hyper.as_dict())
    act = [a for a in model_args if a in ("linear", "softmax")]
    if act:
        attrs["activation"] = act[0]
    scalars = [a for a in model_args if isinstance(a, int | float) and not isinstance(a, bool)]
    if attrs["level"] == "order_parameters" and scalars:
        attrs["P"] = float(scalars[0])
    if attrs["level"] == "network" and scalars:
        attrs["d_model"] = int(scalars[0])
    if model_kwargs:
        attrs["model_kwargs"] = json.dumps({k: repr(v) for k, v in model_kwargs.items()})
    return attrs


def _coords(task):
    """Named dims: row/col for M; hidden/token/position for the network weights."""
    if task is None:
        return {}, {}
    names = [f"x{i}" for i in range(task.V)] + [f"p{a}" for a in range(task.L)]
    coords = {
        "row": names,
        "col": names,
        "token": list(range(task.V)),
        "position": list(range(task.L)),
    }
    dims = {
        "M": ["row", "col"],
        "W_emb": ["hidden", "token"],
        "p": ["hidden", "position"],
        "W_O": ["token", "hidden"],
        "W_G": ["hidden", "hidden_in"],
        "W_Q": ["head", "hidden"],
        "W_K": ["head", "hidden_in"],
    }
    return coords, dims


def to_inference_data(mcmc: MCMC, model, model_args, model_kwargs, tokens=None) -> az.InferenceData:
    """InferenceData with named dims, sample stats (divergences, energy, tree depth, step size),
    the tokens as observed data and descriptive attrs."""
    task = next((a for a in model_args if isinstance(a, bayes_attn.CopyTask)), None)
    coords, dims = _coords(task)
    idata = az.from_numpyro(mcmc, coords=coords, dims=dims, log_likelihood=False)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    stats = idata.sample_stats
    if "num_steps" in extra:
        stats["tree_depth"] = (("chain", "draw"), np.log2(np.asarray(extra["num_steps"]) + 1.0))
    if "adapt_state.step_size" in extra:
        stats["step_size"] = (("chain", "draw"), np.asarray(extra["adapt_state.step_size"]))
    # from_numpyro leaves an empty observed_data group for factor-only models
    if "observed_data" in idata.groups():
        del idata.observed_data
    if tokens is not None:
        tokens = xr.Dataset({"tokens": (("sequence", "position"), np.asarray(tokens))})
        idata.add_groups({"observed_data": tokens})
    attrs = _describe(model, model_args, model_kwargs)
    for group in idata.groups():
        idata[group].attrs.update(attrs)
    return idata


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
        is given a dataset) and ``attrs`` (task, hyperparameters, activation, level, version).
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
    tokens = next(
        (a for a in model_args if hasattr(a, "ndim") and getattr(a, "ndim", 0) == 2), None
    )
    return to_inference_data(mcmc, model, model_args, model_kwargs, tokens=tokens)
