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
- the studies of docs/validation.md (:mod:`bayes_attn.experiments.studies`) and the LLC's
  (:mod:`bayes_attn.experiments.llc_studies`), each with its config in ``bayes_attn/configs/``.

Every kind is registered in one place, ``KINDS`` of :mod:`bayes_attn.experiments.kinds`.

Every finished point is written at once: the whole Dataset goes to a temporary file beside the
target, which then replaces it (``os.replace``, atomic on POSIX). A sweep killed at any moment
leaves either the previous file or the new one, never a torn one; rerunning the same config skips
the finished points (the ``done`` variable) and ends with the same Dataset as an uninterrupted run.
A long point may keep its finished parts in its folder, :func:`point_folder` (``OUT.points/``,
removed once the point is stored), and resume from them (the ``tokens`` kind: each source).
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
import contextvars
import dataclasses
import itertools
import json
import logging
import math
import shutil
import time
import tomllib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xarray as xr

from bayes_attn._deprecation import moved
from bayes_attn._validation import check_activation, check_int, check_positive
from bayes_attn.distributed import CLAIM_TIMEOUT, Claim, part_paths, wait_until
from bayes_attn.experiments.kinds import (  # noqa: F401  (DEFAULTS, DESCRIPTIONS: their old home)
    DEFAULTS,
    DESCRIPTIONS,
    KINDS,
    Kind,
    kind_defaults,
    kind_spec,
    resolve,
    signature_defaults,
)
from bayes_attn.experiments.points import PROTOCOL_GRID, model_at_level  # noqa: F401
from bayes_attn.io import write_atomic
from bayes_attn.models.levels import LEVELS, ORDER_PARAMETERS
from bayes_attn.progress import bar as make_bar
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.tokens import check_uniform, parse_tokens

log = logging.getLogger(__name__)

GRID = ("activation", "L", "V", "P", "seed")
__getattr__ = moved(__name__, {"ORDER": "bayes_attn.models.levels:ORDER_PARAMETERS"})


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


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """What a sweep computes, and where.

    Attributes
    ----------
    kind : str
        A kind registered in ``KINDS`` of :mod:`bayes_attn.experiments.kinds` ("theory", "nuts",
        "sgld", "adam", "protocol", "llc", "landscape", the studies, ...).
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
        spec = kind_spec(self.kind)
        pos_int = {"P": 1, "L": 2, "V": 2, "seed": 0}
        setattr_ = object.__setattr__
        for name, low in pos_int.items():
            if name == "P" and spec.real_P:
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
        known = kind_defaults(self.kind)
        unknown = set(self.options) - set(known)
        if unknown:
            raise ValueError(
                f"unknown options for a {self.kind} sweep: {sorted(unknown)}; known: {sorted(known)}"
            )
        options = {**known, **self.options}
        if self.kind == "theory" or options.get("level") == "reduced":
            check_uniform(source, f"a {self.kind} sweep at the reduced level (Level 2)")
        if "level" in options and options["level"] not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {options['level']!r}")
        if spec.check is not None:
            options = resolve(spec.check)(self, options)
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


def protocol_sweep(protocol, hyper: dict | None = None) -> SweepConfig:
    """The ``protocol`` sweep of a :class:`~bayes_attn.experiments.protocol.ProtocolConfig`: its
    P values and activations as the grid, its other fields as the options."""
    fields = protocol.flat()
    grid = {new: fields.pop(old) for old, new in PROTOCOL_GRID.items()}
    grid.update(L=(grid["L"],), V=(grid["V"],), seed=(grid["seed"],))
    return SweepConfig(kind="protocol", **grid, hyper=dict(hyper or {}), options=fields)


def read_sweep_table(path, quick: bool = False) -> dict:
    """The sweep settings of a TOML file (its ``[sweep]`` table, or settings at the top level) or
    a JSON file (an object, or one under ``"sweep"``); a table under another name raises naming
    it, since its settings would otherwise go unread. With ``quick``, the file's ``[quick]`` table
    (beside ``[sweep]``) overrides its settings, ``options`` merged: the shrunken study a test
    runs end to end."""
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
        table = dict(data["sweep"])
        if quick:
            small = dict(data.get("quick", {}))
            options = {**table.get("options", {}), **small.pop("options", {})}
            table.update(small, options=options)
        return table
    fields = {f.name for f in dataclasses.fields(SweepConfig)}
    tables = [k for k, v in data.items() if isinstance(v, dict) and k not in fields]
    if tables:
        raise ValueError(
            f"{path} has no [sweep] table (it has [{'], ['.join(tables)}]): put the settings "
            "under [sweep]"
        )
    return data


def compute_point(cfg: SweepConfig, index: tuple, point: dict) -> dict:
    """The results at one grid point: name -> (extra dims, array[, {dim: coordinate}])."""
    task = CopyTask(point["L"], point["V"], cfg.tokens)
    hyper = Hyper(**cfg.hyper)
    return resolve(kind_spec(cfg.kind).point)(cfg, point, task, hyper)


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
    rec = RunRecord(
        kind_spec(cfg.kind).sampler, cfg.seed[0], chains, warmup, draws, settings=settings
    )
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


def _describe(name: str, kind: str = "") -> dict:
    table = {**DESCRIPTIONS, **resolve(kind_spec(kind).descriptions)} if kind else DESCRIPTIONS
    if name in table:  # a variable described by its own name (level1_U, adam_start, ...)
        units, text = table[name]
        return {"units": units, "description": text}
    base = name
    for prefix in ("adam_", "sgld_", "theory_", "level1_"):
        base = base.removeprefix(prefix)
    base = base.split("_")[0] if base.split("_")[0] in ORDER_PARAMETERS else base
    units, text = table.get(base, ("1", name.replace("_", " ")))
    if base in ("c1", "cG") and base != name and not name.startswith("theory_"):
        text += f"; {_FOLDED}"
    return {"units": units, "description": text if base == name else f"{name}: {text}"}


_FOLDED = (
    "folded draw by draw onto the Z2 image c1 + cG >= 0 (the images (c1, cG) and (-c1, -cG) "
    "have equal posterior mass) before it was summarised"
)


def _store(ds: xr.Dataset, cfg: SweepConfig, index: tuple, result: dict) -> xr.Dataset:
    for name, (dims, value, *coords) in result.items():
        value = np.asarray(value, dtype=float)
        if name not in ds:
            shape = cfg.shape + value.shape
            extra = {d: np.arange(n) for d, n in zip(dims, value.shape, strict=True)}
            extra.update(coords[0] if coords else {})  # a dim's own labels, else its index
            da = xr.DataArray(np.full(shape, np.nan), dims=GRID + tuple(dims))
            ds[name] = da.assign_coords(extra)
            ds[name].attrs.update(_describe(name, cfg.kind))
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


#: the folder of the point being computed (:func:`point_folder`), set by :func:`run_sweep`
_POINT_FOLDER: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "bayes_attn_point_folder", default=None
)


def point_folder() -> Path | None:
    """Where the point that :func:`run_sweep` is computing may keep its finished parts, so that an
    interrupted point resumes from them (``OUT.points/<the point's values>/`` beside the sweep's
    file, created by whoever writes there; removed once the point is stored); None outside a sweep.
    Whoever writes there keys each part by a digest of what decides it."""
    return _POINT_FOLDER.get()


_POINT_PROGRESS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bayes_attn_point_progress", default=False
)


def point_progress() -> bool:
    """Whether the point that :func:`run_sweep` is computing may report its own progress (the
    sweep's ``progress``: a line per umbrella window, say, under the sweep's bar, for points that
    run for hours); False outside a sweep."""
    return _POINT_PROGRESS.get()


@contextlib.contextmanager
def _in_point_folder(path: Path, pt: dict, progress: bool = False):
    """Run the point with :func:`point_folder` (and :func:`point_progress`) set; remove the folder
    once the point is stored."""
    folder = path.with_name(path.name + ".points") / ",".join(f"{d}={pt[d]}" for d in GRID)
    token, shown = _POINT_FOLDER.set(folder), _POINT_PROGRESS.set(bool(progress))
    try:
        yield
    finally:
        _POINT_FOLDER.reset(token)
        _POINT_PROGRESS.reset(shown)
    shutil.rmtree(folder, ignore_errors=True)  # only after the point is stored
    with contextlib.suppress(OSError):
        folder.parent.rmdir()  # once every point's folder is gone


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
        A progress bar over the points (to stderr), and the points' own progress lines where
        their kind reports it (:func:`point_progress`: the umbrella's windows, for instance).
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
                    with _in_point_folder(path, nxt.point, progress):
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
