"""The figures are drawn from their data: Fig. 4's broken theory curve, spinodals and critical end
point, and the posterior figure's folded c1 and per-phase summaries.

Fig. 4 is drawn from the committed Table-1 data of docs/figures/paper (the theory curves and phase
diagrams, the protocol sweep); the posterior panels from planted draws whose phases are known.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from bayes_attn import _arviz as az  # noqa: E402
from bayes_attn.analysis.diagnostics import fold_ordered, hdi, phase_summary  # noqa: E402
from bayes_attn.plotting import plots  # noqa: E402
from bayes_attn.theory.boundaries import PhaseBoundaries  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "docs" / "figures" / "paper"
TABLE1 = dict(L=25, V=5, chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)
# Table 1's boundaries (docs/theory.md §7)
BOUNDS = PhaseBoundaries(22.761, 22.761, 22.761, 442.736, {}, 275.970, (264.967, 296.757))


def _open(name):
    with xr.open_dataset(DATA / name, engine="h5netcdf") as f:
        return f.load()


def _transition(activation, **kw):
    proto = _open("protocol.nc").isel(L=0, V=0, seed=0)
    return plots.order_parameter_transition(
        proto,
        _open(f"theory_{activation}_curve.nc"),
        _open(f"theory_{activation}_L.nc"),
        _open(f"theory_{activation}_V.nc"),
        activation,
        BOUNDS,
        **kw,
    )


def test_broken_at_inserts_one_gap_between_the_straddling_points():
    x, y = plots.broken_at([1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 5.0, 6.0], 2.5)
    np.testing.assert_array_equal(x, [1.0, 2.0, 2.5, 3.0, 4.0])
    np.testing.assert_array_equal(np.isnan(y), [False, False, True, False, False])
    for at in (None, float("nan"), 0.5, 9.0):  # nothing to break
        assert not np.isnan(plots.broken_at([1.0, 2.0], [0.0, 1.0], at)[1]).any()


def test_fig4_breaks_the_jump_lists_the_spinodals_and_marks_the_end_point():
    curve = _open("theory_softmax_curve.nc")
    diag = _open("theory_softmax_L.nc")
    fig = _transition("softmax")
    ax, ax_L = fig.axes[0], fig.axes[1]
    line = next(ln for ln in ax.lines if ln.get_label() == r"$\hat a_G$ theory")
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    gap = np.flatnonzero(np.isnan(y))
    assert gap.size == 1 and x[gap[0]] == pytest.approx(BOUNDS.first_order)  # one break, at P*
    assert x[gap[0] - 1] < BOUNDS.first_order < x[gap[0] + 1]
    assert y[gap[0] + 1] - y[gap[0] - 1] > 2.0  # the jump is where it breaks: 0.44 -> 3.8
    shown = curve.sel(P=x[np.isfinite(y)])
    np.testing.assert_allclose(y[np.isfinite(y)], shown.aG)
    assert "spinodals" in [t.get_text() for t in ax.get_legend().texts]
    # the end of the computed first-order line in (P, L): its smallest L with a transition
    ok = np.isfinite(diag.first_order.values)
    L_end = int(diag.L.values[ok].min())
    star = next(ln for ln in ax_L.lines if ln.get_marker() == "*")
    assert star.get_ydata()[0] == L_end
    assert star.get_xdata()[0] == pytest.approx(float(diag.first_order.sel(L=L_end)))
    legend = [t.get_text() for t in ax_L.get_legend().texts]
    assert any(t.startswith("critical end point") for t in legend), legend
    assert plots.END_POINT_CAPTION in [t.get_text() for t in fig.texts]
    plt.close(fig)
    # a critical end point from the theory, as a bracket in L
    fig = _transition("softmax", critical_end={"P": 232.0, "L": (15.0, 17.0)})
    star = next(ln for ln in fig.axes[1].lines if ln.get_marker() == "*")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (232.0, 16.0)
    assert "critical end point (L = 15 to 17)" in [
        t.get_text() for t in fig.axes[1].get_legend().texts
    ]
    plt.close(fig)
    # the computed end point (theory.critical_end_point), a point
    fig = _transition("softmax", critical_end={"P": 225.94, "L": 15.58})
    legend = [t.get_text() for t in fig.axes[1].get_legend().texts]
    assert "critical end point (L = 15.58, P = 225.9)" in legend, legend
    plt.close(fig)
    # Fig. 3 (linear, second order): a continuous curve, no end point, no caption
    fig = _transition("linear")
    assert not any(np.isnan(ln.get_ydata()).any() for ln in fig.axes[0].lines if "theory" in
                   ln.get_label())  # fmt: skip
    assert not fig.texts
    plt.close(fig)


def _bimodal(P=276.0, weights=(0.6, 0.4), n=500, seed=0):
    """Two chains of planted softmax draws: weak phase near 0.45, strong near 3.8."""
    rng = np.random.default_rng(seed)
    strong = rng.random((2, n)) < weights[1]
    aG = np.where(strong, 3.8 + 0.2 * rng.standard_normal((2, n)),
                  0.45 + 0.09 * rng.standard_normal((2, n)))  # fmt: skip
    idata = az.from_dict({"posterior": {"aG": aG}})
    idata.posterior.attrs.update(activation="softmax", sampler="smc", P=P, **TABLE1)
    return idata, aG


def test_hdi_is_the_narrowest_interval():
    x = np.linspace(0.0, 1.0, 1001)
    lo, hi = hdi(x, 0.94)
    assert hi - lo == pytest.approx(0.94, abs=1e-3)
    lo, hi = hdi(np.concatenate([x, np.full(5000, 0.5)]), 0.5)
    assert lo == hi == 0.5  # a point mass holds half of the draws


def test_phase_summary_reports_each_phase():
    idata, aG = _bimodal()
    table = phase_summary(idata, "aG", boundary=2.0)
    weak, strong = aG[aG <= 2.0], aG[aG > 2.0]
    assert list(table.index) == ["weak", "strong"]
    assert table.loc["strong", "weight"] == pytest.approx(strong.size / aG.size)
    assert table.loc["weak", "mean"] == pytest.approx(weak.mean())
    assert table.loc["strong", "hdi_low"] > 2.0 > table.loc["weak", "hdi_high"]
    assert table.loc["weak", "n_draws"] + table.loc["strong", "n_draws"] == aG.size
    # the default split: the Level-2 density minimum at the run's P (phase_occupancy)
    from bayes_attn.analysis import phase_boundary
    from bayes_attn.task import CopyTask, Hyper

    table = phase_summary(idata, "aG")
    cut = phase_boundary(CopyTask(25, 5), Hyper(30.0, 1.0, 1.0, 30.0), 276.0)
    assert table.attrs["boundary"] == pytest.approx(cut) and 1.0 < cut < 3.0
    assert table.loc["strong", "weight"] == pytest.approx(strong.size / aG.size)
    assert np.isfinite(table.loc["strong", "weight_se"])  # SMC runs: genealogy-aware binomial
    # one phase: one row
    one = phase_summary(idata, "aG", boundary=None)
    assert list(one.index) == ["posterior"] and one.loc["posterior", "mean"] == pytest.approx(
        aG.mean()
    )


def _linear(P, seed=0):
    rng = np.random.default_rng(seed)
    sign = np.where(rng.random((2, 400)) < 0.5, 1.0, -1.0)
    c1 = sign * 0.33 + 0.03 * rng.standard_normal((2, 400))
    cG = sign * 0.01 + 0.03 * rng.standard_normal((2, 400))
    idata = az.from_dict({"posterior": {"c1": c1, "cG": cG}})
    idata.posterior.attrs.update(activation="linear", sampler="nuts", P=float(P), **TABLE1)
    return idata


def test_posterior_figure_shows_folded_c1_and_each_phase():
    """Linear: folded c1 (cG sits near 0 on both sides of P*, c1 shows the transition); softmax:
    one line per phase with its weight, mean and interval, and labelled reference lines."""
    above = plots.posterior_panel("P = 45.5", _linear(45.5), refs=[(0.334, "theory")])
    assert above["var"] == "c1" and np.all(above["draws"] > 0.2)  # folded: one image
    below = fold_ordered(_linear(11.4))  # below P*: left as it is
    assert np.isclose(np.asarray(below.posterior.c1).mean(), 0.0, atol=0.05)
    idata, aG = _bimodal()
    soft = plots.posterior_panel("P = 276", idata, refs=[(0.444, "weak minimum"),
                                                         (3.82, "strong minimum")])  # fmt: skip
    fig = plots.posteriors_across({"linear": [above], "softmax": [soft]})
    ax_lin, ax_soft = fig.axes
    assert r"$\hat c_1$" in ax_lin.get_title()
    words = [t.get_text() for t in ax_soft.texts][0].splitlines()
    table = soft["phases"]
    assert words[0].startswith(f"weak: weight {table.loc['weak', 'weight']:.3f} ± ")
    assert f"mean {table.loc['strong', 'mean']:.3g}" in words[1]
    assert f"94% HDI {table.loc['strong', 'hdi_low']:.3g} to" in words[1]
    legend = [t.get_text() for t in ax_soft.get_legend().texts]
    assert "weak minimum: 0.444" in legend and "strong minimum: 3.82" in legend
    assert any(t.startswith("phase boundary") for t in legend)
    # the histogram is the draws' density
    heights = np.array([p.get_height() for p in ax_soft.patches])
    widths = np.array([p.get_width() for p in ax_soft.patches])
    assert np.sum(heights * widths) == pytest.approx(1.0)
    assert min(p.get_x() for p in ax_soft.patches) == pytest.approx(aG.min())
    plt.close(fig)


def test_the_old_call_still_draws_and_warns():
    idata, _ = _bimodal()
    with pytest.warns(DeprecationWarning, match="posterior_panel"):
        fig = plots.posteriors_across(
            {"linear": [("P = 45.5", _linear(45.5))], "softmax": [("P = 276", idata)]},
            ref_vals={"linear": [0.005], "softmax": [3.86]},
        )
    assert r"$\hat c_1$" in fig.axes[0].get_title()
    assert fig.axes[0].get_legend() is None  # cG's reference does not belong to c1
    assert "theory: global saddle: 3.86" in [t.get_text() for t in fig.axes[1].get_legend().texts]
    plt.close(fig)


def test_posterior_figure_data_folds_c1_and_splits_the_phases(monkeypatch, tmp_path):
    """The data ``bayes-attn figures`` draws the posterior figure from (experiments.figures.
    posterior), on the committed Table-1 posteriors: the linear row is the folded c1 (cG sits near
    0 on both sides of P*), so the transition shows; every panel's reference lines are labelled
    theory minima of the variable shown; a two-phase softmax panel is reported phase by phase,
    split at theory.modes.phase_boundary."""
    from bayes_attn.experiments import figures as fdata
    from bayes_attn.plotting.figures import DRAW
    from bayes_attn.task import CopyTask, Hyper
    from bayes_attn.theory.modes import phase_boundary

    monkeypatch.setattr(
        fdata, "_posterior_at",
        lambda spec, ctx, task, hyper, act, k, P: az.from_netcdf(DATA / f"posterior_{act}_{k}.nc"),
    )  # fmt: skip
    ctx = fdata.FigureContext(tmp_path, progress=False)
    monkeypatch.setattr(ctx, "boundaries", lambda task, hyper: BOUNDS)
    spec = fdata.load_configs()["posterior"](quick=True)
    panels = fdata.posterior(spec, ctx)["panels"]
    below, above, _ = panels["linear"]
    assert below["var"] == above["var"] == "c1"
    # below P* one symmetric state about 0; above it one folded image at the theory's c1
    assert abs(below["draws"].mean()) < 0.05 and np.all(np.isfinite(below["draws"]))
    (c1_theory, words), = above["refs"]  # fmt: skip
    assert words.startswith("theory") and c1_theory > 0.2
    assert np.mean(above["draws"] > 0) > 0.99
    assert above["draws"].mean() == pytest.approx(c1_theory, abs=0.1)
    assert list(above["phases"].index) == ["posterior"]
    mid = panels["softmax"][1]
    assert mid["var"] == "aG" and list(mid["phases"].index) == ["weak", "strong"]
    run_P = float(az.from_netcdf(DATA / "posterior_softmax_1.nc").posterior.attrs["P"])
    cut = phase_boundary(CopyTask(25, 5), Hyper(30.0, 1.0, 1.0, 30.0), run_P)
    assert mid["phases"].attrs["boundary"] == pytest.approx(cut)
    strong = np.ravel(mid["draws"]) > cut
    assert mid["phases"].loc["strong", "weight"] == pytest.approx(strong.mean())
    x = np.ravel(mid["draws"])
    assert mid["phases"].loc["strong", "mean"] == pytest.approx(x[strong].mean())
    assert mid["phases"].loc["weak", "mean"] == pytest.approx(x[~strong].mean())
    words = [w for _, w in mid["refs"]]
    assert words == ["theory: weak-copy minimum", "theory: strong-copy minimum"]
    fig = DRAW["posterior"](dict(panels=panels))
    assert r"$\hat c_1$" in fig.axes[0].get_title() and "second-order P*" in fig.axes[0].get_title()
    assert fig.axes[4].texts[0].get_text().startswith("weak: weight")
    plt.close(fig)


def test_posterior_figure_folds_linear_draws_only_above_p_star(monkeypatch, tmp_path):
    """Below the second-order P* the linear posterior is one state symmetric about 0: the figure's
    sampler step keeps it unfolded (folding would move c1's mean off 0); above P* it folds."""
    from bayes_attn import inference
    from bayes_attn.experiments import figures as fdata

    made = {}
    monkeypatch.setattr(inference, "run_nuts", lambda model, model_args, **kw: made[model_args[2]])
    ctx = fdata.FigureContext(tmp_path, progress=False)
    task, hyper = fdata.preset({})
    for P in (11.4, 45.5):
        made[P] = _linear(P)
        idata = fdata._posterior_at({"nuts": {}}, ctx, task, hyper, "linear", 0, P)
        c1 = np.asarray(idata.posterior.c1)
        if P < BOUNDS.second_order:
            np.testing.assert_array_equal(c1, np.asarray(made[P].posterior.c1))
        else:
            assert np.all(c1 > 0.2)


def test_posterior_figure_smc_runs_checkpoint_beside_their_output(monkeypatch, tmp_path):
    """The figure's softmax posteriors (tempered SMC, the long runs) checkpoint beside their
    output, so a killed `bayes-attn figures` resumes them."""
    from bayes_attn import inference
    from bayes_attn.experiments import figures as fdata

    idata, _ = _bimodal()
    seen = {}
    monkeypatch.setattr(inference, "run_smc", lambda model, **kw: seen.update(kw) or idata)
    ctx = fdata.FigureContext(tmp_path, progress=False)
    task, hyper = fdata.preset({})
    fdata._posterior_at({"smc": {}}, ctx, task, hyper, "softmax", 1, 276.0)
    assert seen["checkpoint"] == tmp_path / "posterior_softmax_1.nc.smc-checkpoint"
    assert (tmp_path / "posterior_softmax_1.nc").exists()
