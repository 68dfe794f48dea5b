"""What the drawing scripts share: a study's result file read back (a sweep file of ``bayes-attn
sweep``, or an older file of the same variables), with its single-valued grid axes dropped; its
settings and preset; pyplot on Agg; the loss-filtered ensemble mean of a protocol file."""

import json

import xarray as xr


def open_study(path, keep=()) -> xr.Dataset:
    """The file at ``path`` in memory, its axes of one value (L, V, seed, ...) squeezed out
    unless named in ``keep``."""
    ds = xr.load_dataset(path, engine="h5netcdf")
    return ds.squeeze([d for d in ("L", "V", "seed") if d in ds.dims
                       and ds.sizes[d] == 1 and d not in keep])  # fmt: skip


def options(ds) -> dict:
    """The settings of the sweep that wrote ``ds`` (its config's options); {} for other files."""
    return json.loads(ds.attrs["config"])["options"] if "config" in ds.attrs else {}


def setting(ds, name, default=None):
    """A setting of the run: the sweep's option, else the file's attr of that name."""
    return options(ds).get(name, ds.attrs.get(name, default))


def preset(ds):
    """(task, hyper) of the run that wrote ``ds``: a sweep's config (its first L and V), else the
    preset in the attrs (:func:`bayes_attn.task.preset_from_attrs`)."""
    from bayes_attn.task import CopyTask, Hyper, preset_from_attrs

    if "config" not in ds.attrs:
        return preset_from_attrs(ds.attrs)
    cfg = json.loads(ds.attrs["config"])
    return CopyTask(cfg["L"][0], cfg["V"][0], cfg["tokens"]), Hyper(**cfg["hyper"])


def pyplot():
    """matplotlib's pyplot on the Agg backend (the scripts write files, never open windows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def filtered(ds, name, keep=None):
    """(mean, sd, count) over ``member`` of ``ds[name]`` on the members that pass the loss filter
    (``keep``, default the file's ``global_min``, as the protocol recorded it)."""
    keep = ds.global_min > 0.5 if keep is None else keep
    x = ds[name].where(keep)
    return x.mean("member"), x.std("member"), keep.sum("member")
