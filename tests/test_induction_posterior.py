"""The induction head's kernel-limit posterior, profiles and LLC as sweep kinds
(bayes_attn.experiments.induction_posterior; issue 43, part 4)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import bayes_attn
from bayes_attn.analysis.free_energy import equal_weight_crossing
from bayes_attn.experiments import induction_posterior as ip
from bayes_attn.experiments.sweep import SweepConfig, read_sweep_table, run_sweep
from bayes_attn.induction import InductionTask, fold_linear_scores
from bayes_attn.inference.potential import flat_potential
from bayes_attn.models.two_layer import two_layer_kernel_model
from bayes_attn.task import Hyper
from bayes_attn.tokens import parse_tokens

CONFIGS = Path(bayes_attn.__file__).parent / "configs"
SOURCE = "icl-markov:alpha=1,start=uniform"
TASK = InductionTask(4, 2, parse_tokens(SOURCE))
HYPER = Hyper.paper()


def _draws(P=12, seed=0):
    tokens = TASK.sample(jax.random.key(seed), P)
    n = TASK.n_features
    k1, k2 = jax.random.split(jax.random.key(seed + 1))
    return tokens, [
        {"M1": 0.5 * jax.random.normal(jax.random.fold_in(k1, i), (n, n)),
         "M2": 0.5 * jax.random.normal(jax.random.fold_in(k2, i), (2 * n, 2 * n))}
        for i in range(3)
    ]  # fmt: skip


def test_llc_target_at_the_posterior_temperature_is_the_kernel_limit_posterior():
    """With the prior in, no localization and n beta = n, the LLC target is the kernel limit's
    posterior: its log density differs from -U of two_layer_kernel_model (Woodbury evidence) by a
    constant, at 1e-9 relative to the spread of U over the points."""
    tokens, Ms = _draws()
    w = jnp.zeros((TASK.V, 4 * TASK.n_features))
    target = ip.two_layer_llc_target(TASK, HYPER, tokens, "softmax", Ms[0], w, d_model=64,
                                     nbeta=tokens.shape[0], gamma=0.0, include_prior=True)  # fmt: skip
    pot = flat_potential(two_layer_kernel_model, (TASK, HYPER, tokens, "softmax"))
    U_fn, lp_fn = jax.jit(pot.U), jax.jit(target.log_density)
    U = np.array([float(U_fn(pot.ravel(m))) for m in Ms])
    lp = np.array([float(lp_fn(jnp.concatenate([m["M1"].ravel(), m["M2"].ravel()]))) for m in Ms])
    diff = lp + U
    assert np.ptp(diff) < 1e-9 * np.ptp(U)


def test_the_linear_posterior_is_even_in_each_layers_sign_and_the_fold_picks_one_image():
    """Linear attention, the readout integrated out: U is the same at (M1, M2), at -M1 with
    M2's h0-h1 blocks negated, at -M2, and at both (1e-10 relative); the four images predict
    the same held-out loss, and their scores differ by the signs fold_linear_scores undoes:
    folded, the four read the same (1e-10)."""
    tokens, Ms = _draws()
    test, n = TASK.sample(jax.random.key(9), 20), TASK.n_features
    pot = flat_potential(two_layer_kernel_model, (TASK, HYPER, tokens, "linear"))
    M1, M2 = Ms[0]["M1"], Ms[0]["M2"]
    cross = jnp.ones((2 * n, 2 * n)).at[:n, n:].set(-1.0).at[n:, :n].set(-1.0)  # h1 -> -h1
    images = [(M1, M2), (-M1, M2 * cross), (M1, -M2), (-M1, -M2 * cross)]
    U = jax.jit(pot.U)
    u = np.array([float(U(pot.ravel({"M1": a, "M2": b}))) for a, b in images])
    assert np.ptp(u) < 1e-10 * abs(u[0])
    got = ip.predictive(TASK, HYPER, tokens, test, "linear", jnp.stack([a for a, _ in images]),
                        jnp.stack([b for _, b in images]))  # fmt: skip
    np.testing.assert_allclose(got["loss_draws"], got["loss_draws"][0], rtol=1e-10)
    raw = {s: got[s] for s in ip.SCORES}
    np.testing.assert_allclose(raw["copy1"][[1, 3]], -raw["copy1"][[0, 2]], rtol=1e-10)
    np.testing.assert_allclose(raw["induction2"][[2, 3]], -raw["induction2"][[0, 1]], rtol=1e-10)
    folded = fold_linear_scores(raw)
    for s in ip.SCORES:
        np.testing.assert_allclose(folded[s], folded[s][0], rtol=1e-10, atol=1e-14, err_msg=s)
    assert folded["copy1"][0] >= 0 and folded["induction2"][0] >= 0


def test_llc_target_loss_at_its_point_with_a_stiff_readout_is_the_point_loss():
    """gamma -> infinity pins the readout at w*: E[L_n | x*] -> L_n(x*, w*) = init_loss."""
    tokens, Ms = _draws()
    w = 0.3 * jax.random.normal(jax.random.key(5), (TASK.V, 4 * TASK.n_features))
    target = ip.two_layer_llc_target(TASK, HYPER, tokens, "linear", Ms[1], w, d_model=24,
                                     gamma=1e9)  # fmt: skip
    assert float(target.loss(target.x_star)) == pytest.approx(target.init_loss, rel=1e-6)
    assert target.n == tokens.shape[0] and target.nbeta == pytest.approx(12 / np.log(12))
    with pytest.raises(ValueError, match="gamma"):
        ip.two_layer_llc_target(TASK, HYPER, tokens, "linear", Ms[1], w, d_model=24, gamma=0.0)
    with pytest.raises(ValueError, match="d_model"):
        ip.two_layer_llc_target(TASK, HYPER, tokens, "linear", Ms[1], w, d_model=4)


@pytest.mark.parametrize(
    "kind, options, name",
    [("induction_profile", {"cvs": ["aG"]}, "cvs"),
     ("induction_profile", {"profiles": 3}, "profiles"),
     ("induction_profile", {"centres": {"aG": [0.0, 1.0]}}, "centres"),
     ("induction_profile", {"centres": {"copy1": [1.0, 1.0]}}, "centres"),
     ("induction_profile", {"centres": {"copy1": "1.0"}}, "centres"),
     ("induction_profile", {"profiles": "/proc/no/such/folder"}, "profiles"),
     ("induction_posterior", {"metric": "dense"}, "metric"),
     ("induction_posterior", {"num_samples": 0}, "num_samples"),
     ("induction_llc", {"sampler": "smc"}, "sampler"),
     ("induction_llc", {"metric": "dense"}, "metric"),
     ("induction_llc", {"gamma": -1.0}, "gamma"),
     ("induction_llc", {"gamma": float("nan")}, "gamma")],
)  # fmt: skip
def test_the_kinds_refuse_bad_options_naming_them(kind, options, name):
    with pytest.raises(ValueError, match=name):
        SweepConfig.from_dict({"kind": kind, "P": [10], "L": [4], "V": [2], "tokens": SOURCE,
                               "activation": ["softmax"], "options": options})  # fmt: skip


def test_equal_weight_P_interpolates_the_sign_change_in_log_P():
    dF = np.array([[3.0, 1.0, -1.0, -4.0], [2.0, 1.0, 0.5, 0.2]]).T  # (P, cv)
    ds = xr.Dataset({"delta_F": (("P", "cv"), dF)}, coords={"P": [100, 300, 1000, 3000]},
                    attrs={"cvs": "copy1, induction2"})  # fmt: skip
    assert ip.equal_weight_P(ds, "copy1") == pytest.approx(np.sqrt(300 * 1000))
    assert np.isnan(ip.equal_weight_P(ds, "induction2"))
    with pytest.raises(ValueError, match="cv"):
        ip.equal_weight_P(ds, "uniform1")
    # the crossing itself (analysis.free_energy): an exact zero, non-finite values left out
    assert equal_weight_crossing([100, 300, 1000], [2.0, 0.0, -1.0]) == 300.0
    assert equal_weight_crossing([100, 300, 1000], [2.0, np.nan, -2.0]) == pytest.approx(
        np.sqrt(100 * 1000)
    )
    with pytest.raises(ValueError, match="delta_F"):
        equal_weight_crossing([100, 300], [1.0])


def _one(da) -> float:
    """The one value of a variable over a one-point grid."""
    return float(np.asarray(da).item())


def _quick(name, tmp_path, **options):
    table = read_sweep_table(CONFIGS / f"{name}.toml", quick=True)
    table["options"] = {**table.get("options", {}), **options}
    cfg = SweepConfig.from_dict(table)
    ds = run_sweep(cfg, tmp_path / f"{name}.nc", progress=False)
    assert bool(ds.done.all())
    return ds


@pytest.mark.slow
def test_induction_posterior_config_runs_at_its_quick_size(tmp_path):
    """NUTS from the MAP at the quick size (L = 4, V = 2, P = 20): the draws' scores and the
    predictive loss finite, no divergence, R-hat < 1.1, and the MAP's scores those of the
    ``induction`` kind's MAP on the same dataset."""
    from bayes_attn.experiments.induction import map_reading, map_search

    ds = _quick("induction_posterior", tmp_path)
    for s in ip.SCORES:
        assert np.isfinite(_one(ds[f"{s}_mean"])) and _one(ds[f"{s}_sd"]) >= 0
    assert _one(ds.divergences) == 0 and _one(ds.copy1_rhat) < 1.1
    assert _one(ds.loss_predictive) < _one(ds.loss_uniform) + 0.05
    search = map_search(TASK, HYPER, 20, "softmax", seed=0, num_test=100, maxiter=30,
                        method="l-bfgs")  # the induction kind's search  # fmt: skip
    ref = map_reading(TASK, HYPER, "softmax", search)[0]
    assert _one(ds.copy1_map) == pytest.approx(ref["copy1"], abs=1e-8)
    assert _one(ds.loss_map) == pytest.approx(ref["loss"], abs=1e-8)


@pytest.mark.slow
def test_induction_profile_config_runs_at_its_quick_size(tmp_path):
    """The quick profile end to end, its whole umbrella run written to ``profiles`` (the figure's
    input: an F(q) by MBAR with one value per bin), its windows' folder gone once it is stored."""
    from bayes_attn import _arviz as az
    from bayes_attn.analysis.free_energy import landscape_report
    from bayes_attn.experiments.results import profile_reports
    from bayes_attn.plotting import plots

    centres = {"copy1": [-1.0, -0.7, -0.4, -0.1, 0.2]}  # fixed windows, as the config sets them
    ds = _quick("induction_profile", tmp_path, profiles=str(tmp_path / "profiles"), centres=centres)
    assert ds.delta_F.sizes["cv"] == 1 and _one(ds.windows.max()) == 5
    assert np.isfinite(_one(ds.barrier_weak.max())) or np.isfinite(_one(ds.q_weak.max()))
    (written,) = (tmp_path / "profiles").glob("*.nc")
    assert written.name == "kernel_P20_copy1_d0.nc"
    prof = landscape_report(az.from_netcdf(written))
    assert np.isfinite(prof.F.values).sum() >= 2
    panels = profile_reports(tmp_path / "profiles")  # what induction_figure.py --profiles draws
    assert list(panels) == ["copy1"] and list(panels["copy1"]) == [20]
    assert len(plots.induction_profiles(panels).axes) == 1
    assert not list((tmp_path / "induction_profile.nc.points").glob("*"))
    # the same point in another sweep file (its points' folder lost): the profile is read back
    import bayes_attn.inference.umbrella_windows as uw

    def sampled(*args):
        raise AssertionError("sampled again")

    again = tmp_path / "again"
    again.mkdir()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(uw, "_compile", sampled)
        redo = _quick("induction_profile", again, profiles=str(tmp_path / "profiles"),
                      centres=centres)  # fmt: skip
    assert _one(redo.delta_F) == _one(ds.delta_F) or np.isnan(_one(ds.delta_F))


@pytest.mark.slow
def test_induction_llc_config_runs_at_its_quick_size(tmp_path):
    """The config's sampler (NUTS in the Laplace metric at the MAP) at the quick size: a finite
    estimate, no divergence, an acceptance in (0, 1]."""
    ds = _quick("induction_llc", tmp_path)
    assert np.isfinite(_one(ds.llc_mean)) and np.isnan(_one(ds.llc_step))
    assert _one(ds.divergences) == 0 and 0 < _one(ds.acceptance) <= 1
