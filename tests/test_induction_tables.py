"""The induction-head tables and the LLC-along-training figure that docs/scripts/induction_tables.py
and docs/scripts/induction_training.py print and draw (bayes_attn.analysis.induction_tables,
bayes_attn.plotting.induction), from small synthetic files shaped as the sweeps write them."""

from pathlib import Path

import matplotlib
import numpy as np
import pytest
import xarray as xr

from bayes_attn.analysis.induction_tables import (
    closure_table,
    profile_table,
    symmetry_table,
    training_llc_table,
)
from bayes_attn.plotting import plots

matplotlib.use("Agg")

GRID = ("activation", "L", "V", "P", "seed")
COORDS = {"activation": ["softmax"], "L": [4], "V": [2], "P": [10, 20], "seed": [0]}


def _grid(ds, done, **names):
    """``ds`` with the grid's ``done`` and each variable of ``names`` over the grid and its extra
    axes (``name=(extra dims, values at a point)``)."""
    shape = tuple(len(v) for v in COORDS.values())
    ds["done"] = (GRID, np.reshape(done, shape))
    for name, (dims, value) in names.items():
        value = np.asarray(value, float)
        ds[name] = (GRID + dims, np.broadcast_to(value, shape + value.shape).copy())
    return ds


def _closure(families=("a", "b")):
    ds = xr.Dataset(coords={**COORDS, "family": list(families)})
    scalars = {"U_map": 1.0, "U_sym": 3.5, "map_from_file": 1.0, "off_symmetric1": 0.1,
               "off_symmetric2": 0.2, "U_sym_start": 4.0, "sym_grad_norm": 1e-9, "sym_steps": 50}  # fmt: skip
    fam = {"U_family": [2.0, 1.25], "family_size": [3, 7], "copy1_family": [0.5, 0.6],
           "excess_family": [0.01, 0.02], "family_seconds": [2, 3], "family_starts": [1, 2]}  # fmt: skip
    return _grid(ds, [True, False], **{k: ((), v) for k, v in scalars.items()},
                 **{k: (("family",), v) for k, v in fam.items()})  # fmt: skip


def _symmetry(hessian=True):
    runs = ["real:zero", "sym:zero", "sym:circuit", "sym:floor"]
    d = np.array([[np.nan, 1.0, 1.0, 1.0], [1.0, np.nan, 1e-7, 0.5],
                  [1.0, 1e-7, np.nan, 0.5], [1.0, 0.5, 0.5, np.nan]])  # fmt: skip
    ds = xr.Dataset(coords={**COORDS, "run": runs})
    names = {"distance": (("run", "other"), d), "distance_relabelled": (("run", "other"), d),
             "distance_map": (("run",), [1e-3, np.nan, np.nan, np.nan]),
             "P_data": (("run",), [10, 40, 40, 40]), "U": (("run",), [1.0, 2.0, 2.0, 2.75]),
             "off_symmetric1": (("run",), [0.3] * 4), "off_symmetric2": (("run",), [0.4] * 4),
             "grad_norm": (("run",), [1e-8] * 4), "perm_dU": (("run",), [1e-12] * 4),
             "U_map": ((), 1.0)}  # fmt: skip
    if hessian:
        names.update(hessian_low=(("eigen",), [0.5, 0.75]), asymmetric_dim=((), 6),
                     hessian_high=((), 9.0), hessian_seconds=((), 2.0))  # fmt: skip
    return _grid(ds, [True, True], **names)


def test_closure_table_lists_each_done_point_against_the_map_and_the_floor():
    text = closure_table(_closure()).splitlines()
    assert text[0] == "| activation | P | seed | `a` | `b` | `sym` (floor) |"
    assert text[2] == "| softmax | 10 | 0 | 1.00 | 0.25 | 2.50 |"
    assert not any(line.startswith("| softmax | 20") for line in text)  # not done
    assert "  softmax 10 0: a -1.50, b -2.25" in text
    assert text[-2].startswith("    a             3 coordinates: U 2.000  copy1 0.500")
    assert closure_table(_closure(), _closure()).count("each point:") == 2  # one after the other


def test_symmetry_table_groups_the_runs_into_modes():
    text = symmetry_table(_symmetry())
    rows, notes = text.split("\n\n")
    assert len(rows.splitlines()) == 2 + 2 * 4  # two done points, four runs each
    assert "| sym | 10 | 40 | 0 | circuit | 2.0000 |" in rows
    assert (
        "sym P = 10 seed 0: 1 mode(s) from 2 starts, 1 up to relabelling, lowest U 2.0000; "
        "the symmetric floor 0.75 nats above" in notes
    )
    assert "Hessian at sym:floor on the asymmetric forms (6 dims): lowest 0.500, 0.750" in notes
    assert symmetry_table(_symmetry(hessian=False)).count("Hessian") == 0


def test_tables_want_the_sweep_options_as_names():
    with pytest.raises(ValueError, match="family"):
        closure_table(_closure().drop_vars("family"))
    with pytest.raises(ValueError, match="runs"):
        symmetry_table(_symmetry().drop_vars("run"))


def test_llc_along_training_table_and_figure():
    n = 6
    curve = {k: ("chunk", np.linspace(0.1, 1.0, n)) for k in
             ("test_loss", "copy1", "induction2_excess", "llc_mcse", "llc_rhat", "llc_grad_norm")}  # fmt: skip
    llc = np.full(n, np.nan)
    llc[[0, 3, 5]] = [1.0, 2.0, 3.0]
    ds = xr.Dataset({**curve, "llc": ("chunk", llc), "train_step": ("chunk", 10.0 * np.arange(n)),
                     "loss_bigram": 0.5, "loss_unigram": 0.8, "jump_step": 30.0})  # fmt: skip
    ds = ds.expand_dims(P=[100], seed=[0], doubly_stochastic=[0])
    text = training_llc_table(ds).splitlines()
    assert len(text) == 1 + 3 + 1 and text[2].startswith("   30")
    assert (
        text[-1] == "held-out references: loss_bigram 0.5000, loss_unigram 0.8000; jump_step 30.0"
    )
    fig = plots.induction_training_llc(ds)
    assert len(fig.axes) == 4  # three panels and the gradient's twin axis
    matplotlib.pyplot.close("all")


def _summaries(names, acts, done, **fixed):
    """A squeezed summaries file (activation, P = 10, 20), every variable 0.5 but ``fixed``."""
    shape = (len(acts), 2)
    ds = xr.Dataset({n: (("activation", "P"), np.full(shape, fixed.get(n, 0.5))) for n in names},
                    coords={"activation": list(acts), "P": [10, 20]})  # fmt: skip
    ds["done"] = (("activation", "P"), np.reshape(done, shape))
    return ds


def test_beyond_map_table_and_figure():
    """The posterior, SGLD and LLC files beside the study: a row per (activation, P) that any
    file has done; a linear point's layer-1 values folded by its MAP's sign, not its spread."""
    from bayes_attn.analysis.induction_tables import beyond_map_table, fold_linear, network_llc

    stems = ("copy1", "uniform1", "induction2_excess")
    post = _summaries([f"{s}_{k}" for s in stems for k in ("map", "mean", "sd", "rhat", "ess")]
                      + ["loss_predictive", "loss_map", "loss_bigram"], ("softmax", "linear"),
                      [True, False, True, False], copy1_map=-0.5, copy1_mean=-0.4)  # fmt: skip
    post = fold_linear(post)
    assert float(post.copy1_mean.sel(activation="linear", P=10)) == 0.4
    assert float(post.copy1_mean.sel(activation="softmax", P=10)) == -0.4  # softmax: as it is
    assert float(post.copy1_sd.sel(activation="linear", P=10)) == 0.5
    draws = _summaries(["copy1", "copy1_adam", "copy1_sd"], ("linear",), [True, True],
                       copy1=-0.3, copy1_adam=0.0)  # SGLD's: no MAP, a start at copy1 = 0  # fmt: skip
    assert float(fold_linear(draws).copy1.sel(activation="linear", P=10)) == 0.3
    # layer 2 by its own sign: induction2 -0.2 with a share of matches 0.4 (excess -0.6)
    two = _summaries(["copy1", "induction2", "induction2_excess", "uniform2", "induction2_sd"],
                     ("linear",), [True, True], copy1=0.3, induction2=-0.2,
                     induction2_excess=-0.6, uniform2=-0.1)  # fmt: skip
    got = fold_linear(two).sel(activation="linear", P=10)
    assert float(got.induction2) == 0.2 and float(got.uniform2) == 0.1
    assert float(got.induction2_excess) == pytest.approx(-0.2, abs=1e-15)
    assert float(got.copy1) == 0.3 and float(got.induction2_sd) == 0.5
    pats = _summaries(["copy1", "induction2", "A1_mean", "A2_mean"], ("linear",), [True, True],
                      copy1=-0.3, induction2=0.2)  # fmt: skip
    got = fold_linear(pats).sel(activation="linear", P=10)
    assert float(got.A1_mean) == -0.5 and float(got.A2_mean) == 0.5  # with their layer's sign
    sgld_names = [*stems, "copy1_sd", "copy1_rhat", "induction2_excess_sd",
                  "induction2_excess_rhat", "U_rhat", "copy1_adam"]  # fmt: skip
    sgld = _summaries(sgld_names, ("softmax",), [False, True])
    llc = _summaries(["llc_mean", "llc_mcse", "llc_rhat", "copy1_map"], ("softmax",),
                     [True, False], llc_mean=52.57)  # fmt: skip
    rows = beyond_map_table(post, sgld, llc).splitlines()[1:]
    assert [r[:13].split() for r in rows] == [
        ["softmax", "10"],
        ["softmax", "20"],
        ["linear", "10"],
    ]
    assert "52.57" in rows[0] and rows[1].count("|") == 1 and rows[2].count("|") == 0
    study = xr.Dataset({n: (("activation", "P", "seed"), np.full((2, 2, 1), 0.3))
                        for n in ("copy1", "induction2_excess", "loss", "loss_bigram",
                                  "loss_unigram", "loss_uniform")},
                       coords={"activation": ["softmax", "linear"], "P": [10, 20], "seed": [0]})  # fmt: skip
    study["done"] = (("activation", "P", "seed"), np.ones((2, 2, 1), bool))
    fig = plots.induction_beyond_map(study, post, sgld, llc)
    assert len(fig.axes) == 8 and "not run" in [t.get_text() for t in fig.axes[7].texts]
    assert len(plots.induction_beyond_map(study, post).axes) == 6
    unmixed = llc.assign(llc_rhat=llc.llc_rhat * 0 + 1.5)  # drawn hollow, said in the legend
    labels = plots.induction_beyond_map(study, llc=unmixed).axes[6].get_legend_handles_labels()[1]
    assert any("not mixed" in t for t in labels), labels
    # the network's LLC at Adam's last record beside the kernel limit's (network_llc)
    net = _training_llc_file()
    lam = network_llc(net)
    assert dict(lam.sizes) == {"activation": 1, "P": 2}
    at = lam.sel(activation="softmax", P=20)
    assert float(at.llc_mean) == 7.0 and float(at.train_step) == 200
    rows = beyond_map_table(post, sgld, llc, lam).splitlines()
    assert rows[0].endswith("network LLC ± MCSE, R-hat")
    assert rows[2].count("|") == 3 and rows[2].rstrip().endswith("7.00 ±  0.50 1.010")
    fig = plots.induction_beyond_map(study, post, llc_net=lam)
    assert len(fig.axes) == 8 and fig.axes[6].get_legend() is not None
    matplotlib.pyplot.close("all")


def _training_llc_file():
    """An ``induction_training`` file as configs/induction_llc_network.toml writes it: two P,
    two records, the LLC at the last (7 at P = 20, NaN before it)."""
    dims = ("activation", "L", "V", "P", "seed", "doubly_stochastic", "chunk")
    coords = {"activation": ["softmax"], "L": [4], "V": [2], "P": [10, 20], "seed": [0],
              "doubly_stochastic": [False], "chunk": [0, 1]}  # fmt: skip
    shape = (1, 1, 1, 2, 1, 1, 2)
    llc = np.full(shape, np.nan)
    llc[..., 1, 0, 0, 1], llc[..., 0, 0, 0, 1] = 7.0, 5.0
    ds = xr.Dataset({n: (dims, np.full(shape, v)) for n, v in
                     (("llc_mcse", 0.5), ("llc_rhat", 1.01), ("llc_grad_norm", 0.1),
                      ("test_loss", 0.3), ("copy1", 1.0), ("induction2_excess", 0.05))},
                    coords=coords)  # fmt: skip
    ds["llc"] = (dims, llc)
    ds["train_step"] = (dims[:5] + ("chunk",), np.broadcast_to([100.0, 200.0], (1, 1, 1, 2, 1, 2)))
    ds["done"] = (dims[:5], np.ones((1, 1, 1, 2, 1), bool))
    return ds


def test_profile_reports_reads_both_kinds_names(tmp_path, monkeypatch):
    """A sweep's profiles folder: the landscape kind's kernel_P{P}_d{seed}.nc (site aG) and the
    induction_profile kind's kernel_P{P}_{cv}_d{seed}.nc; other datasets and widths left out."""
    import bayes_attn._arviz as az
    import bayes_attn.analysis.free_energy as fe
    from bayes_attn.experiments.results import profile_reports

    for name in ("kernel_P290_d0.nc", "kernel_P1500_copy1_d0.nc", "kernel_P1500_induction2_d0.nc",
                 "kernel_P290_d1.nc", "kernel_P290_d0_g10000.nc", "reduced_P290_d0.nc"):  # fmt: skip
        (tmp_path / name).touch()
    monkeypatch.setattr(az, "from_netcdf", lambda f: f.name)  # the names are what is tested
    monkeypatch.setattr(fe, "landscape_report", lambda idata, divide=None: idata)
    assert profile_reports(tmp_path) == {"aG": {290: "kernel_P290_d0.nc"},
                                         "copy1": {1500: "kernel_P1500_copy1_d0.nc"},
                                         "induction2": {1500: "kernel_P1500_induction2_d0.nc"}}  # fmt: skip
    assert profile_reports(tmp_path / "none") == {}
    # each site read across its own divide where one is given
    monkeypatch.setattr(fe, "landscape_report", lambda idata, divide=None: divide)
    assert profile_reports(tmp_path, divides={"copy1": 1.5}) == {
        "aG": {290: None},
        "copy1": {1500: 1.5},
        "induction2": {1500: None},
    }


def test_profile_table_reads_delta_F_across_a_fixed_divide():
    """The committed chain alpha = 0.3 profiles (docs/validation.md, "Is the softmax transition
    still first order?") read across aG = 2: one minimum each, Delta F 18.08 and 2.86 nats (the
    table there, made by docs/scripts/landscape.py --split 2), no sign change; Zipf s = 1 at
    P = 340 has two minima and Delta F < 0 across its own barrier."""
    from bayes_attn.experiments.results import profile_reports

    tokens = Path(__file__).resolve().parents[1] / "docs" / "figures" / "tokens"
    chain = profile_reports(tokens / "profiles_markov_a0.3", divides={"aG": 2.0})
    text = profile_table(chain).splitlines()
    assert text[0].startswith("aG: P, windows") and len(text) == 4
    assert "divide 2.000:   +18.08" in text[1] and "divide 2.000:    +2.86" in text[2]
    assert text[3] == "  Delta F does not change sign across these P"
    zipf = profile_reports(tokens / "profiles_zipf1")["aG"]
    assert zipf[340].q_minimum.size == 2 and float(zipf[340].delta_F) < 0
