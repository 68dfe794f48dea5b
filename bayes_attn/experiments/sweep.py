"""Resumable sweeps over grids of (activation, L, V, P, seed), saved to NetCDF point by point.

A sweep runs one kind of computation at every point of a grid:

- ``theory``: the global saddle, its metastable partner and the phase boundaries (Level 2);
- ``nuts`` / ``sgld``: posterior summaries of the order parameters at a level (``reduced``,
  ``kernel`` or ``network``);
- ``adam``: an Adam-trained ensemble (final observables per member);
- ``protocol``: the paper's experiment, Adam then SGLD warm-started from Adam, with the theory
  (:mod:`bayes_attn.experiments.protocol`).

Every finished point is written at once: the whole Dataset goes to a temporary file beside the
target, which then replaces it (``os.replace``, atomic on POSIX). A sweep killed at any moment
leaves either the previous file or the new one, never a torn one; rerunning the same config skips
the finished points (the ``done`` variable) and ends with the same Dataset as an uninterrupted run.
A file written by a different config, or one that cannot be read, raises :class:`SweepFileError`.

Rewriting the file per point costs O(points x file size); at the sizes of our grids (hundreds of
points, kilobytes each) that is negligible beside the computations.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
from pathlib import Path

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from bayes_attn import _arviz as az
from bayes_attn._validation import check_activation, check_int, check_positive
from bayes_attn.io import write_atomic
from bayes_attn.models.levels import LEVELS, model_with_data, order_parameters
from bayes_attn.task import CopyTask, Hyper

log = logging.getLogger(__name__)

KINDS = ("theory", "nuts", "sgld", "adam", "protocol")
GRID = ("activation", "L", "V", "P", "seed")
ORDER = ("c1", "cG", "a1", "aG")

# Settings each kind accepts, with their defaults (``SweepConfig.options`` overrides them).
DEFAULTS = {
    "theory": {},
    "nuts": dict(
        level="reduced",
        num_chains=4,
        num_warmup=500,
        num_samples=500,
        d_model=16,
        include_logdet=False,
    ),
    "sgld": dict(
        level="reduced",
        num_chains=4,
        num_warmup=500,
        num_samples=500,
        d_model=16,
        step_size=1e-4,
        batch_size=None,
        include_logdet=False,
    ),
    "adam": dict(
        d_model=64,
        members=4,
        lr=1e-2,
        max_steps=300,
        patience=100,
        warmup_fraction=0.1,
        warmup_init=1e-4,
        num_test=100,
        rtol=0.05,
    ),
    "protocol": None,  # the fields of ProtocolConfig, filled in lazily (import cycle)
}

DESCRIPTIONS = {
    "done": ("1", "the grid point has finished"),
    "c1": ("1", "uniform-pooling order parameter (linear attention)"),
    "cG": ("1", "copy order parameter (linear attention)"),
    "a1": ("1", "uniform-pooling order parameter (softmax attention)"),
    "aG": ("1", "copy order parameter (softmax attention)"),
    "loss": ("1", "theory loss per token at the global saddle, 1/2 |y - f|^2"),
    "action": ("nats / chi", "action per unit chi at the global saddle"),
    "n_minima": ("1", "number of local minima of the reduced action"),
    "meta_q": (
        "1",
        "copy order parameter (cG or aG) of the lowest metastable minimum (linear: in the Z2 "
        "image c1 + cG >= 0, where the anti-aligned minimum has c1 < 0)",
    ),
    "meta_loss": ("1", "theory loss per token at the lowest metastable minimum"),
    "second_order": ("sequences", "linear: second-order transition P*"),
    "crossover": ("sequences", "linear: crossover, max d cG / d log P"),
    "first_order": ("sequences", "softmax: first-order P* (equal action)"),
    "spinodal_lower": ("sequences", "softmax: the strong-copy minimum appears"),
    "spinodal_upper": ("sequences", "softmax: the weak-copy minimum vanishes"),
    "divergences": ("1", "divergent transitions after warm-up, all chains"),
    "train_loss": ("1", "final train loss per token"),
    "test_loss": ("1", "final held-out loss per token"),
    "global_min": ("1", "member reached the ensemble's lowest loss (classify_minima), 1 or 0"),
    "steps": ("steps", "Adam steps taken (early stopping)"),
    "A_bar": ("1", "final mean attention pattern on held-out sequences (linear: Z2-folded)"),
    "step": ("1", "SGLD step size (min(5e-4 / d_model, 0.1 / largest Hessian eigenvalue))"),
}


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


def _known_options(kind: str) -> dict:
    if kind == "protocol":
        from bayes_attn.experiments.protocol import ProtocolConfig

        skip = {"L", "V", "Ps", "activations", "seed"}
        return {f.name: f.default for f in dataclasses.fields(ProtocolConfig) if f.name not in skip}
    return DEFAULTS[kind]


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """What a sweep computes, and where.

    Attributes
    ----------
    kind : {"theory", "nuts", "sgld", "adam", "protocol"}
    P, L, V, activation, seed : tuples
        The grid axes; every combination is one point.
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
    hyper: dict = dataclasses.field(default_factory=dict)
    options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        pos_int = {"P": 1, "L": 2, "V": 2, "seed": 0}
        setattr_ = object.__setattr__
        for name, low in pos_int.items():
            if name == "P" and self.kind in ("theory", "nuts", "sgld"):
                check = lambda v: float(check_positive("P", v))  # noqa: E731
            else:
                check = lambda v, n=name, lo=low: check_int(n, v, lo)  # noqa: E731
            setattr_(self, name, _as_tuple(name, getattr(self, name), check))
        setattr_(self, "activation", _as_tuple("activation", self.activation, check_activation))
        base = dataclasses.asdict(Hyper.paper())
        unknown = set(self.hyper) - set(base)
        if unknown:
            raise ValueError(f"unknown hyperparameters {sorted(unknown)}; known: {sorted(base)}")
        hyper = {k: float(v) for k, v in {**base, **self.hyper}.items()}
        Hyper(**hyper)  # validates
        setattr_(self, "hyper", hyper)
        known = _known_options(self.kind)
        unknown = set(self.options) - set(known)
        if unknown:
            raise ValueError(
                f"unknown options for a {self.kind} sweep: {sorted(unknown)}; known: {sorted(known)}"
            )
        options = {**known, **self.options}
        if "level" in options and options["level"] not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {options['level']!r}")
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


# --------------------------------------------------------------------------------------------------
# One grid point of each kind: a dict name -> (extra dims, array), the same names at every point.


def _theory_point(cfg, pt, task, hyper):
    from bayes_attn import theory

    found = theory.saddles(task, hyper, pt["P"], pt["activation"])
    best = found[0]
    out = {k: getattr(best, k) for k in ORDER}
    out = {k: math.nan if v is None else v for k, v in out.items()}
    out.update(loss=best.loss, action=best.action, n_minima=len(found))
    meta = found[1] if len(found) > 1 else None
    q = "cG" if pt["activation"] == "linear" else "aG"
    out["meta_q"] = getattr(meta, q) if meta else math.nan
    out["meta_loss"] = meta.loss if meta else math.nan
    b = theory.phase_boundaries(task, hyper)  # cached per (task, hyper)
    lin = pt["activation"] == "linear"
    out["second_order"] = b.second_order if lin else math.nan
    out["crossover"] = b.crossover if lin else math.nan
    out["first_order"] = math.nan if lin else b.first_order
    out["spinodal_lower"] = math.nan if lin else b.spinodals[0]
    out["spinodal_upper"] = math.nan if lin else b.spinodals[1]
    return {k: ((), np.float64(v)) for k, v in out.items()}


def model_at_level(opts, pt, task, hyper):
    """The NumPyro model of ``opts["level"]`` (reduced, kernel or network) with its arguments and
    keyword arguments at the point ``pt`` (activation, P, seed): :func:`model_with_data`, the
    dataset drawn from the seed. A sweep's batch size covers its whole P grid: at P <= batch_size
    the full batch is used."""
    return model_with_data(
        opts["level"], task, hyper, pt["P"], pt["activation"], seed=pt["seed"],
        d_model=opts.get("d_model"), include_logdet=opts.get("include_logdet", False),
        batch_size=opts.get("batch_size"),
    )  # fmt: skip


_STATS = {"mean": "mean", "sd": "sd", "mcse": "mcse_mean", "r_hat": "r_hat", "ess": "ess_bulk"}


def _summary_point(idata, activation):
    """Posterior summaries of the order parameters (linear: of the Z2-folded draws)."""
    from bayes_attn.analysis.diagnostics import diagnose, fold_posterior

    out = {f"{q}_{stat}": math.nan for q in ORDER for stat in _STATS}
    names = order_parameters(activation)
    names = [q for q in names if q in idata.posterior]
    div = math.nan
    if names:
        d = diagnose(fold_posterior(idata), var_names=names)
        for q in names:
            out.update({f"{q}_{stat}": float(d.table.loc[q, col]) for stat, col in _STATS.items()})
        if "sample_stats" in az.groups(idata) and "diverging" in idata.sample_stats:
            div = float(d.divergences)
    out["divergences"] = div
    return {k: ((), np.float64(v)) for k, v in out.items()}


def _sampled(sampler, cfg, pt, task, hyper, **options):
    """Run ``sampler`` (run_nuts or run_sgld) at the point with the sweep's chain settings."""
    o = cfg.options
    model, args, kw = model_at_level(o, pt, task, hyper)
    return sampler(
        model,
        model_args=args,
        model_kwargs=kw,
        num_chains=o["num_chains"],
        num_warmup=o["num_warmup"],
        num_samples=o["num_samples"],
        seed=pt["seed"],
        progress_bar=False,
        **options,
    )


def _nuts_point(cfg, pt, task, hyper):
    from bayes_attn.inference import run_nuts

    return _summary_point(_sampled(run_nuts, cfg, pt, task, hyper), pt["activation"])


def _sgld_point(cfg, pt, task, hyper):
    from bayes_attn.inference import run_sgld

    idata = _sampled(run_sgld, cfg, pt, task, hyper, step_size=cfg.options["step_size"])
    out = _summary_point(idata, pt["activation"])
    out.pop("divergences")
    return out


def _pad_attention(A, L_max):
    out = np.full(A.shape[:-2] + (L_max, L_max), np.nan)
    out[..., : A.shape[-2], : A.shape[-1]] = A
    return out


def _adam_point(cfg, pt, task, hyper):
    from bayes_attn.analysis import classify_minima, final_state
    from bayes_attn.inference import train_adam
    from bayes_attn.inference.adam import warmup_steps_for
    from bayes_attn.theory import global_saddle

    o, act, P = cfg.options, pt["activation"], pt["P"]
    soft = act == "softmax"
    ds = train_adam(
        task,
        hyper,
        act,
        o["d_model"],
        P,
        members=o["members"],
        seed=pt["seed"],
        num_test=o["num_test"],
        lr=o["lr"],
        warmup_steps=warmup_steps_for(act, o["max_steps"], o["warmup_fraction"]),
        warmup_init=o["lr"] * o["warmup_init"],
        max_steps=o["max_steps"],
        patience=o["patience"],
        progress_bar=False,
    )
    ds = classify_minima(ds, theory_loss=global_saddle(task, hyper, P, act).loss, rtol=o["rtol"])
    fin = final_state(ds)
    m = ("member",)
    out = {q: (m, np.full(o["members"], np.nan)) for q in ORDER}
    names = order_parameters("softmax" if soft else "linear")
    out[names[0]], out[names[1]] = (m, fin["q1"]), (m, fin["qG"])
    out.update(
        train_loss=(m, fin["train_loss"]),
        test_loss=(m, fin["test_loss"]),
        global_min=(m, np.asarray(ds.global_min, float)),
        steps=(m, fin["steps"].astype(float)),
        A_bar=(m + ("query", "key"), _pad_attention(fin["A_bar"], max(cfg.L))),
    )
    return out


def _protocol_point(cfg, pt, task, hyper, index):
    from bayes_attn.experiments.protocol import ProtocolConfig, protocol_point

    pc = ProtocolConfig(
        L=pt["L"],
        V=pt["V"],
        Ps=cfg.P,
        activations=cfg.activation,
        seed=pt["seed"],
        **{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.options.items()},
    )
    i, j = index[GRID.index("activation")], index[GRID.index("P")]
    values, _ = protocol_point(pc, hyper, i, j)
    out = {}
    for k, v in values.items():
        v = np.asarray(v, dtype=float)
        if k == "adam_A_bar":
            out[k] = (("member", "query", "key"), _pad_attention(v, max(cfg.L)))
        else:
            out[k] = (("member",) if v.ndim == 1 else (), v)
    return out


_POINT = {
    "theory": _theory_point,
    "nuts": _nuts_point,
    "sgld": _sgld_point,
    "adam": _adam_point,
}


def compute_point(cfg: SweepConfig, index: tuple, point: dict) -> dict:
    """The results at one grid point: name -> (extra dims, array)."""
    task = CopyTask(point["L"], point["V"])
    hyper = Hyper(**cfg.hyper)
    if cfg.kind == "protocol":
        return _protocol_point(cfg, point, task, hyper, index)
    return _POINT[cfg.kind](cfg, point, task, hyper)


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


_SAMPLER = {"theory": "none (theory)", "nuts": "nuts", "sgld": "sgld", "adam": "adam"}
_SAMPLER["protocol"] = "adam, then sgld"


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
    warmup = o.get("num_warmup", o.get("sgld_warmup", 0))
    draws = o.get("num_samples", o.get("sgld_samples", 1))
    settings = {k: v for k, v in o.items() if not isinstance(v, list | dict)}
    rec = RunRecord(_SAMPLER[cfg.kind], cfg.seed[0], chains, warmup, draws, settings=settings)
    attrs = rec.attrs()
    attrs["seed"] = _numbers(cfg.seed)  # the grid's seeds
    attrs["level"] = o.get("level", "reduced" if cfg.kind == "theory" else "network")
    for k, v in o.items():
        if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v):
            attrs[k] = _numbers(v)
        elif isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            attrs[k] = ", ".join(v)
    attrs.update(cfg.hyper)
    return attrs


def _describe(name: str) -> dict:
    base = name
    for prefix in ("adam_", "sgld_", "theory_", "level1_"):
        base = base.removeprefix(prefix)
    base = base.split("_")[0] if base.split("_")[0] in ORDER else base
    units, text = DESCRIPTIONS.get(base, ("1", name.replace("_", " ")))
    if base in ("c1", "cG") and base != name and not name.startswith("theory_"):
        text += f"; {_FOLDED}"
    return {"units": units, "description": text if base == name else f"{name}: {text}"}


_FOLDED = (
    "folded draw by draw onto the Z2 image c1 + cG >= 0 (the images (c1, cG) and (-c1, -cG) "
    "have equal posterior mass) before it was summarised"
)


def _store(ds: xr.Dataset, cfg: SweepConfig, index: tuple, result: dict) -> xr.Dataset:
    for name, (dims, value) in result.items():
        value = np.asarray(value, dtype=float)
        if name not in ds:
            shape = cfg.shape + value.shape
            extra = {d: np.arange(n) for d, n in zip(dims, value.shape, strict=True)}
            da = xr.DataArray(np.full(shape, np.nan), dims=GRID + tuple(dims))
            ds[name] = da.assign_coords(extra)
            ds[name].attrs.update(_describe(name))
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


def _check_same(ds: xr.Dataset, cfg: SweepConfig, path: Path) -> None:
    theirs = json.loads(ds.attrs["config"])
    ours = json.loads(cfg.to_json())
    if theirs != ours:
        diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        raise SweepFileError(
            f"{path} holds a sweep with a different config (differs in: {', '.join(diff)}); "
            "use another output path, or delete the file to start over"
        )


def run_sweep(
    cfg: SweepConfig,
    path,
    *,
    progress: bool = True,
    process_id: int = 0,
    num_processes: int = 1,
) -> xr.Dataset:
    """Run (or resume) the sweep, persisting every finished point to ``path``.

    Parameters
    ----------
    cfg : SweepConfig
    path : str or Path
        The NetCDF file. If it exists it must hold the same config; its finished points are kept.
    progress : bool
        A progress bar over the points (to stderr).
    process_id, num_processes : int
        Work on every ``num_processes``-th point starting at ``process_id`` (one process of a
        multi-host run; merge the files with :func:`merge_sweeps`).

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
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        stale.unlink()  # a write that was killed half-way
    if path.exists():
        ds = load_sweep(path)
        _check_same(ds, cfg, path)
    else:
        ds = _empty(cfg)
    todo = [
        (idx, pt)
        for k, (idx, pt) in enumerate(cfg.points())
        if k % num_processes == process_id and not ds["done"].values[idx]
    ]
    mine = len(range(process_id, math.prod(cfg.shape), num_processes))  # points of this process
    if len(todo) < mine:
        log.info("resuming %s: %d of %d points already done", path, mine - len(todo), mine)
    with tqdm(total=mine, initial=mine - len(todo), disable=not progress, desc=cfg.kind) as bar:
        for idx, pt in todo:
            bar.set_postfix({d: pt[d] for d in GRID if len(getattr(cfg, d)) > 1})
            ds = _store(ds, cfg, idx, compute_point(cfg, idx, pt))
            write_atomic(ds, path)
            bar.update()
    if not todo and not path.exists():
        write_atomic(ds, path)
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
        _check_same(ds, cfg, p)
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
