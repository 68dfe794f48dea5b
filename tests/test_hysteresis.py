"""Hysteresis sweeps: warm starts carry the phase, jump points are read off the ensemble median."""

import numpy as np
import pytest
import xarray as xr

import bayes_attn as ba
from bayes_attn.analysis.hysteresis import hysteresis_sweep, jump_points


def test_jump_points_on_a_planted_loop():
    """A loop with the up-jump between P = 4 and 8 and the down-jump between 2 and 4."""
    P = np.array([1, 2, 4, 8, 16])
    up = np.array([0.1, 0.1, 0.1, 5.0, 5.0])
    down = np.array([0.1, 0.1, 5.0, 5.0, 5.0])
    q = np.stack([up, down])[:, :, None] * np.ones(3)
    ds = xr.Dataset(
        {"qG": (("direction", "P", "member"), q)},
        coords={"direction": ["up", "down"], "P": P, "member": np.arange(3)},
    )
    jp = jump_points(ds)
    assert jp["threshold"] == pytest.approx(2.55)
    assert 4 < jp["up"] < 8 and 2 < jp["down"] < 4


def test_sweep_warm_starts_and_records_both_directions():
    task, hyper = ba.CopyTask(L=6, V=3), ba.Hyper.paper().replace(sigma2=5.0)
    ds = hysteresis_sweep(
        task, hyper, [2, 50], "linear", 8, members=2, lr=1e-2, max_steps=200, progress=False
    )
    assert dict(ds.sizes) == {"direction": 2, "P": 2, "member": 2}
    assert np.all(np.isfinite(ds.qG.values))
    # the down sweep at the top P continues from the up sweep there: same order parameter branch
    top_up, top_down = ds.qG.sel(direction="up", P=50), ds.qG.sel(direction="down", P=50)
    assert np.allclose(np.abs(top_up), np.abs(top_down), rtol=0.2, atol=0.05)
