"""The free-energy landscape of the softmax order parameter at one level, beside Level 2.

:func:`run_landscape` builds the model at a level (``reduced``: Level 2; ``kernel``: Level 1, with
``gram_width`` the exact posterior of a network of that width with frozen embeddings, one prior
draw) on a dataset, starts umbrella windows from the modes of both phases
(:func:`bayes_attn.experiments.coexistence.phase_starts`, then the mode finder), and runs
:func:`bayes_attn.inference.run_umbrella` along ``aG``. :func:`landscape_report` turns the result
into F(aG) by MBAR with the exact Level-2 profile beside it, and :func:`landscape_text` says it
in a few lines (both from :mod:`bayes_attn.analysis.free_energy`, re-exported here).

References
----------
docs/theory.md, "The free-energy landscape"; docs/validation.md, "Free-energy profiles".
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int
from bayes_attn.analysis.free_energy import landscape_report, landscape_text
from bayes_attn.experiments.coexistence import phase_starts
from bayes_attn.inference.umbrella import run_umbrella
from bayes_attn.models.levels import model_at, model_with_data
from bayes_attn.models.network import init_embeddings
from bayes_attn.progress import say

__all__ = ["LANDSCAPE_LEVELS", "landscape_report", "landscape_text", "run_landscape",
           "write_landscape"]  # fmt: skip

#: the levels a landscape is measured at (the network's own posterior is Level 1 with its Gram)
LANDSCAPE_LEVELS = ("reduced", "kernel")
#: run_umbrella's vectorisation and metric per level: Level 2 is one cheap dimension (every window
#: vectorised, a Hessian per window); Level 1's gradient does not vectorise on a CPU and its
#: Hessian costs 900 Hessian-vector products (one chain at a time, the two modes' Hessians)
LEVEL_SETTINGS = {"reduced": {"batch": 0, "metric": "window"},
                  "kernel": {"batch": 1, "metric": "mode"}}  # fmt: skip
#: what the embeddings' key folds into the run's key, so the Gram's draw is apart from the data's
GRAM_FOLD = 2


def landscape_model(task, hyper, P, level, *, tokens=None, gram_width=None, seed=0,
                    include_logdet=True):  # fmt: skip
    """``(model, args, kwargs)``: the level's softmax model on ``tokens`` (or on a dataset drawn
    from ``seed`` by :func:`~bayes_attn.models.levels.model_with_data`), with the Gram of one
    prior draw of embeddings of width ``gram_width`` at Level 1."""
    if level not in LANDSCAPE_LEVELS:
        raise ValueError(f"level must be one of {LANDSCAPE_LEVELS}, got {level!r}")
    if level == "reduced":
        if gram_width is not None:
            raise ValueError("gram_width: only for level 'kernel'")
        return model_with_data("reduced", task, hyper, float(P), "softmax",
                               include_logdet=include_logdet)  # fmt: skip
    if tokens is None:
        model, args, kwargs = model_with_data("kernel", task, hyper, int(P), "softmax", seed=seed)
    else:
        model, args, kwargs = model_at("kernel", task, hyper, tokens, "softmax")
    if gram_width is not None:
        d = check_int("gram_width", gram_width, 1)
        k = jax.random.fold_in(jax.random.key(check_int("seed", seed, 0)), GRAM_FOLD)
        kwargs = {**kwargs, "gram": algebra.embedding_gram(*init_embeddings(k, task, hyper, d))}
    return model, args, kwargs


def run_landscape(
    task,
    hyper,
    P,
    level: str = "kernel",
    activation: str = "softmax",
    *,
    tokens=None,
    gram_width: int | None = None,
    include_logdet: bool = True,
    seed: int = 0,
    progress: bool = True,
    **umbrella,
):
    """Umbrella sampling along ``aG`` of the softmax posterior at ``level`` (module docstring).

    Parameters
    ----------
    task, hyper, P
        The preset and the training-set size.
    level : {"reduced", "kernel"}
    activation : {"softmax"}
    tokens : (P, L) ints, optional
        The dataset (``kernel``); default drawn from ``seed`` as the CLI's ``sample`` draws it.
    gram_width : int, optional
        ``kernel`` only: the Gram of one prior draw of embeddings of this width (the exact
        posterior of that network with frozen embeddings); None is g = I.
    include_logdet : bool
        ``reduced`` only: the log-determinant in the density (Level 1 carries its own).
    seed : int
        The dataset's and the sampler's seed.
    **umbrella
        Options of :func:`~bayes_attn.inference.run_umbrella` (``num_warmup``, ``num_samples``,
        ``num_chains``, ``centres``, ``kappa``, ``refine``, ...); ``batch`` and ``metric`` default
        to :data:`LEVEL_SETTINGS` of the level.

    Returns
    -------
    InferenceData
        :func:`run_umbrella`'s result, its attrs with ``level``, ``gram_width`` (0 for g = I).
    """
    check_activation(activation)
    if activation != "softmax":
        raise ValueError("activation: the landscape is of the softmax order parameter aG")
    model, args, kwargs = landscape_model(task, hyper, P, level, tokens=tokens,
                                          gram_width=gram_width, seed=seed,
                                          include_logdet=include_logdet)  # fmt: skip
    st = phase_starts(task, hyper, P, level)
    say("landscape: %s level at P = %g, windows from both phases' modes", level, P,
        enabled=progress)  # fmt: skip
    umbrella = {**LEVEL_SETTINGS[level], **umbrella}
    idata = run_umbrella(model, "aG", model_args=args, model_kwargs=kwargs,
                         starts=[st["weak"], st["strong"]], seed=seed, progress=progress,
                         **umbrella)  # fmt: skip
    for group in az.groups(idata):
        idata[group].attrs.update(landscape_level=level, gram_width=int(gram_width or 0))
    return idata


def write_landscape(idata, path) -> None:
    """Write a landscape (:func:`run_landscape`) to NetCDF atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    az.to_netcdf(idata, tmp)
    os.replace(tmp, path)
