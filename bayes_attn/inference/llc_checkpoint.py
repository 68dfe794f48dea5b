"""The chunks and the checkpoint of the LLC's sampling loops (Langevin and NUTS alike), whose
:class:`Keeper` also keeps :func:`~bayes_attn.inference.nuts.run_nuts`'s (``checkpoint=``).

Both loops of :func:`~bayes_attn.inference.llc.run_llc` run compiled chunks of steps that aim at
:data:`CHUNK_SECONDS` of wall time each (:class:`Chunker`); between chunks they update the
progress bar, check for divergence, let Ctrl-C through, and, with a checkpoint path, write their
state and the draws so far every :data:`CHECKPOINT_SECONDS` (:class:`Keeper`). A rerun with the
same arguments reads the file back and goes on from there, bit for bit: every step's key is folded
from the run's key and the step's index, so the draws do not depend on where chunks end. A file
written by a run with other arguments (its :func:`fingerprint` differs) is refused; the file is
removed when the run completes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_SECONDS", "CHUNK_SECONDS", "Chunker", "Keeper"]

CHECKPOINT_FORMAT = "bayes_attn.llc.checkpoint/3"
"""/2: NUTS's acceptance and divergences per draw; /3: Langevin runs too, NUTS by BlackJAX."""

CHECKPOINT_SECONDS = 30.0
"""A checkpoint is written after a chunk when this many seconds have passed since the last."""

CHUNK_SECONDS = 1.0
"""The wall time a compiled chunk of steps aims at: progress, divergence checks and Ctrl-C act
between chunks."""


class Chunker:
    """Chunk sizes that aim at :data:`CHUNK_SECONDS` each: from 1 unit, at most 4 times the last
    (the first call also compiles) and never above ``cap``."""

    def __init__(self, cap: int):
        self.cap, self.n = max(1, cap), 1

    def __call__(self, left: int) -> int:
        return max(1, min(self.n, left, self.cap))

    def timed(self, n: int, seconds: float) -> None:
        rate = seconds / n
        grow = CHUNK_SECONDS / rate if rate > 0 else 4 * n
        self.n = int(max(1, min(4 * n, grow, self.cap)))


def chunks(total: int, parts: int = 20) -> list[int]:
    """``total`` split into about ``parts`` equal pieces (the last shorter)."""
    size = max(1, -(-total // parts))
    return [min(size, total - i) for i in range(0, total, size)]


def fingerprint(kind: str, target, x0, key, *settings) -> str:
    """What determines a run's draws: the loop (``kind``), the target (its settings and its log
    density at two points, which tells closures apart), the starts, the key and ``settings``."""
    from bayes_attn.inference.smc_checkpoint import digest

    probe = target.x_star + 0.01 * jnp.cos(jnp.arange(target.x_star.size))
    dens = [float(jax.jit(target.log_density)(x)) for x in (target.x_star, probe)]
    dens = [np.format_float_scientific(v, precision=9) for v in dens]
    return digest(
        CHECKPOINT_FORMAT, kind, np.asarray(target.x_star), target.n, target.nbeta, target.gamma,
        target.include_prior, dens, np.asarray(x0), np.asarray(jax.random.key_data(key)),
        *settings,
    )  # fmt: skip


def save(path: Path, fp: str, state, steps: int, arrays: dict) -> None:
    """``state`` (a pytree; PRNG keys as their data) after ``steps`` steps and ``arrays`` (the
    draws so far), atomically (npz, no pickles; a temporary file beside it, then
    ``os.replace``)."""
    out = {"format": np.array(CHECKPOINT_FORMAT), "fingerprint": np.array(fp)}
    out["steps"] = np.array(steps)
    out.update({f"draws/{k}": np.asarray(v) for k, v in arrays.items()})
    for i, leaf in enumerate(jax.tree.leaves(state)):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out[f"state/{i}"] = np.asarray(leaf)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, **out)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load(path: Path, fp: str, template):
    """``(state, steps, arrays)`` from ``path``, or None when there is no file; a file made by a
    run with other arguments is refused (``ValueError`` naming ``checkpoint``). ``template`` is a
    state of the same structure (its leaves give the dtypes and key implementations)."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
        raise ValueError(f"checkpoint: {path} is not a readable checkpoint ({err})") from None
    if str(data.get("format", "")) != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint: {path} is not an LLC checkpoint ({CHECKPOINT_FORMAT})")
    if str(data["fingerprint"]) != fp:
        raise ValueError(
            f"checkpoint: {path} was written by a run with other arguments; rerun with the "
            "arguments it was made with, or remove the file to start afresh"
        )
    flat, treedef = jax.tree.flatten(template)
    leaves = []
    for i, t in enumerate(flat):
        v = data[f"state/{i}"]
        if jax.dtypes.issubdtype(t.dtype, jax.dtypes.prng_key):
            leaves.append(jax.random.wrap_key_data(v, impl=jax.random.key_impl(t)))
        else:
            leaves.append(jnp.asarray(v, dtype=t.dtype))
    arrays = {k.removeprefix("draws/"): v for k, v in data.items() if k.startswith("draws/")}
    return jax.tree.unflatten(treedef, leaves), int(data["steps"]), arrays


class Keeper:
    """A loop's checkpoint: ``resume(template)`` reads it back (None: start afresh), ``tick``
    writes it when :data:`CHECKPOINT_SECONDS` have passed, ``done`` removes it. With no path
    every call does nothing."""

    def __init__(self, checkpoint, fp_args: tuple | None = None, *, fp: str | None = None):
        self.path = None if checkpoint is None else Path(checkpoint)
        if self.path is None:
            self.fp = None
        else:  # the LLC's loops fingerprint their target; run_nuts gives its own digest
            self.fp = fp if fp is not None else fingerprint(*fp_args)
        self.last = time.perf_counter()

    def resume(self, template):
        return None if self.path is None else load(self.path, self.fp, template)

    def due(self) -> bool:
        """Whether :meth:`tick` would write now (a path, and :data:`CHECKPOINT_SECONDS` passed):
        a loop whose arrays cost something to gather asks first."""
        return self.path is not None and time.perf_counter() - self.last >= CHECKPOINT_SECONDS

    def tick(self, state, steps: int, arrays: dict, force: bool = False) -> None:
        """Write the checkpoint if it is :meth:`due` (or, with a path, if ``force``)."""
        if self.due() or (force and self.path is not None):
            save(self.path, self.fp, state, steps, arrays)
            self.last = time.perf_counter()

    def done(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
