"""Checkpoints of a tempered SMC run, so that a killed run resumes where it stopped.

``run_smc(..., checkpoint=path)`` writes, after every tempering step and once more after the
rejuvenation at lambda = 1, everything the rest of the run depends on: the particles, their
weights, lambda and the moves' parameters of every run (:class:`~bayes_attn.inference.smc_kernel.
RunState`), the eves, every run's per-step records, the key the driver splits next, and, after the
rejuvenation, the runs' lineage variances and the rejuvenation's record. Rerun with the same
arguments, ``run_smc`` reads the file and continues from there; since the random key is saved
with the state and float64 values round-trip exactly, the result is bit for bit that of an
uninterrupted run (tests/test_smc_checkpoint.py). The file is removed when the run completes.

The file is a NumPy ``.npz`` archive without pickled objects, written to a temporary file beside
it and moved into place (``os.replace``), so a run killed while writing leaves the previous
checkpoint intact. It carries a fingerprint of what determines the draws: the model (its module
and name), its arguments (arrays by their bytes, dataclasses by their fields), the log density
at two fixed points (which tells closures apart, e.g. the whitened model of ``basin_evidence``),
the key, and the settings that change the draws (``num_particles``, ``num_runs``, the moves, the
reference, ``batch_size``). A file whose fingerprint differs is refused with an error naming
``checkpoint`` and what differs; the settings that only change warnings and limits
(``min_lineages``, ``evidence_tolerance``, ``max_tempering_steps``) may change between the runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn.inference.smc_kernel import RunState, StepRecord

__all__ = ["Checkpoint", "Saved", "check_path", "digest", "fingerprint"]

FORMAT = "bayes_attn.smc.checkpoint/1"
TEMPERING, REJUVENATED = "tempering", "rejuvenated"


def check_path(checkpoint) -> Path | None:
    """``checkpoint`` as a Path (None stays None); its directory must exist, and it must not be a
    directory itself. Checked before any work."""
    if checkpoint is None:
        return None
    try:
        path = Path(os.fspath(checkpoint))
    except TypeError:
        raise TypeError(f"checkpoint must be a path, got {type(checkpoint).__name__}") from None
    if path.is_dir():
        raise ValueError(f"checkpoint: {path} is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"checkpoint: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"checkpoint: the directory {parent} is not writable")
    return path


# --------------------------------------------------------------------------------------------------
# The fingerprint


def _feed(h, obj) -> None:
    """Feed a canonical byte form of ``obj`` to the hash ``h`` (no memory addresses)."""
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes):
        h.update(repr((type(obj).__name__, obj)).encode())
    elif isinstance(obj, jax.Array) and jax.dtypes.issubdtype(obj.dtype, jax.dtypes.prng_key):
        _feed(h, ("key", np.asarray(jax.random.key_data(obj))))
    elif isinstance(obj, np.ndarray | np.generic | jax.Array):
        a = np.ascontiguousarray(np.asarray(obj))
        h.update(repr(("array", a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        _feed(h, (type(obj).__qualname__, dataclasses.asdict(obj)))
    elif isinstance(obj, dict):
        h.update(b"dict")
        for k in sorted(obj, key=repr):
            _feed(h, k)
            _feed(h, obj[k])
    elif isinstance(obj, tuple | list):
        h.update(repr((type(obj).__qualname__, len(obj))).encode())
        for v in obj:
            _feed(h, v)
    elif callable(obj):
        _feed(h, ("callable", getattr(obj, "__module__", ""), getattr(obj, "__qualname__", "")))
    else:
        _feed(h, (type(obj).__qualname__, dict(getattr(obj, "__dict__", {}))))


def digest(*objs) -> str:
    """A SHA-256 digest of a canonical byte form of ``objs`` (arrays by their bytes, dataclasses
    by their fields, keys by their data; no memory addresses): the same arguments, the same
    digest, in any process."""
    return _digest(*objs)


def _digest(*objs) -> str:
    h = hashlib.sha256()
    for obj in objs:
        _feed(h, obj)
    return h.hexdigest()


def fingerprint(model, model_args, model_kwargs, log_parts, unravel, dim, key_data, settings):
    """The checkpoint's fingerprint: one digest per part (``model``, ``model_args``,
    ``model_kwargs``, ``density``, ``seed or key``, ``settings``; module docstring)."""
    probes = [np.zeros(dim), np.random.default_rng(0).normal(scale=0.1, size=dim)]
    values = [np.asarray(jax.jit(log_parts)(unravel(jnp.asarray(x)))) for x in probes]
    # ten significant digits: the same density on another XLA build still matches
    density = [np.format_float_scientific(float(v), precision=9) for v in np.ravel(values)]
    return {
        "model": _digest(model),
        "model_args": _digest(tuple(model_args)),
        "model_kwargs": _digest(dict(model_kwargs)),
        "density": _digest(dim, density),
        "seed or key": _digest(np.asarray(key_data)),
        "settings": _digest(settings),
    }


# --------------------------------------------------------------------------------------------------
# The saved state


class Saved(NamedTuple):
    """What a checkpoint holds (module docstring).

    Attributes
    ----------
    stage : {"tempering", "rejuvenated"}
    key : PRNG key
        The driver's key: split next for the next tempering step ("tempering"), or for the
        shuffle of the draws ("rejuvenated").
    state : RunState
        Over the run axis.
    records : list of list of StepRecord
        Per run, its tempering steps' records (Python floats).
    run_var : numpy.ndarray or None
        The runs' lineage variances ("rejuvenated" only).
    last : StepRecord of numpy arrays or None
        The rejuvenation's record over the runs ("rejuvenated" only).
    """

    stage: str
    key: object
    state: RunState
    records: list
    run_var: np.ndarray | None = None
    last: StepRecord | None = None


class Checkpoint(NamedTuple):
    """A checkpoint file and the fingerprint of the run that owns it."""

    path: Path
    fingerprint: dict

    def save(self, saved: Saved) -> None:
        """Write ``saved`` atomically (a temporary file beside it, then ``os.replace``)."""
        arrays = {"format": np.array(FORMAT), "stage": np.array(saved.stage)}
        arrays.update({f"fp/{k}": np.array(v) for k, v in self.fingerprint.items()})
        arrays["key_data"] = np.asarray(jax.random.key_data(saved.key))
        leaves = jax.tree.leaves(saved.state)
        arrays.update({f"state/{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)})
        arrays["records/count"] = np.array([len(run) for run in saved.records], dtype=np.int64)
        for f in StepRecord._fields:
            arrays[f"records/{f}"] = np.array(
                [getattr(s, f) for run in saved.records for s in run], dtype=np.float64
            )
        if saved.stage == REJUVENATED:
            arrays["run_var"] = np.asarray(saved.run_var, dtype=np.float64)
            arrays.update({f"last/{f}": np.asarray(v) for f, v in saved.last._asdict().items()})
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
            os.replace(tmp, self.path)
        finally:
            if tmp.exists():
                tmp.unlink()

    def load(self, template: RunState, key_impl) -> Saved | None:
        """The saved run, or None when there is no file. ``template``: the state's structure
        (``jax.eval_shape`` of the program's init); ``key_impl``: the key's implementation."""
        if not self.path.exists():
            return None
        try:
            with np.load(self.path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
            raise ValueError(
                f"checkpoint: {self.path} is not a readable checkpoint ({err})"
            ) from None
        if data.get("format") is None or str(data["format"]) != FORMAT:
            raise ValueError(f"checkpoint: {self.path} is not a run_smc checkpoint ({FORMAT})")
        differs = [k for k, v in self.fingerprint.items() if str(data.get(f"fp/{k}", "")) != v]
        if differs:
            raise ValueError(
                f"checkpoint: {self.path} was written by a run with other arguments (it differs "
                f"in: {', '.join(differs)}); rerun with the arguments it was made with, or remove "
                "the file to start afresh"
            )
        flat, treedef = jax.tree.flatten(template)
        leaves = [jnp.asarray(data[f"state/{i}"], dtype=t.dtype) for i, t in enumerate(flat)]
        counts = np.cumsum(np.concatenate([[0], data["records/count"]]))
        total = int(np.sum(data["records/count"]))
        # a field added since the file was written (mean_log_likelihood) reads as NaN
        columns = [
            data[f"records/{f}"].tolist() if f"records/{f}" in data else [math.nan] * total
            for f in StepRecord._fields
        ]
        rows = [StepRecord(*values) for values in zip(*columns, strict=True)]
        records = [rows[a:b] for a, b in zip(counts[:-1], counts[1:], strict=True)]
        stage = str(data["stage"])
        last = None
        if stage == REJUVENATED:
            last = StepRecord(
                *(data.get(f"last/{f}", np.full_like(data["last/ess"], math.nan))
                  for f in StepRecord._fields)
            )  # fmt: skip
        return Saved(
            stage,
            jax.random.wrap_key_data(data["key_data"], impl=key_impl),
            jax.tree.unflatten(treedef, leaves),
            records,
            data.get("run_var"),
            last,
        )

    def remove(self) -> None:
        """Delete the file (the run completed)."""
        self.path.unlink(missing_ok=True)
