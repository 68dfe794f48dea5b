"""Ensemble summaries against the theory, the Adam loss plot's data, and an ensemble's provenance
line in its own words."""

import logging

import numpy as np
import xarray as xr

from bayes_attn.analysis import classify_minima, ensemble_summary
from bayes_attn.analysis.ensembles import above_theory_warning
from bayes_attn.inference.record import RunRecord, header


def _ensemble(final_losses, steps=(100, 200, 300), chi=30.0, sigma2=30.0):
    """An Adam-like history: the loss rises towards ``final_losses`` while the objective falls."""
    final = np.asarray(final_losses, float)
    t = np.linspace(0.98, 1.0, len(steps))
    loss = final[:, None] * t[None, :]
    prior = 0.05 / np.arange(1, len(steps) + 1)[None, :] * np.ones((final.size, 1))
    objective = chi / sigma2 * loss + prior
    attrs = RunRecord("adam", 0, final.size, 30, len(steps), 100).attrs()
    attrs.update(trainer="adam", activation="softmax", P=300, d_model=32, chi=chi, sigma2=sigma2)
    return xr.Dataset(
        {
            "train_loss": (("member", "step"), loss),
            "objective": (("member", "step"), objective),
        },
        coords={"member": np.arange(final.size), "step": np.asarray(steps)},
        attrs=attrs,
    )


def test_summary_warns_when_the_whole_ensemble_sits_above_the_theory(caplog):
    """The issue's case: 4 members at 0.386 against the theory's 0.154; the filter (relative to
    the ensemble's own lowest loss) keeps them all, the summary must say so."""
    ds = classify_minima(_ensemble([0.385, 0.386, 0.387, 0.386]), theory_loss=0.154)
    assert bool(ds.global_min.all())  # the filter cannot see it
    with caplog.at_level(logging.WARNING, logger="bayes_attn"):
        summary = ensemble_summary(ds)
    text = summary.attrs["warning"]
    assert "all 4 members of width 32 end above the theory's loss" in text
    assert "0.385 to 0.387" in text and "0.154" in text and "5% margin" in text
    assert text in caplog.text
    assert float(summary.theory_loss.sel(selection="unfiltered")) == 0.154
    # one member within the margin of the theory: no warning
    ok = classify_minima(_ensemble([0.16, 0.386, 0.387, 0.386]), theory_loss=0.154)
    assert above_theory_warning(ok) is None and "warning" not in ensemble_summary(ok).attrs
    # the margin is the filter's own rtol
    near = _ensemble([0.17, 0.17])
    assert above_theory_warning(classify_minima(near, theory_loss=0.154, rtol=0.2)) is None
    assert "5% margin" in above_theory_warning(classify_minima(near, theory_loss=0.154))
    # without a theory loss there is nothing to compare with
    assert above_theory_warning(classify_minima(near)) is None


def test_adam_loss_draws_the_objective_beside_the_loss():
    """The panels are drawn from the data: the train loss with the theory's line, the objective
    Adam minimises, and its prior part objective - (chi / sigma^2) loss."""
    import matplotlib.pyplot as plt

    from bayes_attn.plotting import plots

    ds = classify_minima(_ensemble([0.385, 0.386]), theory_loss=0.154)
    fig = plots.adam_loss(ds)
    loss_ax, obj_ax, prior_ax = fig.axes
    for m in range(2):
        np.testing.assert_allclose(loss_ax.lines[m].get_ydata(), ds.train_loss[m])
        np.testing.assert_allclose(obj_ax.lines[m].get_ydata(), ds.objective[m])
        np.testing.assert_allclose(
            prior_ax.lines[m].get_ydata(), ds.objective[m] - ds.train_loss[m], rtol=1e-12
        )
    # the objective falls while the loss rises: both are visible on their own linear axes
    assert obj_ax.get_yscale() == loss_ax.get_yscale() == "linear"
    theory = loss_ax.collections[0].get_segments()[0]
    np.testing.assert_allclose(theory[:, 1], 0.154)
    assert "objective" in obj_ax.get_ylabel() and "minimised" in obj_ax.get_title()
    assert "theory (Level-2 global saddle)" in [t.get_text() for t in loss_ax.get_legend().texts]
    plt.close(fig)


def test_an_ensembles_provenance_line_uses_an_ensembles_words():
    """Not "chains 4, warm-up 30, draws 3, thinning 100"."""
    line = header(_ensemble([0.3] * 4).attrs)
    assert "members 4, learning-rate warm-up 30 steps, 300 steps, recorded every 100 steps" in line
    for word in ("chains", "draws", "thinning"):
        assert word not in line, line
    attrs = {**_ensemble([0.3] * 4).attrs, "max_steps": 5000}
    assert "300 steps (of at most 5000), recorded every 100 steps" in header(attrs)
    # samplers keep theirs
    nuts = header(RunRecord("nuts", 1, 4, 500, 1000).attrs())
    assert "chains 4, warm-up 500, draws 1000, thinning 1" in nuts
