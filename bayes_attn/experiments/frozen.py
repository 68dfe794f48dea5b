"""The paper's protocol at any width, exactly: frozen embeddings through the whitened Level 1.

With the embeddings held at their prior draw (as the explicit protocol holds them), a network of
width d is exactly the Level-1 posterior on the features R^T psi, g = W^T W / d = R R^T
(docs/theory.md, "Frozen embeddings at any width"). So each member of the paper's ensemble costs a
Level-1 computation at every width, d = 10^4 included:

* its own embedding draw at width d (the draw :func:`~bayes_attn.inference.train_adam` starts from
  in :func:`~bayes_attn.experiments.protocol.protocol_point`, same keys, without W_G), and its Gram;
* its exact MAP, by L-BFGS on the whitened Level-1 action (the readout profiled out, no
  log-determinant: what Adam converges to) from several starts, the lowest kept; the loss filter
  of :func:`~bayes_attn.analysis.classify_minima` then marks the members at the global minimum;
* optionally its exact posterior means, by NUTS on ``kernel_limit_model(..., gram=g)`` started at
  the MAP: per (activation, P) the first member's Laplace covariance as a dense metric and a short
  dual averaging of the step, then every member's chain with them, the members mapped and split
  over the local devices (:func:`~bayes_attn.inference.members.member_nuts`).

The datasets and the held-out sequences are the explicit protocol's, so the two line up member by
member: at the explicit protocol's own width the exact MAP is what Adam should reach. Every key
comes from the protocol's named layout (:func:`~bayes_attn.experiments.protocol.protocol_keys`:
the datasets, Adam's initial draws and the NUTS chains of each point).
"""

from __future__ import annotations

import functools
import time

import jax
import numpy as np
import xarray as xr

import bayes_attn
from bayes_attn import algebra
from bayes_attn._validation import check_int
from bayes_attn.experiments.protocol import (
    collect_grid,
    held_out,
    level2_saddle,
    member_datasets,
    point_values,
    protocol_keys,
)
from bayes_attn.inference.adam import adam_keys
from bayes_attn.models.network import init_embeddings
from bayes_attn.progress import say
from bayes_attn.task import Hyper
from bayes_attn.theory.level1 import level1_fit, level1_map

__all__ = ["frozen_point", "run_frozen_protocol"]


def member_grams(cfg, hyper, activation: str, P: int, d_model: int | None = None) -> list:
    """The Grams W^T W / d of every member's embeddings at the point (activation, P): the initial
    draws of the explicit protocol's Adam there (``adam_keys(key=protocol_keys(cfg.seed)
    .point(activation, P).adam).init``, split per member), at width ``d_model``."""
    if not isinstance(activation, str) or d_model is None:
        raise TypeError(
            "member_grams takes the point's values, member_grams(cfg, hyper, activation, P, "
            "d_model); the old form (cfg, hyper, j, d_model) had no activation and other keys"
        )
    task = cfg.task()
    adam = protocol_keys(cfg.seed).point(activation, P).adam
    keys = jax.random.split(adam_keys(key=adam).init, cfg.members)
    return [
        np.asarray(algebra.embedding_gram(*init_embeddings(k, task, hyper, d_model))) for k in keys
    ]


def _map(task, hyper, tokens, act, gram, warm):
    """The lowest of the L-BFGS minima from the theory's start and the warm start (if any)."""
    found = [level1_map(task, hyper, tokens, act, gram=gram)]
    if warm is not None:
        found.append(level1_map(task, hyper, tokens, act, M0=warm, gram=gram))
    return min(found, key=lambda m: m.action), found


def _posteriors(task, hyper, tokens, test, act, grams, Ms, draws, key):
    """Every member's posterior means, sds and effective sample sizes of the held-out order
    parameters, by NUTS on the whitened Level 1 (``kernel_limit_model(..., gram=g)``) started at
    its MAP (:func:`~bayes_attn.inference.members.member_nuts`: the first member's Laplace metric
    and step for all, members mapped)."""
    from numpyro.infer.util import potential_energy

    from bayes_attn import _arviz as az
    from bayes_attn.inference.members import member_nuts
    from bayes_attn.models.kernel_limit import kernel_limit_model

    n = task.n_features

    def logdensity(x, tok, gram):
        return -potential_energy(kernel_limit_model, (task, hyper, tok, act), {"gram": gram},
                                 {"M": x.reshape(n, n)})  # fmt: skip

    def observe(x, tok, gram):
        del tok
        factor = algebra.gram_factor(gram)
        A = algebra.attention(algebra.logits_from_M(x.reshape(n, n), test, task.V, factor), act)
        pr = algebra.project(A)
        return jax.numpy.stack([pr["c1"], pr["cG"]])

    starts = np.asarray(Ms).reshape(len(Ms), -1)
    run = member_nuts(logdensity, observe, starts, (np.asarray(tokens), np.asarray(grams)),
                      key=key, num_draws=draws)  # fmt: skip
    a, b = run["draws"][..., 0], run["draws"][..., 1]  # (member, draw)
    if act == "linear":
        a, b = (np.asarray(x) for x in algebra.fold_sign(a, b))
    ess = [min(float(az.ess(x[m][None])) for x in (a, b)) for m in range(a.shape[0])]
    return {"c1": a.mean(1), "cG": b.mean(1), "c1_sd": a.std(1), "cG_sd": b.std(1),
            "ess": np.asarray(ess), "leapfrogs": run["leapfrogs"].mean(1)}  # fmt: skip


def frozen_point(cfg, hyper, activation: str, P: int, *, d_model: int, posterior_draws: int = 0):
    """One point (activation, P): every member's exact MAP at width ``d_model`` and, with
    ``posterior_draws`` > 0, its posterior means (NUTS from the MAP with the first member's
    Laplace metric and 30 steps of step-size adaptation, then per member 10 dropped steps and
    ``posterior_draws`` draws). Returns ``(values, seconds)``; the values are per member unless
    named ``theory_*``. The old form with grid indices, ``frozen_point(cfg, hyper, i, j, ...)``,
    warns (``DeprecationWarning``)."""
    from bayes_attn.analysis.ensembles import classify_minima

    task = cfg.task()
    act, P = point_values(cfg, activation, P, "frozen_point")
    tokens = np.asarray(member_datasets(cfg, act, P))
    test = held_out(cfg)
    grams = member_grams(cfg, hyper, act, P, d_model)
    names = ("c1", "cG", "train_loss", "action", "n_iter", "starts_agree")
    out = {f"exact_{k}": np.full(cfg.members, np.nan) for k in names}
    seconds = {"map": 0.0, "posterior": 0.0}
    warm, Ms = None, []
    for m in range(cfg.members):
        t0 = time.perf_counter()
        best, found = _map(task, hyper, tokens[m], act, grams[m], warm)
        warm = best.M  # members' Grams are close at large d: a fair warm start for the next one
        Ms.append(np.asarray(best.M))
        fit = level1_fit(best.M, test, task, hyper, act, grams[m])  # order parameters held out
        train = level1_fit(best.M, tokens[m], task, hyper, act, grams[m])
        c1, cG = (fit["c1"], fit["cG"])
        if act == "linear":
            c1, cG = (float(x) for x in algebra.fold_sign(c1, cG))
        spread = max(f.action for f in found) - best.action
        row = dict(c1=c1, cG=cG, train_loss=train["loss"], action=best.action,
                   n_iter=sum(f.n_iter for f in found), starts_agree=float(spread < 1e-6))  # fmt: skip
        for k, v in row.items():
            out[f"exact_{k}"][m] = v
        seconds["map"] += time.perf_counter() - t0
    if posterior_draws:
        t0 = time.perf_counter()
        nuts = protocol_keys(cfg.seed).point(act, P).nuts
        post = _posteriors(task, hyper, tokens, test, act, grams, Ms, posterior_draws, nuts)
        out.update({f"exact_post_{k}": v for k, v in post.items()})
        seconds["posterior"] += time.perf_counter() - t0
    sd = level2_saddle(task, hyper, P, act)  # None (and a warning) for tokens that are not uniform
    filt = classify_minima(
        xr.Dataset({"train_loss": (("member", "step"), out["exact_train_loss"][:, None])}),
        theory_loss=None if sd is None else sd.loss,
        rtol=cfg.rtol,
    )
    out["exact_global_min"] = np.asarray(filt.global_min)
    out["theory_c1"] = np.nan if sd is None else sd.c1 if act == "linear" else sd.a1
    out["theory_cG"] = np.nan if sd is None else sd.cG if act == "linear" else sd.aG
    out["theory_loss"] = np.nan if sd is None else sd.loss
    return out, seconds


def run_frozen_protocol(
    cfg,
    hyper: Hyper | None = None,
    *,
    d_model: int = 10_000,
    posterior_draws: int = 0,
    progress: bool = True,
):
    """The protocol's settings (``cfg``, a :class:`~bayes_attn.experiments.protocol.ProtocolConfig`)
    run exactly at width ``d_model`` through the frozen-embedding identity.

    Returns ``(dataset, seconds)``: dims (activation, P, member) for ``exact_*`` (the MAP's held-out
    order parameters, folded for linear; its train loss, action per chi, L-BFGS iterations; whether
    the starts agreed; ``exact_global_min``, the loss filter; with ``posterior_draws`` the posterior
    means and sds ``exact_post_*`` of the held-out order parameters, their smaller effective sample
    size ``exact_post_ess`` and the mean leapfrog steps per draw ``exact_post_leapfrogs``) and
    (activation, P) for ``theory_*`` (Level 2). The attrs hold the settings, the width and the
    run's record.
    """
    hyper = hyper or Hyper.paper()
    d_model = check_int("d_model", d_model, 1)
    posterior_draws = check_int("posterior_draws", posterior_draws, 0)
    seconds = {"map": 0.0, "posterior": 0.0}
    say(
        "frozen protocol: %d activations x %d P x %d members at d_model = %d, exact (Level-1 cost)",
        len(cfg.activations), len(cfg.Ps), cfg.members, d_model,
    )  # fmt: skip
    point = functools.partial(frozen_point, cfg, hyper, d_model=d_model,
                              posterior_draws=posterior_draws)  # fmt: skip
    data = collect_grid(cfg, point, seconds, desc=f"exact d={d_model}", progress=progress)
    coords = {"activation": list(cfg.activations), "P": list(cfg.Ps),
              "member": np.arange(cfg.members)}  # fmt: skip
    attrs = {"d_model": d_model, "method": "frozen embeddings, whitened Level 1 (exact)",
             "posterior_draws": posterior_draws, **cfg.task().as_dict(), "members": cfg.members,
             "seed": cfg.seed, "rtol": cfg.rtol, "bayes_attn_version": bayes_attn.__version__,
             "map_seconds": seconds["map"], "posterior_seconds": seconds["posterior"]}  # fmt: skip
    attrs.update(hyper.as_dict())
    return xr.Dataset(data, coords=coords, attrs=attrs), seconds
