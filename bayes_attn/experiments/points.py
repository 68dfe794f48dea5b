"""The point functions of the built-in sweep kinds (registered in :mod:`bayes_attn.experiments.kinds`).

Each takes ``(cfg, pt, task, hyper)``, the sweep's config, the grid point (activation, L, V, P,
seed), its task and scales, and returns ``{name: (extra dims, array)}``, the same names at every
point: ``theory`` (the Level-2 saddles and boundaries), ``nuts`` / ``sgld`` (posterior summaries of
the order parameters), ``adam`` (an ensemble's final state), ``protocol`` (the paper's experiment),
``landscape`` (a free-energy profile's summary) and ``llc`` (the local learning coefficient).
"""

from __future__ import annotations

import math

import numpy as np

from bayes_attn import _arviz as az
from bayes_attn.analysis.ensembles import classify_minima
from bayes_attn.experiments.kinds import UMBRELLA_OPTIONS
from bayes_attn.inference.adam import AdamSettings
from bayes_attn.inference.umbrella import UmbrellaSettings
from bayes_attn.models.levels import (
    BOUNDARY_ACTIVATION,
    ORDER_PARAMETERS,
    model_with_data,
    order_parameters,
)
from bayes_attn.task import CopyTask, Hyper

#: a protocol sweep's grid axes: ProtocolConfig's field -> the sweep's
PROTOCOL_GRID = {
    "L": "L",
    "V": "V",
    "Ps": "P",
    "activations": "activation",
    "seed": "seed",
    "tokens": "tokens",
}


def protocol_defaults() -> dict:
    """A protocol sweep's options: the fields of ProtocolConfig that are not grid axes."""
    from bayes_attn.experiments.protocol import ProtocolConfig

    return {k: v for k, v in ProtocolConfig.options().items() if k not in PROTOCOL_GRID}


def check_theory(cfg, options: dict) -> dict:
    """P within the range where the float64 reduced action is accurate (at the longest L)."""
    from bayes_attn.theory.saddles import check_P_in_range

    check_P_in_range(CopyTask(max(cfg.L), 2), Hyper(**cfg.hyper), max(cfg.P))
    return options


def check_landscape(cfg, options: dict) -> dict:
    """At the reduced and kernel levels the umbrella defaults are the level's UmbrellaSettings."""
    if options["level"] in ("reduced", "kernel"):
        level = UmbrellaSettings.for_level(options["level"]).options(*UMBRELLA_OPTIONS)
        options = {**options, **level, **cfg.options}
    return options


def check_llc(cfg, options: dict) -> dict:
    if options["level"] not in ("network", "kernel"):
        raise ValueError(f"level: an llc sweep is at network or kernel, not {options['level']!r}")
    return options


def theory_point(cfg, pt, task, hyper):
    from bayes_attn import theory

    act = pt["activation"]
    found = theory.saddles(task, hyper, pt["P"], act)
    best = found[0]
    out = {k: getattr(best, k) for k in ORDER_PARAMETERS}
    out = {k: math.nan if v is None else v for k, v in out.items()}
    out.update(loss=best.loss, action=best.action, n_minima=len(found))
    meta = found[1] if len(found) > 1 else None
    q = "cG" if act == "linear" else "aG"  # Saddle.cG is the logit gap for softmax
    out["meta_q"] = getattr(meta, q) if meta else math.nan
    out["meta_loss"] = meta.loss if meta else math.nan
    b = theory.phase_boundaries(task, hyper, act)  # cached per (task, hyper)
    ours = {k: getattr(b, k) if BOUNDARY_ACTIVATION[k] == act else math.nan for k in _BOUNDARIES}
    out.update(second_order=ours["second_order"], crossover=ours["crossover"])
    out["first_order"] = ours["first_order"]
    lower, upper = ours["spinodals"] if BOUNDARY_ACTIVATION["spinodals"] == act else (math.nan,) * 2
    out.update(spinodal_lower=lower, spinodal_upper=upper)
    return {k: ((), np.float64(v)) for k, v in out.items()}


_BOUNDARIES = ("second_order", "crossover", "first_order", "spinodals")


def model_at_level(opts, pt, task, hyper):
    """The NumPyro model of ``opts["level"]`` (reduced, kernel or network) with its arguments and
    keyword arguments at the point ``pt`` (activation, P, seed): :func:`model_with_data`, the
    dataset drawn from the seed. A sweep's batch size covers its whole P grid: at P <= batch_size
    the full batch is used."""
    return model_with_data(
        opts["level"], task, hyper, pt["P"], pt["activation"], seed=pt["seed"],
        d_model=opts.get("d_model"), include_logdet=opts.get("include_logdet", False),
        batch_size=opts.get("batch_size"),
    )  # fmt: skip


_STATS = {"mean": "mean", "sd": "sd", "mcse": "mcse_mean", "r_hat": "r_hat", "ess": "ess_bulk"}


def _summary_point(idata, activation):
    """Posterior summaries of the order parameters (linear: of the Z2-folded draws)."""
    from bayes_attn.analysis.diagnostics import diagnose, fold_posterior

    out = {f"{q}_{stat}": math.nan for q in ORDER_PARAMETERS for stat in _STATS}
    names = order_parameters(activation)
    names = [q for q in names if q in idata.posterior]
    div = math.nan
    if names:
        d = diagnose(fold_posterior(idata), var_names=names)
        for q in names:
            out.update({f"{q}_{stat}": float(d.table.loc[q, col]) for stat, col in _STATS.items()})
        if "sample_stats" in az.groups(idata) and "diverging" in idata.sample_stats:
            div = float(d.divergences)
    out["divergences"] = div
    return {k: ((), np.float64(v)) for k, v in out.items()}


def _sampled(sampler, cfg, pt, task, hyper, **options):
    """Run ``sampler`` (run_nuts or run_sgld) at the point with the sweep's chain settings."""
    o = cfg.options
    model, args, kw = model_at_level(o, pt, task, hyper)
    return sampler(
        model,
        model_args=args,
        model_kwargs=kw,
        num_chains=o["num_chains"],
        num_warmup=o["num_warmup"],
        num_samples=o["num_samples"],
        seed=pt["seed"],
        progress=False,
        **options,
    )


def nuts_point(cfg, pt, task, hyper):
    from bayes_attn.inference import run_nuts

    return _summary_point(_sampled(run_nuts, cfg, pt, task, hyper), pt["activation"])


def sgld_point(cfg, pt, task, hyper):
    from bayes_attn.inference import run_sgld

    idata = _sampled(run_sgld, cfg, pt, task, hyper, step_size=cfg.options["step_size"])
    out = _summary_point(idata, pt["activation"])
    out.pop("divergences")
    return out


def _pad_attention(A, L_max):
    out = np.full(A.shape[:-2] + (L_max, L_max), np.nan)
    out[..., : A.shape[-2], : A.shape[-1]] = A
    return out


def adam_point(cfg, pt, task, hyper):
    from bayes_attn.analysis import final_state
    from bayes_attn.experiments.protocol import level2_saddle
    from bayes_attn.inference import train_adam

    o, act, P = cfg.options, pt["activation"], pt["P"]
    soft = act == "softmax"
    settings = AdamSettings(
        lr=o["lr"], max_steps=o["max_steps"], patience=o["patience"], num_test=o["num_test"]
    ).with_warmup(act, o["warmup_fraction"], o["warmup_init"])
    ds = train_adam(
        task, hyper, act, o["d_model"], P, members=o["members"], seed=pt["seed"],
        settings=settings, progress=False,
    )  # fmt: skip
    sd = level2_saddle(task, hyper, P, act)  # None (a warning) for tokens that are not uniform
    ds = classify_minima(ds, theory_loss=None if sd is None else sd.loss, rtol=o["rtol"])
    fin = final_state(ds)
    m = ("member",)
    out = {q: (m, np.full(o["members"], np.nan)) for q in ORDER_PARAMETERS}
    names = order_parameters("softmax" if soft else "linear")
    out[names[0]], out[names[1]] = (m, fin["q1"]), (m, fin["qG"])
    out.update(
        train_loss=(m, fin["train_loss"]),
        test_loss=(m, fin["test_loss"]),
        global_min=(m, np.asarray(ds.global_min, float)),
        steps=(m, fin["steps"].astype(float)),
        A_bar=(m + ("query", "key"), _pad_attention(fin["A_bar"], max(cfg.L))),
    )
    return out


def pool_tokens(task, pt, pool: int):
    """The nested dataset of a point: the first P sequences of ``task.sample(key(seed), pool)``
    (None for ``pool`` 0: the kind draws its own dataset from the seed)."""
    if not pool:
        return None
    import jax

    if int(pt["P"]) > pool:
        raise ValueError(f"pool: P = {pt['P']} exceeds the pool of {pool} sequences")
    return task.sample(jax.random.key(pt["seed"]), int(pool))[: int(pt["P"])]


def protocol_config(cfg, pt, drop=()):
    """The :class:`~bayes_attn.experiments.protocol.ProtocolConfig` of a protocol-like sweep at the
    point ``pt``: its grid as the protocol's, its options (less ``drop``) as the settings."""
    from bayes_attn.experiments.protocol import ProtocolConfig

    options = {k: v for k, v in cfg.options.items() if k not in drop}
    return ProtocolConfig.of(
        L=pt["L"],
        V=pt["V"],
        Ps=cfg.P,
        activations=cfg.activation,
        seed=pt["seed"],
        tokens=cfg.tokens,
        **{k: tuple(v) if isinstance(v, list) else v for k, v in options.items()},
    )


def member_values(values: dict, L_max: int) -> dict:
    """A protocol point's values as a sweep point's: per member, or scalars; attention padded."""
    out = {}
    for k, v in values.items():
        v = np.asarray(v, dtype=float)
        if k == "adam_A_bar":
            out[k] = (("member", "query", "key"), _pad_attention(v, L_max))
        else:
            out[k] = (("member",) if v.ndim == 1 else (), v)
    return out


def protocol_point(cfg, pt, task, hyper):
    from bayes_attn.experiments.protocol import protocol_point as run_point

    values, _ = run_point(protocol_config(cfg, pt), hyper, pt["activation"], pt["P"])
    return member_values(values, max(cfg.L))


def landscape_point(cfg, pt, task, hyper):
    from bayes_attn.experiments.landscape import landscape_report, run_landscape
    from bayes_attn.experiments.sweep import point_folder, point_progress

    if pt["activation"] != "softmax":
        raise ValueError("activation: a landscape sweep is of softmax's aG; list only softmax")
    o = dict(cfg.options)
    level, width, logdet = o.pop("level"), o.pop("gram_width"), o.pop("include_logdet")
    tokens = pool_tokens(task, pt, o.pop("pool"))
    if o["centres"]:
        o["centres"] = np.asarray(o["centres"], float)
    else:
        del o["centres"]
    profiles = o.pop("profiles")
    P = pt["P"] if tokens is None else int(pt["P"])  # a dataset's size
    folder = point_folder()  # in a sweep: the finished windows kept there, so a point resumes
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        o["checkpoint"] = folder / "windows.nc"
    idata = run_landscape(task, hyper, P, level, gram_width=width or None, tokens=tokens,
                          include_logdet=logdet, seed=pt["seed"], progress=point_progress(), **o)  # fmt: skip
    if profiles:  # the whole profile, for the figures (docs/scripts/landscape_figure.py)
        from pathlib import Path

        from bayes_attn.experiments.landscape import write_landscape

        g = f"_g{width}" if width else ""
        write_landscape(idata, Path(profiles) / f"{level}_P{pt['P']:g}_d{pt['seed']}{g}.nc")
    prof = landscape_report(idata)
    q = prof.q_minimum.values
    return {
        "delta_F": ((), float(prof.delta_F)),
        "delta_F_se": ((), float(prof.delta_F_se)),
        "divide": ((), float(prof.divide)),
        "aG_weak": ((), float(q[0]) if q.size else math.nan),
        "aG_strong": ((), float(q[-1]) if q.size > 1 else math.nan),
        "n_profile_minima": ((), float(q.size)),
        "barrier_weak": ((), float(prof.barrier_below)),
        "barrier_strong": ((), float(prof.barrier_above)),
        "min_overlap": ((), float(prof.min_overlap_next)),
        "max_r_hat": ((), float(np.nanmax(prof.r_hat.values))),
    }


def llc_point(cfg, pt, task, hyper):
    from bayes_attn.analysis.llc import llc_estimate
    from bayes_attn.experiments.llc import llc_point as run_point

    o = dict(cfg.options)
    run = {k: o[k] for k in ("sampler", "num_chains", "num_draws", "num_burnin", "step_size",
                             "gamma", "include_prior", "nbeta")}  # fmt: skip
    idata, ex = run_point(
        o["level"], task, hyper, pt["P"], pt["activation"], d_model=o["d_model"],
        seed=pt["seed"], batch_size=o["batch_size"], exact=bool(o["exact"]), progress=False, **run,
    )  # fmt: skip
    est = llc_estimate(idata)
    out = dict(
        llc_mean=est.llc_mean, llc_std=est.llc_std, llc_mcse=est.mcse, llc_ess=est.ess,
        llc_rhat=est.rhat, acceptance=est.acceptance, init_loss=est.init_loss,
        grad_norm=est.grad_norm, nbeta=est.nbeta, exact_llc=math.nan, exact_mcse=math.nan,
    )  # fmt: skip
    if ex is not None:
        e = llc_estimate(ex)
        out.update(exact_llc=e.llc_mean, exact_mcse=e.mcse)
    return {k: ((), np.float64(v)) for k, v in out.items()}
