"""The studies of docs/validation.md and docs/results.md as sweep kinds (registered in
``KINDS`` of :mod:`bayes_attn.experiments.kinds`; their configs are ``bayes_attn/configs/*.toml``).

Each study runs as ``bayes-attn sweep --config bayes_attn/configs/STUDY.toml --out FILE``
(resumable, shared by processes, its provenance in the attrs), and its ``docs/scripts/STUDY.py``
only reads the file and draws or tabulates:

- ``frozen``: the paper's protocol at any width, exactly, through the frozen-embedding identity
  (:func:`bayes_attn.experiments.frozen.frozen_point`): each member's exact MAP and, with
  ``posterior_draws``, its exact posterior means;
- ``precursors``: the posterior variance of the order parameter at P by Laplace and quadrature at
  each ``chi``, and by NUTS at the P listed in ``nuts_P``
  (:func:`bayes_attn.experiments.precursors.precursors`);
- ``level1``: the exact Level-1 MAP (L-BFGS, no log-determinant) from each start on the point's
  dataset (``pool``: nested datasets), beside the Level-2 saddle;
- ``delta_f``: the evidence of each softmax phase by SMC per basin and Delta F beside Level 2's
  (:func:`bayes_attn.experiments.coexistence.phase_free_energies`);
- ``hysteresis``: warm-started Adam (and optionally SGLD) networks up the ``Ps`` and back down
  (:func:`bayes_attn.experiments.hysteresis.hysteresis_sweep`); the grid's P is the pool, max(Ps).
"""

from __future__ import annotations

import inspect

import numpy as np

from bayes_attn.experiments.points import (
    member_values,
    pool_tokens,
    protocol_config,
    protocol_defaults,
)

__all__ = ["delta_f_point", "frozen_point", "hysteresis_point", "level1_point", "precursors_point"]


# --------------------------------------------------------------------------------------------------
# frozen: the protocol at any width, exactly


def frozen_defaults() -> dict:
    """The protocol's options and ``posterior_draws`` (0: the exact MAP only)."""
    return {**protocol_defaults(), "posterior_draws": 0}


def frozen_point(cfg, pt, task, hyper):
    """Every member's exact MAP (and posterior means) at width ``d_model``, and the theory."""
    from bayes_attn.experiments.frozen import frozen_point as run_point

    pc = protocol_config(cfg, pt, drop=("posterior_draws",))
    values, _ = run_point(pc, hyper, pt["activation"], pt["P"], d_model=pc.d_model,
                          posterior_draws=cfg.options["posterior_draws"])  # fmt: skip
    return member_values(values, max(cfg.L))


# --------------------------------------------------------------------------------------------------
# precursors: the posterior variance of the order parameter


def precursors_defaults() -> dict:
    """``chi`` (the values, an extra dim; empty: the config's hyper), ``nuts_P`` (the P at which
    NUTS also runs, at the first chi), ``exact`` and NUTS's chains (``precursors``' defaults)."""
    from bayes_attn.experiments.precursors import precursors

    params = inspect.signature(precursors).parameters
    names = ("exact", "num_chains", "num_warmup", "num_samples")
    return {"chi": [], "nuts_P": [], **{k: params[k].default for k in names}}


_NUTS = ("var_nuts", "mcse_nuts", "divergences")


def precursors_point(cfg, pt, task, hyper):
    """Laplace and quadrature (and NUTS at ``nuts_P``) at each chi: dims ("chi",)."""
    from bayes_attn.experiments.precursors import precursors

    o, P, act = cfg.options, float(pt["P"]), pt["activation"]
    chis = o["chi"] or [hyper.chi]
    rows = []
    for k, chi in enumerate(chis):
        h = hyper.replace(chi=float(chi))
        ds = precursors(task, h, [P], act, exact=bool(o["exact"]))
        row = {name: float(ds[name].values[0]) for name in ds.data_vars}
        row.update(dict.fromkeys(_NUTS, np.nan))
        if k == 0 and P in [float(p) for p in o["nuts_P"]]:
            nuts = precursors(task, h, [P], act, exact=False, nuts=True, seed=pt["seed"],
                              num_chains=o["num_chains"], num_warmup=o["num_warmup"],
                              num_samples=o["num_samples"])  # fmt: skip
            row.update({name: float(nuts[name].values[0]) for name in _NUTS})
        rows.append(row)
    return {name: (("chi",), np.array([r[name] for r in rows])) for name in rows[0]}


# --------------------------------------------------------------------------------------------------
# hysteresis: warm-started networks up and down a grid of P

HYSTERESIS = dict(
    Ps=[],
    d_model=32,
    members=2,
    embeddings="orthonormal",  # or "prior": the embeddings' prior draw
    lr=1e-2,
    max_steps=300,
    patience=10**6,  # early stopping off
    train_embeddings=False,
    sgld_steps=0,
    sgld_warmup=100,
)


def check_hysteresis(cfg, options: dict) -> dict:
    Ps = options["Ps"]
    if not Ps or cfg.P != (max(Ps),):
        raise ValueError(
            f"Ps: a hysteresis sweep lists the loop's P values in the option Ps and the pool, "
            f"max(Ps), as its P; got Ps={Ps}, P={list(cfg.P)}"
        )
    if options["embeddings"] not in ("orthonormal", "prior"):
        raise ValueError(
            f"embeddings must be 'orthonormal' or 'prior', got {options['embeddings']!r}"
        )
    return options


def hysteresis_point(cfg, pt, task, hyper):
    """The loop at one (activation, seed): dims (direction = up/down, rung = the index of P in the
    sorted ``Ps``, member)."""
    from bayes_attn.experiments.hysteresis import hysteresis_sweep, orthonormal_start

    o = dict(cfg.options)
    Ps, d, emb = o.pop("Ps"), o.pop("d_model"), o.pop("embeddings")
    init = None
    if emb == "orthonormal":
        init = orthonormal_start(task, hyper, d, o["members"], pt["seed"])
    ds = hysteresis_sweep(task, hyper, Ps, pt["activation"], d, init=init, seed=pt["seed"],
                          progress=False, **o)  # fmt: skip
    return {k: (("direction", "rung", "member"), ds[k].values) for k in ds.data_vars}


# --------------------------------------------------------------------------------------------------
# level1: the exact Level-1 MAP from each start

LEVEL1 = dict(pool=0)  # 0: task.sample(key(seed), P); > 0: the first P of a pool that size
#: the starts: linear from the Level-2 saddle's realisation; softmax from the uniform (M = 0)
#: and the copy start (the strong Level-2 minimum's logits, ``phase_starts``)
STARTS = ("saddle", "uniform", "copy")


def level1_point(cfg, pt, task, hyper):
    """c1, cG (softmax: a1, aG; linear: Z2-folded), the action per chi and the token residual
    of the Level-1 MAP from each start (dims ("start",), nan where a start does not apply),
    and the Level-2 saddle's ``theory_c1``, ``theory_cG``."""
    import jax

    from bayes_attn import algebra
    from bayes_attn.experiments.coexistence import phase_starts
    from bayes_attn.theory import global_saddle, level1_map

    act, P = pt["activation"], int(pt["P"])
    tokens = pool_tokens(task, pt, cfg.options["pool"])
    if tokens is None:
        tokens = task.sample(jax.random.key(pt["seed"]), P)
    if act == "linear":
        M0s = {"saddle": None}
    else:
        st = phase_starts(task, hyper, P, "kernel")
        M0s = {"uniform": st["weak"]["M"], "copy": st["strong"]["M"]}
    out = {k: np.full(len(STARTS), np.nan) for k in ("c1", "cG", "action", "residual")}
    for k, name in enumerate(STARTS):
        if name in M0s:
            m = level1_map(task, hyper, tokens, act, M0=M0s[name])
            c1, cG = algebra.fold_sign(m.c1, m.cG) if act == "linear" else (m.c1, m.cG)
            row = dict(c1=c1, cG=cG, action=m.action, residual=m.token_residual)
            for name_, v in row.items():
                out[name_][k] = float(v)
    sd = global_saddle(task, hyper, P, act)
    theory = (sd.c1, sd.cG) if act == "linear" else (sd.a1, sd.aG)
    result = {f"level1_{k}": (("start",), v) for k, v in out.items()}
    result.update(theory_c1=((), float(theory[0])), theory_cG=((), float(theory[1])))
    return result


# --------------------------------------------------------------------------------------------------
# delta_f: the free energy of the softmax phases by SMC per basin

DELTA_F = dict(
    level="kernel",
    pool=0,  # > 0: the first P of task.sample(key(seed), pool); 0: the sweep's dataset of the seed
    include_logdet=True,
    num_particles=0,  # 0: phase_free_energies' default
    replicates=2,
    d_model=32,  # network: the width, embeddings frozen at an orthonormal draw (Level 1 exactly)
)


def delta_f_point(cfg, pt, task, hyper):
    """The log evidence of each phase (weak, strong) by SMC and by Laplace, their tempering steps
    and modes' aG (dims ("phase",)), and Delta F by SMC, Laplace and Level 2."""
    from bayes_attn.experiments.coexistence import phase_free_energies
    from bayes_attn.experiments.hysteresis import orthonormal_start
    from bayes_attn.models.levels import model_with_data

    o, P = cfg.options, pt["P"]
    smc = {"replicates": o["replicates"]}
    if o["num_particles"]:
        smc["num_particles"] = o["num_particles"]
    extra = {}
    if o["level"] == "reduced":
        data = float(P)
    else:
        data = pool_tokens(task, pt, o["pool"])
        if data is None:
            _, args, _ = model_with_data("kernel", task, hyper, P, "softmax", seed=pt["seed"])
            data = args[2]
    if o["level"] == "network":
        draw = orthonormal_start(task, hyper, o["d_model"], 1)
        extra["embeddings"] = (draw["W_emb"][0], draw["p"][0])
    ds = phase_free_energies(task, hyper, data, o["level"], include_logdet=o["include_logdet"],
                             smc_options=smc, progress=False, **extra)  # fmt: skip
    ds = ds.sel(phase=["weak", "strong"])
    return {
        name: (tuple(d for d in ds[name].dims), np.asarray(ds[name].values, float))
        for name in ds.data_vars
        if set(ds[name].dims) <= {"phase"}
    }
