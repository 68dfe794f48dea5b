"""NUTS on the reduced posterior against exact quadrature of exp(-chi s).

Error budget: 4 chains x 2000 draws; every mean and standard deviation must lie within 4 Monte Carlo
standard errors (ArviZ's mcse_mean / mcse_sd) of the quadrature value. With 16 comparisons, a correct
sampler fails this by chance with probability ~1e-3. The quadrature is a trapezoid rule on a grid of
+- 10 posterior widths; its own error is < 1e-6 of the compared quantities.
Where the posterior has Z2 images (linear, above P*), both sides are folded onto c1 >= 0.
"""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn.analysis import diagnose
from bayes_attn.inference import run_nuts
from bayes_attn.models import order_param_model
from bayes_attn.theory import action as act
from bayes_attn.theory import saddles


def _linear_quadrature(task, hyper, P, sd):
    w = 10 / np.sqrt(hyper.chi * np.diag(sd.hessian))
    c1 = np.linspace(max(sd.c1 - w[0], 0.0 if sd.c1 > 0 else -w[0]), sd.c1 + w[0], 801)
    cG = np.linspace(sd.cG - w[1], sd.cG + w[1], 801)
    C1, CG = np.meshgrid(c1, cG, indexing="ij")
    s = np.asarray(act.action_linear(jnp.stack([C1, CG], -1), P, act.scales(task, hyper)))
    p = np.exp(-hyper.chi * (s - s.min()))
    z = np.trapezoid(np.trapezoid(p, cG, axis=1), c1)
    mom = {}
    for name, x in (("c1", C1), ("cG", CG)):
        m = np.trapezoid(np.trapezoid(p * x, cG, axis=1), c1) / z
        v = np.trapezoid(np.trapezoid(p * (x - m) ** 2, cG, axis=1), c1) / z
        mom[name] = (m, np.sqrt(v))
    return mom


def _softmax_quadrature(task, hyper, P, sd):
    """In the logit gap cG, where the density is exp(-chi s) with no Jacobian: an independent route."""
    w = 10 / np.sqrt(hyper.chi * sd.hessian[0, 0])
    cG = np.linspace(sd.cG - w, sd.cG + w, 20001)
    s = np.asarray(act.action_softmax(jnp.asarray(cG), P, act.scales(task, hyper)))
    p = np.exp(-hyper.chi * (s - s.min()))
    z = np.trapezoid(p, cG)
    aG = np.asarray(algebra.softmax_order(jnp.asarray(cG), task.L)[1])
    m = np.trapezoid(p * aG, cG) / z
    return {"aG": (m, np.sqrt(np.trapezoid(p * (aG - m) ** 2, cG) / z))}


@functools.cache
def _run(P, activation, metric):
    """The quadrature tests' run (4 chains x (500 + 2000), seed 1), made once per worker: the
    round-trip test below reads the softmax one (issue 44: one compiled program, not two)."""
    import bayes_attn as ba

    return run_nuts(
        order_param_model,
        model_args=(ba.CopyTask.paper(), ba.Hyper.paper(), P, activation),
        num_warmup=500,
        num_samples=2000,
        seed=1,
        progress=False,
        metric=metric,
    )


@pytest.mark.parametrize(
    "activation, P, metric",
    [
        # slow: linear-68.0-laplace covers the linear path (at P = 68; P = 11 < P* in the slow run)
        pytest.param("linear", 11.0, "adapt", marks=pytest.mark.slow),
        # slow: linear-68.0-laplace covers the same point in the other metric
        pytest.param("linear", 68.0, "adapt", marks=pytest.mark.slow),
        # slow: softmax-455.0-adapt covers the same path and metric at P = 455
        pytest.param("softmax", 68.0, "adapt", marks=pytest.mark.slow),
        ("softmax", 455.0, "adapt"),  # default: also the round-trip test's run
        ("linear", 68.0, "laplace"),  # one Z2 image: the mode's; folded as below
        # slow: softmax-455.0-adapt covers the point, linear-68.0-laplace the metric
        pytest.param("softmax", 455.0, "laplace", marks=pytest.mark.slow),
    ],
)
def test_reduced_posterior_matches_quadrature(paper, activation, P, metric):
    task, hyper = paper
    found = saddles(task, hyper, P, activation)
    assert len(found) == 1  # unimodal here (up to the Z2 images)
    idata = _run(P, activation, metric)
    if activation == "linear":
        idata = idata.copy()  # the cached run stays as drawn
        exact = _linear_quadrature(task, hyper, P, found[0])
        sign = np.sign(idata.posterior["c1"]) if found[0].c1 > 0 else 1.0
        for v in ("c1", "cG"):
            idata.posterior[v] = idata.posterior[v] * sign
    else:
        exact = _softmax_quadrature(task, hyper, P, found[0])
    summ = az.summary(idata, var_names=list(exact), kind="all", round_to="none")
    for v, (m, s) in exact.items():
        assert abs(summ.loc[v, "mean"] - m) < 4 * summ.loc[v, "mcse_mean"], (v, summ.loc[v], m)
        assert abs(summ.loc[v, "sd"] - s) < 4 * summ.loc[v, "mcse_sd"], (v, summ.loc[v], s)
    assert diagnose(idata, var_names=list(exact)).divergences == 0


def test_inference_data_is_complete_and_round_trips(tmp_path):
    idata = _run(455.0, "softmax", "adapt")  # the quadrature test's run
    assert {"aG", "a1", "cG"} <= set(idata.posterior.data_vars)
    assert {"diverging", "energy", "tree_depth", "step_size"} <= set(idata.sample_stats.data_vars)
    assert idata.posterior.attrs["activation"] == "softmax"
    assert idata.posterior.attrs["level"] == "reduced"
    assert idata.posterior.attrs["L"] == 25 and idata.posterior.attrs["sigma2"] == 30.0
    path = tmp_path / "x.nc"
    az.to_netcdf(idata, path)
    back = az.from_netcdf(path)
    np.testing.assert_array_equal(back.posterior["aG"].values, idata.posterior["aG"].values)
    assert back.posterior.attrs["activation"] == "softmax"
    # the ArviZ plots work without glue
    import matplotlib.pyplot as plt

    for plot in (az.plot_posterior, az.plot_trace, az.plot_energy):
        plot(idata)
    az.plot_pair(idata, var_names=["aG", "a1"])
    plt.close("all")


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_diagnose_flags_stuck_z2_chains(paper):
    """Above P* the linear chains stay in the Z2 image they start in; diagnose must say so, in
    words, and summarise the folded draws."""
    task, hyper = paper
    init = {"c1": jnp.array([0.39, -0.39, 0.39, -0.39]), "cG": jnp.zeros(4)}
    idata = run_nuts(
        order_param_model,
        model_args=(task, hyper, 68.0, "linear"),
        num_warmup=200,
        num_samples=300,
        init_params=init,
        progress=False,
    )
    d = diagnose(idata)
    # the two images are expected above P*: said in words, with the folded table, not a problem
    assert d.ok, d.warnings
    assert "the two Z2 images (c1, cG) -> (-c1, -cG): chains 0, 2" in d.z2
    assert "chains 1, 3 at c1 + cG < 0" in d.z2
    assert "folded summary" in str(d) and d.folded.loc["c1", "mean"] > 0.3
    # the raw table keeps the split: its mean is near 0, the folded one at the saddle
    assert abs(d.table.loc["c1", "mean"]) < 0.1
    assert diagnose(idata, fold=True).table.loc["c1", "mean"] == d.folded.loc["c1", "mean"]
    # a well-mixed unimodal posterior passes
    ok = run_nuts(
        order_param_model,
        model_args=(task, hyper, 11.0, "linear"),
        num_warmup=300,
        num_samples=1000,
        progress=False,
    )
    assert diagnose(ok).ok
