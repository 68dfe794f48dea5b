"""A study's result file read back, as the drawing scripts of ``docs/scripts/`` read it: the file
of a ``bayes-attn sweep`` (or an older file of the same variables) with its single-valued grid
axes dropped (:func:`open_study`), its sweep's settings (:func:`options`, :func:`setting`) and
preset (:func:`study_preset`), the loss-filtered ensemble mean of a protocol file
(:func:`filtered`), and the umbrella profiles a sweep wrote to its ``profiles`` folder
(:func:`profile_reports`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import xarray as xr


def open_study(path, keep=()) -> xr.Dataset:
    """The file at ``path`` in memory, its axes of one value (L, V, seed) squeezed out unless
    named in ``keep``."""
    ds = xr.load_dataset(path, engine="h5netcdf")
    return ds.squeeze([d for d in ("L", "V", "seed") if d in ds.dims
                       and ds.sizes[d] == 1 and d not in keep])  # fmt: skip


def options(ds) -> dict:
    """The settings of the sweep that wrote ``ds`` (its config's options); {} for other files."""
    return json.loads(ds.attrs["config"])["options"] if "config" in ds.attrs else {}


def setting(ds, name, default=None):
    """A setting of the run: the sweep's option, else the file's attr of that name."""
    return options(ds).get(name, ds.attrs.get(name, default))


def study_preset(ds):
    """(task, hyper) of the run that wrote ``ds``: a sweep's config (its first L and V), else the
    preset in the attrs (:func:`bayes_attn.task.preset_from_attrs`)."""
    from bayes_attn.task import CopyTask, Hyper, preset_from_attrs

    if "config" not in ds.attrs:
        return preset_from_attrs(ds.attrs)
    cfg = json.loads(ds.attrs["config"])
    return CopyTask(cfg["L"][0], cfg["V"][0], cfg["tokens"]), Hyper(**cfg["hyper"])


def filtered(ds, name, keep=None):
    """(mean, sd, count) over ``member`` of ``ds[name]`` on the members that pass the loss filter
    (``keep``, default the file's ``global_min``, as the protocol recorded it with
    :func:`bayes_attn.analysis.ensembles.classify_minima`)."""
    keep = ds.global_min > 0.5 if keep is None else keep
    x = ds[name].where(keep)
    return x.mean("member"), x.std("member"), keep.sum("member")


#: a profile's file in a sweep's ``profiles`` folder: the ``landscape`` kind's
#: ``{level}_P{P}_d{seed}.nc`` (its site aG) and ``induction_profile``'s ``kernel_P{P}_{cv}_d{seed}.nc``
_PROFILE = re.compile(r"kernel_P(?P<P>[\d.]+)(?:_(?P<cv>[a-z]\w*?))?_d(?P<seed>\d+)\.nc")


def profile_reports(folder, seed: int = 0, divides=None) -> dict:
    """``{cv: {P: landscape report}}`` of the kernel-level profiles of dataset ``seed`` in a
    sweep's ``profiles`` folder (files of other widths, ``_g{width}``, are left out), each read by
    :func:`~bayes_attn.analysis.free_energy.landscape_report`, its ``delta_F`` across the fixed
    divide ``divides[cv]`` where given (a dict; by default the highest point of F between its
    outer minima); {} for a folder with none."""
    from bayes_attn import _arviz as az
    from bayes_attn.analysis.free_energy import landscape_report

    panels = {}
    for f in sorted(Path(folder).glob("kernel_P*.nc")):
        m = _PROFILE.fullmatch(f.name)
        if m and int(m["seed"]) == seed:
            cv = m["cv"] or "aG"
            report = landscape_report(az.from_netcdf(f), divide=(divides or {}).get(cv))
            panels.setdefault(cv, {})[int(float(m["P"]))] = report
    return panels
