"""Adam-trained ensembles of the finite-width network: the MAP, computed the way the paper does.

Every member trains on its own dataset, in one jitted program per chunk of ``lax.scan`` steps. The
optimiser is an optax chain (:mod:`bayes_attn.inference.adam_optim`): Adam with a linear
learning-rate warm-up, then :func:`~bayes_attn.inference.adam_optim.early_stopping`, which freezes
a member once its objective stops improving. The objective is
the chi-scaled negative log-posterior of the finite network (Level 0, docs/theory.md §1)
(:func:`bayes_attn.models.network.neg_log_posterior`), so the optimum is the MAP.

References
----------
Paper Sec. 4 and Table 1 (Adam warm-up, early stopping, filtering by the loss); docs/theory.md §1
(Level 0).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from bayes_attn._deprecation import renamed
from bayes_attn._validation import (
    check_activation,
    check_int,
    check_positive,
    check_tokens,
    with_changes,
)
from bayes_attn.inference.adam_nets import AdamNetwork, adam_network
from bayes_attn.inference.adam_optim import (
    DECAYS,
    EarlyStoppingState,
    adam_optimizer,
    early_stopping,
    lr_schedule,
    optimizer_for,
)
from bayes_attn.inference.memory import members_per_group
from bayes_attn.inference.memory import memory_limit as device_memory_limit
from bayes_attn.inference.record import RunRecord
from bayes_attn.inference.sharding import (
    member_mesh,
    pad_leading,
    shard_leading,
    sharded_map,
    unpad_leading,
)
from bayes_attn.io import concat_disjoint
from bayes_attn.keys import resolve_key
from bayes_attn.progress import bar as make_bar
from bayes_attn.task import preset_attrs

__all__ = [
    "DECAYS",
    "WARMUP_FRACTION",
    "WARMUP_START",
    "AdamKeys",
    "AdamSettings",
    "EarlyStoppingState",
    "adam_keys",
    "adam_optimizer",
    "adam_settings",
    "early_stopping",
    "lr_schedule",
    "merge_ensembles",
    "train_adam",
    "warmup_steps_for",
]

# --------------------------------------------------------------------------------------------------
# The chunk program


def _chunk_program(opt, hyper, activation: str, P: int, L: int, batch_size, mesh, net=None):
    """The jitted chunk: ``run_chunk(params, opt_state, keys, tokens, frozen, test_tokens)`` runs
    ``keys.shape[1]`` steps of every member (leading axis of all but ``test_tokens``) of the
    network ``net`` (:func:`~bayes_attn.inference.adam_nets.adam_network`; default the one-layer
    network) and returns the new params, optimiser state and the observables."""
    net = adam_network(None, hyper, activation, None) if net is None else net
    n_tok = P * L
    scale = P / batch_size if batch_size else 1.0

    def one_step(carry, key, data, fixed):
        params, opt_state = carry
        batch = (
            data if batch_size is None else data[jax.random.choice(key, P, (batch_size,), False)]
        )
        value, grads = jax.value_and_grad(net.objective)(params, batch, frozen=fixed, scale=scale)
        updates, opt_state = opt.update(grads, opt_state, params, value=value / n_tok)
        return (optax.apply_updates(params, updates), opt_state), None

    def member(args, test_tokens):
        p, s, ks, data, fixed = args
        (p, s), _ = jax.lax.scan(lambda c, k: one_step(c, k, data, fixed), (p, s), ks)
        return p, s, net.observables(p, fixed, data, test_tokens)

    @jax.jit
    def run_chunk(params, opt_state, keys, tokens, frozen, test_tokens):
        # members run one after another on each device: a vmapped gather with per-member indices
        # is ~3x slower on the CPU than the same gathers in sequence
        xs = (params, opt_state, keys, tokens, frozen)
        return sharded_map(member, xs, test_tokens, mesh=mesh)

    return run_chunk


# --------------------------------------------------------------------------------------------------
# The settings: the one home of the trainer's defaults


def warmup_steps_for(activation: str, max_steps: int, fraction: float) -> int:
    """The learning-rate warm-up of the paper's protocol: softmax networks warm up for
    ``fraction * max_steps`` steps (from a small learning rate, so that the attention does not
    saturate in the first steps); linear ones start at the full rate."""
    check_activation(activation)
    return int(fraction * max_steps) if activation == "softmax" else 0


#: The paper's warm-up (softmax only): over this fraction of ``max_steps`` ...
WARMUP_FRACTION = 0.1
#: ... from ``lr * WARMUP_START`` (the paper's ramp from 1e-7, rescaled to our learning rate).
WARMUP_START = 1e-4


@dataclasses.dataclass(frozen=True)
class AdamSettings:
    """How :func:`train_adam` trains: the one home of its defaults.

    ``bayes-attn train``, the ``adam`` sweep and
    :class:`~bayes_attn.experiments.protocol.ProtocolConfig` take their defaults from here. The
    budget, lr 1e-2 for at most 300 steps with patience 100, is the one measured in
    docs/validation.md ("Our learning rates", "Adam convergence").

    Attributes
    ----------
    lr, warmup_steps, warmup_init : float, int, float
        Adam's learning rate and a linear warm-up from ``warmup_init`` to ``lr`` over
        ``warmup_steps`` (none by default; :meth:`with_warmup` sets the paper's).
    decay, decay_steps, end_fraction : str, int or None, float
        The learning rate after the warm-up (:func:`lr_schedule`): ``"constant"``, or a
        ``"cosine"`` or ``"exponential"`` decay to ``end_fraction * lr`` over ``decay_steps``
        (None: the steps left after the warm-up).
    max_steps, patience, min_delta : int, int, float
        Early stopping on the objective per token (``max_steps`` is rounded up to a whole number
        of chunks).
    batch_size : int or None
        Minibatch size (sequences); None, or more than P, is the full batch.
    chunk : int
        Steps per jitted ``lax.scan`` chunk; observables are recorded after each chunk.
    num_test : int
        Held-out sequences drawn when none are given.
    factorized : bool
        ``W_G = W_Q^T W_K`` instead of a full ``W_G``.
    train_embeddings : bool
        Train ``W_emb`` and ``p`` too; False holds them at their initial draw.
    """

    lr: float = 1e-2
    warmup_steps: int = 0
    warmup_init: float = 0.0
    decay: str = "constant"
    decay_steps: int | None = None
    end_fraction: float = 1e-2
    max_steps: int = 300
    patience: int = 100
    min_delta: float = 0.0
    batch_size: int | None = None
    chunk: int = 100
    num_test: int = 100
    factorized: bool = False
    train_embeddings: bool = True

    def __post_init__(self):
        check_positive("lr", self.lr)
        if self.decay not in DECAYS:
            raise ValueError(f"decay must be one of {DECAYS}, got {self.decay!r}")
        ints = {"warmup_steps": 0, "max_steps": 1, "patience": 0, "chunk": 1, "num_test": 1}
        if self.batch_size is not None:
            ints["batch_size"] = 1
        for name, low in ints.items():
            object.__setattr__(self, name, check_int(name, getattr(self, name), low))

    def with_warmup(
        self, activation: str, fraction: float = WARMUP_FRACTION, start: float = WARMUP_START
    ) -> AdamSettings:
        """These settings with the paper's warm-up: a softmax network warms up over
        ``fraction * max_steps`` steps from ``lr * start`` (:func:`warmup_steps_for`); a linear
        one starts at the full rate."""
        steps = warmup_steps_for(activation, self.max_steps, fraction)
        return dataclasses.replace(self, warmup_steps=steps, warmup_init=self.lr * start)


def adam_settings(settings: AdamSettings | None = None, **changes) -> AdamSettings:
    """``settings`` (default :class:`AdamSettings`) with ``changes``, which must name its fields
    (:func:`~bayes_attn._validation.with_changes`)."""
    return with_changes(settings, AdamSettings, changes, where="train_adam")


# --------------------------------------------------------------------------------------------------
# The trainer


def _history(runs, net: AdamNetwork, return_params: bool, keep: tuple = ()):
    """The data variables of :func:`train_adam`'s result from its member groups' runs (records,
    steps, stopped_at, final weights, the weights at the steps ``keep``), and the recorded
    steps."""
    # a group that stopped early holds still: repeat its last record up to the longest group
    steps = max((r[1] for r in runs), key=len)
    records = [
        {k: np.concatenate([r[0][min(t, len(r[0]) - 1)][k] for r in runs]) for k in runs[0][0][0]}
        for t in range(len(steps))
    ]
    stopped_at = np.concatenate([r[2] for r in runs])
    final_params = {n: np.concatenate([r[3][n] for r in runs]) for n in runs[0][3]}
    data = {
        out: (("member", "step"), np.stack([r[key] for r in records], axis=1))
        for out, key in net.series.items()
    }
    for name in net.patterns:
        data[name] = (("member", "query", "key"), records[-1][name])
    data["stopped_at"] = (("member",), stopped_at)
    if return_params:
        for name, w in final_params.items():
            data[name] = (("member", *net.dims(name)), np.asarray(w))
    for name in runs[0][4][keep[0]] if keep else ():
        w = [np.concatenate([r[4][t][name] for r in runs]) for t in keep]
        data[f"{name}_at"] = (("member", "params_step", *net.dims(name)), np.stack(w, axis=1))
    return data, steps


class AdamKeys(NamedTuple):
    """The keys :func:`train_adam` draws from its key, in this order: the members' datasets, the
    held-out set, the initial weights and the run (minibatches). Anything that must reproduce
    one of them (a held-out set, an initial draw) asks :func:`adam_keys` instead of re-deriving
    the split."""

    data: jax.Array
    test: jax.Array
    init: jax.Array
    run: jax.Array


def adam_keys(key=None, seed: int | None = None) -> AdamKeys:
    """The keys of :func:`train_adam` for ``key`` or ``seed`` (:class:`AdamKeys`)."""
    rng, _, _ = resolve_key(key, seed)
    return AdamKeys(*jax.random.split(rng, 4))


def train_adam(
    task,
    hyper,
    activation: str,
    d_model: int,
    P: int,
    *,
    members: int = 10,
    seed: int | None = None,
    key=None,
    tokens=None,
    test_tokens=None,
    init=None,
    settings: AdamSettings | None = None,
    return_params: bool = False,
    keep_params_at=None,
    progress: bool = True,
    devices=None,
    memory_limit: int | str | None = None,
    member_range: tuple[int, int] | None = None,
    progress_bar: bool | None = None,
    **changes,
) -> xr.Dataset:
    """Train an ensemble of ``members`` networks to the MAP with Adam, one dataset per member.

    Parameters
    ----------
    task, hyper : CopyTask, Hyper
    activation : {"linear", "softmax"}
    d_model, P : int
        Width and number of training sequences per member.
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given); the keys drawn from it are :func:`adam_keys`.
    tokens : (members, P, L) ints, optional
        The members' datasets; by default drawn from ``seed``. ``test_tokens`` (num_test, L) is one
        held-out set shared by all members.
    init : dict, optional
        Starting parameters with a leading member axis (default: a prior draw per member).
    settings, **changes
        The fields of :class:`AdamSettings` (its docstring lists them; how to train: the
        learning rate and its schedule, steps, early stopping, minibatch, chunk, held-out size,
        which weights train), ``settings`` (default ``AdamSettings()``) with the keywords
        replacing its fields (:func:`adam_settings`). An unknown keyword is a TypeError naming
        it.
    return_params : bool
        Also store the final parameters (dims ``member`` plus the weight's own).
    keep_params_at : sequence of int, optional
        Recorded steps (multiples of ``chunk``, the last one rounded up as ``max_steps`` is) at
        which to store every weight ``W`` too, as ``W_at`` with dims (member, params_step, the
        weight's own): the weights of this one run along its training (a member that stopped
        early holds its weights). Nothing else in the result changes.
    devices : sequence of jax.Device, optional
        The member axis is split over these (default: all local devices); each runs its members
        one after another (:func:`bayes_attn.inference.sharding.sharded_map`). Results match a
        one-device run to float rounding.
    memory_limit : int or str, optional
        Bytes per device (``"2GB"`` works too); default ``BAYES_ATTN_MEMORY_LIMIT`` or 90 % of the
        device's ``bytes_limit`` (none on the CPU). When the ensemble's
        :func:`~bayes_attn.inference.memory.estimate_bytes` exceeds it, the members run in groups,
        one group after another, with the same results; ``MemoryError`` if one member does not fit.
    progress : bool
        One progress bar over the steps (:func:`bayes_attn.progress.bar`); ``progress_bar`` is its
        old name (deprecated).
    member_range : (start, stop), optional
        Train only members ``start .. stop - 1`` of the ensemble, with the data, initial weights
        and random keys they have in the whole run (one process's share in a multi-host run; the
        ``member`` coordinate keeps their ensemble indices).

    Returns
    -------
    xarray.Dataset
        dims (member, step): ``train_loss``, ``test_loss`` (per token, 1/2 |y - f|^2),
        ``objective`` (negative log-posterior per token), ``c1``/``cG`` (``a1``/``aG`` for softmax),
        ``token_residual``; per member: ``A_bar`` (query, key), ``stopped_at`` (-1 if it never
        stopped), the final losses; attrs: the settings.
    """
    progress = renamed("progress_bar", progress_bar, "progress", progress)
    s = adam_settings(settings, **changes)
    check_activation(activation)
    d_model = check_int("d_model", d_model, 1)
    P = check_int("P", P, 1)
    members = check_int("members", members, 1)
    lo, hi = _member_range(member_range, members)
    s = _for_run(s, P)
    keep = _keep_steps(keep_params_at, s)
    mesh = member_mesh(devices)
    group = _group_size(task, d_model, P, hi - lo, s, mesh, memory_limit, test_tokens)
    rng, seed, key_attrs = resolve_key(key, seed)
    keys = adam_keys(rng)
    tokens, test_tokens = _datasets(task, P, members, tokens, test_tokens, s.num_test, keys)
    data = (tokens, test_tokens, init)
    run = _ensemble(task, hyper, activation, d_model, members, s, keys, data, mesh, return_params)
    run = run._replace(keep_at=keep)
    groups = [slice(a, min(a + group, hi)) for a in range(lo, hi, group)]
    runs = _train_groups(run, groups, f"adam {activation} P={P}", progress)
    data, steps = _history(runs, run.net, return_params, keep)
    attrs = _attrs(run, seed, activation, P, s, key_attrs, len(steps), len(groups))
    coords = {"member": np.arange(lo, hi), "step": np.asarray(steps)}
    coords.update({"params_step": np.asarray(keep)} if keep else {})
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _keep_steps(steps, s: AdamSettings) -> tuple:
    """``keep_params_at`` checked: distinct recorded steps of a run with settings ``s``, sorted."""
    if steps is None:
        return ()
    chunk = min(s.chunk, s.max_steps)
    recorded = range(chunk, -(-s.max_steps // chunk) * chunk + 1, chunk)
    keep = sorted({check_int("keep_params_at", t, 1) for t in steps})
    bad = [t for t in keep if t not in recorded]
    if bad:
        raise ValueError(f"keep_params_at: {bad} are not recorded steps (multiples of chunk "
                         f"{chunk} up to {recorded[-1]})")  # fmt: skip
    return tuple(keep)


def _ensemble(task, hyper, activation, d_model, members, s, keys, data, mesh, return_params):
    """The :class:`_Ensemble` of a run: its optimiser, its chunk program and its data
    (``data``: the members' datasets, the held-out set, the starting weights or None)."""
    tokens, test_tokens, init = data
    opt = optimizer_for(s)
    P = tokens.shape[1]
    net = adam_network(task, hyper, activation, test_tokens)
    return _Ensemble(
        task=task,
        hyper=hyper,
        d_model=d_model,
        members=members,
        factorized=s.factorized,
        train_embeddings=s.train_embeddings,
        init=init,
        init_keys=jax.random.split(keys.init, members),
        k_run=keys.run,
        opt=opt,
        net=net,
        run_chunk=_chunk_program(opt, hyper, activation, P, task.L, s.batch_size, mesh, net),
        mesh=mesh,
        tokens=tokens,
        test_tokens=test_tokens,
        chunk=min(s.chunk, s.max_steps),
        max_steps=s.max_steps,
        return_params=return_params,
    )


def _for_run(s: AdamSettings, P: int) -> AdamSettings:
    """``s`` resolved for a run on ``P`` sequences: the minibatch at most P, and a decay over the
    steps left after the warm-up when ``decay_steps`` is None."""
    if s.batch_size is not None:
        s = dataclasses.replace(s, batch_size=min(s.batch_size, P))
    if s.decay_steps is None:
        s = dataclasses.replace(s, decay_steps=max(s.max_steps - s.warmup_steps, 1))
    return s


def _group_size(task, d_model, P, n, s: AdamSettings, mesh, memory_limit, test_tokens) -> int:
    """Members per group, before anything is allocated: ``MemoryError`` if one does not fit."""
    return members_per_group(
        task,
        d_model,
        P,
        n,
        limit=device_memory_limit(list(mesh.devices.flat), memory_limit),
        n_devices=mesh.size,
        factorized=s.factorized,
        batch_size=s.batch_size,
        num_test=s.num_test if test_tokens is None else max(len(test_tokens), 1),
    )


def _member_range(member_range, members: int) -> tuple[int, int]:
    """``member_range`` checked against ``members`` (default: all of them)."""
    lo, hi = (0, members) if member_range is None else tuple(member_range)
    lo, hi = check_int("member_range start", lo, 0), check_int("member_range stop", hi, 1)
    if not lo < hi <= members:
        raise ValueError(f"member_range must satisfy 0 <= start < stop <= members, got {lo, hi}")
    return lo, hi


def _train_groups(run: _Ensemble, groups: list[slice], desc: str, progress: bool) -> list:
    """Train the member groups one after another under one progress bar."""
    desc += f" ({len(groups)} groups)" if len(groups) > 1 else ""
    with make_bar(run.max_steps * len(groups), desc, progress) as bar:
        return [_train_group(run, idx, bar) for idx in groups]


def _attrs(run, seed, activation, P, s: AdamSettings, key_attrs, records, groups) -> dict:
    """The run's record (:class:`~bayes_attn.inference.record.RunRecord`) with the network's level
    and options, as ``network_model`` would record them, and how the run was laid out. ``s`` is
    resolved for the run (its decay's steps and its batch filled in)."""
    settings = dict(
        **key_attrs,
        lr=s.lr,
        warmup_init=s.warmup_init,
        decay=s.decay,
        decay_steps=s.decay_steps,
        end_fraction=s.end_fraction,
        max_steps=s.max_steps,
        patience=s.patience,
        min_delta=s.min_delta,
        batch_size=s.batch_size or P,
        factorized=s.factorized,
        train_embeddings=s.train_embeddings,
    )
    record = RunRecord(
        "adam", seed, run.members, s.warmup_steps, records, run.chunk, settings=settings
    )
    attrs = record.attrs()
    attrs.update(
        trainer="adam",
        level="network",
        model=run.net.model,
        activation=activation,
        d_model=run.d_model,
        P=P,
        warmup_steps=s.warmup_steps,
        **preset_attrs(run.task, run.hyper),
    )
    attrs.update(run.net.attrs)
    attrs.update(devices=run.mesh.size, member_groups=groups)
    attrs.update(members=run.members)
    return attrs


def _datasets(task, P, members, tokens, test_tokens, num_test, keys: AdamKeys):
    """The members' training sets (members, P, L) and the shared held-out set, checked; drawn from
    ``keys.data`` and ``keys.test`` where not given."""
    if tokens is None:
        tokens = jax.vmap(lambda k: task.sample(k, P))(jax.random.split(keys.data, members))
    tokens = np.asarray(tokens)
    if tokens.shape[:2] != (members, P):
        raise ValueError(f"tokens must have shape ({members}, {P}, {task.L}), got {tokens.shape}")
    check_tokens(tokens.reshape(-1, tokens.shape[-1]), task.L, task.V)
    if test_tokens is None:
        test_tokens = task.sample(keys.test, check_int("num_test", num_test, 1))
    test_tokens = jnp.asarray(check_tokens(test_tokens, task.L, task.V))
    return jnp.asarray(tokens), test_tokens


class _Ensemble(NamedTuple):
    """What every group of one :func:`train_adam` call shares."""

    task: object
    hyper: object
    d_model: int
    members: int
    factorized: bool
    train_embeddings: bool
    init: dict | None
    init_keys: jax.Array  # (members,): the initial draw of each member
    k_run: jax.Array  # folded with the step: the minibatch keys of each chunk
    opt: optax.GradientTransformation
    net: AdamNetwork
    run_chunk: object
    mesh: object
    tokens: jax.Array
    test_tokens: jax.Array
    chunk: int
    max_steps: int
    return_params: bool
    keep_at: tuple = ()  # the steps whose weights are kept (train_adam's keep_params_at)


def _start(run: _Ensemble, idx: slice, whole: bool) -> dict:
    """The starting weights of members ``idx``: their prior draws, or their rows of ``init``."""
    if run.init is None:
        return jax.vmap(lambda k: run.net.init(k, run.d_model, run.factorized))(run.init_keys[idx])
    return {k: w if whole else jnp.asarray(w)[idx] for k, w in run.init.items()}


def _train_group(run: _Ensemble, idx: slice, bar):
    """Train members ``idx``; their keys are those of the whole ensemble, so the results do not
    depend on the grouping. Returns the chunks' observables, the step after each chunk, each
    member's stopping step, (with ``return_params``) its final weights and the weights at the
    steps ``run.keep_at``."""
    n = idx.stop - idx.start
    whole = n == run.members  # one group: no slicing; one device: no padding, no placement
    start = _start(run, idx, whole)
    frozen = {k: start[k] for k in ("W_emb", "p")} if not run.train_embeddings else {}
    params = {k: w for k, w in start.items() if k not in frozen}
    opt_state = jax.vmap(run.opt.init)(params)
    data = run.tokens if whole else run.tokens[idx]
    state, _ = pad_leading((params, opt_state, data, frozen), run.mesh.size)
    params, opt_state, data, frozen = shard_leading(state, run.mesh)
    size = run.mesh.size
    trim = (lambda tree: tree) if n % size == 0 else (lambda tree: unpad_leading(tree, n))
    records, steps, kept = [], [], {}
    step = 0
    while step < run.max_steps:
        keys = jax.random.split(jax.random.fold_in(run.k_run, step), (run.members, run.chunk))
        keys = shard_leading(pad_leading(keys if whole else keys[idx], size)[0], run.mesh)
        params, opt_state, obs = run.run_chunk(
            params, opt_state, keys, data, frozen, run.test_tokens
        )
        step += run.chunk
        if step in run.keep_at:
            kept[step] = jax.device_get(trim({**frozen, **params}))
        records.append(jax.device_get(trim(obs)))
        steps.append(step)
        stopped = np.asarray(opt_state[1].stopped_at)[:n] >= 0
        bar.update(run.chunk)
        bar.set_postfix(
            loss=f"{float(np.mean(records[-1]['train_loss'])):.4f}", stopped=int(stopped.sum())
        )
        if stopped.all():
            break
    bar.update(max(run.max_steps - step, 0))
    final = jax.device_get(trim({**frozen, **params})) if run.return_params or run.keep_at else {}
    kept.update({t: final for t in run.keep_at if t not in kept})  # stopped early: held still
    final = final if run.return_params else {}
    return records, steps, np.asarray(opt_state[1].stopped_at)[:n], final, kept


def merge_ensembles(parts) -> xr.Dataset:
    """Join the shares of one ensemble trained in several processes (``member_range``).

    Every part must come from the same settings; together they must hold members 0 .. members-1
    once each. A part whose members all stopped early has fewer recorded steps: its last record
    is held up to the last step, which is what those members record in a one-process run.
    """
    parts = sorted(parts, key=lambda d: int(d.member[0]))
    if not parts:
        raise ValueError("parts must hold at least one ensemble share")
    keep = ("member_groups", "devices", "created")  # how and when a share ran
    ref = {k: v for k, v in parts[0].attrs.items() if k not in keep}
    for d in parts[1:]:
        if {k: v for k, v in d.attrs.items() if k not in keep} != ref:
            raise ValueError("the parts were trained with different settings")
    steps = np.unique(np.concatenate([d.step.values for d in parts]))
    parts = [d.reindex(step=steps, method="ffill") for d in parts]
    out = concat_disjoint(parts, "member", expected=np.arange(ref["members"]))
    return out.assign_attrs(ref)
