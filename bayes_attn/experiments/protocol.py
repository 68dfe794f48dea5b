"""The paper's experiment: Adam ensembles, then SGLD warm-started from Adam, against the theory.

For each activation and each training-set size P: an ensemble of networks trained to the MAP with
Adam (:func:`bayes_attn.inference.train_adam`), then Langevin dynamics at temperature 1 from each
member's Adam solution (:class:`bayes_attn.inference.SGLD`), compared with the Level-2 saddle and
the Level-1 MAP on the first member's dataset. Everything lands in one ``xarray.Dataset``.

Order parameters are stored as ``c1``/``cG`` for both activations; for softmax read them as
(a1, aG). Linear attention has the Z2 symmetry (c1, cG) -> (-c1, -cG); its network values are
folded onto the theory's sign (:func:`bayes_attn.algebra.fold_sign`).

References
----------
Paper Sec. 4 and Table 1; docs/validation.md "The paper protocol: networks against the theory".
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import tomllib
import warnings
import zlib
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

import bayes_attn
from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int, check_positive
from bayes_attn.analysis import classify_minima, final_state
from bayes_attn.inference import resolve_key
from bayes_attn.inference.adam import (
    WARMUP_FRACTION,
    WARMUP_START,
    AdamSettings,
    adam_settings,
    train_adam,
)
from bayes_attn.inference.members import chain_means, sgld_program
from bayes_attn.progress import bar as make_bar
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.theory.level1 import level1_map
from bayes_attn.theory.saddles import global_saddle
from bayes_attn.tokens import parse_tokens

PAPER_PS = (1, 10, 20, 60, 100, 200, 250, 275, 300, 400, 500, 600, 700, 800)
PRESETS = ("paper", "quick")

_RTOL = inspect.signature(classify_minima).parameters["rtol"].default
# the quick preset's changes to the paper's: the P values Fig. 1 shows, small networks, short SGLD
_QUICK = dict(
    Ps=(20, 100, 300, 800),
    members=3,
    num_test=50,
    d_model=32,
    sgld_warmup=20,
    sgld_samples=20,
    level1=False,
)

#: The protocol's Adam: :class:`~bayes_attn.inference.adam.AdamSettings`' defaults, except where
#: the protocol deliberately differs: a cosine decay, and the embeddings held at their prior draw
#: (the joint MAP with trained embeddings collapses them and has cG = 0, unlike the posterior the
#: theory describes; docs/validation.md, "Adam convergence").
PROTOCOL_ADAM = AdamSettings(decay="cosine", train_embeddings=False)
#: The fields of :class:`~bayes_attn.inference.adam.AdamSettings` that a flat ``[protocol]`` table
#: (and :meth:`ProtocolConfig.of`) may set by name, as the protocol's own fields once were; they
#: go into ``ProtocolConfig.adam``. A ``[protocol.adam]`` table sets any field.
ADAM_KEYS = (
    "lr",
    "decay",
    "end_fraction",
    "train_embeddings",
    "max_steps",
    "patience",
    "min_delta",
    "chunk",
    "num_test",
)

# the flat settings in the order of the protocol's fields before they held an AdamSettings
_FLAT_ORDER = (
    "L", "V", "tokens", "Ps", "members", "num_test", "d_model", "activations", "lr", "decay",
    "end_fraction", "train_embeddings", "max_steps", "patience", "min_delta", "warmup_fraction",
    "warmup_init", "chunk", "sgld_step", "sgld_warmup", "sgld_samples", "sgld_thinning",
    "batch_size", "level1", "rtol", "seed",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ProtocolConfig:
    """Settings of the protocol. ``paper()`` is the paper's Table 1 with our learning rates;
    ``quick()`` is the one quick preset. Learning rates are for our loss scaling (the chi-scaled
    negative log-posterior summed over sequences), see docs/validation.md.

    Attributes
    ----------
    adam : AdamSettings
        How every member trains (default :data:`PROTOCOL_ADAM`); ``adam.num_test`` is the size of
        the held-out set. Its warm-up fields are not read: each point trains with
        ``adam.with_warmup(activation, warmup_fraction, warmup_init)`` (:meth:`adam_for`), the
        paper's warm-up for softmax. The flat names of :data:`ADAM_KEYS` are accepted by
        :meth:`of`, :meth:`paper`, :meth:`quick` and :meth:`from_toml` and go into ``adam``.
    warmup_fraction, warmup_init : float
        The softmax warm-up: over ``warmup_fraction * max_steps`` steps, from ``lr * warmup_init``
        (:meth:`~bayes_attn.inference.adam.AdamSettings.with_warmup`'s ``fraction`` and
        ``start``).
    sgld_step, sgld_warmup, sgld_samples, sgld_thinning, batch_size
        SGLD from each member's Adam solution; ``sgld_step`` None is the curvature rule of
        ``sgld_step_size`` (at most 5e-4 / d_model, and 0.1 / lambda_max); ``batch_size`` is
        SGLD's minibatch (sequences).
    level1, rtol, seed
        The Level-1 MAP on member 0's data; the loss filter
        (:func:`~bayes_attn.analysis.classify_minima`); the protocol's seed
        (:func:`protocol_keys`).
    """

    L: int = 25
    V: int = 5
    # the token source's spec (bayes_attn.tokens): "uniform", "zipf:s=1", "icl-markov:alpha=1", ...
    tokens: str = "uniform"
    Ps: tuple[int, ...] = PAPER_PS
    members: int = 10
    d_model: int = 256
    activations: tuple[str, ...] = ("linear", "softmax")
    adam: AdamSettings = PROTOCOL_ADAM
    warmup_fraction: float = WARMUP_FRACTION  # softmax only, as in the paper
    warmup_init: float = WARMUP_START  # softmax: lr ramps up from lr * warmup_init
    sgld_step: float | None = None
    sgld_warmup: int = 50
    sgld_samples: int = 100
    sgld_thinning: int = 1
    batch_size: int = 1000
    level1: bool = True
    rtol: float = _RTOL
    seed: int = 0

    def __post_init__(self):
        check_int("L", self.L, 2)
        check_int("V", self.V, 2)
        object.__setattr__(self, "tokens", str(parse_tokens(self.tokens)))
        self.task()  # the source fits V
        for P in self.Ps:
            check_int("P", P, 1)
        check_int("members", self.members, 1)
        check_int("d_model", self.d_model, 1)
        for a in self.activations:
            check_activation(a)
        if isinstance(self.adam, dict):  # a [protocol.adam] table
            object.__setattr__(self, "adam", adam_settings(PROTOCOL_ADAM, **self.adam))
        if not isinstance(self.adam, AdamSettings):
            raise TypeError(f"adam must be an AdamSettings, got {type(self.adam).__name__}")
        check_positive("end_fraction", self.adam.end_fraction)
        if self.adam.factorized:
            raise ValueError("adam: the protocol's SGLD stage needs a full W_G (factorized=False)")
        if self.sgld_step is not None:
            check_positive("sgld_step", self.sgld_step)

    @classmethod
    def of(cls, base: ProtocolConfig | None = None, **settings) -> ProtocolConfig:
        """``base`` (default ``cls()``) with ``settings`` by name: the protocol's fields, and the
        flat Adam names of :data:`ADAM_KEYS`, which change ``adam``. Unknown names raise."""
        base = cls() if base is None else base
        flat = {k: settings.pop(k) for k in ADAM_KEYS if k in settings}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(settings) - known
        if unknown:
            raise ValueError(f"unknown protocol settings: {sorted(unknown)}")
        adam = settings.pop("adam", base.adam)
        if isinstance(adam, dict):
            adam = adam_settings(base.adam, **adam)
        return dataclasses.replace(base, adam=adam_settings(adam, **flat), **settings)

    @classmethod
    def paper(cls, **changes) -> ProtocolConfig:
        """The paper's Table 1 with our learning rates, with ``changes`` (:meth:`of`)."""
        return cls.of(**changes)

    @classmethod
    def quick(cls, **changes) -> ProtocolConfig:
        """The one quick preset, a few minutes on a laptop CPU: the four P values of Fig. 1 (both
        transitions between them), three members of width 32, 50 held-out sequences, short SGLD,
        no Level-1 MAP. ``bayes-attn figures --quick`` (``make demo``), the ``protocol_quick.toml``
        config and the benchmarks' ``--quick`` all use it."""
        return cls.of(**{**_QUICK, **changes})

    @classmethod
    def from_toml(cls, path) -> ProtocolConfig:
        """Read a ``[protocol]`` table (unknown keys raise); lists become tuples. ``preset =
        "quick"`` starts from :meth:`quick` instead of :meth:`paper`. Adam's settings are the flat
        names of :data:`ADAM_KEYS` or a ``[protocol.adam]`` table of
        :class:`~bayes_attn.inference.adam.AdamSettings` fields."""
        table = dict(tomllib.loads(Path(path).read_text())["protocol"])
        preset = table.pop("preset", "paper")
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        changes = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
        return getattr(cls, preset)(**changes)

    @classmethod
    def options(cls) -> dict:
        """The flat settings and their defaults (the protocol's fields with ``adam`` spelled out
        as :data:`ADAM_KEYS`): what a flat table, a sweep's options and a result's attrs hold."""
        return cls().flat()

    def flat(self) -> dict:
        """These settings flat (:meth:`options`), in the order the attrs have always had."""
        out = {k: getattr(self.adam, k) for k in ADAM_KEYS}
        out.update({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        del out["adam"]
        return {k: out[k] for k in _FLAT_ORDER}

    def adam_for(self, activation: str) -> AdamSettings:
        """The Adam settings of a point: ``adam`` with the paper's warm-up for ``activation``."""
        return self.adam.with_warmup(activation, self.warmup_fraction, self.warmup_init)

    def task(self) -> CopyTask:
        return CopyTask(self.L, self.V, self.tokens)


def _sgld_stage(cfg: ProtocolConfig, task, hyper, activation, tokens, test, adam_params, key):
    """SGLD from each member's Adam solution on its own dataset; per-member posterior means of the
    order parameters (on the held-out ``test`` sequences, as for Adam), their standard deviations
    and the mean train loss per token. Embeddings that Adam held fixed (``cfg.adam.train_embeddings``
    False) stay fixed here too, so SGLD samples the posterior whose MAP Adam found.

    The chains run in one program per (activation, P):
    :func:`bayes_attn.inference.members.sgld_program`.
    """
    P = tokens.shape[1]
    run = sgld_program(
        task,
        hyper,
        activation,
        cfg.d_model,
        test,
        train_embeddings=cfg.adam.train_embeddings,  # held where Adam held them
        factorized=False,
        warmup=cfg.sgld_warmup,
        steps=cfg.sgld_samples,
        thinning=cfg.sgld_thinning,
        step_size=cfg.sgld_step,
        temperature=1.0,
        batch_size=cfg.batch_size if cfg.batch_size < P else None,
    )
    obs = run(jax.random.split(key, tokens.shape[0]), tokens, adam_params)
    m = chain_means(obs, activation)
    names = {"q1": "c1", "qG": "cG", "q1_sd": "c1_sd", "qG_sd": "cG_sd", "step_size": "step"}
    return {names.get(k, k): v for k, v in m.items()}


# --------------------------------------------------------------------------------------------------
# The key layout: every key the protocol (and experiments.frozen, the same members at any width)
# draws, by name


class PointKeys(NamedTuple):
    """The keys of one (activation, P) point of the protocol, by purpose.

    Attributes
    ----------
    data
        The members' training sets (split per member, :func:`member_datasets`).
    adam
        :func:`~bayes_attn.inference.train_adam`'s key: the members' initial weights are
        ``adam_keys(key=adam).init`` split per member (the embeddings that
        :mod:`bayes_attn.experiments.frozen` rebuilds at any width).
    sgld
        The SGLD chains from Adam (split per member).
    nuts
        The exact posterior's NUTS chains of :mod:`bayes_attn.experiments.frozen`.
    """

    data: jax.Array
    adam: jax.Array
    sgld: jax.Array
    nuts: jax.Array


class ProtocolKeys(NamedTuple):
    """The keys of the protocol, split by purpose from its seed: ``held_out`` (the held-out
    sequences, one set for every point, :func:`held_out`) and ``points``, from which every grid
    point's keys are folded (:meth:`point`)."""

    held_out: jax.Array
    points: jax.Array

    def point(self, activation: str, P) -> PointKeys:
        """The keys of the point (activation, P), independent of every other point's.

        The point's values are folded into ``points`` (the activation's name by its CRC-32, then
        P), so a point's keys depend on its values only, not on its place in a grid, and no two
        points share a key (a seed is never offset by an index)."""
        check_activation(activation)
        P = check_int("P", P, 1)
        name = zlib.crc32(activation.encode())
        k = jax.random.fold_in(jax.random.fold_in(self.points, name), P)
        return PointKeys(*jax.random.split(k, len(PointKeys._fields)))


def protocol_keys(seed: int | None = None, key=None) -> ProtocolKeys:
    """The protocol's keys for ``seed`` or ``key`` (seed 0 when neither): :class:`ProtocolKeys`.

    :func:`protocol_point` and :mod:`bayes_attn.experiments.frozen` draw every random quantity
    from these, so the two line up member by member."""
    rng, _, _ = resolve_key(key, seed)
    return ProtocolKeys(*jax.random.split(rng, len(ProtocolKeys._fields)))


def held_out(cfg: ProtocolConfig) -> jax.Array:
    """The held-out sequences (``cfg.adam.num_test`` of them) shared by every member and every point."""
    return cfg.task().sample(protocol_keys(cfg.seed).held_out, cfg.adam.num_test)


def member_datasets(cfg: ProtocolConfig, activation: str, P) -> jax.Array:
    """The members' training sets at the point (activation, P): (members, P, L) tokens."""
    keys = jax.random.split(protocol_keys(cfg.seed).point(activation, P).data, cfg.members)
    task = cfg.task()
    return jax.vmap(lambda k: task.sample(k, int(P)))(keys)


def level2_saddle(task: CopyTask, hyper: Hyper, P, activation: str):
    """The global Level-2 saddle at ``P``, or None with a one-line warning when the task's tokens
    are not uniform (the reduced theory is derived for uniform tokens only): the protocol then
    leaves its ``theory_*`` columns NaN and filters the members by their own losses alone."""
    if not task.tokens.uniform_law:
        warnings.warn(
            f"tokens: {task.tokens} is not uniform, so the Level-2 (theory_*) columns are NaN",
            UserWarning,
            stacklevel=3,
        )
        return None
    return global_saddle(task, hyper, P, activation)


def point_values(cfg, activation, P, name: str) -> tuple[str, int]:
    """(activation, P) from values, or from the deprecated grid indices (i, j) of ``cfg``."""
    if isinstance(activation, str):
        return activation, check_int("P", P, 1)
    warnings.warn(
        f"{name}(cfg, hyper, i, j) with grid indices is deprecated and will be removed in the next "
        f"release; pass the point's values, {name}(cfg, hyper, activation, P)",
        DeprecationWarning,
        stacklevel=3,
    )
    return cfg.activations[int(activation)], cfg.Ps[int(P)]


def protocol_point(
    cfg: ProtocolConfig, hyper: Hyper, activation: str, P: int, *, progress: bool = False
):
    """One point of the protocol: ``activation`` at training-set size ``P``.

    Returns ``(values, seconds)``: ``values`` maps names to per-member arrays (``adam_*``,
    ``sgld_*``, ``global_min``, ``adam_steps``, ``adam_drift``; ``adam_A_bar`` (member, L, L), the
    final mean attention, Z2-folded for linear) or scalars (``theory_*``, ``level1_*``). The random
    keys depend on (``cfg.seed``, activation, P) only (:func:`protocol_keys`), so a point gives the
    same numbers inside any loop, grid or sweep. The old form with grid indices,
    ``protocol_point(cfg, hyper, i, j)``, warns (``DeprecationWarning``).
    """
    act, P = point_values(cfg, activation, P, "protocol_point")
    task = cfg.task()
    seconds = {}
    keys = protocol_keys(cfg.seed).point(act, P)
    test = held_out(cfg)
    tokens = member_datasets(cfg, act, P)
    t0 = time.perf_counter()
    ds = train_adam(
        task, hyper, act, cfg.d_model, P, members=cfg.members, key=keys.adam, tokens=tokens,
        test_tokens=test, settings=cfg.adam_for(act), return_params=True, progress=progress,
    )  # fmt: skip
    sd = level2_saddle(task, hyper, P, act)
    ds = classify_minima(ds, theory_loss=None if sd is None else sd.loss, rtol=cfg.rtol)
    seconds["adam"] = time.perf_counter() - t0
    out = _adam_values(ds, cfg.members)

    t0 = time.perf_counter()
    params = {n: jnp.asarray(ds[n].values) for n in ("W_emb", "p", "W_G", "W_O")}
    sg = _sgld_stage(cfg, task, hyper, act, tokens, test, params, keys.sgld)
    out.update({f"sgld_{k}": v for k, v in sg.items()})
    seconds["sgld"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    out.update(_theory_values(cfg, task, hyper, act, tokens, sd))
    seconds["theory"] = time.perf_counter() - t0
    return out, seconds


def _adam_values(ds: xr.Dataset, members: int) -> dict:
    """The ``adam_*`` values and ``global_min`` of a point from its filtered ensemble; the drift
    is the objective's relative change over the last chunk (convergence)."""
    fin = final_state(ds)
    out = {
        "adam_c1": fin["q1"],
        "adam_cG": fin["qG"],
        "adam_train_loss": fin["train_loss"],
        "adam_test_loss": fin["test_loss"],
        "adam_token_residual": fin["token_residual"],
        "adam_A_bar": fin["A_bar"],
        "global_min": np.asarray(ds.global_min),
    }
    obj = ds.objective.values
    drift = np.full(members, np.nan)
    if obj.shape[1] > 1:
        drift = (obj[:, -2] - obj[:, -1]) / np.abs(obj[:, -1])
    out["adam_drift"] = drift
    out["adam_steps"] = fin["steps"]
    return out


def _theory_values(cfg: ProtocolConfig, task, hyper, act: str, tokens, sd) -> dict:
    """The ``theory_*`` values of a point (the Level-2 saddle ``sd``; NaN when None) and the
    ``level1_*`` values (the Level-1 MAP on member 0's data; NaN unless ``cfg.level1``)."""
    soft = act == "softmax"
    out = {
        "theory_c1": np.nan if sd is None else sd.c1 if not soft else sd.a1,
        "theory_cG": np.nan if sd is None else sd.cG if not soft else sd.aG,
        "theory_loss": np.nan if sd is None else sd.loss,
    }
    for k in ("level1_c1", "level1_cG", "level1_residual"):
        out[k] = np.nan
    if cfg.level1:
        m1 = level1_map(task, hyper, tokens[0], act)
        c1, cG = (m1.c1, m1.cG) if soft else algebra.fold_sign(m1.c1, m1.cG)
        out["level1_c1"], out["level1_cG"] = c1, cG
        out["level1_residual"] = m1.token_residual
    return out


def run_protocol(cfg: ProtocolConfig, hyper: Hyper | None = None, *, progress: bool = True):
    """Run the protocol; returns ``(dataset, seconds)`` with the time per stage.

    Dataset dims (activation, P, member) for the networks (``adam_*``, ``sgld_*``, ``global_min``;
    ``adam_A_bar`` also has (query, key)) and (activation, P) for the theory (``theory_*`` at
    Level 2, ``level1_*`` on member 0's data). For resumable runs saved point by point, use a
    ``protocol`` sweep (:mod:`bayes_attn.experiments.sweep`), which calls the same
    :func:`protocol_point`.
    """
    hyper = hyper or Hyper.paper()
    seconds = {"adam": 0.0, "sgld": 0.0, "theory": 0.0}
    data = collect_grid(
        cfg, lambda act, P: protocol_point(cfg, hyper, act, P, progress=progress), seconds,
        desc="protocol", progress=progress,
    )  # fmt: skip
    coords = {
        "activation": list(cfg.activations),
        "P": list(cfg.Ps),
        "member": np.arange(cfg.members),
    }
    attrs = {
        k: (str(v) if isinstance(v, tuple | bool) or v is None else v)
        for k, v in cfg.flat().items()
    }
    attrs.update(hyper.as_dict())
    attrs["bayes_attn_version"] = bayes_attn.__version__
    return xr.Dataset(data, coords=coords, attrs=attrs), seconds


def collect_grid(cfg, point, seconds: dict, *, desc: str, progress: bool = True) -> dict:
    """Run ``point(activation, P) -> (values, seconds)`` over every (activation, P) of ``cfg`` and
    stack the values: dims (activation, P) for scalars, (activation, P, member) per member, and
    (..., query, key) for patterns. ``seconds`` is added to in place, stage by stage."""
    n_act, n_P = len(cfg.activations), len(cfg.Ps)
    values = {}
    bar = make_bar(n_act * n_P, desc, progress)
    for i, act in enumerate(cfg.activations):
        for j, P in enumerate(cfg.Ps):
            bar.set_postfix(activation=act, P=P)
            out, sec = point(act, P)
            for k, v in out.items():
                v = np.asarray(v)
                if k not in values:
                    fill = False if v.dtype == bool else (0 if v.dtype.kind == "i" else np.nan)
                    values[k] = np.full((n_act, n_P) + v.shape, fill, dtype=v.dtype)
                values[k][i, j] = v
            for k, t in sec.items():
                seconds[k] = seconds.get(k, 0.0) + t
            bar.update()
    bar.close()
    dims = {0: ("activation", "P"), 1: ("activation", "P", "member")}
    return {
        k: (dims.get(v.ndim - 2, ("activation", "P", "member", "query", "key")), v)
        for k, v in values.items()
    }
