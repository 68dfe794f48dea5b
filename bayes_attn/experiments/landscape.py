"""The free-energy landscape of an order parameter at one level, beside Level 2.

:func:`run_landscape` builds the model at a level (``reduced``: Level 2; ``kernel``: Level 1, with
``gram_width`` or ``gram`` the exact posterior of a network of that width with frozen embeddings)
on a dataset, starts umbrella windows from the modes (softmax: both phases',
:func:`bayes_attn.experiments.coexistence.phase_starts`; linear: the MAP's), and runs
:func:`bayes_attn.inference.run_umbrella` along the order parameter of :data:`CV` (softmax ``aG``,
linear ``cG``). :func:`landscape_report` turns the result
into F(aG) by MBAR with the exact Level-2 profile beside it, and :func:`landscape_text` says it
in a few lines (both from :mod:`bayes_attn.analysis.free_energy`, re-exported here).

References
----------
docs/theory.md, "The free-energy landscape"; docs/validation.md, "Free-energy profiles".
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import jax.numpy as jnp

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_gram, check_int
from bayes_attn.analysis.free_energy import landscape_report, landscape_text
from bayes_attn.distributed import part_paths, wait_until
from bayes_attn.experiments.coexistence import phase_starts
from bayes_attn.inference.umbrella import UmbrellaSettings, merge_umbrella, run_umbrella
from bayes_attn.io import write_atomic
from bayes_attn.models.levels import model_at, model_with_data, seed_embeddings
from bayes_attn.progress import say
from bayes_attn.theory import global_saddle
from bayes_attn.theory.level1 import level1_map
from bayes_attn.theory.phase_split import OnePhaseError

__all__ = ["CV", "LANDSCAPE_LEVELS", "check_landscape_P", "checkpoint_path", "landscape_on_hosts",
           "landscape_report", "landscape_text", "run_landscape", "write_landscape"]  # fmt: skip

#: the levels a landscape is measured at (the network's own posterior is Level 1 with its Gram)
LANDSCAPE_LEVELS = ("reduced", "kernel")
#: run_umbrella's vectorisation and metric per level, from UmbrellaSettings.for_level: Level 2 is
#: one cheap dimension (every window vectorised, a Hessian per window); Level 1's gradient does
#: not vectorise on a CPU and its Hessian costs 900 Hessian-vector products (one chain at a time,
#: the two modes' Hessians)
LEVEL_SETTINGS = {level: UmbrellaSettings.for_level(level).options("batch", "metric")
                  for level in LANDSCAPE_LEVELS}  # fmt: skip


def _kernel_bytes_per_sequence(task) -> int:
    """About the bytes a Level-1 gradient holds per training sequence (float64: the one-hot
    features, L x n, and the L x L logits, attention and their cotangents, twice over)."""
    return 8 * 2 * (task.L * task.n_features + 4 * task.L * task.L)


def check_landscape_P(task, hyper, P, level: str):
    """``P`` if a landscape at ``level`` can be run at it, else ``ValueError`` naming P, before
    any work: at most the theory's largest P (:func:`bayes_attn.theory.saddles.check_P_in_range`:
    the float64 reduced action loses its digits beyond it, and every level starts from the Level-2
    minima); at Level 1 a whole number of sequences whose gradient fits in memory (the device's
    limit, :func:`bayes_attn.inference.memory.memory_limit`, or the machine's RAM)."""
    from bayes_attn.inference.memory import memory_limit
    from bayes_attn.theory.saddles import check_P_in_range

    P = check_P_in_range(task, hyper, P)
    if level != "kernel":
        return float(P)
    if P != math.floor(P):
        raise ValueError(f"P must be a whole number of sequences at level kernel, got {P:g}")
    limit = memory_limit()
    if limit is None:
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    most = limit // _kernel_bytes_per_sequence(task)
    if P > most:
        raise ValueError(f"P must be <= {most:.3g} at level kernel: a gradient at P = {P:g} holds "
                         f"about {P * _kernel_bytes_per_sequence(task) / 1e9:.3g} GB, more than the "
                         f"{limit / 1e9:.3g} GB this machine has")  # fmt: skip
    return int(P)


#: the order parameter each activation's landscape is of
CV = {"softmax": "aG", "linear": "cG"}


def landscape_model(task, hyper, P, level, activation="softmax", *, tokens=None, gram_width=None,
                    gram=None, seed=0, include_logdet=True):  # fmt: skip
    """``(model, args, kwargs)``: the level's model on ``tokens`` (or on a dataset drawn from
    ``seed`` by :func:`~bayes_attn.models.levels.model_with_data`), at Level 1 with ``gram`` or
    the Gram of one prior draw of embeddings of width ``gram_width``."""
    if level not in LANDSCAPE_LEVELS:
        raise ValueError(f"level must be one of {LANDSCAPE_LEVELS}, got {level!r}")
    if gram_width is not None and gram is not None:
        raise ValueError("gram_width, gram: give one or neither")
    if level == "reduced":
        if gram_width is not None or gram is not None:
            raise ValueError("gram_width, gram: only for level 'kernel'")
        return model_with_data("reduced", task, hyper, float(P), activation,
                               include_logdet=include_logdet)  # fmt: skip
    if tokens is None:
        model, args, kwargs = model_with_data("kernel", task, hyper, int(P), activation, seed=seed)
    else:
        model, args, kwargs = model_at("kernel", task, hyper, tokens, activation)
    if gram is not None:
        kwargs = {**kwargs, "gram": jnp.asarray(check_gram(gram, task.n_features))}
    elif gram_width is not None:
        d = check_int("gram_width", gram_width, 1)
        emb = seed_embeddings(task, hyper, d, seed=check_int("seed", seed, 0))
        kwargs = {**kwargs, "gram": algebra.embedding_gram(*emb)}
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
    gram=None,
    include_logdet: bool = True,
    seed: int = 0,
    progress: bool = True,
    **umbrella,
):
    """Umbrella sampling along the order parameter of ``activation`` (:data:`CV`) of the
    posterior at ``level`` (module docstring).

    Parameters
    ----------
    task, hyper, P
        The preset and the training-set size.
    level : {"reduced", "kernel"}
    activation : {"softmax", "linear"}
        Softmax: the profile of ``aG``, windows from both phases' modes; linear: of ``cG``,
        windows from the MAP (give ``centres`` to reach the pooled side, cG near 0).
    tokens : (P, L) ints, optional
        The dataset (``kernel``); default drawn from ``seed`` as the CLI's ``sample`` draws it.
    gram_width : int, optional
        ``kernel`` only: the Gram of one prior draw of embeddings of this width (the exact
        posterior of that network with frozen embeddings); None is g = I.
    gram : (n, n) array, optional
        ``kernel`` only, instead of ``gram_width``: a given Gram (for example a protocol
        member's, :func:`bayes_attn.experiments.frozen.member_grams`).
    include_logdet : bool
        ``reduced`` only: the log-determinant in the density (Level 1 carries its own).
    seed : int
        The dataset's and the sampler's seed.
    **umbrella
        Options of :func:`~bayes_attn.inference.run_umbrella` (``num_warmup``, ``num_samples``,
        ``num_chains``, ``centres``, ``kappa``, ``refine``, ``checkpoint``, ...); the sampler's
        options default to the level's
        (:meth:`~bayes_attn.inference.umbrella.UmbrellaSettings.for_level`, passed as
        ``settings``). With ``checkpoint``, an interrupted run (Ctrl-C) keeps the plan of its
        windows and its finished windows, at Level 2 as at Level 1, and a rerun with the same
        arguments resumes them without finding the modes again.

    Returns
    -------
    InferenceData
        :func:`run_umbrella`'s result, its attrs with ``level``, ``gram_width`` (0 for g = I, -1
        for a given ``gram``).
    """
    check_activation(activation)
    if level in LANDSCAPE_LEVELS:
        P = check_landscape_P(task, hyper, P, level)
    model, args, kwargs = landscape_model(task, hyper, P, level, activation, tokens=tokens,
                                          gram_width=gram_width, gram=gram, seed=seed,
                                          include_logdet=include_logdet)  # fmt: skip
    starts = _starts(task, hyper, P, level, activation, args, kwargs)
    say("landscape: %s level at P = %g, %s, windows from %s", level, P, activation,
        "both phases' modes" if activation == "softmax" else "the MAP", enabled=progress)  # fmt: skip
    idata = run_umbrella(model, CV[activation], model_args=args, model_kwargs=kwargs,
                         settings=UmbrellaSettings.for_level(level), starts=starts, seed=seed,
                         progress=progress, **umbrella)  # fmt: skip
    width = -1 if gram is not None else int(gram_width or 0)
    for group in az.groups(idata):
        idata[group].attrs.update(landscape_level=level, gram_width=width)
    return idata


def _starts(task, hyper, P, level, activation, args, kwargs) -> list[dict]:
    """Softmax: a start in each phase, or, where the transition is not first order at this L and
    V (one phase), zero and the MAP; linear: the MAP (Level 2's global saddle, or Level 1's on
    the dataset and Gram of the model)."""
    if activation == "softmax":
        try:
            st = phase_starts(task, hyper, P, level)
        except OnePhaseError as err:
            say("landscape: %s: the windows start from zero and the MAP", err)
        else:
            return [st["weak"], st["strong"]]
    if level == "reduced" and activation == "softmax":
        return [{"aG": jnp.float64(global_saddle(task, hyper, float(P), "softmax").aG)}]
    if level == "reduced":
        sd = global_saddle(task, hyper, float(P), "linear")
        return [{"c1": jnp.float64(abs(sd.c1)), "cG": jnp.float64(abs(sd.cG))}]
    m = level1_map(task, hyper, args[2], activation, gram=kwargs.get("gram"))
    if activation == "softmax":
        return [{"M": jnp.zeros_like(jnp.asarray(m.M))}, {"M": jnp.asarray(m.M)}]
    return [{"M": jnp.asarray(m.M) * (1.0 if m.cG >= 0 else -1.0)}]  # the Z2 image with cG > 0


def landscape_on_hosts(task, hyper, P, level, activation, out, process, *, progress=True, **opts):
    """:func:`run_landscape` over several processes (hosts): each runs its share of the windows
    and writes ``OUT.part-I-of-N.nc`` (:func:`bayes_attn.distributed.part_paths`); process 0
    waits for every part, merges them (:func:`bayes_attn.inference.umbrella.merge_umbrella`),
    writes ``out`` and returns the result, the others return None. Refinement needs every
    window, so it is off (``refine = 0``) with more than one process. Each process keeps its
    finished windows beside its file (:func:`checkpoint_path`) until that file is written, so an
    interrupted run started again with the same arguments resumes them."""
    n, i = process.num_processes, process.process_id
    if n == 1:
        ckpt = checkpoint_path(out)
        idata = run_landscape(task, hyper, P, level, activation, progress=progress,
                              checkpoint=ckpt, **opts)  # fmt: skip
        write_landscape(idata, out)
        ckpt.unlink(missing_ok=True)
        return idata
    if opts.pop("refine", 0):
        say("landscape: refinement is off with %d processes (it needs every window)", n,
            enabled=progress)  # fmt: skip
    parts = part_paths(out, n)
    ckpt = checkpoint_path(parts[i])
    idata = run_landscape(task, hyper, P, level, activation, progress=progress, refine=0,
                          share=(i, n), checkpoint=ckpt, **opts)  # fmt: skip
    write_landscape(idata, parts[i])
    ckpt.unlink(missing_ok=True)
    if i != 0:
        return None
    wait_until(lambda: (all(p.exists() for p in parts), [str(p) for p in parts if not p.exists()]))
    idata = merge_umbrella([az.from_netcdf(p) for p in parts])
    write_landscape(idata, out)
    return idata


def write_landscape(idata, path) -> None:
    """Write a landscape (:func:`run_landscape`) to NetCDF atomically
    (:func:`bayes_attn.io.write_atomic`), its folder created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(idata, path)


def checkpoint_path(out) -> Path:
    """The file beside ``out`` that keeps an unfinished landscape's windows
    (``OUT.windows.nc``; :class:`bayes_attn.inference.umbrella.WindowStore`)."""
    out = Path(out)
    return out.with_name(out.name + ".windows.nc")
