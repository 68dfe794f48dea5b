"""The data behind the paper's figures, from figure configs (``bayes_attn/configs/figures.py``).

A figure config is a plain dict (see that file): the figure to draw (``figure``), the sweeps it
needs (run resumably, shared between figures), and its theory grids and sampler settings. For each
figure, :func:`figure_data` runs what it needs (the sweeps, the theory grids, the samplers), saves
the data beside the PNG (NetCDF) and returns the arguments of its drawing function in
:mod:`bayes_attn.plotting.plots`; :func:`bayes_attn.plotting.figures.make_figures` draws them. The
task and the hyperparameters come from the config (:func:`preset`): those of its protocol sweep,
or its own ``task`` and ``hyper`` dicts, Table 1 by default.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import math
from pathlib import Path

import numpy as np
import xarray as xr

import bayes_attn
from bayes_attn import _arviz as az
from bayes_attn import algebra, theory
from bayes_attn.experiments.sweep import SweepConfig, run_sweep
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.tokens import check_uniform

log = logging.getLogger(__name__)


def find_config_file(path=None) -> Path:
    """The figure configs: ``path``, else the package's own ``bayes_attn/configs/figures.py``
    (it ships in the wheel)."""
    c = Path(path) if path is not None else Path(bayes_attn.__file__).resolve().parent / "configs"
    c = c / "figures.py" if path is None else c
    if not c.is_file():
        raise FileNotFoundError(f"no figure configs at {c}; pass --configs PATH")
    return c


def load_configs(path=None) -> dict:
    """The ``FIGURES`` dict (name -> config function) of a figure-config file."""
    path = find_config_file(path)
    spec = importlib.util.spec_from_file_location(f"bayes_attn_configs_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not isinstance(getattr(module, "FIGURES", None), dict):
        raise ValueError(f"{path} must define FIGURES, a dict of name -> config function")
    return module.FIGURES


class FigureContext:
    """What the figures of one run share: finished sweeps and theory grids, by name, in the
    folder ``out``."""

    def __init__(self, out: Path, progress: bool):
        self.out, self.progress = Path(out), progress
        self.sweeps: dict[str, tuple[SweepConfig, xr.Dataset]] = {}
        self.cache: dict = {}

    def sweep(self, name: str, cfg: SweepConfig) -> xr.Dataset:
        if name in self.sweeps:
            if self.sweeps[name][0] != cfg:
                raise ValueError(f"two figures name the sweep {name!r} with different configs")
            return self.sweeps[name][1]
        log.info("sweep %s -> %s", name, self.out / f"{name}.nc")
        ds = run_sweep(cfg, self.out / f"{name}.nc", progress=self.progress)
        self.sweeps[name] = (cfg, ds)
        return ds

    def theory(self, kind: str, activation: str, grid: dict, task, hyper):
        """Theory along P at the task's L (``curve``) or over (L, P) / (V, P) (``L``, ``V``)."""
        activation = str(activation)
        key = (kind, activation, tuple(grid["P"]), tuple(grid.get(kind, ())), task, hyper)
        if key not in self.cache:
            lo, hi, n = grid["P"]
            Ps = np.geomspace(lo, hi, int(n))
            if kind == "curve":
                ds = theory.phase_diagram(task, hyper, Ps, activation, L=[task.L], boundaries=False)
                ds = ds.isel(L=0)
            else:
                ds = theory.phase_diagram(task, hyper, Ps, activation, **{kind: list(grid[kind])})
            ds.to_netcdf(self.out / f"theory_{activation}_{kind}.nc", engine="h5netcdf")
            self.cache[key] = ds
        return self.cache[key]

    @staticmethod
    def boundaries(task, hyper):
        return theory.phase_boundaries(task, hyper)  # cached


def preset(spec) -> tuple[CopyTask, Hyper]:
    """The task and hyperparameters of a figure config: those of its protocol sweep (its first L
    and V, its token source and its ``hyper``), else the config's own ``task`` (L, V, optionally
    ``tokens``, a spec of :mod:`bayes_attn.tokens`) and ``hyper`` dicts, each defaulting to the
    paper's Table 1. A figure that draws the Level-2 theory refuses tokens that are not uniform
    (a ``ValueError`` naming ``tokens``)."""
    cfg = spec.get("sweeps", {}).get("protocol")
    if cfg is not None:
        return CopyTask(int(cfg.L[0]), int(cfg.V[0]), cfg.tokens), Hyper(**cfg.hyper)
    paper = Hyper.paper()
    task = CopyTask(**{"L": 25, "V": 5, **spec.get("task", {})})
    hyper = Hyper(**{**dataclasses.asdict(paper), **spec.get("hyper", {})})
    return task, hyper


def _one_point(ds: xr.Dataset) -> xr.Dataset:
    """A protocol sweep at its single (L, V, seed)."""
    for d in ("L", "V", "seed"):
        if ds.sizes[d] != 1:
            raise ValueError(f"the figure needs a protocol sweep at one {d}, got {ds.sizes[d]}")
    return ds.isel(L=0, V=0, seed=0)


def attention_and_loss(spec, ctx: FigureContext) -> dict:
    """Fig. 1: the protocol sweep, the theory's attention patterns, the theory curves."""
    proto = _one_point(ctx.sweep("protocol", spec["sweeps"]["protocol"]))
    L = int(proto.L)
    # for softmax the theory's (a1, aG) are the coefficients of the same J, G* pattern
    A = algebra.reduced_attention(proto.theory_c1.values, proto.theory_cG.values, L)
    attn = xr.DataArray(
        np.asarray(A),
        dims=("activation", "P", "query", "key"),
        coords={"activation": proto.activation, "P": proto.P},
    )
    task, hyper = preset(spec)
    curves = {
        a: ctx.theory("curve", a, spec["theory"], task, hyper) for a in proto.activation.values
    }
    return dict(
        proto=proto, attn=attn, curves=curves, show_P=spec.get("show_P", (20, 100, 300, 800))
    )


def transition(spec, ctx: FigureContext) -> dict:
    """Figs. 3 and 4: the protocol sweep, the theory along P and over (P, L) and (P, V), the
    boundaries and, for softmax, the critical end point of the first-order line in (P, L)
    (:func:`bayes_attn.theory.critical_end_point`)."""
    act = spec["activation"]
    cfg = spec["sweeps"]["protocol"]
    proto = _one_point(ctx.sweep("protocol", cfg))
    grid = spec["theory"]
    opts = cfg.options  # SweepConfig has filled in every default
    task, hyper = preset(spec)
    end = None
    if act == "softmax" and math.isfinite(ctx.boundaries(task, hyper).first_order):
        end = theory.critical_end_point(task, hyper)  # where the first-order line ends in (P, L)
    return dict(
        proto=proto,
        curve=ctx.theory("curve", act, grid, task, hyper),
        over_L=ctx.theory("L", act, grid, task, hyper),
        over_V=ctx.theory("V", act, grid, task, hyper),
        activation=act,
        boundaries=ctx.boundaries(task, hyper),
        networks=f"{opts['members']} networks of width {opts['d_model']}",
        critical_end=end,
    )


def _posterior_at(spec, ctx, task, hyper, act, k, P):
    """One posterior of the reduced model at P: NUTS for linear (folded onto one Z2 image only
    above the second-order P*, :func:`~bayes_attn.analysis.diagnostics.fold_ordered`: below it the
    posterior is one state, symmetric about the origin), SMC for softmax (which checkpoints after
    every tempering step beside its output, so a killed run resumes)."""
    from bayes_attn.analysis.diagnostics import fold_ordered
    from bayes_attn.inference import run_nuts, run_smc
    from bayes_attn.models import order_param_model

    args = (task, hyper, P, act)
    out = ctx.out / f"posterior_{act}_{k}.nc"
    if act == "softmax":
        ckpt = out.with_name(out.name + ".smc-checkpoint")
        idata = run_smc(order_param_model, model_args=args, seed=k, checkpoint=ckpt, **spec["smc"])
    else:
        idata = run_nuts(order_param_model, model_args=args, seed=k, progress=False, **spec["nuts"])
        idata = fold_ordered(idata)
    az.to_netcdf(idata, out)
    return idata


def posterior_panel(idata, var: str | None = None, refs=()) -> dict:
    """The data of one panel of the posterior figure: ``var`` (default: ``c1`` for linear
    attention, folded onto one Z2 image above the second-order P*,
    :func:`~bayes_attn.analysis.diagnostics.fold_ordered`; ``aG`` for softmax), its ``draws``,
    its ``phases`` (:func:`~bayes_attn.analysis.diagnostics.phase_summary`: each phase's weight,
    mean and interval, the draws split at :func:`bayes_attn.theory.modes.phase_boundary` where
    the run's P has two phases) and the reference lines ``refs`` ((value, label) pairs)."""
    from bayes_attn.analysis.diagnostics import fold_ordered, phase_summary

    act = idata.posterior.attrs.get("activation")
    if var is None:
        var = "c1" if act == "linear" else "aG"
    if var in ("c1", "cG") and {"c1", "cG"} <= set(idata.posterior.data_vars):
        idata = fold_ordered(idata)
    draws = np.asarray(idata.posterior[var].transpose("chain", "draw"))
    return dict(var=var, draws=draws, phases=phase_summary(idata, var),
                refs=[(float(v), str(w)) for v, w in refs])  # fmt: skip


def theory_refs(task, hyper, P, activation: str) -> list[tuple[float, str]]:
    """The reference lines of a posterior panel: the Level-2 minima at P, labelled. Linear: the
    global minimum's ``c1`` (on the image c1 + cG >= 0, as the folded draws); softmax: every
    minimum's ``aG`` (the weak- and strong-copy minima where both exist)."""
    found = theory.saddles(task, hyper, P, activation)
    if activation == "linear":
        return [(round(float(found[0].c1), 4), "theory: minimum of the action")]
    found = sorted(found, key=lambda s: s.aG)
    if len(found) == 1:
        return [(round(float(found[0].aG), 4), "theory: minimum of the action")]
    names = ["weak-copy minimum", "strong-copy minimum"] if len(found) == 2 else []
    names = names or [f"minimum {i + 1}" for i in range(len(found))]
    return [(round(float(s.aG), 4), f"theory: {n}") for s, n in zip(found, names, strict=True)]


def posterior(spec, ctx: FigureContext) -> dict:
    """The posterior of the copy order parameter across each transition: ``panels``, activation
    -> one dict per column with ``boundary``, ``factor`` and ``P`` (at ``factor`` times the
    boundary) and the panel data of :func:`posterior_panel` (folded ``c1`` for linear, ``aG``
    for softmax, each phase's weight, mean and interval, the theory's minima as references)."""
    task, hyper = preset(spec)
    b = ctx.boundaries(task, hyper)
    panels = {}
    for act, where in spec["at"].items():
        panels[act] = []
        for k, (boundary, factor) in enumerate(where):
            P = float(getattr(b, boundary)) * factor
            if not math.isfinite(P):
                raise ValueError(f"the {boundary} boundary is not finite at this preset")
            idata = _posterior_at(spec, ctx, task, hyper, act, k, P)
            refs = theory_refs(task, hyper, P, act)
            panel = posterior_panel(idata, refs=refs)
            panels[act].append(dict(boundary=boundary, factor=factor, P=P, **panel))
    return dict(panels=panels)


def phase_weights(spec, ctx: FigureContext) -> dict:
    """The weight of the strong-copy softmax phase against P around the first-order P*."""
    from bayes_attn.theory.modes import phase_weights as weights
    from bayes_attn.theory.modes import weight_crossing

    task, hyper = preset(spec)
    b = ctx.boundaries(task, hyper)
    span = spec["span"]
    Ps = np.linspace(b.first_order * (1 - span), b.first_order * (1 + span), spec["num"])
    w = weights(task, hyper, Ps)
    w.attrs.setdefault("chi", hyper.chi)
    w.to_netcdf(ctx.out / "phase_weights.nc", engine="h5netcdf")
    return dict(w=w, crossing=weight_crossing(task, hyper), boundaries=b)


#: figure -> the function that computes its data
DATA = {
    "attention_and_loss": attention_and_loss,
    "transition": transition,
    "posterior": posterior,
    "phase_weights": phase_weights,
}


def figure_data(name: str, spec: dict, ctx: FigureContext) -> dict:
    """The data of the figure ``name`` configured by ``spec`` (computed, saved in ``ctx.out``)."""
    if spec.get("figure") not in DATA:
        raise ValueError(f"figure {name}: unknown builder {spec.get('figure')!r}")
    # every figure draws the reduced theory beside its data: refuse other tokens before any work
    check_uniform(preset(spec)[0].tokens, f"the reduced (Level-2) theory that figure {name} draws")
    return DATA[spec["figure"]](spec, ctx)
