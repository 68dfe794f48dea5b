"""Hysteresis sweeps: warm starts carry the phase, jump points are read off the ensemble median."""

import jax
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
    assert jump_points(ds, min_jump=4.8) == jp
    creep = ds.assign(qG=0.01 * np.log(ds.qG.P) + 0 * ds.qG)  # smooth, no jump
    assert np.isfinite(jump_points(creep)["up"])  # the midpoint threshold is always crossed
    assert np.isnan(jump_points(creep, min_jump=1.0)["up"])


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


def test_level2_loop_jumps_at_the_spinodals():
    """Warm-started descent on the reduced softmax action keeps each phase until it stops being a
    minimum: ``jump_points`` must find the up-jump in the grid cell holding the upper spinodal and
    the down-jump in the cell holding the lower one (deterministic; no tolerance beyond the grid)."""
    from bayes_attn.analysis.hysteresis import theory_sweep
    from bayes_attn.theory.action import scales
    from bayes_attn.theory.boundaries import second_order_closed_form, softmax_boundaries

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    sc = scales(task, hyper)
    soft = softmax_boundaries(sc, float(second_order_closed_form(sc)))
    lower, upper = soft["spinodals"]
    Ps = np.geomspace(1000.0, 1500.0, 81)
    ds = theory_sweep(task, hyper, Ps)
    jp = jump_points(ds)
    for direction, spinodal in (("up", upper), ("down", lower)):
        i = np.searchsorted(Ps, spinodal)
        assert Ps[i - 1] < jp[direction] < Ps[i], (direction, jp[direction], spinodal)
    # the loop is open exactly between the spinodals: the branches differ there and only there
    q = ds.qG.isel(member=0)
    open_ = np.abs(q.sel(direction="up") - q.sel(direction="down")).values > 1.0
    assert np.array_equal(open_, (Ps > lower) & (Ps < upper))
    # each branch is a minimum of the action: below the lower spinodal both follow the weak phase
    assert float(q.sel(direction="up")[0]) == pytest.approx(float(q.sel(direction="down")[0]))


# Measured with examples/multimodal_softmax.py settings (d_model = 32, 2 members, lr 1e-2,
# 300 Adam steps per P, patience off, seed 0; docs/validation.md "Hysteresis loop").
_NET = dict(members=2, seed=0, lr=1e-2, max_steps=300, patience=10**6)
_NET_P = [800, 1000, 1100, 1200, 1300, 1500, 2000, 3000]


@pytest.mark.slow
@pytest.mark.xfail(
    strict=False,
    reason=(
        "measured: warm-started up from P = 800 the networks never leave the no-copy state "
        "(aG <= 0.005 up to P = 3000, train loss 0.384) so there is no up-jump, while Level 2 "
        "jumps at the upper spinodal 1303.8; started strong (fresh at P = 3000, aG = 16) they "
        "stay strong (aG = 12.6 at P = 1000) below the lower spinodal 1164.1. The network's loop "
        "is far wider than the theory's (docs/validation.md)."
    ),
)
def test_network_jumps_lie_between_the_spinodals():
    """~30 min on two CPU cores. The jump points of the network's sweep bracket P* inside the
    spinodals of the reduced theory (1164.1, 1303.8 at the paper preset)."""
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    ds = hysteresis_sweep(task, hyper, _NET_P, "softmax", 32, progress=False, **_NET)
    jp = jump_points(ds, min_jump=1.0)  # Level 2 jumps by ~3 in aG
    assert 1164.1 <= jp["down"] <= jp["up"] <= 1303.8, jp


@pytest.mark.slow
def test_network_phase_depends_on_history():
    """~10 min. What does hold for the network: at P = 1200 (inside the theory's coexistence
    region) the phase depends on where training came from. Up from P = 800 the networks stay
    in the no-copy state (aG < 0.1); down from a strong-copy solution at P = 3000 they keep
    copying (aG > 5). Deterministic given the seed; the margins are 100x the measured spread."""
    from bayes_attn.inference.adam import train_adam

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    pool = jax.vmap(lambda k: task.sample(k, 3000))(jax.random.split(jax.random.key(0), 2))
    weights = ("W_emb", "p", "W_G", "W_O")

    def path(Ps, first_steps):
        init = None
        for j, P in enumerate(Ps):
            kw = {**_NET, "max_steps": first_steps if j == 0 else _NET["max_steps"]}
            ds = train_adam(
                task,
                hyper,
                "softmax",
                32,
                P,
                tokens=pool[:, :P],
                init=init,
                return_params=True,
                progress_bar=False,
                **kw,
            )
            init = {n: ds[n].values for n in weights}
        return ds.aG.isel(step=-1).values

    up = path([800, 1200], 300)
    down = path([3000, 1200], 600)
    assert np.all(up < 0.1), up
    assert np.all(down > 5.0), down
