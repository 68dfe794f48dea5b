"""Sweeps: every kind stores what it computed, a killed sweep resumes to the same file, a file
from another config (or a damaged one) is refused, the same grid in another order is accepted, and
two processes on one file share its points."""

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr

import bayes_attn as ba
from bayes_attn import theory
from bayes_attn.experiments.protocol import PAPER_PS, ProtocolConfig, run_protocol
from bayes_attn.experiments.sweep import (
    SweepConfig,
    SweepFileError,
    load_sweep,
    protocol_sweep,
    run_sweep,
)

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


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
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


@pytest.mark.slow  # two protocol runs (~22 s on CI); the killed-and-resumed sweep above stays
def test_protocol_sweep_equals_run_protocol(tmp_path):
    tiny = dict(members=2, num_test=10, d_model=8, max_steps=100, sgld_warmup=5, sgld_samples=5)
    tiny.update(level1=False, chunk=50)
    cfg = SweepConfig(kind="protocol", P=(30, 100), L=(6,), V=(3,), activation=("linear",))
    cfg = SweepConfig(**{**cfg.__dict__, "options": tiny})
    ds = run_sweep(cfg, tmp_path / "p.nc", progress=False)
    ref, _ = run_protocol(
        ProtocolConfig.of(L=6, V=3, Ps=(30, 100), activations=("linear",), **tiny),
        ba.Hyper.paper(),
        progress=False,
    )
    got = ds.sel(L=6, V=3, seed=0)
    for name in ("adam_c1", "adam_cG", "sgld_c1", "sgld_train_loss", "theory_cG"):
        np.testing.assert_allclose(got[name].values, ref[name].values, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(got.adam_A_bar.values, ref.adam_A_bar.values, rtol=1e-12)


# --------------------------------------------------------------------------------------------------
# Several processes on one file, the grid in another order, the edges of a config

SHARED = (
    "import os, pathlib, sys, time\n"
    "import numpy as np\n"
    "import bayes_attn.experiments.sweep as sweep\n"
    "calls, compute = [], sweep.compute_point\n"
    "def point(cfg, idx, pt):\n"
    "    calls.append(idx)\n"
    "    if sys.argv[3] == 'fake':  # a point that takes a while and costs nothing\n"
    "        time.sleep(0.5)\n"
    "        return {'x': ((), np.float64(pt['P']))}\n"
    "    return compute(cfg, idx, pt)\n"
    "sweep.compute_point = point\n"
    "start = pathlib.Path(sys.argv[4])  # both processes begin together\n"
    "(start / str(os.getpid())).touch()\n"
    "while len(list(start.iterdir())) < 2:\n"
    "    time.sleep(0.05)\n"
    "sweep.run_sweep(sweep.SweepConfig.from_json(sys.argv[1]), sys.argv[2], progress=False,\n"
    "                poll=0.2)\n"
    "print(len(calls))\n"
)


def _two_processes_on_one_file(cfg, path, compute):
    """Run two processes of the sweep ``cfg`` on ``path`` at once; how many points each one
    computed."""
    start = path.parent / "started"
    start.mkdir()
    argv = [sys.executable, "-c", SHARED, cfg.to_json(), str(path), compute, str(start)]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    shutil.rmtree(start)
    return [int(out.split()[-1]) for out, _ in outs]


def _equal_but_for_creation(a, b):
    for ds in (a, b):
        ds.attrs.pop("created")
    xr.testing.assert_identical(a, b)


def test_two_processes_on_one_file_share_its_points(tmp_path, monkeypatch):
    """Two processes started on the same file claim its points one by one: every point is
    computed once (the counts add up to the grid), both take part (each point takes 0.5 s, long
    after both have started), nothing is left beside the file, and it equals a single run's.
    The points are stand-ins that sleep; the slow test below runs the theory."""
    import bayes_attn.experiments.sweep as sweep

    cfg = SweepConfig(kind="theory", P=tuple(float(P) for P in range(50, 650, 50)),
                      activation=("linear",))  # fmt: skip
    counts = _two_processes_on_one_file(cfg, tmp_path / "shared.nc", "fake")
    assert sum(counts) == 12 and min(counts) >= 1, counts
    fake = lambda cfg, idx, pt: {"x": ((), np.float64(pt["P"]))}  # noqa: E731
    monkeypatch.setattr(sweep, "compute_point", fake)
    single = run_sweep(cfg, tmp_path / "single.nc", progress=False)
    _equal_but_for_creation(load_sweep(tmp_path / "shared.nc"), single)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.nc", "single.nc"]


@pytest.mark.slow
def test_two_theory_processes_on_one_file_equal_one(tmp_path):
    """The same with the theory at each point (minutes: each process compiles the saddles)."""
    cfg = SweepConfig(kind="theory", P=(50.0, 100.0, 200.0, 400.0, 800.0, 1600.0),
                      activation=("linear",))  # fmt: skip
    counts = _two_processes_on_one_file(cfg, tmp_path / "shared.nc", "theory")
    assert sum(counts) == 6, counts
    single = run_sweep(cfg, tmp_path / "single.nc", progress=False)
    _equal_but_for_creation(load_sweep(tmp_path / "shared.nc"), single)


def test_the_same_grid_in_another_order_is_the_same_sweep(tmp_path, monkeypatch):
    """P listed as 100, 50 after 50, 100: the file is resumed (nothing computed again) and keeps
    its order; another grid is still refused."""
    import bayes_attn.experiments.sweep as sweep

    path = tmp_path / "s.nc"
    first = run_sweep(SweepConfig(kind="theory", P=(50.0, 100.0), activation=("linear",)), path,
                      progress=False)  # fmt: skip
    monkeypatch.setattr(sweep, "compute_point", lambda *a: pytest.fail("computed again"))
    again = run_sweep(SweepConfig(kind="theory", P=(100.0, 50.0), activation=("linear",)), path,
                      progress=False)  # fmt: skip
    xr.testing.assert_identical(again, first)
    assert again.P.values.tolist() == [50.0, 100.0]
    with pytest.raises(SweepFileError, match="differs in: P"):
        run_sweep(SweepConfig(kind="theory", P=(100.0, 60.0), activation=("linear",)), path)


def test_progress_shows_every_number_in_one_format():
    from bayes_attn.experiments.sweep import _postfix

    cfg = SweepConfig(kind="theory", P=(50.0, 1600.0), L=(20, 25))
    assert _postfix(cfg, {"activation": "linear", "L": 25, "V": 5, "P": 1600.0, "seed": 0}) == {
        "activation": "linear", "L": "25", "P": "1600",
    }  # fmt: skip
    assert (
        _postfix(cfg, {"activation": "softmax", "L": 20, "V": 5, "P": 50.0, "seed": 0})["P"] == "50"
    )


def test_defaults_come_from_the_samplers_and_the_trainer():
    """The sweep's settings of a sampler or the trainer are read from their one home: the
    samplers' settings (NUTSSettings, SGLDSettings) and AdamSettings (the CLI reads them from
    here)."""
    import inspect

    from bayes_attn.analysis import classify_minima
    from bayes_attn.experiments.sweep import DEFAULTS
    from bayes_attn.inference.adam import WARMUP_FRACTION, WARMUP_START, AdamSettings
    from bayes_attn.inference.nuts import NUTSSettings
    from bayes_attn.inference.sgld import SGLDSettings

    def default(fn, name):
        return inspect.signature(fn).parameters[name].default

    for kind, settings in (("nuts", NUTSSettings()), ("sgld", SGLDSettings())):
        for name in ("num_chains", "num_warmup", "num_samples"):
            assert DEFAULTS[kind][name] == getattr(settings, name), (kind, name)
    assert DEFAULTS["sgld"]["step_size"] == SGLDSettings().step_size
    adam = AdamSettings()
    for name in ("lr", "max_steps", "patience", "num_test"):
        assert DEFAULTS["adam"][name] == getattr(adam, name), name
    assert DEFAULTS["adam"]["warmup_fraction"] == WARMUP_FRACTION
    assert DEFAULTS["adam"]["warmup_init"] == WARMUP_START
    assert DEFAULTS["adam"]["rtol"] == default(classify_minima, "rtol")


def test_theory_sweep_refuses_P_beyond_the_float64_range():
    with pytest.raises(ValueError, match=r"P must be <= 9.6e\+09 at L=25"):
        SweepConfig(kind="theory", P=(50.0, 1e12))
    SweepConfig(kind="nuts", P=(1e12,))  # a sampler's reduced model has no such limit


def test_a_misnamed_table_is_named(tmp_path):
    from bayes_attn.experiments.sweep import read_sweep_table

    f = tmp_path / "s.toml"
    f.write_text('[sweeps]\nkind = "theory"\nP = [50.0]\n')
    with pytest.raises(ValueError, match=r"no \[sweep\] table \(it has \[sweeps\]\)"):
        read_sweep_table(f)
    f.write_text('kind = "theory"\nP = [50.0]\n[hyper]\nsigma2 = 20.0\n')  # top level: accepted
    assert read_sweep_table(f)["hyper"] == {"sigma2": 20.0}


def test_the_example_config_ships_and_is_a_sweep():
    from pathlib import Path

    import bayes_attn
    from bayes_attn.experiments.sweep import read_sweep_table

    path = Path(bayes_attn.__file__).parent / "configs" / "sweep_example.toml"
    cfg = SweepConfig.from_dict(read_sweep_table(path))
    assert cfg.kind == "theory" and cfg.shape == (2, 2, 1, 7, 1)


def test_one_quick_protocol_preset():
    """ProtocolConfig.quick() is the preset of the figures' --quick (the sweep they have always
    run), of protocol_quick.toml and of the benchmarks."""
    import importlib.util
    from pathlib import Path

    import bayes_attn

    configs = Path(bayes_attn.__file__).parent / "configs"
    spec = importlib.util.spec_from_file_location("figure_configs", configs / "figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    before = SweepConfig(kind="protocol", P=(20, 100, 300, 800), options=dict(
        members=3, num_test=50, d_model=32, max_steps=300, sgld_warmup=20, sgld_samples=20,
        level1=False))  # fmt: skip
    assert figures.protocol(quick=True).to_json() == before.to_json()
    assert figures.protocol().to_json() == SweepConfig(kind="protocol", P=PAPER_PS).to_json()
    quick = ProtocolConfig.quick()
    assert ProtocolConfig.from_toml(configs / "protocol_quick.toml") == quick
    assert figures.protocol(quick=True) == protocol_sweep(quick)


def test_moved_names_still_work_and_warn():
    """sweep.ORDER is models.levels.ORDER_PARAMETERS; the figure configs' loader moved from
    plotting.figures to experiments.figures (the data half of the figures)."""
    import bayes_attn.experiments.sweep as sweep
    import bayes_attn.plotting.figures as figures
    from bayes_attn.experiments import figures as data
    from bayes_attn.models.levels import ORDER_PARAMETERS

    with pytest.warns(DeprecationWarning, match="models.levels.ORDER_PARAMETERS"):
        assert sweep.ORDER == ORDER_PARAMETERS
    with pytest.warns(DeprecationWarning, match="experiments.figures.load_configs"):
        assert figures.load_configs is data.load_configs
