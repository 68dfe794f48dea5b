"""Resumable sweeps over grids of (activation, L, V, P, seed), saved to NetCDF point by point.

A sweep runs one kind of computation at every point of a grid:

- ``theory``: the global saddle, its metastable partner and the phase boundaries (Level 2);
- ``nuts`` / ``sgld``: posterior summaries of the order parameters at a level (``reduced``,
  ``kernel`` or ``network``);
- ``adam``: an Adam-trained ensemble (final observables per member);
- ``protocol``: the paper's experiment, Adam then SGLD warm-started from Adam, with the theory
  (:mod:`bayes_attn.experiments.protocol`);
- ``landscape``: the free-energy profile of softmax's aG by umbrella sampling and MBAR
  (:mod:`bayes_attn.experiments.landscape`): its minima, barrier and Delta F per point.

Every finished point is written at once: the whole Dataset goes to a temporary file beside the
target, which then replaces it (``os.replace``, atomic on POSIX). A sweep killed at any moment
leaves either the previous file or the new one, never a torn one; rerunning the same config skips
the finished points (the ``done`` variable) and ends with the same Dataset as an uninterrupted run.
A file written by a different config, or one that cannot be read, raises :class:`SweepFileError`;
the same grid listed in another order is the same sweep (the file's order is kept).

Several processes started on the same file share its points: each claims a point before computing
it (:class:`bayes_attn.distributed.Claim`, a lock file per point in ``.NAME.claims/`` beside the
file), and adds its result to the file under a short lock, so N processes (or N jobs of a cluster's
job array) finish an N-times-larger sweep in about the time of one, and the file at the end equals
a single run's. A claim whose process has died is taken over.

Rewriting the file per point costs O(points x file size); at the sizes of our grids (hundreds of
points, kilobytes each) that is negligible beside the computations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import json
import logging
import math
import time
import tomllib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn._deprecation import moved
from bayes_attn._validation import check_activation, check_int, check_positive
from bayes_attn.analysis.ensembles import classify_minima
from bayes_attn.distributed import CLAIM_TIMEOUT, Claim, part_paths, wait_until
from bayes_attn.inference.adam import WARMUP_FRACTION, WARMUP_START, AdamSettings
from bayes_attn.inference.llc import run_llc
from bayes_attn.inference.nuts import run_nuts
from bayes_attn.inference.sgld import run_sgld
from bayes_attn.inference.umbrella import UmbrellaSettings
from bayes_attn.io import write_atomic
from bayes_attn.models.levels import (
    BOUNDARY_ACTIVATION,
    LEVELS,
    ORDER_PARAMETERS,
    model_with_data,
    order_parameters,
)
from bayes_attn.progress import bar as make_bar
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.tokens import check_uniform, parse_tokens

log = logging.getLogger(__name__)

KINDS = ("theory", "nuts", "sgld", "adam", "protocol", "llc", "landscape")
GRID = ("activation", "L", "V", "P", "seed")
__getattr__ = moved(__name__, {"ORDER": "bayes_attn.models.levels:ORDER_PARAMETERS"})


def signature_defaults(fn, *names) -> dict:
    """The defaults of ``fn``'s parameters ``names``, read from its signature (their one home)."""
    params = inspect.signature(fn).parameters
    return {name: params[name].default for name in names}


_ADAM = AdamSettings()
_CHAINS = ("num_chains", "num_warmup", "num_samples")
#: the umbrella options of a landscape sweep; their defaults are the level's UmbrellaSettings
_UMBRELLA = ("num_warmup", "num_samples", "num_chains", "refine", "max_windows")

# Settings each kind accepts, with their defaults (``SweepConfig.options`` overrides them). The
# samplers' and the trainer's come from their signatures and from AdamSettings; the rest (the
# level, the widths, the ensemble's size) are the sweep's own.
DEFAULTS = {
    "theory": {},
    "nuts": dict(
        level="reduced",
        **signature_defaults(run_nuts, *_CHAINS),
        d_model=16,
        include_logdet=False,
    ),
    "sgld": dict(
        level="reduced",
        **signature_defaults(run_sgld, *_CHAINS),
        d_model=16,
        **signature_defaults(run_sgld, "step_size"),
        batch_size=None,
        include_logdet=False,
    ),
    "adam": dict(
        d_model=64,
        members=4,
        lr=_ADAM.lr,
        max_steps=_ADAM.max_steps,
        patience=_ADAM.patience,
        warmup_fraction=WARMUP_FRACTION,
        warmup_init=WARMUP_START,  # relative: the warm-up starts at lr * warmup_init
        num_test=_ADAM.num_test,
        **signature_defaults(classify_minima, "rtol"),
    ),
    "protocol": None,  # the fields of ProtocolConfig, filled in lazily (import cycle)
    "llc": dict(
        level="network",
        d_model=None,  # V + L, the narrowest frozen-embedding network (experiments.llc)
        num_burnin="auto",  # 5/(εγ): a point's λ̂ is biased low without it (run_llc)
        **signature_defaults(
            run_llc,
            "sampler",
            "num_chains",
            "num_draws",
            "step_size",
            "gamma",
            "include_prior",
            "nbeta",
        ),
        batch_size=None,
        exact=False,
    ),
    "landscape": dict(
        level="kernel",
        # the default level's; a point at another level takes that level's (SweepConfig)
        **UmbrellaSettings.for_level("kernel").options(*_UMBRELLA),
        gram_width=0,  # 0: g = I
        include_logdet=True,
    ),
}

DESCRIPTIONS = {
    "done": ("1", "the grid point has finished"),
    "c1": ("1", "uniform-pooling order parameter (linear attention)"),
    "cG": ("1", "copy order parameter (linear attention)"),
    "a1": ("1", "uniform-pooling order parameter (softmax attention)"),
    "aG": ("1", "copy order parameter (softmax attention)"),
    "loss": ("1", "theory loss per token at the global saddle, 1/2 |y - f|^2"),
    "action": ("nats / chi", "action per unit chi at the global saddle"),
    "n_minima": ("1", "number of local minima of the reduced action"),
    "meta_q": (
        "1",
        "copy order parameter (cG or aG) of the lowest metastable minimum (linear: in the Z2 "
        "image c1 + cG >= 0, where the anti-aligned minimum has c1 < 0)",
    ),
    "meta_loss": ("1", "theory loss per token at the lowest metastable minimum"),
    "second_order": ("sequences", "linear: second-order transition P*"),
    "crossover": ("sequences", "linear: crossover, max d cG / d log P"),
    "first_order": ("sequences", "softmax: first-order P* (equal action)"),
    "spinodal_lower": ("sequences", "softmax: the strong-copy minimum appears"),
    "spinodal_upper": ("sequences", "softmax: the weak-copy minimum vanishes"),
    "divergences": ("1", "divergent transitions after warm-up, all chains"),
    "train_loss": ("1", "final train loss per token"),
    "test_loss": ("1", "final held-out loss per token"),
    "global_min": ("1", "member reached the ensemble's lowest loss (classify_minima), 1 or 0"),
    "steps": ("steps", "Adam steps taken (early stopping)"),
    "A_bar": ("1", "final mean attention pattern on held-out sequences (linear: Z2-folded)"),
    "step": ("1", "SGLD step size (min(5e-4 / d_model, 0.1 / largest Hessian eigenvalue))"),
    "llc_mean": ("1", "local learning coefficient nβ (E[L_n] - L_n(w*)) at the exact MAP w*"),
    "llc_std": ("1", "spread of the chains' LLC estimates (devinterp's llc/std)"),
    "llc_mcse": ("1", "Monte Carlo standard error of llc_mean (from the ESS)"),
    "llc_ess": ("1", "effective sample size of the per-draw LLC"),
    "llc_rhat": ("1", "R-hat of the per-draw LLC across chains started around w*"),
    "acceptance": ("1", "mean exact full-batch MALA acceptance of the sampler's steps"),
    "init_loss": ("nats / sequence", "L_n(w*), mean negative log likelihood per sequence"),
    "grad_norm": ("1", "|grad L_n(w*)| (w* is a prior-regularised MAP, not critical for L_n)"),
    "nbeta": ("1", "the inverse temperature nβ times n"),
    "exact_llc": ("1", "the exact LLC of the frozen-embedding network (W_O integrated out, NUTS)"),
    "exact_mcse": ("1", "Monte Carlo standard error of exact_llc"),
    "delta_F": ("nats", "F_strong - F_weak across the divide (umbrella sampling + MBAR)"),
    "delta_F_se": ("nats", "standard error of delta_F (MBAR, draws subsampled)"),
    "divide": ("1", "aG of the divide: the highest point of F(aG) between its outer minima"),
    "aG_weak": ("1", "aG at the lowest-aG minimum of F(aG)"),
    "aG_strong": ("1", "aG at the highest-aG minimum of F(aG) (nan with one minimum)"),
    "n_profile_minima": ("1", "number of minima of F(aG) (profile_minima, 1 nat deep)"),
    "barrier_weak": ("nats", "F at the barrier above the weak minimum"),
    "barrier_strong": ("nats", "F at the barrier above the strong minimum"),
    "min_overlap": ("1", "smallest MBAR overlap of neighbouring windows"),
    "max_r_hat": ("1", "largest per-window R-hat of aG"),
}


class SweepFileError(ValueError):
    """The output file of a sweep belongs to another config, or cannot be read."""


def _as_tuple(name, values, check):
    values = tuple(np.atleast_1d(np.asarray(values)).tolist())
    if not values:
        raise ValueError(f"{name} must list at least one value")
    out = tuple(check(v) for v in values)
    if len(set(out)) != len(out):
        raise ValueError(f"{name} has repeated values: {list(out)}")
    return out


def _known_options(kind: str) -> dict:
    if kind == "protocol":
        from bayes_attn.experiments.protocol import ProtocolConfig

        fields = dataclasses.fields(ProtocolConfig)
        return {f.name: f.default for f in fields if f.name not in _PROTOCOL_GRID}
    return DEFAULTS[kind]


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """What a sweep computes, and where.

    Attributes
    ----------
    kind : {"theory", "nuts", "sgld", "adam", "protocol", "landscape"}
    P, L, V, activation, seed : tuples
        The grid axes; every combination is one point.
    tokens : str
        The token source's spec (:mod:`bayes_attn.tokens`), the same at every point; kinds and
        levels that need the reduced (Level-2) theory refuse a source that is not uniform.
    hyper : dict
        ``chi``, ``g_w``, ``g_o``, ``sigma2`` (default: the paper preset).
    options : dict
        Settings of the kind (see ``DEFAULTS``; for ``protocol`` the fields of
        :class:`~bayes_attn.experiments.protocol.ProtocolConfig`). Unknown names raise.
    """

    kind: str
    P: tuple
    L: tuple = (25,)
    V: tuple = (5,)
    activation: tuple = ("linear", "softmax")
    seed: tuple = (0,)
    tokens: str = "uniform"
    hyper: dict = dataclasses.field(default_factory=dict)
    options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        pos_int = {"P": 1, "L": 2, "V": 2, "seed": 0}
        setattr_ = object.__setattr__
        for name, low in pos_int.items():
            if name == "P" and self.kind in ("theory", "nuts", "sgld", "landscape"):
                check = lambda v: float(check_positive("P", v))  # noqa: E731
            else:
                check = lambda v, n=name, lo=low: check_int(n, v, lo)  # noqa: E731
            setattr_(self, name, _as_tuple(name, getattr(self, name), check))
        setattr_(self, "activation", _as_tuple("activation", self.activation, check_activation))
        source = parse_tokens(self.tokens)
        setattr_(self, "tokens", str(source))
        for V in self.V:
            source.check_vocabulary(V)
        base = dataclasses.asdict(Hyper.paper())
        unknown = set(self.hyper) - set(base)
        if unknown:
            raise ValueError(f"unknown hyperparameters {sorted(unknown)}; known: {sorted(base)}")
        hyper = {k: float(v) for k, v in {**base, **self.hyper}.items()}
        Hyper(**hyper)  # validates
        setattr_(self, "hyper", hyper)
        known = _known_options(self.kind)
        unknown = set(self.options) - set(known)
        if unknown:
            raise ValueError(
                f"unknown options for a {self.kind} sweep: {sorted(unknown)}; known: {sorted(known)}"
            )
        options = {**known, **self.options}
        if self.kind == "theory" or options.get("level") == "reduced":
            check_uniform(source, f"a {self.kind} sweep at the reduced level (Level 2)")
        if self.kind == "theory":
            _check_theory_range(self)
        if "level" in options and options["level"] not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {options['level']!r}")
        if self.kind == "landscape" and options["level"] in ("reduced", "kernel"):
            level = UmbrellaSettings.for_level(options["level"]).options(*_UMBRELLA)
            options = {**known, **level, **self.options}
        if self.kind == "llc" and options["level"] not in ("network", "kernel"):
            raise ValueError(
                f"level: an llc sweep is at network or kernel, not {options['level']!r}"
            )
        setattr_(
            self, "options", {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(getattr(self, d)) for d in GRID)

    def points(self):
        """Every grid point as (index tuple, value dict), in a fixed order."""
        axes = [list(enumerate(getattr(self, d))) for d in GRID]
        for combo in itertools.product(*axes):
            yield tuple(i for i, _ in combo), {d: v for d, (_, v) in zip(GRID, combo, strict=True)}

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> SweepConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown sweep settings: {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> SweepConfig:
        return cls.from_dict(json.loads(text))

    def same_grid(self, other: SweepConfig) -> bool:
        """The same sweep, whatever the order in which each axis lists its values."""
        a, b = dataclasses.asdict(self), dataclasses.asdict(other)
        for d in GRID:
            a[d], b[d] = sorted(a[d]), sorted(b[d])
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


_PROTOCOL_GRID = {
    "L": "L",
    "V": "V",
    "Ps": "P",
    "activations": "activation",
    "seed": "seed",
    "tokens": "tokens",
}


def protocol_sweep(protocol, hyper: dict | None = None) -> SweepConfig:
    """The ``protocol`` sweep of a :class:`~bayes_attn.experiments.protocol.ProtocolConfig`: its
    P values and activations as the grid, its other fields as the options."""
    fields = dataclasses.asdict(protocol)
    grid = {new: fields.pop(old) for old, new in _PROTOCOL_GRID.items()}
    grid.update(L=(grid["L"],), V=(grid["V"],), seed=(grid["seed"],))
    return SweepConfig(kind="protocol", **grid, hyper=dict(hyper or {}), options=fields)


def _check_theory_range(cfg: SweepConfig) -> None:
    """P within the range where the float64 reduced action is accurate (at the longest L)."""
    from bayes_attn.theory.saddles import check_P_in_range

    check_P_in_range(CopyTask(max(cfg.L), 2), Hyper(**cfg.hyper), max(cfg.P))


def read_sweep_table(path) -> dict:
    """The sweep settings of a TOML file (its ``[sweep]`` table, or settings at the top level) or
    a JSON file (an object, or one under ``"sweep"``); a table under another name raises naming
    it, since its settings would otherwise go unread."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ValueError(f"{path} is not valid TOML: {err}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON (or name it .toml): {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a table of sweep settings")
    if isinstance(data.get("sweep"), dict):
        return data["sweep"]
    fields = {f.name for f in dataclasses.fields(SweepConfig)}
    tables = [k for k, v in data.items() if isinstance(v, dict) and k not in fields]
    if tables:
        raise ValueError(
            f"{path} has no [sweep] table (it has [{'], ['.join(tables)}]): put the settings "
            "under [sweep]"
        )
    return data


# --------------------------------------------------------------------------------------------------
# One grid point of each kind: a dict name -> (extra dims, array), the same names at every point.


def _theory_point(cfg, pt, task, hyper):
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
    b = theory.phase_boundaries(task, hyper)  # cached per (task, hyper)
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
        progress_bar=False,
        **options,
    )


def _nuts_point(cfg, pt, task, hyper):
    from bayes_attn.inference import run_nuts

    return _summary_point(_sampled(run_nuts, cfg, pt, task, hyper), pt["activation"])


def _sgld_point(cfg, pt, task, hyper):
    from bayes_attn.inference import run_sgld

    idata = _sampled(run_sgld, cfg, pt, task, hyper, step_size=cfg.options["step_size"])
    out = _summary_point(idata, pt["activation"])
    out.pop("divergences")
    return out


def _pad_attention(A, L_max):
    out = np.full(A.shape[:-2] + (L_max, L_max), np.nan)
    out[..., : A.shape[-2], : A.shape[-1]] = A
    return out


def _adam_point(cfg, pt, task, hyper):
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
        settings=settings, progress_bar=False,
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


def _protocol_point(cfg, pt, task, hyper):
    from bayes_attn.experiments.protocol import ProtocolConfig, protocol_point

    pc = ProtocolConfig(
        L=pt["L"],
        V=pt["V"],
        Ps=cfg.P,
        activations=cfg.activation,
        seed=pt["seed"],
        tokens=cfg.tokens,
        **{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.options.items()},
    )
    values, _ = protocol_point(pc, hyper, pt["activation"], pt["P"])
    out = {}
    for k, v in values.items():
        v = np.asarray(v, dtype=float)
        if k == "adam_A_bar":
            out[k] = (("member", "query", "key"), _pad_attention(v, max(cfg.L)))
        else:
            out[k] = (("member",) if v.ndim == 1 else (), v)
    return out


def _landscape_point(cfg, pt, task, hyper):
    from bayes_attn.experiments.landscape import landscape_report, run_landscape

    if pt["activation"] != "softmax":
        raise ValueError("activation: a landscape sweep is of softmax's aG; list only softmax")
    o = dict(cfg.options)
    level, width, logdet = o.pop("level"), o.pop("gram_width"), o.pop("include_logdet")
    idata = run_landscape(task, hyper, pt["P"], level, gram_width=width or None,
                          include_logdet=logdet, seed=pt["seed"], progress=False, **o)  # fmt: skip
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


def _llc_point(cfg, pt, task, hyper):
    from bayes_attn.analysis.llc import llc_estimate
    from bayes_attn.experiments.llc import llc_point

    o = dict(cfg.options)
    run = {k: o[k] for k in ("sampler", "num_chains", "num_draws", "num_burnin", "step_size",
                             "gamma", "include_prior", "nbeta")}  # fmt: skip
    idata, ex = llc_point(
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


_POINT = {
    "llc": _llc_point,
    "landscape": _landscape_point,
    "theory": _theory_point,
    "nuts": _nuts_point,
    "sgld": _sgld_point,
    "adam": _adam_point,
}


def compute_point(cfg: SweepConfig, index: tuple, point: dict) -> dict:
    """The results at one grid point: name -> (extra dims, array)."""
    task = CopyTask(point["L"], point["V"], cfg.tokens)
    hyper = Hyper(**cfg.hyper)
    if cfg.kind == "protocol":
        return _protocol_point(cfg, point, task, hyper)
    return _POINT[cfg.kind](cfg, point, task, hyper)


# --------------------------------------------------------------------------------------------------
# Storage


def _empty(cfg: SweepConfig) -> xr.Dataset:
    coords = {d: list(getattr(cfg, d)) for d in GRID}
    done = xr.DataArray(np.zeros(cfg.shape, bool), dims=GRID, coords=coords)
    ds = xr.Dataset({"done": done})
    ds.attrs.update(
        title=f"bayes-attn {cfg.kind} sweep",
        kind=cfg.kind,
        config=cfg.to_json(),
        **provenance(cfg),
    )
    return ds


_SAMPLER = {"theory": "none (theory)", "nuts": "nuts", "sgld": "sgld", "adam": "adam", "llc": "llc"}
_SAMPLER["protocol"] = "adam, then sgld"
_SAMPLER["landscape"] = "umbrella"


def _numbers(values):
    """A list of numbers as a NetCDF attr: a scalar for one (NetCDF reads a 1-array back as one)."""
    a = np.asarray(values)
    return a.item() if a.size == 1 else a


def provenance(cfg: SweepConfig) -> dict:
    """The record of a sweep (:mod:`bayes_attn.inference.record`): the sampler, the seeds of the
    grid, chains, warm-up, draws and thinning, the level under the CLI's names, the options with
    their real types (flags as 0/1, lists as arrays) and the versions."""
    from bayes_attn.inference.record import RunRecord

    o = cfg.options
    chains = o.get("num_chains", o.get("members", 1))
    warmup = o.get("num_warmup", o.get("sgld_warmup", o.get("num_burnin", 0)))
    warmup = warmup if isinstance(warmup, int) else -1  # "auto": per point (in the settings)
    draws = o.get("num_samples", o.get("sgld_samples", o.get("num_draws", 1)))
    settings = {k: v for k, v in o.items() if not isinstance(v, list | dict)}
    rec = RunRecord(_SAMPLER[cfg.kind], cfg.seed[0], chains, warmup, draws, settings=settings)
    attrs = rec.attrs()
    attrs["seed"] = _numbers(cfg.seed)  # the grid's seeds
    attrs["level"] = o.get("level", "reduced" if cfg.kind == "theory" else "network")
    for k, v in o.items():
        if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v):
            attrs[k] = _numbers(v)
        elif isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            attrs[k] = ", ".join(v)
    attrs.update(cfg.hyper)
    attrs["tokens"] = cfg.tokens
    return attrs


def _describe(name: str) -> dict:
    base = name
    for prefix in ("adam_", "sgld_", "theory_", "level1_"):
        base = base.removeprefix(prefix)
    base = base.split("_")[0] if base.split("_")[0] in ORDER_PARAMETERS else base
    units, text = DESCRIPTIONS.get(base, ("1", name.replace("_", " ")))
    if base in ("c1", "cG") and base != name and not name.startswith("theory_"):
        text += f"; {_FOLDED}"
    return {"units": units, "description": text if base == name else f"{name}: {text}"}


_FOLDED = (
    "folded draw by draw onto the Z2 image c1 + cG >= 0 (the images (c1, cG) and (-c1, -cG) "
    "have equal posterior mass) before it was summarised"
)


def _store(ds: xr.Dataset, cfg: SweepConfig, index: tuple, result: dict) -> xr.Dataset:
    for name, (dims, value) in result.items():
        value = np.asarray(value, dtype=float)
        if name not in ds:
            shape = cfg.shape + value.shape
            extra = {d: np.arange(n) for d, n in zip(dims, value.shape, strict=True)}
            da = xr.DataArray(np.full(shape, np.nan), dims=GRID + tuple(dims))
            ds[name] = da.assign_coords(extra)
            ds[name].attrs.update(_describe(name))
        ds[name].values[index] = value
    ds["done"].values[index] = True
    return ds


def load_sweep(path) -> xr.Dataset:
    """Read a sweep file into memory; :class:`SweepFileError` if it is not a readable sweep file."""
    path = Path(path)
    try:
        with xr.open_dataset(path, engine="h5netcdf") as f:
            ds = f.load()
    except Exception as err:  # h5py raises OSError, xarray ValueError, ...
        raise SweepFileError(
            f"cannot read {path} as a sweep file (damaged or not NetCDF): {err}"
        ) from err
    if "config" not in ds.attrs or "done" not in ds:
        raise SweepFileError(f"{path} is not a bayes-attn sweep file (no config or done mask)")
    ds["done"] = ds["done"].astype(bool)
    return ds


def _file_config(ds: xr.Dataset, cfg: SweepConfig, path: Path) -> SweepConfig:
    """The config of the sweep file ``ds`` if it is ``cfg``'s sweep (its grid perhaps listed in
    another order: the file's order is kept); :class:`SweepFileError` naming what differs if not."""
    theirs = SweepConfig.from_json(ds.attrs["config"])
    if theirs.same_grid(cfg):
        return theirs
    a, b = json.loads(ds.attrs["config"]), json.loads(cfg.to_json())
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    raise SweepFileError(
        f"{path} holds a sweep with a different config (differs in: {', '.join(diff)}); "
        "use another output path, or delete the file to start over"
    )


class _Next(NamedTuple):
    ds: xr.Dataset  # the file when the point was claimed
    index: tuple | None  # the point claimed, None if every point left is claimed by others
    point: dict | None
    claim: Claim | None


class _SharedFile:
    """A sweep's file as several processes share it: the file, a short lock for every
    read-modify-write (``.NAME.lock``) and a claim per point (``.NAME.claims/``)."""

    def __init__(self, path: Path, claim_timeout: float):
        self.path, self.timeout = path, claim_timeout
        self.claims = path.parent / f".{path.name}.claims"

    def lock(self) -> Claim:
        return Claim(self.path.parent / f".{self.path.name}.lock", self.timeout)

    def open(self, cfg: SweepConfig) -> tuple[SweepConfig, xr.Dataset]:
        """The file's config and contents, the file created (empty) if it does not exist yet."""
        with self.lock():
            for stale in self.path.parent.glob(f".{self.path.name}.tmp-*"):
                stale.unlink()  # a write that was killed half-way (writes happen under the lock)
            if not self.path.exists():
                write_atomic(_empty(cfg), self.path)
            ds = load_sweep(self.path)
            return _file_config(ds, cfg, self.path), ds

    def claim_next(self, todo) -> _Next:
        """Under the lock: the file as it is now, and the first point of ``todo`` that is neither
        done nor claimed by a live process, claimed (no point when there is none)."""
        with self.lock():
            ds = load_sweep(self.path)
            self.claims.mkdir(exist_ok=True)
            for idx, pt in todo:
                if ds["done"].values[idx]:
                    continue
                claim = Claim(self.claims / "-".join(map(str, idx)), self.timeout)
                if claim.acquire():
                    return _Next(ds, idx, pt, claim)
            return _Next(ds, None, None, None)

    def tidy(self) -> None:
        """Remove the claims' folder once it is empty (every point done)."""
        with self.lock(), contextlib.suppress(OSError):
            self.claims.rmdir()

    def store(self, cfg: SweepConfig, idx: tuple, result: dict) -> xr.Dataset:
        """Under the lock: add one point's result to the file as it is now."""
        with self.lock():
            ds = _store(load_sweep(self.path), cfg, idx, result)
            write_atomic(ds, self.path)
            return ds


def _postfix(cfg: SweepConfig, pt: dict) -> dict:
    """The values of the axes that vary, each number in one format (``P=1600`` beside ``P=50``)."""
    fmt = lambda v: f"{v:g}" if isinstance(v, int | float) else str(v)  # noqa: E731
    return {d: fmt(pt[d]) for d in GRID if len(getattr(cfg, d)) > 1}


def run_sweep(
    cfg: SweepConfig,
    path,
    *,
    progress: bool = True,
    process_id: int = 0,
    num_processes: int = 1,
    claim_timeout: float = CLAIM_TIMEOUT,
    poll: float = 2.0,
) -> xr.Dataset:
    """Run (or resume) the sweep, persisting every finished point to ``path``.

    Parameters
    ----------
    cfg : SweepConfig
    path : str or Path
        The NetCDF file. If it exists it must hold the same sweep (its grid may list its values
        in another order); its finished points are kept. Other processes may work on the same
        file at the same time: every point is claimed before it is computed, so none is computed
        twice, and this call returns once every point is done (taking over the points of
        processes that died).
    progress : bool
        A progress bar over the points (to stderr).
    process_id, num_processes : int
        Work on every ``num_processes``-th point starting at ``process_id`` (one process of a
        multi-host run writing its own file; merge the files with :func:`merge_sweeps`).
    claim_timeout, poll : float
        Seconds without a heartbeat after which another host's claim is abandoned
        (:class:`~bayes_attn.distributed.Claim`); seconds between looks at the others' progress.

    Returns
    -------
    xarray.Dataset
        Dims (activation, L, V, P, seed) plus each variable's own (e.g. ``member``); ``done`` marks
        the finished points; attrs ``config`` (JSON), ``kind``, ``bayes_attn_version``.
    """
    num_processes = check_int("num_processes", num_processes, 1)
    process_id = check_int("process_id", process_id, 0)
    if process_id >= num_processes:
        raise ValueError(f"process_id must be < num_processes ({num_processes}), got {process_id}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shared = _SharedFile(path, claim_timeout)
    cfg, ds = shared.open(cfg)
    mine = [p for k, p in enumerate(cfg.points()) if k % num_processes == process_id]
    done = lambda ds: sum(bool(ds["done"].values[idx]) for idx, _ in mine)  # noqa: E731
    if 0 < done(ds) < len(mine):
        log.info("resuming %s: %d of %d points already done", path, done(ds), len(mine))
    computed, before, waited = 0, done(ds), False
    with make_bar(len(mine), cfg.kind, progress, initial=before) as bar:
        while done(ds) < len(mine):
            nxt = shared.claim_next(mine)
            ds = nxt.ds
            if nxt.claim is None:  # every point left is being computed by another process
                if not waited:
                    log.info("%s: waiting for the points other processes are computing", path)
                waited = True
                time.sleep(poll)
            else:
                try:
                    bar.set_postfix(_postfix(cfg, nxt.point))
                    ds = shared.store(cfg, nxt.index, compute_point(cfg, nxt.index, nxt.point))
                    computed += 1
                finally:
                    nxt.claim.release()
            bar.update(done(ds) - bar.n)
    if computed < len(mine) - before:
        log.info("%s: this process computed %d of the %d points", path, computed, len(mine))
    shared.tidy()
    return ds


def merge_sweeps(paths, out=None) -> xr.Dataset:
    """Merge the files of one sweep written by several processes (disjoint ``done`` points).

    Raises :class:`SweepFileError` if the files hold different configs or overlapping points.
    Writes ``out`` (atomically) if given.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("paths must name at least one sweep file")
    parts = [load_sweep(p) for p in paths]
    cfg = SweepConfig.from_json(parts[0].attrs["config"])
    merged = _empty(cfg)
    for p, ds in zip(paths, parts, strict=True):
        if _file_config(ds, cfg, p) != cfg:  # the same grid in another order
            ds = ds.sel({d: list(getattr(cfg, d)) for d in GRID})
        done = ds["done"].values
        if np.any(done & merged["done"].values):
            raise SweepFileError(f"{p} repeats points that another file already holds")
        for name in ds.data_vars:
            if name == "done":
                continue
            if name not in merged:
                merged[name] = xr.full_like(ds[name], np.nan)
            mask = done.reshape(done.shape + (1,) * (ds[name].ndim - done.ndim))
            merged[name].values[...] = np.where(mask, ds[name].values, merged[name].values)
        merged["done"].values |= done
    if out is not None:
        write_atomic(merged, Path(out))
    return merged


def run_sweep_parts(
    cfg: SweepConfig, out, process_id: int, num_processes: int, *, progress: bool = True
) -> xr.Dataset | None:
    """One process of a multi-host sweep: every ``num_processes``-th point into its own file,
    ``OUT.part-I-of-N.nc`` (:func:`bayes_attn.distributed.part_paths`). Process 0 then waits until
    every part holds its share of the points, merges them into ``out`` and returns the merged
    sweep; the other processes return None."""
    parts = part_paths(out, num_processes)
    run_sweep(cfg, parts[process_id], progress=progress, process_id=process_id,
              num_processes=num_processes)  # fmt: skip
    if process_id != 0:
        return None
    total = math.prod(cfg.shape)
    share = [len(range(k, total, num_processes)) for k in range(num_processes)]

    def ready():
        done = []
        for path in parts:
            try:
                done.append(int(load_sweep(path)["done"].sum()) if path.exists() else 0)
            except SweepFileError:  # being replaced at this instant; look again
                done.append(-1)
        return done == share, f"{done} of {share} points"

    wait_until(ready)
    return merge_sweeps(parts, out)
