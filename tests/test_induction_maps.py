"""The induction head's patterns figure as a sweep product (issue 44): the ``induction`` sweep
kind with ``store_maps`` writes each MAP's forms and attention patterns
(bayes_attn/configs/induction_maps.toml), and docs/scripts/induction_figure.py draws from it."""

import importlib.util
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot
import numpy as np
import pytest

import bayes_attn
from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep

matplotlib.use("Agg")

CONFIG = Path(bayes_attn.__file__).parent / "configs" / "induction_maps.toml"
SCRIPTS = Path(__file__).resolve().parents[1] / "docs" / "scripts"


def test_induction_maps_config_runs_and_draws(tmp_path, monkeypatch):
    """The maps config at its [quick] size (L = 4, V = 2, one softmax point): the scalars of the
    study beside M1 (n x n), M2 (2n x 2n) and causal, row-stochastic attention patterns; the
    drawing script reads the file (as the study's and as the maps file) and writes both figures."""
    cfg = SweepConfig.from_dict(read_sweep_table(CONFIG, quick=True))
    assert cfg.options["store_maps"] is True and cfg.kind == "induction"
    run_sweep(cfg, tmp_path / "m.nc", progress=False)
    ds = load_sweep(tmp_path / "m.nc").squeeze(["L", "V", "seed"]).isel(activation=0, P=0)
    n, L = 4 + 2, 4
    assert ds.M1.shape == (n, n) and ds.M2.shape == (2 * n, 2 * n)
    for name in ("A1_mean", "A2_mean", "A1_example", "A2_example"):
        A = ds[name].values
        assert A.shape == (L, L) and np.allclose(np.triu(A, 1), 0.0), name
        np.testing.assert_allclose(A.sum(-1), 1.0, rtol=1e-10)  # softmax rows
    tok = ds.tokens_example.values
    assert tok.shape == (L,) and set(tok) <= {0.0, 1.0}
    assert np.isfinite(ds.loss) and np.isfinite(ds.copy1) and "units" in ds.M1.attrs
    out, path = tmp_path / "fig", str(tmp_path / "m.nc")
    sys.path.insert(0, str(SCRIPTS))  # the script imports docs/scripts/_study.py
    try:
        spec = importlib.util.spec_from_file_location(
            "induction_figure", SCRIPTS / "induction_figure.py"
        )
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        monkeypatch.setattr(
            sys, "argv", ["induction_figure.py", path, "--maps", path, "--out", str(out)]
        )
        script.main()
    finally:
        sys.path.remove(str(SCRIPTS))
        matplotlib.pyplot.close("all")
    assert (out / "patterns.png").exists() and (out / "order_parameters.png").exists()


@pytest.mark.parametrize(
    "grid, options, match",
    [({"L": (4, 5)}, {"store_maps": True}, "store_maps: .* one L and one V"),
     ({}, {"store_maps": "yes"}, "store_maps must be true or false")],
)  # fmt: skip
def test_store_maps_refuses_bad_settings(grid, options, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig(kind="induction", P=(20,), **{"L": (4,), "V": (2,), **grid},
                    tokens="icl-markov:alpha=1", options=options)  # fmt: skip
