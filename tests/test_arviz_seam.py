"""The one seam between ArviZ 0.23 (InferenceData) and ArviZ 1.x (xarray.DataTree): the same
groups, variable and dimension names and attrs under whichever is installed (``make test`` runs it
on the oldest stack, ``make test-latest`` on the newest)."""

import matplotlib

matplotlib.use("Agg")

import jax  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayes_attn as ba  # noqa: E402
from bayes_attn import _arviz as az  # noqa: E402
from bayes_attn.inference import run_sgld  # noqa: E402
from bayes_attn.models import kernel_limit_model  # noqa: E402

TASK, HYPER = ba.CopyTask.paper(), ba.Hyper.paper()
KIND = "DataTree" if az.major() >= 1 else "InferenceData"


def _draws(seed=0):
    rng = np.random.default_rng(seed)
    return {"c1": rng.normal(size=(2, 50)), "M": rng.normal(size=(2, 50, 3, 3))}


def test_groups_edit_and_round_trip(tmp_path):
    r = az.from_dict({"posterior": _draws(), "sample_stats": {"lp": np.zeros((2, 50))}},
                     dims={"M": ["row", "col"]})  # fmt: skip
    assert type(r).__name__ == KIND
    assert az.groups(r) == ["posterior", "sample_stats"]
    assert r.posterior["M"].dims == ("chain", "draw", "row", "col")
    import xarray as xr

    az.set_group(r, "observed_data", xr.Dataset({"tokens": (("sequence", "position"),
                                                           np.zeros((3, 25), int))}))  # fmt: skip
    assert "observed_data" in az.groups(r)
    az.set_variable(r, "sample_stats", "tree_depth", ("chain", "draw"), np.ones((2, 50)))
    for g in az.groups(r):
        r[g].attrs.update({"level": "reduced", "P": 100.0, "dense": 1})
    path = tmp_path / "r.nc"
    az.to_netcdf(r, path)
    back = az.from_netcdf(path)
    assert type(back).__name__ == KIND and az.groups(back) == az.groups(r)
    np.testing.assert_array_equal(back.posterior["M"].values, r.posterior["M"].values)
    assert back.posterior.attrs["level"] == "reduced" and back.posterior.attrs["P"] == 100.0
    assert float(back.sample_stats["tree_depth"].sum()) == 100.0
    assert set(az.dataset(back, "posterior").data_vars) == {"c1", "M"}
    az.drop_group(back, "observed_data")
    assert "observed_data" not in az.groups(back)


def test_statistics_agree_with_their_definitions():
    """ESS and MCSE of i.i.d. draws: ESS near the draw count, MCSE near sd / sqrt(n) (within the
    estimators' own spread, ~20% at 2 x 500 draws); the summary's columns exist."""
    x = np.random.default_rng(1).normal(size=(2, 500))
    assert 600 < az.ess(x) < 1500
    assert az.mcse(x) == pytest.approx(x.std() / np.sqrt(x.size), rel=0.2)
    assert az.ess(x[0]) > 200  # one chain as a 1-D array
    assert az.rhat(x) < 1.02 and az.rhat(x + np.array([[0.0], [1.0]])) > 1.1  # chains apart
    s = az.summary(az.from_dict({"posterior": {"a": x}}), var_names=["a"])
    assert {"mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"} <= set(s.columns)
    assert s.loc["a", "mean"] == pytest.approx(x.mean())


def test_plots_return_figures():
    r = az.from_dict({"posterior": _draws()})
    axes = az.plot_posterior(r, var_names=["c1"])
    assert axes.ravel()[0].figure is not None
    fig, ax = plt.subplots()
    az.plot_posterior(r, var_names=["c1"], ax=ax, ref_val=0.0)
    fig, axes = az.plot_trace(r, var_names=["c1"])
    assert axes.shape == (1, 2) and all(a.figure is fig for a in axes.ravel())
    plt.close("all")


def test_every_sampler_returns_the_same_structure(reduced_nuts, reduced_smc):
    """NUTS, SGLD and SMC results: the same groups, names, dims and record under either ArviZ.
    NUTS (linear) and SMC (softmax) are the session's shared reduced runs (tests/conftest.py)."""
    nuts = reduced_nuts
    assert type(nuts).__name__ == KIND
    assert {"posterior", "sample_stats"} <= set(az.groups(nuts))
    assert {"c1", "cG"} <= set(nuts.posterior.data_vars)
    assert {"diverging", "tree_depth", "step_size"} <= set(nuts.sample_stats.data_vars)
    assert nuts.posterior.attrs["sampler"] == "nuts" and nuts.posterior.attrs["level"] == "reduced"
    smc = reduced_smc
    assert type(smc).__name__ == KIND
    assert {"posterior", "sample_stats"} <= set(az.groups(smc)) and "eve" in smc.sample_stats
    assert {"aG", "a1", "cG"} <= set(smc.posterior.data_vars)
    assert np.isfinite(smc.posterior.attrs["log_evidence"])
    small = ba.CopyTask(L=4, V=2)
    tok = small.sample(jax.random.key(0), 20)
    sgld = run_sgld(kernel_limit_model, model_args=(small, HYPER, tok, "linear"), num_chains=2,
                    num_warmup=20, num_samples=30, step_size=1e-4, progress_bar=False)  # fmt: skip
    assert sgld.posterior["M"].dims == ("chain", "draw", "row", "col")
    assert "tokens" in sgld.observed_data and "potential_energy" in sgld.sample_stats


def test_tail_ess_is_the_same_on_both_stacks():
    """The tail ESS (the exploration check's) is ArviZ 0.23's, quantiles 0.05 and 0.95, on both
    stacks: arviz-stats' array interface needs them given (it raised a TypeError without)."""
    x = np.random.default_rng(0).normal(size=(4, 500))
    assert az.ess(x, "tail") == pytest.approx(2055.6087859576396, rel=1e-9)  # ArviZ 0.23.4
