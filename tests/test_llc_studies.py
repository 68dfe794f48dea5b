"""The LLC studies (experiments.llc_studies) run end to end from their configs at the [quick] size,
and their drawing scripts (and the package functions they call) read what the sweeps write."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import bayes_attn
from bayes_attn.analysis.llc import calibration_markdown
from bayes_attn.experiments.llc_studies import calibration_tables
from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep

CONFIGS = Path(bayes_attn.__file__).parent / "configs"
SCRIPTS = Path(__file__).resolve().parents[1] / "docs" / "scripts"


def _quick(name, **changes):
    table = read_sweep_table(CONFIGS / name, quick=True)
    table["options"] = {**table.get("options", {}), **changes.pop("options", {})}
    return SweepConfig.from_dict({**table, **changes})


def _script(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # two points, each a Level-1 MAP, SGLD and NUTS compiled: ~30 s idle, minutes shared
def test_table1_config_runs_and_tabulates(tmp_path):
    cfg = _quick("llc_table1.toml")
    ds = run_sweep(cfg, tmp_path / "t.nc", progress=False)
    assert ds["done"].all() and ds.attrs["kind"] == "llc_table1"
    for name in ("exact_llc_mean", "exact_mcse", "sgld_llc_mean", "sgld_mcse", "nbeta"):
        assert np.isfinite(ds[name].values).all(), name
    lin, soft = (ds.sel(activation=a).squeeze() for a in ("linear", "softmax"))
    assert np.isfinite(lin.cG_star) and np.isnan(lin.aG_star) and np.isfinite(soft.exact_aG_mean)
    script = _script("llc_table1")
    res = script.read([tmp_path / "t.nc"])
    assert set(res) == {("linear", 12, "map"), ("softmax", 12, "map")}
    rows = script.table(res).splitlines()
    assert sum(r.startswith(("| linear", "| softmax")) for r in rows) == 2


@pytest.mark.slow  # two phases, each two ladders of exact NUTS runs
def test_phases_config_runs_and_summarises(tmp_path, capsys):
    cfg = _quick("llc_phases.toml")
    ds = run_sweep(cfg, tmp_path / "p.nc", progress=False).squeeze(["activation", "L", "V", "seed"])
    assert ds.sizes == {"P": 1, "phase": 2, "node": 2, "loc_node": 2}
    assert np.isfinite(ds.free_energy_basin).all() and np.isfinite(ds.ti_llc).all()
    script = _script("llc_phases")
    script.summary(ds.isel(P=0).assign_coords(phase=["weak", "strong"]), 285, 4.0)
    assert "ΔF_TI of the basins" in capsys.readouterr().out


def test_configs_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="phase: only softmax"):
        _quick("llc_table1.toml", options={"phase": "weak"})
    with pytest.raises(ValueError, match="phase must be"):
        _quick("llc_table1.toml", activation=["softmax"], options={"phase": "both"})
    with pytest.raises(ValueError, match="P: nβ"):
        _quick("llc_table1.toml", P=[1])
    with pytest.raises(ValueError, match="activation: the phases"):
        _quick("llc_phases.toml", activation=["linear"])
    with pytest.raises(ValueError, match="gamma_nodes"):
        _quick("llc_phases.toml", options={"gamma_nodes": 1})
    with pytest.raises(ValueError, match="layout must be"):
        _quick("llc_calibration.toml", options={"layout": "fold"})
    with pytest.raises(ValueError, match="nbetas: a list of"):
        _quick("llc_calibration.toml", options={"nbetas": ["P"]})
    with pytest.raises(ValueError, match="step_sizes: a halving ladder"):
        _quick("llc_calibration.toml", options={"step_sizes": [1e-4]})


@pytest.mark.slow  # compiles exact NUTS and SGLD: 80 s wall with a warm cache on shared cores
def test_calibration_config_runs_and_draws(tmp_path):
    """The llc_calibration kind's [quick] run, tabulated and drawn by its script: calibrate_llc's
    table over (nβ, ε) with the exact value at each nβ (a shape check; the numbers are the
    committed file's, checked below)."""
    cfg = _quick("llc_calibration.toml")
    ds = run_sweep(cfg, tmp_path / "c.nc", progress=False)
    assert ds["done"].all() and ds.attrs["kind"] == "llc_calibration"
    assert ds.sizes["temperature"] == 1 and ds.sizes["rung"] == 2
    for name in ("llc", "mcse", "acceptance", "nbeta", "step_size", "exact_llc", "exact_mcse"):
        assert np.isfinite(ds[name].values).all(), name
    assert load_sweep(tmp_path / "c.nc").exact_seconds.attrs["units"] == "s"
    (table,) = calibration_tables(load_sweep(tmp_path / "c.nc"))
    assert table.attrs["P"] == 10 and table.passes.dtype == bool
    assert calibration_markdown(table).count("| exact |") == 1
    from bayes_attn.plotting import plots

    plots.llc_calibration(table, exact=table.exact_llc).savefig(tmp_path / "c.png")


def test_committed_studies_are_their_configs_sweeps():
    """The committed results are what the configs' sweeps write: the same config, every point
    done, so that `bayes-attn sweep CONFIG --out FILE` resumes them with nothing left to run."""
    figures = Path(__file__).resolve().parents[1] / "docs" / "figures" / "paper"
    pairs = {"llc_table1.toml": "llc_table1_d256.nc", "llc_table1_d10000.toml": "llc_table1_d10000.nc",
             "llc_table1_weak.toml": "llc_table1_weak.nc", "llc_table1_strong.toml": "llc_table1_strong.nc",
             "llc_phases.toml": "llc_phases_P285_d256.nc",
             "llc_phases_P290.toml": "llc_phases_P290_d10000.nc"}  # fmt: skip
    for config, result in pairs.items():
        ds = load_sweep(figures / result)
        cfg = SweepConfig.from_dict(read_sweep_table(CONFIGS / config))
        assert SweepConfig.from_json(ds.attrs["config"]).same_grid(cfg), config
        assert ds["done"].all(), result
        assert json.loads(ds.attrs["config"])["kind"] == cfg.kind


def test_committed_calibration_is_its_configs_sweep():
    """docs/figures/llc_calibration_d64.nc is the llc_calibration config's sweep, and its drawing
    script reads back the numbers docs/validation.md quotes (the chosen step at nβ = n / log n,
    none at nβ = n)."""
    path = Path(__file__).resolve().parents[1] / "docs" / "figures" / "llc_calibration_d64.nc"
    ds = load_sweep(path)
    cfg = SweepConfig.from_dict(read_sweep_table(CONFIGS / "llc_calibration.toml"))
    assert SweepConfig.from_json(ds.attrs["config"]).same_grid(cfg) and ds["done"].all()
    (table,) = calibration_tables(ds)
    text = calibration_markdown(table)
    assert "| 6.676 | exact | 1.4826 ± 0.0025 |" in text
    assert "| 6.676 | 6.25e-05 | 1.4718 ± 0.0309 | -0.3 | 0.981 | True |" in text
    assert "| 20 | chosen: nan |" in text


def test_drawing_scripts_read_the_committed_results(capsys):
    figures = Path(__file__).resolve().parents[1] / "docs" / "figures" / "paper"
    table1 = _script("llc_table1")
    res = table1.read(
        [figures / f"llc_table1_{n}.nc" for n in ("d256", "d10000", "weak", "strong")]
    )
    assert sum(r.sizes["P"] for r in res.values()) == 54
    assert "SGLD - exact over the 28 points with both" in table1.table(res)
    phases = _script("llc_phases")
    ds = load_sweep(figures / "llc_phases_P290_d10000.nc").isel(activation=0, L=0, V=0, seed=0, P=0)
    phases.summary(ds.assign_coords(phase=["weak", "strong"]), 290, 300.0)
    out = capsys.readouterr().out
    assert "ΔF_TI of the basins (localization taken away) = 12.203 ± 2.776" in out
