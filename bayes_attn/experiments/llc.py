"""The local learning coefficient at one point of the copy task, and the calibration of its step.

:func:`llc_point` is what ``bayes-attn llc`` and the ``llc`` sweep kind run: a dataset drawn from
the seed (as every sweep point's), the point w* the exact Level-1 MAP (at ``network`` level with
frozen embeddings, mapped onto the network's weights: W_G = U M~ U^T, W_O = w~^T U^T / √d, so
that the network's logits and readout are the MAP's), then :func:`~bayes_attn.inference.llc.run_llc`
there, and optionally the exact value beside it (:func:`~bayes_attn.inference.llc.exact_frozen_llc`).
:func:`calibrate_llc` runs a ladder of halving step sizes at each nβ and returns the table that
:func:`bayes_attn.analysis.llc.calibration_verdict` judges.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive
from bayes_attn.analysis.llc import calibration_verdict, llc_estimate
from bayes_attn.inference.llc import exact_frozen_llc, run_llc
from bayes_attn.models.levels import model_with_data
from bayes_attn.models.network import init_embeddings
from bayes_attn.theory.level1 import level1_fit, level1_map

__all__ = ["EMBEDDINGS_FOLD", "calibrate_llc", "llc_point", "llc_problem"]

#: what the point's key folds in for the frozen embeddings (the dataset folds in 1)
EMBEDDINGS_FOLD = 2


def llc_problem(level: str, task, hyper, P: int, activation: str, *, d_model=None, seed=0,
                batch_size=None):  # fmt: skip
    """``(model, model_args, model_kwargs, w_star, n)`` of the LLC at a point.

    ``network``: the network with its embeddings frozen at a prior draw from the seed (key
    ``fold_in(key(seed), EMBEDDINGS_FOLD)``), w* the exact MAP of that network (the readout
    profiled out), as weights. ``kernel``: Level 1, w* its MAP; its likelihood is the evidence
    with the readout integrated out (a ``numpyro.factor``), so n = P is given explicitly.
    """
    if level not in ("network", "kernel"):
        raise ValueError(f"level must be 'network' or 'kernel', got {level!r}")
    P = check_int("P", P, 2)
    key = jax.random.key(check_int("seed", seed, 0))
    if level == "kernel":
        model, args, kw = model_with_data("kernel", task, hyper, P, activation, key=key)
        M = level1_map(task, hyper, args[2], activation).M
        return model, args, kw, {"M": M}, P
    d = check_int("d_model", d_model, task.n_features)
    emb = init_embeddings(jax.random.fold_in(key, EMBEDDINGS_FOLD), task, hyper, d)
    model, args, kw = model_with_data(
        "network", task, hyper, P, activation, key=key, embeddings=emb, batch_size=batch_size
    )
    g, U = algebra.embedding_gram(*emb), np.asarray(algebra.span_basis(*emb))
    M = level1_map(task, hyper, args[2], activation, gram=g).M
    w = level1_fit(M, args[2], task, hyper, activation, gram=g)["w"]
    return model, args, kw, {"W_G": U @ M @ U.T, "W_O": w.T @ U.T / math.sqrt(d)}, None


def llc_point(
    level: str,
    task,
    hyper,
    P: int,
    activation: str,
    *,
    d_model: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    exact: bool = False,
    exact_draws: int = 1000,
    progress: bool = True,
    **options,
):
    """The LLC at one point: ``(idata, exact_idata or None)``.

    ``options`` go to :func:`~bayes_attn.inference.llc.run_llc` (sampler, chains, draws, burn-in,
    step size, nβ, γ, include_prior). ``exact`` (``network`` only) adds
    :func:`~bayes_attn.inference.llc.exact_frozen_llc` at the same nβ, γ and prior choice, with
    ``exact_draws`` draws per chain.
    """
    model, args, kw, w_star, n = llc_problem(
        level, task, hyper, P, activation, d_model=d_model, seed=seed, batch_size=batch_size
    )
    if exact and level != "network":
        raise ValueError("exact: the exact LLC is the frozen-embedding network's (level network)")
    idata = run_llc(
        model, w_star, model_args=args, model_kwargs=kw, n=n, seed=seed, progress_bar=progress,
        **options,
    )  # fmt: skip
    if not exact:
        return idata, None
    shared = {
        k: options[k] for k in ("nbeta", "gamma", "include_prior", "num_chains") if k in options
    }
    full = {k: v for k, v in kw.items() if k != "batch_size"}
    ex = exact_frozen_llc(
        model, w_star, model_args=args, model_kwargs=full, num_draws=exact_draws, seed=seed,
        progress_bar=progress, **shared,
    )  # fmt: skip
    return idata, ex


def calibrate_llc(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    step_sizes=(1e-6, 2e-6, 4e-6, 8e-6),
    nbetas=(None,),
    burnin: int = 0,
    min_acceptance: float = 0.9,
    seed: int | None = None,
    **options,
) -> xr.Dataset:
    """λ̂ on a grid of (nβ, ε), each ε the half of the next, and the verdict per nβ.

    Every cell is one :func:`~bayes_attn.inference.llc.run_llc` (``options``: sampler, chains,
    draws, burn-in, γ, ...) from the same seed. Returns ``llc``, ``mcse``, ``rhat`` and
    ``acceptance`` over (``nbeta``, ``step_size``) with the verdict of
    :func:`~bayes_attn.analysis.llc.calibration_verdict` (``chosen``, ``passes``): the largest step
    whose exact MALA acceptance is at least ``min_acceptance`` and whose λ̂ agrees with that at
    half the step within 2 combined MCSE. ``nbetas`` may hold None (n / log n).
    """
    steps = sorted(check_positive("step_sizes", s) for s in step_sizes)
    cells = {k: np.full((len(nbetas), len(steps)), np.nan) for k in ("llc", "mcse", "rhat", "acc")}
    nb_values = []
    for i, nbeta in enumerate(nbetas):
        for j, eps in enumerate(steps):
            idata = run_llc(
                model, w_star, model_args=model_args, model_kwargs=model_kwargs, step_size=eps,
                nbeta=nbeta, seed=seed, **options,
            )  # fmt: skip
            est = llc_estimate(idata, burnin=burnin)
            for k, v in zip(cells, (est.llc_mean, est.mcse, est.rhat, est.acceptance), strict=True):
                cells[k][i, j] = v
        nb_values.append(est.nbeta)
    dims = ("nbeta", "step_size")
    table = xr.Dataset(
        {
            "llc": (dims, cells["llc"]),
            "mcse": (dims, cells["mcse"]),
            "rhat": (dims, cells["rhat"]),
            "acceptance": (dims, cells["acc"]),
        },
        coords={"nbeta": nb_values, "step_size": steps},
    )
    verdict = calibration_verdict(table, min_acceptance=min_acceptance)
    return table.assign(chosen=verdict["chosen"], passes=verdict["passes"]).assign_attrs(
        kind="llc calibration", min_acceptance=min_acceptance, burnin=burnin
    )
