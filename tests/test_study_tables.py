"""The tables and figures that docs/scripts/tokens_study.py and llc_calibration.py print and draw,
called from the package on the committed result files (issue 44: the scripts only read and call
these). Only reads files: no sampler, no theory (Level 2 is passed in)."""

from pathlib import Path

import matplotlib
import numpy as np
import pytest

from bayes_attn.analysis.llc import calibration_markdown
from bayes_attn.analysis.tokens_tables import competitor_table, pstar_per_x, pstar_table
from bayes_attn.experiments.tokens_results import level2_files, read_tokens

matplotlib.use("Agg")

FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"
TOKENS = FIGURES / "tokens"
#: Level 2 for uniform tokens at Table 1, as the table's first line gives it (not recomputed here)
REFERENCE = {"linear": 22.76, "crossover": 442.7, "softmax": 275.97}


def test_pstar_table_of_the_committed_files():
    """One row per (source, level): the pstar file's and the crossover file's columns of the
    same Zipf s pooled into one row, each cell with its count."""
    files = [read_tokens(TOKENS / f) for f in ("tokens_zipf.nc", "tokens_crossover_zipf.nc")]
    assert files[0].attrs["measure"] == "pstar" and files[1].attrs["measure"] == "crossover"
    level2 = {0: {("linear", spec): 30.0 for spec in files[0].source.values}}
    lines = pstar_table(files, REFERENCE, level2).splitlines()
    assert lines[0] == ("Level 2, uniform tokens: linear second-order P* 22.76, crossover 442.7, "
                        "softmax equal-action P* 275.97")  # fmt: skip
    xs = np.unique(files[0].x.values)
    assert len(lines) == 3 + xs.size
    for row, x in zip(lines[3:], xs, strict=True):
        cells = row.split(" | ")
        assert cells[0] == f"| Zipf s = {x:g}" and cells[1] == "Level 1"
        assert cells[2].endswith("(3)") and cells[4].endswith("(3)")  # three datasets
        assert cells[3].endswith("(1)")  # the crossover file: dataset 0
        assert cells[5] == "30.0"  # Level 2 linear, one chain per x
    rows = pstar_per_x(files[0], "softmax")
    assert [r[0] for r in rows] == sorted(xs)


def test_a_crossover_without_a_steep_rise_is_no_crossover():
    """The chains' crossover file (dataset 0): where copying barely grows over the pool (the
    steepest d cG / d log P below CROSSOVER_MIN_SLOPE: alpha = 0.1, chains 1 and 3) the reading
    is nan; every other chain keeps its P, as the file holds it."""
    import xarray as xr

    from bayes_attn.experiments.tokens_results import CROSSOVER_MIN_SLOPE

    ds = read_tokens(TOKENS / "tokens_crossover_markov.nc")
    raw = xr.open_dataset(TOKENS / "tokens_crossover_markov.nc").crossover.values.ravel()
    steep = ds.slope.values.ravel() >= CROSSOVER_MIN_SLOPE
    assert np.isnan(ds.pstar.values.ravel()[~steep]).all()
    np.testing.assert_array_equal(ds.pstar.values.ravel()[steep], raw[steep])
    flat = ds.source.values[
        ~steep.reshape(ds.slope.shape).any(axis=tuple(range(ds.slope.ndim - 1)))
    ]
    assert sorted(flat) == ["markov:alpha=0.1,seed=1", "markov:alpha=0.1,seed=3"]


def test_merge_tokens_pools_files_split_per_source_and_dataset():
    """The chains' softmax points, split into a file per alpha, pool into the chains' file (its
    softmax entries empty): the same values, every source once; files of another measure stay
    apart; two files that disagree on a value are refused."""
    from bayes_attn.experiments.tokens_results import merge_tokens

    chains = read_tokens(TOKENS / "tokens_markov.nc")
    a3 = read_tokens(TOKENS / "tokens_markov_a3.nc")
    cross = read_tokens(TOKENS / "tokens_crossover_zipf.nc")
    merged, other = merge_tokens([chains, a3, cross])
    assert other is cross and merged.sizes["source"] == chains.sizes["source"]
    for spec in a3.source.values:
        np.testing.assert_array_equal(
            merged.pstar.sel(source=spec, activation="softmax").values,
            a3.pstar.sel(source=spec, activation="softmax").values,
        )
    np.testing.assert_array_equal(
        merged.pstar.sel(activation="linear").sel(source=chains.source.values).values,
        chains.pstar.sel(activation="linear").values,
    )
    assert set(merged.crossover.dims) == set(a3.crossover.dims) | {"source"}
    bad = a3.copy(deep=True)
    bad["pstar"] = bad.pstar + 1.0
    with pytest.raises(ValueError, match="files: two files disagree"):
        merge_tokens([a3, bad])


def test_competitor_table_names_the_starts():
    ds = read_tokens(TOKENS / "tokens_competitor.nc")
    assert list(ds.start.values) == ["uniform", "copy", "diagonal"]
    text = competitor_table(ds)
    assert text.startswith("| chain | token-only loss | unigram loss |")
    chains, per_P = text.split("\n\n")
    assert len(chains.splitlines()) == 2 + ds.sizes["source"]
    rows = per_P.splitlines()
    assert rows[0].startswith("| P | global MAP reached from")
    assert len(rows) == 2 + int(ds.done.values.astype(bool).sum())
    assert all("uniform " in r and "copy " in r and "diagonal " in r for r in rows[2:])


def test_level2_files_skips_networks_and_computes_each_source_list_once(monkeypatch):
    from bayes_attn.experiments import tokens_results

    calls = []
    monkeypatch.setattr(tokens_results, "level2_pstar",
                        lambda ds, chains=False: calls.append(chains) or {"x": 1.0})  # fmt: skip
    a = read_tokens(TOKENS / "tokens_zipf.nc")
    net = a.assign_attrs(gram_width=10000)
    out = level2_files([a, a.copy(), net], True)
    assert out == {0: {"x": 1.0}, 1: {"x": 1.0}} and calls == [True]


def test_calibration_table_and_figure_with_the_exact_values():
    from bayes_attn.experiments.llc_studies import calibration_tables
    from bayes_attn.experiments.sweep import load_sweep
    from bayes_attn.plotting import plots

    (table,) = calibration_tables(load_sweep(FIGURES / "llc_calibration_d64.nc"))
    text = calibration_markdown(table).splitlines()
    assert len(text) == 2 + table.sizes["nbeta"] * (2 + table.sizes["step_size"])
    fig = plots.llc_calibration(table, exact=table.exact_llc.values)
    ax = fig.axes[0]
    dotted = [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_linestyle() == ":"]
    np.testing.assert_allclose(dotted, table.exact_llc.values)
    assert ax.get_title().startswith("calibrate_llc on the network (d = 64, P = ")
    assert "exact" in [t.get_text() for t in ax.get_legend().get_texts()]
    plain = plots.llc_calibration(table).axes[0]
    assert plain.get_title().startswith("LLC calibration (hollow")
    assert not [ln for ln in plain.get_lines() if ln.get_linestyle() == ":"]
    with pytest.raises(ValueError):  # one exact value per nβ
        plots.llc_calibration(table, exact=table.exact_llc.values[:1])
    matplotlib.pyplot.close("all")
