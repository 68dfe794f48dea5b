"""ArviZ conversion for every sampler: one table of dimension names, one way to stamp the record.

Every sampler's result is an ``arviz.InferenceData`` (an ``xarray.DataTree`` under ArviZ 1.x, with
the same groups, names and attrs; :mod:`bayes_attn._arviz` is the seam) whose variables carry the
dims below, whose ``observed_data`` holds the tokens (when the model was given a dataset) and
whose groups all carry the run's record (:mod:`bayes_attn.inference.record`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

import bayes_attn
from bayes_attn import _arviz as az
from bayes_attn.inference.record import RunRecord, tokens_of

#: the dims of each site of the package's models (M: Level 1; the rest: the network)
DIMS = {
    "M": ["row", "col"],
    "W_emb": ["hidden", "token"],
    "p": ["hidden", "position"],
    "W_O": ["token", "hidden"],
    "W_G": ["hidden", "hidden_in"],
    "W_Q": ["head", "hidden"],
    "W_K": ["head", "hidden_in"],
}


def task_of(model, model_args=(), model_kwargs=None):
    """The :class:`~bayes_attn.CopyTask` among the model's arguments, or None."""
    values = [*model_args, *dict(model_kwargs or {}).values()]
    return next((a for a in values if isinstance(a, bayes_attn.CopyTask)), None)


def coords_dims(task, names=None):
    """(coords, dims) for ``az.from_*``: rows and columns of M named x0.., p0..; the network's
    token and position axes numbered. Only the sites in ``names`` (all when None)."""
    if task is None:
        return {}, {}
    labels = [f"x{i}" for i in range(task.V)] + [f"p{a}" for a in range(task.L)]
    coords = {
        "row": labels,
        "col": labels,
        "token": list(range(task.V)),
        "position": list(range(task.L)),
    }
    dims = DIMS if names is None else {k: v for k, v in DIMS.items() if k in names}
    return coords, dims


def finish(idata, record: RunRecord, model, model_args, model_kwargs):
    """Add the tokens as ``observed_data`` and the run's record to every group's attrs."""
    tokens = tokens_of(model, model_args, model_kwargs)
    if "observed_data" in az.groups(idata):  # from_numpyro leaves an empty one for factor models
        az.drop_group(idata, "observed_data")
    if tokens is not None:
        obs = xr.Dataset({"tokens": (("sequence", "position"), np.asarray(tokens))})
        az.set_group(idata, "observed_data", obs)
    attrs = record.attrs(model, model_args, model_kwargs)
    for group in az.groups(idata):
        idata[group].attrs.update(attrs)
    return idata


def from_mcmc(mcmc, record: RunRecord, model, model_args, model_kwargs):
    """The result (InferenceData, or DataTree under ArviZ 1.x) of a NumPyro ``MCMC`` run (NUTS,
    SGLD), with named dims, the sample stats (divergences, energy, tree depth, step size) and the
    run's record."""
    coords, dims = coords_dims(task_of(model, model_args, model_kwargs))
    idata = az.from_numpyro(mcmc, coords=coords, dims=dims)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    cd = ("chain", "draw")
    if "num_steps" in extra:
        tree_depth = np.log2(np.asarray(extra["num_steps"]) + 1.0)
        az.set_variable(idata, "sample_stats", "tree_depth", cd, tree_depth)
    if "adapt_state.step_size" in extra:
        step = np.asarray(extra["adapt_state.step_size"])
        az.set_variable(idata, "sample_stats", "step_size", cd, step)
    return finish(idata, record, model, model_args, model_kwargs)


def from_draws(posterior, sample_stats, record, model, model_args, model_kwargs):
    """The result of draws given as arrays with leading (chain, draw) axes (SMC)."""
    posterior = {k: np.asarray(v) for k, v in posterior.items()}
    coords, dims = coords_dims(task_of(model, model_args, model_kwargs), posterior)
    stats = {k: np.asarray(v) for k, v in sample_stats.items()}
    idata = az.from_dict({"posterior": posterior, "sample_stats": stats}, coords=coords, dims=dims)
    return finish(idata, record, model, model_args, model_kwargs)


def constrained_draws(pot, draws) -> dict:
    """Every latent and deterministic site of ``pot``'s model (a
    :class:`~bayes_attn.inference.potential.Potential`) at each flat unconstrained draw of
    ``draws`` (leading axes kept), as numpy arrays: what NumPyro's ``MCMC`` postprocessing gives,
    computed through the potential."""
    import jax

    draws = np.asarray(draws)
    lead = draws.shape[:-1]

    def sites(x):
        return {
            n: s["value"]
            for n, s in pot.trace(x).items()
            if s["type"] == "deterministic" or (s["type"] == "sample" and not s["is_observed"])
        }

    flat = jax.jit(jax.vmap(sites))(draws.reshape(-1, draws.shape[-1]))
    return {n: np.asarray(v).reshape(*lead, *v.shape[1:]) for n, v in flat.items()}


def from_unconstrained(pot, draws, sample_stats, record, model, model_args, model_kwargs):
    """The result of flat unconstrained draws (chain, draw, dim) of ``pot``'s model (BlackJAX
    NUTS): the sites and deterministic sites at every draw (:func:`constrained_draws`), named
    dims, the sample stats given (chain, draw) and the run's record."""
    return from_draws(
        constrained_draws(pot, draws), sample_stats, record, model, model_args, model_kwargs
    )
