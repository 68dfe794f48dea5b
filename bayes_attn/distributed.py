"""Several processes (hosts): start ``jax.distributed``, give each process its share of the work,
merge the per-process NetCDF files into one, or let independent processes share one output by
claiming its items (:class:`Claim`).

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

Processes that were started independently (N jobs of a cluster's job array, or N shells) need no
coordinator: each claims an item before working on it (:class:`Claim`, a lock file per item created
with ``O_CREAT | O_EXCL``), so no item is done twice; the resumable sweeps work this way.

References
----------
docs/performance.md, "Scaling out".
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import numpy as np

from bayes_attn._validation import check_int
from bayes_attn.io import (
    merge_netcdf,  # noqa: F401  (its home before bayes_attn.io)
    write_atomic,
)

log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------------------------------
# Per-process files: process i writes OUT.part-i-of-N.nc, process 0 waits for them and merges

#: how long process 0 waits for the other processes' parts
WAIT_TIMEOUT = 7 * 24 * 3600.0


def part_paths(out, num_processes: int) -> list[Path]:
    """The per-process files of ``out``: ``OUT.part-I-of-N.nc``, one per process."""
    return [Path(f"{out}.part-{k}-of-{num_processes}.nc") for k in range(num_processes)]


def wait_until(ready: Callable, timeout: float = WAIT_TIMEOUT, poll: float = 1.0) -> None:
    """Poll ``ready() -> (finished, status)`` every ``poll`` seconds until ``finished``; ``status``
    says how far the other processes are (in the log, and in the error after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        finished, status = ready()
        if finished:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for the other processes: {status}")
        log.info("waiting for the other processes: %s", status)
        time.sleep(poll)


def wait_for_files(paths, timeout: float = WAIT_TIMEOUT) -> list:
    """Wait until every file of ``paths`` exists (they are written atomically) and load them
    (xarray Datasets, in the order given)."""
    import xarray as xr

    paths = [Path(p) for p in paths]
    missing = lambda: [str(p) for p in paths if not p.exists()]  # noqa: E731
    wait_until(lambda: (not missing(), missing()), timeout)
    out = []
    for p in paths:
        with xr.open_dataset(p, engine="h5netcdf") as f:
            out.append(f.load())
    return out


def gather_parts(ds, out, info: ProcessInfo, merge: Callable):
    """Bring one result computed in shares back together: with one process, ``ds`` itself;
    otherwise every process writes its share to its :func:`part_paths` file, the others return
    None, and process 0 waits for all the parts and returns ``merge(parts)``."""
    n, i = info.num_processes, info.process_id
    if n == 1:
        return ds
    parts = part_paths(out, n)
    write_atomic(ds, parts[i])
    if i != 0:
        return None
    return merge(wait_for_files(parts))


# --------------------------------------------------------------------------------------------------
# Claims: independent processes share the items of one output

#: seconds without a heartbeat after which a claim of another host counts as abandoned
CLAIM_TIMEOUT = 300.0


def _this_process() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex}


def _running_here(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Claim:
    """A lock file that says "this process is on it", for one item of a shared output.

    :meth:`acquire` creates ``path`` with ``O_CREAT | O_EXCL`` (atomic, also on NFS), holding the
    host, the process id and a token; while it is held a thread touches the file every
    ``timeout / 6`` seconds. A claim is stale, and is taken over, when its process has ended (same
    host) or its file has not been touched for ``timeout`` seconds (any host: a process that was
    killed with its machine). Use it as a context manager to wait for the claim (a lock), or call
    :meth:`acquire` once to try.
    """

    def __init__(self, path, timeout: float = CLAIM_TIMEOUT):
        self.path, self.timeout = Path(path), float(timeout)
        self._owner = _this_process()
        self._stop: threading.Event | None = None

    def holder(self) -> dict | None:
        """Who holds the claim (host, pid, token, age in seconds); None if nobody does."""
        try:
            text, age = self.path.read_text(), time.time() - self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        try:
            who = json.loads(text)
        except json.JSONDecodeError:  # being written this instant
            who = {}
        return {**who, "age": age}

    def stale(self, who: dict) -> bool:
        if who["age"] > self.timeout:
            return True
        here = who.get("host") == self._owner["host"]
        return here and isinstance(who.get("pid"), int) and not _running_here(who["pid"])

    def acquire(self) -> bool:
        """Claim the item, taking over a stale claim; False if a live process holds it."""
        who = self.holder()
        if who is not None:
            if not self.stale(who):
                return False
            self._break(who)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(self._owner, f)
        self._stop = threading.Event()
        threading.Thread(target=self._beat, args=(self._stop,), daemon=True).start()
        return True

    def release(self) -> None:
        """Give the claim up (its file is removed if it is still ours)."""
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        who = self.holder()
        if who is not None and who.get("token") == self._owner["token"]:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.timeout / 6):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def _break(self, who: dict) -> None:
        """Remove a stale claim; if a live one replaced it meanwhile, put that one back."""
        aside = self.path.with_name(f"{self.path.name}.stale-{self._owner['token']}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        log.info("taking over the stale claim %s of %s", self.path, who)
        with contextlib.suppress(OSError, json.JSONDecodeError):
            if json.loads(aside.read_text()).get("token") != who.get("token"):
                os.link(aside, self.path)
        aside.unlink()

    def __enter__(self):
        while not self.acquire():
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.release()
