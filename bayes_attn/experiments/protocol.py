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
    DECAYS,
    WARMUP_FRACTION,
    WARMUP_START,
    AdamSettings,
    train_adam,
    warmup_steps_for,
)
from bayes_attn.inference.members import chain_means, sgld_program
from bayes_attn.progress import bar as make_bar
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.theory.level1 import level1_map
from bayes_attn.theory.saddles import global_saddle
from bayes_attn.tokens import parse_tokens

PAPER_PS = (1, 10, 20, 60, 100, 200, 250, 275, 300, 400, 500, 600, 700, 800)
PRESETS = ("paper", "quick")

_ADAM = AdamSettings()  # the trainer's defaults, which the protocol's Adam fields start from
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


@dataclasses.dataclass(frozen=True)
class ProtocolConfig:
    """Settings of the protocol. ``paper()`` is the paper's Table 1 with our learning rates;
    ``quick()`` is the one quick preset. Learning rates are for our loss scaling (the chi-scaled
    negative log-posterior summed over sequences), see docs/validation.md.

    The Adam fields default to :class:`~bayes_attn.inference.adam.AdamSettings`' (and its warm-up
    constants), except where the protocol deliberately differs: a cosine decay, and the
    embeddings held at their prior draw (docs/validation.md, "Adam convergence")."""

    L: int = 25
    V: int = 5
    # the token source's spec (bayes_attn.tokens): "uniform", "zipf:s=1", "icl-markov:alpha=1", ...
    tokens: str = "uniform"
    Ps: tuple[int, ...] = PAPER_PS
    members: int = 10
    num_test: int = _ADAM.num_test
    d_model: int = 256
    activations: tuple[str, ...] = ("linear", "softmax")
    # Adam
    lr: float = _ADAM.lr
    decay: str = "cosine"  # after the warm-up: "constant", "cosine" or "exponential" to
    end_fraction: float = _ADAM.end_fraction  # ... end_fraction * lr at max_steps
    # Adam holds W_emb, p at their prior draw: the joint MAP with trained embeddings collapses
    # them and has cG = 0, unlike the posterior the theory describes (docs/validation.md)
    train_embeddings: bool = False
    max_steps: int = _ADAM.max_steps
    patience: int = _ADAM.patience
    min_delta: float = _ADAM.min_delta
    warmup_fraction: float = WARMUP_FRACTION  # softmax only, as in the paper
    warmup_init: float = WARMUP_START  # softmax: lr ramps up from lr * warmup_init
    chunk: int = _ADAM.chunk
    # SGLD, warm-started from Adam
    # None: the curvature rule of sgld_step_size (at most 5e-4 / d_model, and 0.1 / lambda_max)
    sgld_step: float | None = None
    sgld_warmup: int = 50
    sgld_samples: int = 100
    sgld_thinning: int = 1
    batch_size: int = 1000
    # theory
    level1: bool = True
    rtol: float = _RTOL  # the loss filter, classify_minima
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
        check_positive("lr", self.lr)
        if self.decay not in DECAYS:
            raise ValueError(f"decay must be one of {DECAYS}, got {self.decay!r}")
        check_positive("end_fraction", self.end_fraction)
        if self.sgld_step is not None:
            check_positive("sgld_step", self.sgld_step)

    @classmethod
    def paper(cls, **changes) -> ProtocolConfig:
        return dataclasses.replace(cls(), **changes)

    @classmethod
    def quick(cls, **changes) -> ProtocolConfig:
        """The one quick preset, a few minutes on a laptop CPU: the four P values of Fig. 1 (both
        transitions between them), three members of width 32, 50 held-out sequences, short SGLD,
        no Level-1 MAP. ``bayes-attn figures --quick`` (``make demo``), the ``protocol_quick.toml``
        config and the benchmarks' ``--quick`` all use it."""
        return dataclasses.replace(cls(), **{**_QUICK, **changes})

    @classmethod
    def from_toml(cls, path) -> ProtocolConfig:
        """Read a ``[protocol]`` table (unknown keys raise); lists become tuples. ``preset =
        "quick"`` starts from :meth:`quick` instead of :meth:`paper`."""
        table = dict(tomllib.loads(Path(path).read_text())["protocol"])
        preset = table.pop("preset", "paper")
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(table) - known
        if unknown:
            raise ValueError(f"unknown protocol settings: {sorted(unknown)}")
        changes = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
        return getattr(cls, preset)(**changes)

    def task(self) -> CopyTask:
        return CopyTask(self.L, self.V, self.tokens)


def _sgld_stage(cfg: ProtocolConfig, task, hyper, activation, tokens, test, adam_params, key):
    """SGLD from each member's Adam solution on its own dataset; per-member posterior means of the
    order parameters (on the held-out ``test`` sequences, as for Adam), their standard deviations
    and the mean train loss per token. Embeddings that Adam held fixed (``cfg.train_embeddings``
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
        train_embeddings=cfg.train_embeddings,  # held where Adam held them
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
    """The held-out sequences (``cfg.num_test`` of them) shared by every member and every point."""
    return cfg.task().sample(protocol_keys(cfg.seed).held_out, cfg.num_test)


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
    soft = act == "softmax"
    seconds = {}
    keys = protocol_keys(cfg.seed).point(act, P)
    test = held_out(cfg)
    tokens = member_datasets(cfg, act, P)
    t0 = time.perf_counter()
    warm = warmup_steps_for(act, cfg.max_steps, cfg.warmup_fraction)
    ds = train_adam(
        task,
        hyper,
        act,
        cfg.d_model,
        P,
        members=cfg.members,
        key=keys.adam,
        tokens=tokens,
        test_tokens=test,
        lr=cfg.lr,
        warmup_steps=warm,
        warmup_init=cfg.lr * cfg.warmup_init,
        decay=cfg.decay,
        end_fraction=cfg.end_fraction,
        train_embeddings=cfg.train_embeddings,
        max_steps=cfg.max_steps,
        patience=cfg.patience,
        min_delta=cfg.min_delta,
        chunk=cfg.chunk,
        return_params=True,
        progress_bar=progress,
    )
    sd = level2_saddle(task, hyper, P, act)
    ds = classify_minima(ds, theory_loss=None if sd is None else sd.loss, rtol=cfg.rtol)
    seconds["adam"] = time.perf_counter() - t0
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
    obj = ds.objective.values  # convergence: relative change over the last chunk
    drift = np.full(cfg.members, np.nan)
    if obj.shape[1] > 1:
        drift = (obj[:, -2] - obj[:, -1]) / np.abs(obj[:, -1])
    out["adam_drift"] = drift
    out["adam_steps"] = fin["steps"]

    t0 = time.perf_counter()
    params = {n: jnp.asarray(ds[n].values) for n in ("W_emb", "p", "W_G", "W_O")}
    sg = _sgld_stage(cfg, task, hyper, act, tokens, test, params, keys.sgld)
    out.update({f"sgld_{k}": v for k, v in sg.items()})
    seconds["sgld"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    out["theory_c1"] = np.nan if sd is None else sd.c1 if not soft else sd.a1
    out["theory_cG"] = np.nan if sd is None else sd.cG if not soft else sd.aG
    out["theory_loss"] = np.nan if sd is None else sd.loss
    for k in ("level1_c1", "level1_cG", "level1_residual"):
        out[k] = np.nan
    if cfg.level1:
        m1 = level1_map(task, hyper, tokens[0], act)
        c1, cG = (m1.c1, m1.cG) if soft else algebra.fold_sign(m1.c1, m1.cG)
        out["level1_c1"], out["level1_cG"] = c1, cG
        out["level1_residual"] = m1.token_residual
    seconds["theory"] = time.perf_counter() - t0
    return out, seconds


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
        for k, v in dataclasses.asdict(cfg).items()
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
