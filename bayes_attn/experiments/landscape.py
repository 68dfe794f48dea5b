"""The free-energy landscape of the softmax order parameter at one level, beside Level 2.

:func:`run_landscape` builds the model at a level (``reduced``: Level 2; ``kernel``: Level 1, with
``gram_width`` the exact posterior of a network of that width with frozen embeddings, one prior
draw) on a dataset, starts umbrella windows from the modes of both phases
(:func:`bayes_attn.experiments.coexistence.phase_starts`, then the mode finder), and runs
:func:`bayes_attn.inference.run_umbrella` along ``aG``. :func:`landscape_report` turns the result
into F(aG) by MBAR (:func:`bayes_attn.analysis.free_energy_profile`) with the exact Level-2
profile at the same P (:func:`bayes_attn.theory.profile.reduced_profile`) on the same grid, and
:func:`landscape_text` says it in a few lines (minima, barrier, Delta F, overlap, per-window R-hat).

References
----------
docs/theory.md, "The free-energy landscape"; docs/validation.md, "Free-energy profiles".
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import jax
import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int
from bayes_attn.analysis.free_energy import free_energy_profile
from bayes_attn.experiments.coexistence import phase_starts
from bayes_attn.inference.umbrella import run_umbrella
from bayes_attn.models.levels import model_at, model_with_data
from bayes_attn.models.network import init_embeddings
from bayes_attn.progress import say
from bayes_attn.theory.profile import reduced_profile

__all__ = ["LANDSCAPE_LEVELS", "landscape_report", "landscape_text", "run_landscape",
           "write_landscape"]  # fmt: skip

#: the levels a landscape is measured at (the network's own posterior is Level 1 with its Gram)
LANDSCAPE_LEVELS = ("reduced", "kernel")
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
        ``num_chains``, ``centres``, ``kappa``, ``refine``, ...).

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


def landscape_report(idata, *, grid=None, divide=None, divides=None) -> xr.Dataset:
    """F(aG) by MBAR (:func:`free_energy_profile`) with the exact Level-2 profile ``F_level2`` on
    the same grid (bin averages, at the run's P and preset, the log-determinant in as Level 1 has
    it), and the windows' ``r_hat``, ``ess_bulk`` and ``acceptance``."""
    prof = free_energy_profile(idata, grid, divide=divide, divides=divides)
    a = prof.attrs
    const = az.dataset(idata, "constant_data")
    for name in ("r_hat", "ess_bulk", "acceptance"):
        prof[name] = ("window", const[name].values)
    if a.get("cv") == "aG" and "L" in a:
        from bayes_attn.task import CopyTask, Hyper

        task = CopyTask(L=int(a["L"]), V=int(a["V"]))
        hyper = Hyper(chi=float(a["chi"]), g_w=float(a["g_w"]), g_o=float(a["g_o"]),
                      sigma2=float(a["sigma2"]))  # fmt: skip
        logdet = bool(a.get("include_logdet", 1)) if a.get("level") == "reduced" else True
        try:
            prof["F_level2"] = ("q", _bin_profile(task, hyper, float(a["P"]), prof, logdet))
        except ValueError as err:  # no two phases at this preset: no Level-2 line
            say("landscape: no Level-2 profile (%s)", err)
    return prof


def _bin_profile(task, hyper, P, prof, include_logdet) -> np.ndarray:
    """-log of the Level-2 mass of each bin over its width (41-point trapezoid per bin)."""
    lo, hi = prof.edge_lo.values, prof.edge_hi.values
    t = np.linspace(0.0, 1.0, 41)
    x = lo[:, None] + (hi - lo)[:, None] * t[None]
    F = reduced_profile(task, hyper, P, "softmax", x, include_logdet)
    top = np.min(F, axis=1, keepdims=True)
    mass = np.trapezoid(np.exp(-(F - top)), x, axis=1)
    return top[:, 0] - np.log(mass / (hi - lo))


def landscape_text(prof) -> str:
    """A few lines: the minima, the barrier, Delta F at the divide, the overlap, the windows."""
    a = prof.attrs
    lines = [f"free-energy profile of {a.get('cv', 'q')} by umbrella sampling + MBAR "
             f"({prof.sizes['window']} windows)"]  # fmt: skip
    mins = ", ".join(f"{q:.3f} (F {F:.2f})" for q, F in
                     zip(prof.q_minimum.values, prof.F_minimum.values, strict=True))  # fmt: skip
    lines.append(f"minima: {mins or 'none'}")
    if math.isfinite(float(prof.q_barrier)):
        lines.append(f"barrier at {float(prof.q_barrier):.3f}: {float(prof.barrier_below):.2f} "
                     f"above the lower-q minimum, {float(prof.barrier_above):.2f} above the "
                     "higher-q one")  # fmt: skip
    if math.isfinite(float(prof.delta_F)):
        lines.append(f"Delta F (above - below {float(prof.divide):.3f}) = "
                     f"{float(prof.delta_F):.3f} ± {float(prof.delta_F_se):.3f}; masses "
                     f"{float(prof.mass_below):.4g}, {float(prof.mass_above):.4g}")  # fmt: skip
    ov = float(prof.min_overlap_next)
    lines.append(f"smallest neighbour overlap {ov:.3f}"
                 + (" (below 0.03: not to be trusted)" if ov < 0.03 else ""))  # fmt: skip
    if "r_hat" in prof:
        r = prof.r_hat.values
        lines.append(f"per-window R-hat max {np.nanmax(r):.3f}, ESS min {np.nanmin(prof.ess_bulk):.0f},"
                     f" acceptance {np.nanmin(prof.acceptance):.2f}-{np.nanmax(prof.acceptance):.2f}")  # fmt: skip
    if "F_level2" in prof:
        lines.append("Level 2 beside it: F_level2 on the same bins")
    return "\n".join(lines)
