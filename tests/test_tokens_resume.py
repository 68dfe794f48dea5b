"""An interrupted ``tokens`` sweep point loses only the source it was computing (issue 42 part 3,
:func:`bayes_attn.experiments.tokens_study.per_source`): a rerun reads the finished sources back
and ends with the file of an uninterrupted run; a changed setting computes them again.

The quick config of ``tokens_zipf.toml`` (two sources), its linear point only (the second-order
point, seconds; the softmax point is minutes at quick size and shares the same ``per_source``)."""

from pathlib import Path

import pytest
import xarray as xr

import bayes_attn
from bayes_attn.experiments import tokens_study as ts
from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep

CONFIGS = Path(bayes_attn.__file__).parent / "configs"


class Stop(Exception):
    """The interrupt: raised from the second source's evaluation."""


def _cfg(**options):
    d = read_sweep_table(CONFIGS / "tokens_zipf.toml", quick=True)
    d["activation"] = ["linear"]
    d["options"] = {**d["options"], **options}
    return SweepConfig.from_dict(d)


def _counting(monkeypatch, stop_at=None):
    """Count the sources evaluated; raise :class:`Stop` at evaluation ``stop_at`` (1-based)."""
    calls = []
    inner = ts.second_order_point

    def evaluate(*args, **kwargs):
        calls.append(1)
        if len(calls) == stop_at:
            raise Stop
        return inner(*args, **kwargs)

    monkeypatch.setattr(ts, "second_order_point", evaluate)
    return calls


def _without_created(ds):
    ds = ds.copy()
    ds.attrs.pop("created", None)
    return ds


def test_interrupted_point_resumes_per_source(tmp_path, monkeypatch):
    cfg = _cfg()
    assert len(cfg.options["sources"]) == 2
    whole = run_sweep(cfg, tmp_path / "whole.nc", progress=False)

    out = tmp_path / "t.nc"
    calls = _counting(monkeypatch, stop_at=2)
    with pytest.raises(Stop):
        run_sweep(cfg, out, progress=False)
    saved = list((tmp_path / "t.nc.points").rglob("source-*.nc"))
    assert len(saved) == 1  # the first source, finished before the interrupt

    monkeypatch.undo()
    calls = _counting(monkeypatch)
    run_sweep(cfg, out, progress=False)
    assert len(calls) == 1  # the second source only
    assert not (tmp_path / "t.nc.points").exists()  # removed once the point is stored
    xr.testing.assert_identical(
        _without_created(load_sweep(out)), _without_created(load_sweep(tmp_path / "whole.nc"))
    )
    xr.testing.assert_identical(_without_created(load_sweep(out)), _without_created(whole))


def test_changed_setting_does_not_reuse_a_saved_source(tmp_path, monkeypatch):
    out = tmp_path / "t.nc"
    calls = _counting(monkeypatch, stop_at=2)
    with pytest.raises(Stop):
        run_sweep(_cfg(), out, progress=False)
    out.unlink()  # the file of the old config (a rerun with another config would be refused)
    monkeypatch.undo()
    calls = _counting(monkeypatch)
    changed = run_sweep(_cfg(rtol=0.02), out, progress=False)
    assert len(calls) == 2  # the first source's saved result was made with rtol = 0.05
    assert changed["done"].all()
    stale = list((tmp_path / "t.nc.points").rglob("source-*.nc"))
    assert stale == []  # the point's folder went with the point
