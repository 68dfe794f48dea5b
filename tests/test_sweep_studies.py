"""The studies' configs (bayes_attn/configs/*.toml with a [quick] table) run end to end at their
shrunken size through run_sweep, and every kind is registered in one place."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bayes_attn
from bayes_attn.experiments.kinds import KINDS, kind_defaults, resolve
from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep

CONFIGS = Path(bayes_attn.__file__).parent / "configs"


def _quick(name):
    return SweepConfig.from_dict(read_sweep_table(CONFIGS / name, quick=True))


def test_every_kind_resolves():
    for name, kind in KINDS.items():
        assert callable(resolve(kind.point)), name
        assert isinstance(kind_defaults(name), dict), name
        if kind.check is not None:
            assert callable(resolve(kind.check)), name
    with pytest.raises(ValueError, match="kind must be one of"):
        SweepConfig(kind="nope", P=(1,))


def test_every_study_config_is_a_sweep():
    """Every [sweep] config parses, at full size and quick; its quick grid is smaller."""
    for path in sorted(CONFIGS.glob("*.toml")):
        if "[sweep]" not in path.read_text():
            continue
        full = SweepConfig.from_dict(read_sweep_table(path))
        small = SweepConfig.from_dict(read_sweep_table(path, quick=True))
        assert small.kind == full.kind
        assert np.prod(small.shape) <= np.prod(full.shape), path.name


def test_hysteresis_refuses_a_P_that_is_not_the_pool():
    with pytest.raises(ValueError, match="Ps: a hysteresis sweep"):
        SweepConfig(kind="hysteresis", P=(30,), activation=("softmax",), options={"Ps": [20, 40]})


#: each study's config at its quick size, and a variable that must be finite everywhere
QUICK = {
    "hysteresis_network.toml": "sgld_qG",
    "hysteresis_network_prior.toml": "qG",
    "frozen_protocol.toml": "exact_post_cG",
    "level1_transition.toml": "level1_action",
    "coexistence_level2.toml": "delta_F",
    "landscape_scan.toml": "delta_F",
    "coexistence_modes.toml": "level1_aG",
    "coexistence_occupancy.toml": "adam_aG",
    "landscape_linear.toml": "map_cG",
    "induction_closure.toml": "U_family",
    "induction_symmetry.toml": "U",
    "induction_llc_network.toml": "llc",
}


#: the quick configs whose compilation takes over 20 s on two busy cores
SLOW = {
    "hysteresis_network.toml",
    "frozen_protocol.toml",
    "coexistence_level2.toml",
    "level1_transition.toml",
    "landscape_scan.toml",
    "coexistence_modes.toml",
    "coexistence_occupancy.toml",
    "landscape_linear.toml",
    # 12.6 s in the default run of 2026-12-07; its kind's options are checked by
    # test_induction_symmetry.py's bad-option cases and its pieces (relabelling, symmetrising)
    # there, and induction_closure.toml (default) runs the same script end to end
    "induction_symmetry.toml",
    # 15.9 s in the default run of 2026-12-07 (fresh clone); its tables are checked on small
    # files by test_induction_tables.py, the families' minimum by test_induction_action_family.py
    # and the kind's options by test_induction_symmetry.py's bad-option cases
    "induction_closure.toml",
    # the induction_training kind's LLC snapshots run by default in test_two_layer_training.py
    # (configs/induction_training_llc.toml's quick size); this config differs only in its options
    "induction_llc_network.toml",
}

#: the drawing script that reads a quick config's file (run on it as the docs run it)
READERS = {
    "coexistence_modes.toml": "coexistence.py",
    "coexistence_occupancy.toml": "coexistence.py",
    "landscape_linear.toml": "landscape.py",
    "induction_closure.toml": "induction_tables.py",
    "induction_symmetry.toml": "induction_tables.py",
}
SCRIPTS = Path(__file__).parents[1] / "docs" / "scripts"


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(QUICK)]
)
def test_study_config_runs(tmp_path, name):
    cfg = _quick(name)
    ds = run_sweep(cfg, tmp_path / "s.nc", progress=False)
    assert ds["done"].all()
    values = ds[QUICK[name]].values
    assert np.isfinite(values[~np.isnan(values)]).all() and np.isfinite(values).any()
    back = load_sweep(tmp_path / "s.nc")
    assert back.attrs["kind"] == cfg.kind and "units" in back[QUICK[name]].attrs
    if name in READERS:  # the study's reader tabulates the file
        script = SCRIPTS / READERS[name]
        run = subprocess.run([sys.executable, str(script), str(tmp_path / "s.nc")], cwd=SCRIPTS,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert str(cfg.P[0]) in run.stdout


@pytest.mark.parametrize(
    "kind, activation, options, match",
    [
        ("coexistence_modes", ("linear",), {}, "activation: this sweep is of softmax"),
        ("occupancy", ("softmax",), {"pool": 30}, "pool: the nested pool"),
        ("landscape_linear", ("softmax",), {}, "activation: a landscape_linear sweep"),
    ],
)
def test_coexistence_kinds_refuse_bad_grids(kind, activation, options, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig(kind=kind, P=(42,), activation=activation, options=options)


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_precursors_runs_nuts_only_at_nuts_P(tmp_path):
    cfg = _quick("precursors_linear.toml")
    ds = run_sweep(cfg, tmp_path / "p.nc", progress=False).squeeze(["L", "V", "seed"])
    nuts = ds.var_nuts.sel(activation="linear").isel(chi=0)
    assert ds["done"].all() and np.isfinite(nuts[0]) and np.isnan(nuts[1])
    assert (
        np.all(ds.var_laplace > 0) and load_sweep(tmp_path / "p.nc").var_nuts.attrs["units"] == "1"
    )


def test_level1_starts_by_activation(tmp_path):
    cfg = _quick("level1_vs_level2.toml")
    ds = run_sweep(cfg, tmp_path / "l.nc", progress=False).squeeze(["L", "V", "seed"])
    action = ds.level1_action
    assert np.isfinite(action.sel(activation="linear").isel(start=0)).all()
    assert np.isnan(action.sel(activation="linear").isel(start=[1, 2])).all()
    assert np.isfinite(action.sel(activation="softmax").isel(start=[1, 2])).all()


def test_every_kind_describes_its_variables_from_the_one_table():
    """The studies' variables are described by ``kinds.DESCRIPTIONS``, the one table (issue 44),
    not by the fallback of their names; a kind's own meaning of a name still overrides it."""
    from bayes_attn.experiments.kinds import DESCRIPTIONS
    from bayes_attn.experiments.sweep import _describe

    assert _describe("var_nuts", "precursors")["description"] == DESCRIPTIONS["var_nuts"][1]
    assert _describe("free_energy_basin", "llc_phases")["units"] == "nats"
    assert "phase_occupancy's verdict" in _describe("nuts_verdict", "occupancy")["description"]
    assert _describe("loss", "induction") != _describe("loss", "theory")
    # a name in the table is described by its own entry, before its prefix is taken off
    assert _describe("level1_U", "coexistence_modes") == {
        "units": "nats",
        "description": DESCRIPTIONS["level1_U"][1],
    }


def test_a_kinds_own_descriptions_only_differ_from_the_one_table():
    """``Kind.descriptions`` holds only the names whose meaning in that kind differs from
    ``kinds.DESCRIPTIONS`` (an entry equal to the table's belongs in the table), and the induction
    posterior's statistics of each score are described in the table."""
    from bayes_attn.experiments.induction_posterior import SCORES
    from bayes_attn.experiments.kinds import DESCRIPTIONS

    for name, kind in KINDS.items():
        own = resolve(kind.descriptions)
        assert not {k for k, v in own.items() if DESCRIPTIONS.get(k) == v}, name
    for s in SCORES:
        assert {f"{s}_{t}" for t in ("map", "mean", "sd", "rhat", "ess")} <= set(DESCRIPTIONS)
    assert DESCRIPTIONS["copy1_ess"] == (
        "draws",
        "bulk ESS of layer 1's copy (previous-token) score (training set, every draw)",
    )
