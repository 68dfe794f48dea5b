"""How many bytes an Adam ensemble needs, the memory limit of a device, and how many members fit.

:func:`estimate_bytes` counts, before anything is allocated, what one jitted chunk of
:func:`bayes_attn.inference.train_adam` holds on one device: every resident member's parameters and
Adam moments (twice: the chunk's inputs and its outputs), its tokens and observables, plus the
working set of the one member that runs at a time under ``lax.map`` (its gradients and optimiser
temporaries, the (V L) x d and (V L)^2 tables of the forward and their cotangents, the per-sequence
logits and attention of the batch, and the forward over the train and test sets for the
observables). The formula is in docs/performance.md ("Scaling out"); ``tests/test_sharding.py``
checks it against XLA's own ``memory_analysis()`` of the compiled chunk.

References
----------
docs/performance.md, "Scaling out".
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

import jax
import numpy as np

from bayes_attn._validation import check_int

MEMORY_LIMIT_ENV = "BAYES_ATTN_MEMORY_LIMIT"
DEVICE_HEADROOM = 0.9  # share of a device's reported bytes_limit that a run may plan to use

# Multiples of the parameter count and of the table and sequence sizes, read off XLA's
# memory_analysis() of the compiled chunk (CPU, float32 and float64, d_model 8 to 256) and rounded up.
_RESIDENT_PER_PARAM = 6  # params, Adam mu and nu, as chunk inputs and again as outputs
_WORKING_PER_PARAM = 6  # the running member: carry, gradients, updates, moment temporaries
_PER_TABLE = 3  # (V L) x d embedding table, H W_G, and their cotangents (per V L d)
_PER_TABLE2 = 4  # (V L)^2 logit table, its cotangent (per (V L)^2)
_PER_SEQUENCE = 3  # logits, attention and cotangents per sequence and query (per L (L + V))
_KEY_BYTES = 8  # a threefry key (2 x uint32)
_CHUNK = 100  # steps per chunk whose keys are passed in (train_adam's default)

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value, name: str = "memory_limit") -> int:
    """A byte count from an int or a string such as ``"2GB"``, ``"1.5 GiB"``, ``"512M"`` or
    ``"8e9"``. k/M/G/T and kB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a positive byte count such as 2GB, got {value!r}")
    if isinstance(value, int | np.integer | float):
        number, unit = float(value), ""
    else:
        match = re.fullmatch(
            r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(value)
        )
        if match is None or match.group(2).lower() not in _UNITS:
            raise ValueError(
                f"{name} must be a positive byte count such as 2GB, 512MiB or 8e9, got {value!r}"
            )
        number, unit = float(match.group(1)), match.group(2).lower()
    if not math.isfinite(number) or number * _UNITS[unit] < 1:
        raise ValueError(f"{name} must be a positive byte count such as 2GB, got {value!r}")
    return int(number * _UNITS[unit])


def format_bytes(n: float) -> str:
    """``n`` bytes in human units: ``"1.50 GiB"``."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _default_dtype_bytes() -> int:
    return np.dtype(jax.dtypes.canonicalize_dtype(float)).itemsize


def _one_layer_sizes(d, L, V, factorized):
    """(parameters, table floats, floats per sequence) of the one-layer network at width d: W_G
    (or W_Q, W_K), the embeddings, W_O; the (V L) x d tables and the (V L)^2 logit table; the
    logits, attention and output per query."""
    VL = V * L
    n_params = d * d * (2 if factorized else 1) + d * (V + L) + V * d
    tables = _PER_TABLE * VL * d * (2 if factorized else 1) + _PER_TABLE2 * VL * VL
    return n_params, tables, L * (L + V)


def _two_layer_sizes(d, L, V, factorized):
    """(parameters, table floats, floats per sequence) of the two-layer network
    (:func:`bayes_attn.models.two_layer.init_network_params`) at width d, n = V + L features:
    W_G1 (d^2), W_G2 (4 d^2), the embeddings (d n) and the readout W_O (V x 4d); the products of
    the weights with the embeddings (d n and 2d x 2n) and the forms M1 (n^2) and M2 ((2n)^2); per
    query both layers' logits and attention (2 L), the streams [h0, h1, h2] (4n) and the output."""
    if factorized:
        raise ValueError("factorized: the two-layer network trains full W_G1 and W_G2 only")
    n = V + L
    n_params = 5 * d * d + d * n + 4 * V * d
    tables = _PER_TABLE * 5 * d * n + _PER_TABLE2 * 5 * n * n
    return n_params, tables, L * (2 * L + 4 * n + V)


def _estimate_parts(task, d_model, P, *, factorized, batch_size, num_test, dtype_bytes):
    """(fixed bytes per device, bytes per resident member): the one-layer network's, or the
    two-layer network's for an induction task (a task with a ``target_mask``, as
    :func:`bayes_attn.inference.adam_nets.is_induction` tells them apart)."""
    d, L, V = d_model, task.L, task.V
    sizes = _two_layer_sizes if hasattr(task, "target_mask") else _one_layer_sizes
    n_params, tables, per_sequence = sizes(d, L, V, factorized)
    B = P if batch_size is None else min(batch_size, P)
    f = dtype_bytes
    per_member = (
        _RESIDENT_PER_PARAM * n_params * f
        + P * L * 4  # the member's tokens (int32)
        + _CHUNK * _KEY_BYTES  # its keys for one chunk
        + (L * L + 8) * f  # its observables (A_bar and scalars)
    )
    sequences = _PER_SEQUENCE * (B + P + num_test) * per_sequence
    fixed = (
        (_WORKING_PER_PARAM * n_params + tables + sequences) * f
        + num_test * L * 4  # the shared test tokens
    )
    return int(fixed), int(per_member)


def estimate_bytes(
    task,
    d_model: int,
    P: int,
    members: int,
    *,
    factorized: bool = False,
    batch_size: int | None = None,
    num_test: int = 100,
    dtype_bytes: int | None = None,
) -> int:
    """Estimated peak bytes of one :func:`~bayes_attn.inference.train_adam` chunk with ``members``
    members resident on one device (members run one at a time under ``lax.map``).

    With ``n = d^2`` (``2 d^2`` factorised) ``+ d (V + L) + V d`` parameters per member, ``B`` the
    batch (``P`` when full batch) and ``b`` = ``dtype_bytes``::

        members * (6 n b + 4 P L + 800 + (L^2 + 8) b)     resident: params, Adam mu, nu (in and out)
        + (6 n + 3 V L d + 4 (V L)^2) b                    the running member: gradients, tables
        + 3 (B + P + num_test) L (L + V) b + 4 num_test L  logits, attention, cotangents, observables

    (``3 V L d`` twice when factorised). For an
    :class:`~bayes_attn.induction.InductionTask` the member is the two-layer network, sized from
    its own shapes (n = V + L features): ``5 d^2 + d n + 4 V d`` parameters (W_G1, W_G2 of
    (2d)^2, the embeddings, the readout of [h0, h1, h2]), tables ``3 * 5 d n + 4 * 5 n^2`` (the
    weights' products with the embeddings; M1 and M2 of (2n)^2) and ``L (2 L + 4 n + V)`` floats
    per sequence in place of ``L (L + V)``. See docs/performance.md, "Scaling out".

    Parameters
    ----------
    task : CopyTask or InductionTask
        An induction task's member is the two-layer network.
    d_model, P, members : int
    factorized : bool
        W_Q, W_K instead of W_G.
    batch_size : int, optional
        Minibatch size; full batch by default.
    num_test : int
        Held-out sequences of the observables.
    dtype_bytes : int, optional
        Bytes per float; default 8 with ``jax_enable_x64``, else 4.

    Returns
    -------
    int
        Bytes; it matches XLA's ``memory_analysis()`` of the compiled chunk to within 2x from above
        (tested in ``tests/test_sharding.py``).
    """
    d_model = check_int("d_model", d_model, 1)
    P = check_int("P", P, 1)
    members = check_int("members", members, 1)
    num_test = check_int("num_test", num_test, 1)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1)
    if dtype_bytes is None:
        dtype_bytes = _default_dtype_bytes()
    dtype_bytes = check_int("dtype_bytes", dtype_bytes, 1)
    fixed, per_member = _estimate_parts(
        task,
        d_model,
        P,
        factorized=factorized,
        batch_size=batch_size,
        num_test=num_test,
        dtype_bytes=dtype_bytes,
    )
    return fixed + members * per_member


def memory_limit(
    devices: Sequence[jax.Device] | None = None, memory_limit: int | str | None = None
) -> int | None:
    """The bytes a run may plan to use on each device, or None when unknown.

    In order: the ``memory_limit`` argument (bytes, or a string such as ``"2GB"``), the environment
    variable ``BAYES_ATTN_MEMORY_LIMIT``, or ``DEVICE_HEADROOM`` (90 %) of the smallest
    ``bytes_limit`` that the devices report in ``memory_stats()`` (GPUs do; the CPU does not).
    """
    if memory_limit is not None:
        return parse_bytes(memory_limit, "memory_limit")
    env = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if env:
        return parse_bytes(env, MEMORY_LIMIT_ENV)
    limits = []
    for device in jax.local_devices() if devices is None else devices:
        try:
            stats = device.memory_stats()
        except Exception:  # some backends do not implement memory_stats
            stats = None
        if stats and stats.get("bytes_limit"):
            limits.append(int(stats["bytes_limit"]))
    return int(DEVICE_HEADROOM * min(limits)) if limits else None


def members_per_group(
    task,
    d_model: int,
    P: int,
    members: int,
    *,
    limit: int | None,
    n_devices: int = 1,
    factorized: bool = False,
    batch_size: int | None = None,
    num_test: int = 100,
    dtype_bytes: int | None = None,
) -> int:
    """How many members to run at once on ``n_devices`` devices with ``limit`` bytes each: all of
    them when they fit (or ``limit`` is None), else the most that fit, a multiple of ``n_devices``.

    Raises ``MemoryError`` when even one member per device does not fit.
    """
    members = check_int("members", members, 1)
    n_devices = check_int("n_devices", n_devices, 1)
    if limit is None:
        return members
    if dtype_bytes is None:
        dtype_bytes = _default_dtype_bytes()
    fixed, per_member = _estimate_parts(
        task,
        check_int("d_model", d_model, 1),
        check_int("P", P, 1),
        factorized=factorized,
        batch_size=batch_size,
        num_test=check_int("num_test", num_test, 1),
        dtype_bytes=dtype_bytes,
    )
    fit = (limit - fixed) // per_member
    if fit < 1:
        net = "two-layer" if hasattr(task, "target_mask") else "one-layer"
        raise MemoryError(
            f"one {net} ensemble member at d_model={d_model} (P={P}, L={task.L}, V={task.V}"
            f"{', factorized' if factorized else ''}, batch_size={batch_size or P}) needs an "
            f"estimated {format_bytes(fixed + per_member)} per device, more than the memory limit "
            f"of {format_bytes(limit)}; lower d_model or batch_size, or raise the limit "
            f"(memory_limit= or {MEMORY_LIMIT_ENV})"
        )
    return int(min(members, fit * n_devices))
