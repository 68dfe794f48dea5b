"""Sweeps: every kind stores what it computed, a killed sweep resumes to the same file, and a file
from another config (or a damaged one) is refused."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr

import bayes_attn as ba
from bayes_attn import theory
from bayes_attn.experiments.protocol import ProtocolConfig, run_protocol
from bayes_attn.experiments.sweep import SweepConfig, SweepFileError, load_sweep, run_sweep

# three reduced-model NUTS points, ~1-2 s each (a fresh compile per point): slow enough to be
# killed between two points
NUTS = dict(
    kind="nuts",
    P=(20.0, 100.0, 800.0),
    activation=("linear",),
    options=dict(num_chains=1, num_warmup=50, num_samples=50),
)


def test_theory_sweep_matches_saddles(tmp_path):
    cfg = SweepConfig(kind="theory", P=(100.0, 2000.0), activation=("linear", "softmax"))
    ds = run_sweep(cfg, tmp_path / "t.nc", progress=False)
    assert ds["done"].all()
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    for P in cfg.P:
        lin = theory.global_saddle(task, hyper, P, "linear")
        soft = theory.global_saddle(task, hyper, P, "softmax")
        pt = ds.sel(L=25, V=5, seed=0, P=P)
        assert float(pt.cG.sel(activation="linear")) == pytest.approx(lin.cG, abs=1e-10)
        assert float(pt.aG.sel(activation="softmax")) == pytest.approx(soft.aG, abs=1e-10)
        assert np.isnan(float(pt.aG.sel(activation="linear")))
    b = theory.phase_boundaries(task, hyper)
    assert float(ds.first_order.sel(activation="softmax").max()) == pytest.approx(b.first_order)
    # units and descriptions travel with the file; the config is stored as JSON
    back = load_sweep(tmp_path / "t.nc")
    assert back.loss.attrs["units"] == "1" and "saddle" in back.loss.attrs["description"]
    assert SweepConfig.from_json(back.attrs["config"]) == cfg
    xr.testing.assert_identical(back, ds)


def test_killed_sweep_resumes_to_the_same_file(tmp_path):
    cfg = SweepConfig(**NUTS)
    path = tmp_path / "killed.nc"
    script = (
        "import sys; from bayes_attn.experiments.sweep import SweepConfig, run_sweep; "
        "run_sweep(SweepConfig.from_json(sys.argv[1]), sys.argv[2], progress=False)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, cfg.to_json(), str(path)])
    deadline = time.monotonic() + 240
    done = 0
    while done == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        if path.exists():
            try:
                done = int(load_sweep(path)["done"].sum())
            except SweepFileError:  # never happens with atomic writes; fail loudly below
                raise
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 1 <= done < 3, f"the kill came after {done} of 3 points"
    resumed = run_sweep(cfg, path, progress=False)
    fresh = run_sweep(cfg, tmp_path / "fresh.nc", progress=False)
    assert resumed["done"].all()
    # identical but for the time each file was created (provenance, not a result)
    for a, b in ((load_sweep(path), load_sweep(tmp_path / "fresh.nc")), (resumed, fresh)):
        assert a.attrs.pop("created") <= b.attrs.pop("created")
        xr.testing.assert_identical(a, b)
    assert not list(tmp_path.glob(".*.tmp-*"))  # no temporary file left behind


def test_other_config_or_damaged_file_is_refused(tmp_path):
    path = tmp_path / "s.nc"
    cfg = SweepConfig(kind="theory", P=(100.0,), activation=("linear",))
    run_sweep(cfg, path, progress=False)
    other = SweepConfig(kind="theory", P=(100.0, 200.0), activation=("linear",))
    with pytest.raises(SweepFileError, match="different config.*P"):
        run_sweep(other, path, progress=False)
    path.write_bytes(b"not a netcdf file")
    with pytest.raises(SweepFileError, match="cannot read"):
        run_sweep(cfg, path, progress=False)


def test_bad_configs_name_the_setting():
    with pytest.raises(ValueError, match="kind"):
        SweepConfig(kind="bogus", P=(1,))
    with pytest.raises(ValueError, match="L"):
        SweepConfig(kind="theory", P=(1,), L=(1,))
    with pytest.raises(ValueError, match="P"):
        SweepConfig(kind="theory", P=(-3.0,))
    with pytest.raises(ValueError, match="activation"):
        SweepConfig(kind="theory", P=(1,), activation=("relu",))
    with pytest.raises(ValueError, match="num_chainz"):
        SweepConfig(kind="nuts", P=(1,), options={"num_chainz": 2})
    with pytest.raises(ValueError, match="sigma2"):
        SweepConfig(kind="theory", P=(1,), hyper={"sigma2": 0.0})
    with pytest.raises(ValueError, match="level"):
        SweepConfig(kind="nuts", P=(1,), options={"level": "deep"})


def test_protocol_sweep_equals_run_protocol(tmp_path):
    tiny = dict(members=2, num_test=10, d_model=8, max_steps=100, sgld_warmup=5, sgld_samples=5)
    tiny.update(level1=False, chunk=50)
    cfg = SweepConfig(kind="protocol", P=(30, 100), L=(6,), V=(3,), activation=("linear",))
    cfg = SweepConfig(**{**cfg.__dict__, "options": tiny})
    ds = run_sweep(cfg, tmp_path / "p.nc", progress=False)
    ref, _ = run_protocol(
        ProtocolConfig(L=6, V=3, Ps=(30, 100), activations=("linear",), **tiny),
        ba.Hyper.paper(),
        progress=False,
    )
    got = ds.sel(L=6, V=3, seed=0)
    for name in ("adam_c1", "adam_cG", "sgld_c1", "sgld_train_loss", "theory_cG"):
        np.testing.assert_allclose(got[name].values, ref[name].values, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(got.adam_A_bar.values, ref.adam_A_bar.values, rtol=1e-12)
