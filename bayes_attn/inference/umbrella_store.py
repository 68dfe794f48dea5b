"""What lets an umbrella run stop and resume: Ctrl-C within a second, and the finished work kept.

- :func:`interruptible`: a compiled JAX call in a worker thread that the caller waits on in short
  sleeps, so that Ctrl-C stops the caller at once (a compiled program does not return to Python
  until it ends).
- :func:`fingerprint`: a digest of everything that decides a run's draws.
- :class:`WindowStore`: the checkpoint file of :func:`bayes_attn.inference.run_umbrella`: the
  plan of the windows (the modes, their Hessians, the centres and biases, so that a resumed run
  does not find the modes again), the relaxed starts of each round, and each finished window's
  draws, all under the run's fingerprint.
"""

from __future__ import annotations

import atexit
import hashlib
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn.inference.umbrella_plan import UmbrellaPlan

__all__ = ["WindowStore", "fingerprint", "interruptible"]


def interruptible(fn, *args):
    """``fn(*args)`` (a compiled JAX call) in a worker thread, the caller waiting in short sleeps:
    a compiled program does not return to Python until it ends, so Ctrl-C would wait for it;
    here it stops the caller within a tenth of a second (``KeyboardInterrupt``), the program
    left to run in its daemon thread (at exit the process then leaves at once, status 130, see
    :func:`_leave_at_exit`). Returns its outputs, ready; re-raises its error."""
    box = {}

    def work():
        try:
            box["out"] = jax.block_until_ready(fn(*args))
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box["err"] = err

    worker = threading.Thread(target=work, name="bayes-attn-umbrella", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        _IN_FLIGHT.add(worker)
        if len(_IN_FLIGHT) == 1:
            atexit.register(_leave_at_exit)
        raise
    if "err" in box:
        raise box["err"]
    return box["out"]


#: worker threads left running by an interrupt (:func:`interruptible`)
_IN_FLIGHT: set = set()


def _leave_at_exit() -> None:
    """At exit after an interrupt left a compiled program running: flush and leave at once
    (status 130, as an interrupt). The interpreter's shutdown would end the threads XLA runs it
    and its host callbacks on while they wait for Python, which XLA answers with an abort
    ("terminate called ... FATAL: exception not rethrown", status 134, or a segfault, 139)."""
    if _IN_FLIGHT:
        import logging
        import os
        import sys

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream: nothing to flush
                pass
        logging.shutdown()
        os._exit(130)


def fingerprint(*parts) -> str:
    """A digest of everything that decides a run's draws: arrays by dtype, shape and bytes,
    mappings by sorted keys, functions by name, anything else by ``repr``."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(str(k).encode())
                feed(x[k])
        elif isinstance(x, list | tuple):
            h.update(f"seq{len(x)}".encode())
            for v in x:
                feed(v)
        elif callable(x) and hasattr(x, "__qualname__"):
            h.update(f"{x.__module__}.{x.__qualname__}".encode())
        elif isinstance(x, np.ndarray | jax.Array | np.generic):
            if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
                x = jax.random.key_data(x)
            a = np.ascontiguousarray(np.asarray(x))
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(a.tobytes())
        else:
            h.update(repr(x).encode())

    feed(list(parts))
    return h.hexdigest()


class WindowStore:
    """The finished work of one run (:func:`~bayes_attn.inference.run_umbrella` with
    ``checkpoint``): a NetCDF file rewritten atomically (:func:`bayes_attn.io.write_atomic`) after
    each stage and each compiled call, holding the plan of the windows (``plan_*``: the modes'
    q, sd and Hessians, the centres, kappas and starts), each round's relaxed starts, each
    finished window's draws, statistics, step and last position by (round, window), and the run's
    :func:`fingerprint` (of the arguments, taken before any work). A run with other arguments
    refuses the file."""

    def __init__(self, path, digest: str):
        self.path, self.digest = Path(path), digest
        self._rounds: dict[int, dict] = {}
        self._relaxed: dict[int, tuple] = {}  # round -> the windows' relaxed starts and kappas
        self._plan: UmbrellaPlan | None = None  # the windows' plan (the modes found once)
        if self.path.exists():
            import xarray as xr

            try:
                with xr.open_dataset(self.path, engine="h5netcdf") as f:
                    ds = f.load()
            except Exception as err:  # h5py raises OSError, xarray ValueError
                raise ValueError(f"checkpoint: cannot read {self.path}: {err}") from err
            if ds.attrs.get("fingerprint") != digest:
                raise ValueError(
                    f"checkpoint: {self.path} holds windows of a run with other arguments (model, "
                    "data, seed or settings); remove it, or rerun with the arguments that made it"
                )
            if all(f"plan_{f}" in ds for f in UmbrellaPlan._fields):
                self._plan = UmbrellaPlan(*(ds[f"plan_{f}"].values for f in UmbrellaPlan._fields))
            names = [str(v)[4:] for v in ds.data_vars if str(v).startswith("obs_")]
            for v in ds.data_vars:
                if str(v).startswith("relaxed_x0_"):
                    r = int(str(v)[len("relaxed_x0_") :])
                    self._relaxed[r] = (ds[v].values, ds[f"relaxed_kappa_{r}"].values)
            for s in range(ds.sizes.get("slot", 0)):
                row = ds.isel(slot=s)
                self._rounds.setdefault(int(row["round"]), {})[int(row["window"])] = (
                    {n: row[f"obs_{n}"].values for n in names}, row["acceptance"].values,
                    row["n_steps"].values, row["diverging"].values, row["step_size"].values,
                    row["last"].values)  # fmt: skip

    def load(self, round_: int, index) -> dict:
        """The finished windows of ``round_`` among ``index``: window -> outputs."""
        have = self._rounds.get(int(round_), {})
        return {int(i): have[int(i)] for i in index if int(i) in have}

    def count(self) -> int:
        return sum(len(r) for r in self._rounds.values())

    def relaxed(self, round_: int):
        """The relaxed starts and kappas of every window of ``round_`` (all windows, before a
        share is taken), or None: a resumed run skips the relaxation."""
        return self._relaxed.get(int(round_))

    def plan(self) -> UmbrellaPlan | None:
        """The plan of the windows kept by an earlier run with the same fingerprint, or None: a
        resumed run neither finds the modes again nor takes their Hessians."""
        return self._plan

    def keep_plan(self, plan: UmbrellaPlan) -> None:
        self._plan = UmbrellaPlan(*(np.asarray(a) for a in plan))
        self.save(0, {})

    def keep_relaxed(self, round_: int, x0, kappas) -> None:
        self._relaxed[int(round_)] = (np.asarray(x0), np.asarray(kappas))
        self.save(round_, {})

    def save(self, round_: int, done: dict) -> None:
        import xarray as xr

        from bayes_attn.io import write_atomic

        self._rounds.setdefault(int(round_), {}).update(done)
        rows = [
            (r, w, out) for r, ws in sorted(self._rounds.items()) for w, out in sorted(ws.items())
        ]
        data = {}
        for field, a in ({} if self._plan is None else self._plan._asdict()).items():
            data[f"plan_{field}"] = (tuple(f"plan_{field}_{i}" for i in range(a.ndim)), a)
        for r, (x0, kap) in self._relaxed.items():
            data[f"relaxed_x0_{r}"] = ((f"relaxed_{r}", "dim"), x0)
            data[f"relaxed_kappa_{r}"] = ((f"relaxed_{r}",), kap)
        if rows:
            names = list(rows[0][2][0])
            stack = lambda f: np.stack([out[f] for _, _, out in rows])  # noqa: E731
            cdw = ("slot", "chain", "draw")
            data.update(
                {**{f"obs_{n}": (cdw, np.stack([out[0][n] for _, _, out in rows])) for n in names},
                 "acceptance": (cdw, stack(1)), "n_steps": (cdw, stack(2)),
                 "diverging": (cdw, stack(3)), "step_size": (("slot", "chain"), stack(4)),
                 "last": (("slot", "chain", "dim"), stack(5)),
                 "round": ("slot", np.array([r for r, _, _ in rows])),
                 "window": ("slot", np.array([w for _, w, _ in rows]))}
            )  # fmt: skip
        attrs = {"fingerprint": self.digest,
                 "description": "finished umbrella windows, kept to resume an interrupted run"}  # fmt: skip
        write_atomic(xr.Dataset(data, attrs=attrs), self.path)
