"""Several processes (hosts): start ``jax.distributed``, give each process its share of the work,
merge the per-process NetCDF files into one.

Ensemble members and sweep points are independent, so every process runs its own share on its own
local devices (:func:`bayes_attn.inference.sharding.member_mesh`) and writes its own file; no
cross-process collectives are needed. :func:`initialize_distributed` still registers the processes
with ``jax.distributed`` (so ``jax.process_index()`` and ``jax.process_count()`` are right, and a
cluster scheduler sees one job), and is a no-op for a single process. This module imports no more
of the package than ``bayes_attn`` itself, so that it can run before JAX starts its backend.

Usage, on every host (or with the ``--coordinator``, ``--num-processes``, ``--process-id`` flags of
the CLI)::

    BAYES_ATTN_COORDINATOR=host0:12345 BAYES_ATTN_NUM_PROCESSES=2 BAYES_ATTN_PROCESS_ID=0 python run.py

    info = initialize_distributed()          # before any other JAX call
    for P in process_share(Ps, info.process_id, info.num_processes):
        ...                                   # write out/part-{info.process_id}.nc
    merge_netcdf(paths, "P", "out/all.nc")   # afterwards, on one host

References
----------
docs/performance.md, "Scaling out".
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import jax
import numpy as np

from bayes_attn._validation import check_int
from bayes_attn.io import merge_netcdf  # noqa: F401  (its home before bayes_attn.io)

COORDINATOR_ENV = "BAYES_ATTN_COORDINATOR"
NUM_PROCESSES_ENV = "BAYES_ATTN_NUM_PROCESSES"
PROCESS_ID_ENV = "BAYES_ATTN_PROCESS_ID"


@dataclasses.dataclass(frozen=True)
class ProcessInfo:
    """Where this process stands: its id in ``[0, num_processes)`` and the coordinator (None when
    there is only one process)."""

    process_id: int
    num_processes: int
    coordinator_address: str | None


def _from_env(value, env: str, name: str, minimum: int | None):
    if value is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return None
        value = raw
        name = f"{name} (from {env})"
    if minimum is None:
        return str(value)
    try:
        value = int(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    return check_int(name, value, minimum)


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    initialization_timeout: int = 300,
) -> ProcessInfo:
    """Register this process with ``jax.distributed``; a no-op for one process.

    Each argument falls back to an environment variable: ``BAYES_ATTN_COORDINATOR`` (``host:port``
    of process 0), ``BAYES_ATTN_NUM_PROCESSES``, ``BAYES_ATTN_PROCESS_ID``. With
    ``num_processes`` None or 1 nothing is initialised and ``ProcessInfo(0, 1, None)`` is returned.
    Otherwise all three are required, and this must run before any other JAX computation in the
    process (``jax.distributed.initialize``'s own rule).

    Returns
    -------
    ProcessInfo
    """
    num_processes = _from_env(num_processes, NUM_PROCESSES_ENV, "num_processes", 1)
    process_id = _from_env(process_id, PROCESS_ID_ENV, "process_id", 0)
    coordinator_address = _from_env(coordinator_address, COORDINATOR_ENV, "coordinator", None)
    if num_processes is None or num_processes == 1:
        if process_id not in (None, 0):
            raise ValueError(f"process_id must be 0 for a single process, got {process_id}")
        return ProcessInfo(0, 1, None)
    if process_id is None:
        raise ValueError(
            f"process_id is required with num_processes={num_processes} "
            f"(argument or {PROCESS_ID_ENV})"
        )
    if process_id >= num_processes:
        raise ValueError(
            f"process_id must lie in [0, num_processes) = [0, {num_processes}), got {process_id}"
        )
    if not coordinator_address or ":" not in coordinator_address:
        raise ValueError(
            "coordinator must be host:port of process 0 (argument or "
            f"{COORDINATOR_ENV}), got {coordinator_address!r}"
        )
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            initialization_timeout=initialization_timeout,
        )
    except RuntimeError as err:
        if "must be called before" not in str(err):
            raise
        raise RuntimeError(
            "initialize_distributed must run before JAX starts its backend: import "
            "bayes_attn.distributed and call it before importing bayes_attn.inference, "
            "bayes_attn.models or bayes_attn.theory (importing those computes arrays)"
        ) from err
    return ProcessInfo(process_id, num_processes, coordinator_address)


def process_share(
    items: Sequence,
    process_id: int | None = None,
    num_processes: int | None = None,
    *,
    interleave: bool = False,
) -> list:
    """This process's share of ``items`` (sweep points, member indices).

    Contiguous blocks whose sizes differ by at most one (``np.array_split``), or with
    ``interleave=True`` every ``num_processes``-th item from ``process_id`` on (balances a sweep
    whose cost grows along it). The shares of all processes partition ``items``; a process can get
    none. ``process_id`` and ``num_processes`` default to ``jax.process_index()`` and
    ``jax.process_count()``.
    """
    items = list(items)
    if num_processes is None:
        num_processes = jax.process_count()
    num_processes = check_int("num_processes", num_processes, 1)
    if process_id is None:
        process_id = jax.process_index()
    process_id = check_int("process_id", process_id, 0)
    if process_id >= num_processes:
        raise ValueError(
            f"process_id must lie in [0, num_processes) = [0, {num_processes}), got {process_id}"
        )
    if interleave:
        return items[process_id::num_processes]
    bounds = np.cumsum([0] + [len(b) for b in np.array_split(np.arange(len(items)), num_processes)])
    return items[bounds[process_id] : bounds[process_id + 1]]
