"""The study figures of bayes_attn.plotting.studies, drawn from the committed result files as the
drawing scripts of docs/scripts/ draw them (the cheap ones; llc_table1.py and llc_phases.py in
tests/test_llc_studies.py). Only reads files: no sampler, no theory beyond the preset."""

import importlib.util
import re
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from bayes_attn.experiments.results import filtered, open_study, setting, study_preset
from bayes_attn.plotting import plots

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "docs" / "scripts"
FIGURES = ROOT / "docs" / "figures"


def _script(name):
    sys.path.insert(0, str(SCRIPTS))  # the scripts import docs/scripts/_study.py
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


def _legends(fig) -> dict:
    return {ax.get_title(): [t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes}


def test_tokens_figure_names_the_crossover_of_a_chain():
    """Issue 42: at alpha = 0.3 the search met one minimum only, so its softmax point is where
    the MAP's aG passes 2; the legend says so, and keeps "equal-action" for the Zipf tokens."""
    from bayes_attn.experiments.tokens_results import read_tokens

    files = [
        read_tokens(FIGURES / "tokens" / f) for f in ("tokens_zipf.nc", "tokens_markov_a0.3.nc")
    ]
    assert not files[0].crossover.sel(activation="softmax").any()
    assert files[1].crossover.sel(activation="softmax").all()
    fig = plots.tokens_pstar(files, {"linear": 22.76, "softmax": 275.97}, *study_preset(files[0]))
    legend = _legends(fig)
    assert "softmax: equal-action P* (Level 1)" in legend["i.i.d. Zipf tokens: P*(s)"]
    chain = legend["global Markov chain: P*(α)"]
    assert "softmax: where aG passes 2, one minimum (Level 1)" in chain
    assert not any("equal-action" in t for t in chain)


def test_scaling_figure_quotes_the_slopes_it_is_given():
    import xarray as xr

    ds = xr.load_dataset(FIGURES / "scaling" / "pstar_grid.nc")
    slopes = {"linear": ("derived", {"long": (-1.0, 2.0), "wide": (0.5, 0.5)}),
              "softmax": ("fit", {"long": (0.25, 1.5), "wide": (0.75, 0.5)})}  # fmt: skip
    titles = [ax.get_title() for ax in plots.pstar_scaling(ds, slopes).axes]
    assert titles[0].endswith("derived slope in L: long: -1.00, wide: +0.50")
    assert titles[3].endswith("fit slope in V: long: +1.50, wide: +0.50")


def test_frozen_protocol_figure_and_the_loss_filter():
    runs = {int(setting(ds, "d_model")): ds for ds in
            (open_study(FIGURES / "paper" / f"exact_d{d}.nc") for d in (256, 10000))}  # fmt: skip
    ds = runs[256].isel(activation=0)
    keep = ds.exact_global_min > 0.5
    m, sd, n = filtered(ds, "exact_cG", keep)
    manual = np.nanmean(np.where(keep.values, ds.exact_cG.values, np.nan), axis=-1)
    np.testing.assert_allclose(m.values, manual, rtol=1e-12)
    assert (n.values == keep.values.sum(-1)).all()
    fig = plots.frozen_protocol(runs)
    assert len(fig.axes) == 4 and fig.axes[0].get_legend() is not None


def test_drawing_scripts_call_no_sampler():
    """Issue 44: docs/scripts/ only reads result files, draws and tabulates."""
    calls = re.compile(r"\b(run_nuts|run_sgld|run_smc|run_umbrella|run_llc|find_modes|train_adam|"
                       r"phase_free_energies|basin_evidence|run_sweep)\(")  # fmt: skip
    for path in sorted(SCRIPTS.glob("*.py")):
        assert not calls.search(path.read_text()), path.name


def _induction_files():
    """A small study file (both activations, P = 10, 100, the second linear point not done), a
    forms' file of two points and a training file (one P, both token sources), all synthetic."""
    import xarray as xr

    rng = np.random.default_rng(0)
    dims, shape = ("activation", "P", "seed"), (2, 2, 2)
    names = ("copy1", "uniform1", "induction2", "induction2_excess", "loss", "loss_bigram",
             "loss_unigram", "loss_uniform")  # fmt: skip
    done = np.ones(shape, bool)
    done[1, 1] = False
    study = xr.Dataset({n: (dims, rng.uniform(0.5, 1.0, shape)) for n in names},
                       coords={"activation": ["softmax", "linear"], "P": [10, 100], "seed": [0, 1]})  # fmt: skip
    study["done"] = (dims, done)
    L = 4  # the forms' file: an induction sweep with store_maps (activation, P, seed), P = 100 not done
    A = np.tril(rng.uniform(size=(2, 2, 1, L, L)))
    grid, pq = ("activation", "P", "seed"), ("activation", "P", "seed", "query", "key")
    maps = xr.Dataset({"A1_mean": (pq, A), "A2_mean": (pq, A),
                       "A2_example": (pq, 0 * A),  # linear M = 0: no attention
                       "tokens_example": (grid + ("query",), np.tile([0, 1, 0, 2], (2, 2, 1, 1))),
                       "done": (grid, [[[True], [False]], [[True], [False]]])},
                      coords={"activation": ["linear", "softmax"], "P": [10, 100], "seed": [0]})  # fmt: skip
    for n in ("copy1", "uniform1", "induction2", "induction2_excess"):
        maps[n] = (grid, np.full((2, 2, 1), 0.2))
    tdims, curve = ("P", "seed", "doubly_stochastic"), ("P", "seed", "doubly_stochastic", "chunk")
    train = xr.Dataset({n: (curve, rng.uniform(0.1, 1.0, (1, 2, 2, 5)))
                        for n in ("test_loss", "kl_bigram", "kl_unigram", "copy1", "induction2_excess")},
                       coords={"P": [100], "seed": [0, 1], "doubly_stochastic": [0, 1]})  # fmt: skip
    for n, v in (("entry_step", 10.0), ("jump_step", np.nan), ("plateau_steps", 30.0),
                 ("loss_bigram", 0.5), ("loss_unigram", 0.8), ("loss_uniform", 1.1)):  # fmt: skip
        train[n] = (tdims, np.full((1, 2, 2), v))
    train["jump_step"][0, 0, 1] = 40.0
    train["train_step"] = (("P", "seed", "chunk"), np.tile(np.arange(5) * 10, (1, 2, 1)))
    train["done"] = (("P",), [True])
    return study, maps, train


def test_induction_figures_and_tables():
    """The induction study's figures (bayes_attn.plotting.induction) and tables
    (bayes_attn.analysis.induction_tables) from synthetic files: what is not done is left out."""
    from bayes_attn.analysis.induction_tables import plateau_table, study_table
    from bayes_attn.plotting.induction import attention_excess, map_points

    study, maps, train = _induction_files()
    text = study_table(study).splitlines()
    assert len(text) == 1 + 3 and not any(line.startswith("linear     100") for line in text)
    fig = plots.induction_across_P(study, maps)
    assert len(fig.axes) == 6 and "not yet in the study: P = [100]" in fig.axes[1].get_title()
    assert map_points(maps) == [("softmax", 10, 0), ("linear", 10, 0)]
    E = attention_excess(maps.A1_mean.values[0, 0, 0])
    np.testing.assert_allclose(np.nansum(E, axis=-1), 0.0, atol=1e-12)  # rows sum to uniform's
    assert np.isnan(E[0, 1:]).all()
    fig = plots.induction_patterns(maps)
    assert len(fig.axes) == 2 * 3 * 2  # a colour bar beside each panel
    table = plateau_table(train).splitlines()
    assert table[1].endswith("0/2") and table[2].endswith("1/2")
    assert len(plots.induction_training(train).axes) == 3
    matplotlib.pyplot.close("all")


def test_largest_rise_skips_nan_and_names_its_input():
    from bayes_attn.analysis.ensembles import largest_rise

    assert largest_rise([0.1, 0.2, np.nan, 5.0, 4.0, 4.5]) == 4
    assert largest_rise([0.0, 1.0, 1.5]) == 0
    with pytest.raises(ValueError, match="values"):
        largest_rise([np.nan, 1.0, np.nan])


def test_token_profiles_draw_one_panel_per_source():
    """The structured-token profiles (docs/figures/tokens/profiles_*): one panel per source, a
    curve per P, each shifted to its minimum (so 0 is its lowest point)."""
    from bayes_attn import _arviz as az
    from bayes_attn.analysis.free_energy import landscape_report
    from bayes_attn.plotting.studies import token_profiles

    tokens = FIGURES / "tokens"
    panels = {
        title: {P: landscape_report(az.from_netcdf(tokens / folder / f"kernel_P{P}_d0.nc"))}
        for title, folder, P in (("Zipf s = 1", "profiles_zipf1", 320),
                                 ("chain", "profiles_markov_a0.3", 290))
    }  # fmt: skip
    fig = token_profiles(panels)
    assert [ax.get_title() for ax in fig.axes] == ["Zipf s = 1", "chain"]
    for ax, P in zip(fig.axes, (320, 290), strict=True):
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"P = {P}"]
        ys = ax.containers[0].lines[0].get_ydata()  # the profile's points (not its error bars)
        assert np.nanmin(ys) == pytest.approx(0.0, abs=1e-9)
