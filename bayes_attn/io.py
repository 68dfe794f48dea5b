"""NetCDF I/O shared by every layer: atomic writes, and the one merge of disjoint shares.

A kill at any moment leaves the old file or the new one (:func:`write_atomic`). Work split
across processes (sweeps, ensembles, per-process files) comes back together through
:func:`concat_disjoint`, which refuses overlaps and, given what to expect, gaps.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["concat_disjoint", "merge_netcdf", "write_atomic"]


def write_atomic(ds, path) -> None:
    """Write ``ds`` (an ``xarray.Dataset``, or an ArviZ result written by
    :func:`bayes_attn._arviz.to_netcdf`) to ``path`` (NetCDF, h5netcdf) through a temporary file
    and ``os.replace``: a reader, or a kill at any moment, sees the old file or the new one, never
    a torn one. The only atomic write of the package."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if isinstance(ds, xr.Dataset):
            ds.to_netcdf(tmp, engine="h5netcdf")
        else:
            from bayes_attn import _arviz as az

            az.to_netcdf(ds, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def concat_disjoint(parts, dim: str, *, expected=None, names=None) -> xr.Dataset:
    """Concatenate datasets along ``dim``, sorted by its coordinate.

    Raises if a value of ``dim`` appears in two parts (overlap), or, with ``expected`` (all values
    the result should hold), if one is missing or unexpected (gap). Other dims are joined (outer
    join, NaN where a part lacks a coordinate value); attributes that differ are dropped.
    ``names`` labels the parts in the errors (default: their index).
    """
    parts = list(parts)
    if not parts:
        raise ValueError("parts must hold at least one dataset")
    names = [str(n) for n in (names if names is not None else range(len(parts)))]
    for name, part in zip(names, parts, strict=True):
        if dim not in part.coords:
            raise ValueError(f"{name} has no coordinate {dim!r} (dims: {dict(part.sizes)})")
    values = np.concatenate([p[dim].values for p in parts])
    uniq, counts = np.unique(values, return_counts=True)
    if np.any(counts > 1):
        twice = uniq[counts > 1].tolist()
        owners = {
            str(v): [n for n, part in zip(names, parts, strict=True) if v in part[dim].values]
            for v in twice
        }
        raise ValueError(f"overlap: {dim} values {twice} appear in more than one part: {owners}")
    if expected is not None:
        expected = np.unique(np.asarray(expected))
        missing = np.setdiff1d(expected, uniq).tolist()
        extra = np.setdiff1d(uniq, expected).tolist()
        if missing or extra:
            raise ValueError(
                f"gap: {dim} values missing from the parts: {missing}; not expected: {extra}"
            )
    merged = xr.concat(
        parts,
        dim=dim,
        data_vars="minimal",
        coords="minimal",
        compat="equals",
        join="outer",
        combine_attrs="drop_conflicts",
    )
    return merged.sortby(dim)


def merge_netcdf(
    paths: Sequence[str | os.PathLike],
    dim: str,
    out: str | os.PathLike | None = None,
    *,
    expected: Sequence | None = None,
) -> xr.Dataset:
    """Concatenate per-process NetCDF files along ``dim`` (:func:`concat_disjoint`, the files
    named in its errors). Writes ``out`` (atomically, its folder created) when given and returns
    the merged dataset."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("paths must name at least one NetCDF file")
    parts = []
    for path in paths:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            parts.append(ds.load())
    merged = concat_disjoint(parts, dim, expected=expected, names=paths)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(merged, out)
    return merged
