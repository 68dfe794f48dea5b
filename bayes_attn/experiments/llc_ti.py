"""The free energy at a point by thermodynamic integration of the LLC: over the data's weight
(:func:`llc_free_energy`) and over the localization (:func:`localization_free_energy`);
docs/theory.md §11. Both are re-exported by :mod:`bayes_attn.experiments.llc`.
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int, check_positive, with_changes
from bayes_attn.analysis.llc import llc_estimate
from bayes_attn.inference import resolve_key
from bayes_attn.inference.llc import (
    EXACT_SETTINGS,
    exact_frozen_llc,
    frozen_llc_target,
    llc_target,
    run_llc,
)
from bayes_attn.inference.llc_settings import LLCSettings
from bayes_attn.models.levels import ORDER_PARAMETERS
from bayes_attn.progress import say

__all__ = ["LADDER_SETTINGS", "llc_free_energy", "localization_free_energy"]


def _ti_nodes(nbeta: float, scale: float, num_nodes: int):
    """Gauss-Legendre nodes in u = log(1 + t / scale) on [0, log(1 + nβ / scale)]: the data
    weights t and the weights of ∫ g(t) dt = ∫ g(t) (scale + t) du."""
    x, w = np.polynomial.legendre.leggauss(num_nodes)
    top = math.log1p(nbeta / scale)
    u = (x + 1) * top / 2
    t = scale * np.expm1(u)
    return t, w * top / 2 * (scale + t)


def _ti_ladder(run_one, nbeta, scale, num_nodes, key, burnin, progress=False):
    """λ̂ and its MCSE at the nodes of one Gauss-Legendre rule, and the integral
    ∫_0^nβ (E_t[L_n] - L_n(w*)) dt = ∫ λ̂(t)/t dt with its standard error (independent runs);
    last, :func:`_node_order` of the nodes."""
    t, w = _ti_nodes(nbeta, scale, num_nodes)
    est, orders = [], []
    for i, ti in enumerate(t):
        start = time.perf_counter()
        run = run_one(float(ti), jax.random.fold_in(key, i))
        est.append(llc_estimate(run, burnin=burnin))
        orders.append(_node_order(run))
        say("llc free energy: node %d of %d, t = %.4g: llc %.4g ± %.2g, R-hat %.3f%s (%.0f s)",
            i + 1, num_nodes, ti, est[-1].llc_mean, est[-1].mcse, est[-1].rhat,
            _order_line(orders[-1]), time.perf_counter() - start, enabled=progress)  # fmt: skip
    llc = np.array([e.llc_mean for e in est])
    se = np.array([e.mcse for e in est])
    rhat = np.array([e.rhat for e in est])
    integral = float(np.sum(w * llc / t))
    se_int = float(np.sqrt(np.sum((w * se / t) ** 2)))
    return t, llc, se, rhat, integral, se_int, est[0].init_loss, _stack_orders(orders)


def _node_order(run) -> dict:
    """{name_mean, name_min, name_max} of each order parameter a ladder node's draws record
    (the exact runs' a1/aG or c1/cG): where the node's chains sit, so that a ladder whose path
    crosses a transition shows it. Empty when the run records none."""
    post = az.dataset(run)
    out = {}
    for name in ORDER_PARAMETERS:
        if name in post:
            v = np.asarray(post[name])
            out.update({f"{name}_mean": v.mean(), f"{name}_min": v.min(), f"{name}_max": v.max()})
    return out


def _order_line(order: dict) -> str:
    """``_node_order`` for a progress line: ", aG mean [min, max]" per order parameter."""
    return "".join(f", {n} {order[n + '_mean']:.3f} [{order[n + '_min']:.3f}, "
                   f"{order[n + '_max']:.3f}]" for n in ORDER_PARAMETERS if n + "_mean" in order)  # fmt: skip


def _stack_orders(orders: list[dict]) -> dict:
    """The nodes' :func:`_node_order` as arrays over the nodes (keys every node has)."""
    keys = set.intersection(*(set(o) for o in orders)) if orders else set()
    return {k: np.array([o[k] for o in orders], dtype=float) for k in sorted(keys)}


def _full_batch(model_kwargs: dict) -> dict:
    """The model's keywords without a minibatch: the exact LLC is full-batch."""
    return {k: v for k, v in model_kwargs.items() if k != "batch_size"}


def _ladder(model, w_star, model_args, model_kwargs, n, exact, vary, s: LLCSettings):
    """(the target at the top of a ladder, ``run(value, key)``): the ladder's node at ``vary``
    (``"nbeta"`` or ``"gamma"``) = value, the other settings ``s``'s, by :func:`exact_frozen_llc`
    (``exact``; its target the frozen network's, gate only, so cheap at any width) or
    :func:`run_llc` (whose ``step_size`` may be a function of the value)."""
    kw = {"model_args": tuple(model_args), "model_kwargs": dict(model_kwargs or {})}
    if exact:
        kw["model_kwargs"] = _full_batch(kw["model_kwargs"])
    else:
        kw["n"] = n
    base = (frozen_llc_target if exact else llc_target)(model, w_star, **kw, settings=s)
    if vary == "gamma":  # the data's weight stays the top's
        s = dataclasses.replace(s, nbeta=base.nbeta)
    sampler = exact_frozen_llc if exact else run_llc

    def run_one(value, key):
        eps = s.step_size(value) if callable(s.step_size) else s.step_size
        node = dataclasses.replace(s, step_size=eps, **{vary: value})
        return sampler(model, w_star, **kw, settings=node, key=key)

    return base, run_one


LADDER_SETTINGS = LLCSettings(step_size=1e-4)
"""The ladders' defaults without ``exact``: :class:`LLCSettings` with the step 1e-4 (with
``exact``, :data:`~bayes_attn.inference.llc.EXACT_SETTINGS`)."""


def _ladder_settings(settings, exact: bool, changes: dict, where: str) -> LLCSettings:
    """The ladder's settings: ``settings`` (default :data:`LADDER_SETTINGS`, or
    :data:`~bayes_attn.inference.llc.EXACT_SETTINGS` with ``exact``) with ``changes``."""
    if settings is None:
        settings = EXACT_SETTINGS if exact else LADDER_SETTINGS
    return with_changes(settings, LLCSettings, changes, where=where)


def llc_free_energy(
    model, w_star, *, model_args: tuple = (), model_kwargs: dict | None = None,
    n: int | None = None, settings: LLCSettings | None = None, num_nodes: int = 8,
    scale: float | None = None, exact: bool = False, log_z0: float | None = None,
    burnin: int = 0, seed: int | None = None, key=None, progress: bool = False, **changes,
) -> xr.Dataset:  # fmt: skip
    """The localized free energy at ``w_star`` by thermodynamic integration of the LLC over the
    temperature (docs/theory.md §11, "The free energy from the LLC").

    With Z(t) = ∫ exp(-t L_n(w) - γ/2 |w - w*|²) [prior] dw and t = nβ the data's weight,
    d log Z / dt = -E_t[L_n], so

        F(nβ) - F(0) = nβ L_n(w*) + ∫_0^nβ λ̂(t)/t dt,     λ̂(t) = t (E_t[L_n] - L_n(w*)).

    The integral runs over u = log(1 + t / scale) by Gauss-Legendre with ``num_nodes`` nodes
    (λ̂(t)(1 + scale/t) is bounded and smooth in u: for a quadratic direction of curvature
    scale it is 1/2), every node one :func:`~bayes_attn.inference.llc.run_llc` or, with
    ``exact``, :func:`~bayes_attn.inference.llc.exact_frozen_llc`, from its own key, at
    ``settings, **changes`` (the fields of :class:`~bayes_attn.inference.llc_settings.LLCSettings`:
    the target's nβ, γ and prior, and the sampler's; default :data:`LADDER_SETTINGS`, or
    :data:`~bayes_attn.inference.llc.EXACT_SETTINGS` with ``exact``); ``step_size`` may be a
    function of t, since the target's curvature grows from γ to nβ H + γ along the ladder. The same integral with
    ``num_nodes // 2`` nodes (more runs) checks the quadrature. ``scale`` defaults to γ (1 when
    γ = 0). F(0) = -log Z(0): -(D/2) log(2π/γ) without the prior (D the flat dimension); with
    the prior it is the user's ``log_z0`` (NaN when not given). ``progress`` logs each node's
    λ̂ and time as it finishes (a ladder of exact runs on the Table-1 network takes minutes a node).

    Returns a Dataset: ``llc``, ``mcse``, ``rhat`` at the nodes ``t`` (dimension ``node``) and at
    the half rule's (``node_half``); scalars ``delta_f`` (F(nβ) - F(0)), ``delta_f_se`` (from the
    MCSEs), ``delta_f_half`` (the half rule), ``quadrature_error`` (|delta_f - delta_f_half|),
    ``log_z0`` and ``free_energy`` (F(nβ) = delta_f - log_z0), ``init_loss``, ``nbeta``; with
    ``exact``, where each node's draws sit: ``aG_mean``, ``aG_min``, ``aG_max`` (and a1's; c1/cG
    for linear attention) at the nodes.
    """
    num_nodes = check_int("num_nodes", num_nodes, 2)
    s = _ladder_settings(settings, exact, changes, "llc_free_energy")
    base, run_one = _ladder(model, w_star, model_args, model_kwargs, n, exact, "nbeta", s)
    gamma, include_prior = base.gamma, base.include_prior
    scale = (gamma if gamma > 0 else 1.0) if scale is None else check_positive("scale", scale)
    rng = resolve_key(key, seed)[0]

    rule = _ti_ladder(
        run_one, base.nbeta, scale, num_nodes, jax.random.fold_in(rng, 0), burnin, progress
    )
    half = _ti_ladder(
        run_one, base.nbeta, scale, num_nodes // 2, jax.random.fold_in(rng, 1), burnin, progress
    )
    if log_z0 is None:
        log_z0 = math.nan if include_prior else base.x_star.size / 2 * math.log(2 * math.pi / gamma)
    delta_f = base.nbeta * base.init_loss + rule[4]
    delta_half = base.nbeta * base.init_loss + half[4]
    return xr.Dataset(
        {
            "llc": ("node", rule[1]), "mcse": ("node", rule[2]), "rhat": ("node", rule[3]),
            "llc_half": ("node_half", half[1]), "mcse_half": ("node_half", half[2]),
            "delta_f": delta_f, "delta_f_se": rule[5], "delta_f_half": delta_half,
            "quadrature_error": abs(delta_f - delta_half), "log_z0": float(log_z0),
            "free_energy": delta_f - float(log_z0), "init_loss": base.init_loss,
            "nbeta": base.nbeta, **{k: ("node", v) for k, v in rule[7].items()},
        },
        coords={"t": ("node", rule[0]), "t_half": ("node_half", half[0])},
        attrs={"kind": "llc free energy", "gamma": float(gamma), "scale": scale,
               "include_prior": int(include_prior), "exact": int(exact), "burnin": burnin},
    )  # fmt: skip


def _gamma_ladder(run_one, gamma, scale, m, key, progress):
    """One Gauss-Legendre rule of :func:`localization_free_energy` with ``m`` nodes in γ (in
    u = log(1 + g/scale) with ``scale``): the nodes, the columns (½E|w - w*|², its MCSE, R-hat,
    the draws' least and largest L_n), the integral, its standard error and the nodes' orders."""
    if scale is None:
        x, wts = np.polynomial.legendre.leggauss(m)
        g, wts = (x + 1) * gamma / 2, wts * gamma / 2
    else:
        g, wts = _ti_nodes(gamma, scale, m)
    rows, orders = [], []
    for i, gi in enumerate(g):
        start = time.perf_counter()
        run = run_one(float(gi), jax.random.fold_in(key, i))
        post = run.posterior
        half = 0.5 * np.asarray(post["distance"]) ** 2
        loss = np.asarray(post["loss"])
        rows.append((half.mean(), float(az.mcse(half)), float(az.rhat(half)), loss.min(),
                     loss.max()))  # fmt: skip
        orders.append(_node_order(run))
        say("localization free energy: node %d of %d, γ = %.4g: ½E|w - w*|² %.4g ± %.2g, "
            "R-hat %.3f%s (%.0f s)", i + 1, m, gi, *rows[-1][:3], _order_line(orders[-1]),
            time.perf_counter() - start, enabled=progress)  # fmt: skip
    cols = [np.array(c, dtype=float) for c in zip(*rows, strict=True)]
    integral = float(np.sum(wts * cols[0]))
    return g, cols, integral, float(np.sqrt(np.sum((wts * cols[1]) ** 2))), orders


def localization_free_energy(
    model, w_star, *, model_args: tuple = (), model_kwargs: dict | None = None,
    n: int | None = None, settings: LLCSettings | None = None, num_nodes: int = 4,
    scale: float | None = None, exact: bool = False, seed: int | None = None, key=None,
    progress: bool = False, **changes,
) -> xr.Dataset:  # fmt: skip
    """F(γ) - F(0) at fixed nβ: the free energy the localization adds, by thermodynamic
    integration over γ (docs/theory.md §11, "Taking the localization away").

    With Z(g) = ∫ exp(-nβ L_n(w) - g/2 |w - w*|²) [prior] dw, d(-log Z)/dg = ½ E_g|w - w*|², so

        F(γ) - F(0) = ∫_0^γ ½ E_g|w - w*|² dg,

    by Gauss-Legendre on [0, γ] with ``num_nodes`` nodes (and ``num_nodes // 2`` as the check),
    or, with ``scale``, in u = log(1 + g/scale) (a direction held by a precision p has integrand
    ½/(p + g), constant in u when scale = p: pass the prior's precision when γ is above it),
    each node one :func:`~bayes_attn.inference.llc.run_llc` or, with ``exact``,
    :func:`~bayes_attn.inference.llc.exact_frozen_llc` (|w - w*|² in the span, the readout's part
    integrated), from its own key, at ``settings, **changes`` (as in :func:`llc_free_energy`). F(0) is the free energy without localization: the target at
    γ = 0 must be proper (the prior, or a loss that holds every direction). Added to
    :func:`llc_free_energy`'s F(nβ) at γ it gives the unlocalized F(nβ); where the γ = 0 target
    has several basins, each node's chains stay in the basin they start in (w*'s) only while the
    barrier holds them: read ``loss_min``/``loss_max`` at the nodes against the other basin's
    loss.

    Returns a Dataset: ``half_sq_distance`` (½ E|w - w*|²), its ``mcse``, ``rhat``, ``loss_min``
    and ``loss_max`` (the draws' extremes of L_n) at the nodes ``g`` (dimension ``node``) and at
    the check rule's (``node_half``); scalars ``delta_f`` (F(γ) - F(0)), ``delta_f_se``,
    ``delta_f_half`` and ``quadrature_error``; with ``exact``, the order parameters' mean, min and
    max at the nodes, as in :func:`llc_free_energy`.
    """
    num_nodes = check_int("num_nodes", num_nodes, 2)
    s = _ladder_settings(settings, exact, changes, "localization_free_energy")
    gamma = check_positive("gamma", s.gamma)
    base, run_one = _ladder(model, w_star, model_args, model_kwargs, n, exact, "gamma", s)
    if scale is not None:
        scale = check_positive("scale", scale)
    rng = resolve_key(key, seed)[0]

    def ladder(m, k):
        return _gamma_ladder(run_one, gamma, scale, m, k, progress)

    g, cols, delta, se, orders = ladder(num_nodes, jax.random.fold_in(rng, 0))
    g_half, cols_half, delta_half, _, _ = ladder(num_nodes // 2, jax.random.fold_in(rng, 1))
    names = ("half_sq_distance", "mcse", "rhat", "loss_min", "loss_max")
    return xr.Dataset(
        {**{k: ("node", c) for k, c in zip(names, cols, strict=True)},
         **{f"{k}_half": ("node_half", c) for k, c in zip(names[:2], cols_half[:2], strict=True)},
         "delta_f": delta, "delta_f_se": se, "delta_f_half": delta_half,
         "quadrature_error": abs(delta - delta_half), "init_loss": base.init_loss,
         "nbeta": base.nbeta, **{k: ("node", v) for k, v in _stack_orders(orders).items()}},
        coords={"g": ("node", g), "g_half": ("node_half", g_half)},
        attrs={"kind": "localization free energy", "gamma": gamma,
               "scale": math.nan if scale is None else scale,
               "include_prior": int(base.include_prior), "exact": int(exact)},
    )  # fmt: skip
