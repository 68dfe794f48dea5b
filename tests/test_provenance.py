"""Every run records how it was made; diagnose prints it and tells the truth about SMC and Z2."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn.analysis import diagnose
from bayes_attn.experiments.sweep import SweepConfig, run_sweep
from bayes_attn.inference import run_sgld, run_smc, train_adam
from bayes_attn.models import network_model, order_param_model

RECORD = ("sampler", "seed", "chains", "warmup", "draws", "thinning", "level")
VERSIONS = ("bayes_attn", "jax", "numpyro", "arviz", "blackjax")


@pytest.fixture(scope="module")
def paper():
    return ba.CopyTask.paper(), ba.Hyper.paper()


def _reread(idata, tmp_path, name):
    path = tmp_path / f"{name}.nc"
    az.to_netcdf(idata, path)
    return az.from_netcdf(path)


def _check_record(attrs, sampler, level, **expected):
    for key in RECORD:
        assert key in attrs, key
    for lib in VERSIONS:
        assert isinstance(attrs[f"{lib}_version"], str) and attrs[f"{lib}_version"], lib
    assert attrs["sampler"] == sampler and attrs["level"] == level
    assert "model_kwargs" not in attrs  # no repr-JSON
    for key, want in expected.items():
        got = np.asarray(attrs[key]).item()
        assert got == want and type(got) is type(want), (key, got, want)


def test_nuts_sgld_smc_record_their_runs(paper, tmp_path, reduced_nuts, reduced_smc):
    """NUTS and SMC: the session's shared runs (tests/conftest.py), with model_kwargs; SGLD its own."""
    task, hyper = paper
    nuts = _reread(reduced_nuts, tmp_path, "nuts")
    _check_record(
        nuts.posterior.attrs, "nuts", "reduced",
        seed=7, chains=2, warmup=50, draws=50, thinning=1, include_logdet=1, P=9.0,
    )  # fmt: skip
    assert nuts.sample_stats.attrs["sampler"] == "nuts"  # every group carries it
    # the compiled program of test_sgld's run (its task, tokens, sizes and step; not its seed)
    small = ba.CopyTask(8, 3)
    tokens = small.sample(jax.random.key(1), 12)
    sgld = run_sgld(
        network_model,
        model_args=(small, hyper, tokens, "softmax", 12),
        model_kwargs={"batch_size": 4},
        num_chains=2,
        num_warmup=3,
        num_samples=7,
        thinning=2,
        seed=1,
        progress_bar=False,
    )
    sgld = _reread(sgld, tmp_path, "sgld")
    _check_record(
        sgld.posterior.attrs, "sgld", "network",
        seed=1, chains=2, warmup=3, draws=3, thinning=2, d_model=12, P=12, batch_size=4,
        factorized=0, train_embeddings=1, step_size=1e-4,
    )  # fmt: skip
    smc = _reread(reduced_smc, tmp_path, "smc")
    _check_record(
        smc.posterior.attrs, "smc", "reduced",
        seed=5, chains=1, warmup=0, draws=200, include_logdet=1, P=276.0,
    )  # fmt: skip


def test_adam_and_sweep_record_their_runs(paper, tmp_path):
    task, hyper = paper
    ds = train_adam(
        task, hyper, "linear", 8, 20, members=2, max_steps=20, chunk=10, seed=4,
        progress_bar=False,
    )  # fmt: skip
    ds.to_netcdf(tmp_path / "adam.nc", engine="h5netcdf")
    back = xr.open_dataset(tmp_path / "adam.nc", engine="h5netcdf")
    _check_record(
        back.attrs, "adam", "network",
        seed=4, chains=2, warmup=0, thinning=10, d_model=8, P=20, factorized=0,
    )  # fmt: skip
    assert back.attrs["draws"] == ds.sizes["step"]
    # the points are the program of the session's reduced_nuts (tests/conftest.py)
    cfg = SweepConfig(
        kind="nuts", P=(9.0,), activation=("linear",), seed=(0, 1),
        options=dict(num_chains=2, num_warmup=50, num_samples=50, include_logdet=True),
    )  # fmt: skip
    out = run_sweep(cfg, tmp_path / "sweep.nc", progress=False)
    sweep = xr.open_dataset(tmp_path / "sweep.nc", engine="h5netcdf")
    a = sweep.attrs
    _check_record(a, "nuts", "reduced", chains=2, warmup=50, draws=50, include_logdet=1)
    np.testing.assert_array_equal(a["seed"], [0, 1])  # the grid
    # the sweep's linear summaries say that they are folded
    assert "folded" in sweep["c1_mean"].attrs["description"]
    assert "Z2" in sweep["cG_mean"].attrs["description"]
    assert out is not None


def test_diagnose_prints_the_record_in_one_line(reduced_nuts):
    first = str(diagnose(reduced_nuts)).splitlines()[0]
    assert first.startswith("nuts, level reduced, linear, P=9, L=25, V=5")
    assert "seed 7, chains 2, warm-up 50, draws 50, thinning 1" in first
    for lib in ("bayes-attn", "jax", "numpyro", "arviz", "blackjax"):
        assert f"{lib} " in first, lib


def test_smc_diagnose_reports_smc_not_rhat(reduced_nuts, reduced_smc):
    """SMC draws: no R-hat column or R-hat verdict, no n_switches, no ArviZ shape warning; the
    particle ESS, tempering steps, evidence and phase fractions instead. The SMC run (one run, so
    one chain: the case ArviZ's shape check warns about) is made with every warning an error
    (tests/conftest.py); diagnose here too."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an ArviZ shape warning would fail here
        d = diagnose(reduced_smc)
    text = str(d)
    assert "r_hat" not in d.table.columns
    assert "R-hat" not in text
    assert "tempering_steps" in text and "particle_ess" in text and "SMC: log evidence" in text
    assert d.phases is not None and "n_switches" not in d.phases.table.columns
    assert "strong phase" in text
    # the same reduced model's NUTS draws keep their R-hat
    assert "r_hat" in diagnose(reduced_nuts).table.columns


def _linear_draws(centres, n=400, sd=0.01, seed=0):
    rng = np.random.default_rng(seed)
    c = np.asarray(centres, float)[:, None, :] + sd * rng.standard_normal((len(centres), n, 2))
    idata = az.from_dict({"posterior": {"c1": c[..., 0], "cG": c[..., 1]}})
    idata.posterior.attrs.update(activation="linear", sampler="nuts")
    return idata


def test_z2_images_are_described_and_real_disagreement_is_flagged():
    images = _linear_draws([(0.4, 0.1), (-0.4, -0.1), (0.4, 0.1), (-0.4, -0.1)])
    d = diagnose(images)
    assert d.ok and "chains 0, 2 at c1 + cG > 0" in d.z2 and "folded summary" in str(d)
    np.testing.assert_allclose(d.folded.loc["c1", "mean"], 0.4, atol=0.01)
    assert abs(d.table.loc["c1", "mean"]) < 0.01  # the raw table is still there
    # chain 2 sits elsewhere, not in an image of the others: flagged, after folding
    beyond = _linear_draws([(0.4, 0.1), (-0.4, -0.1), (0.8, 0.1), (-0.4, -0.1)])
    d = diagnose(beyond)
    assert not d.ok
    assert any("beyond the Z2 symmetry" in w and "chain 2" in w for w in d.warnings), d.warnings
    assert "c1 + cG >= 0" in str(diagnose(images, fold=True))
    np.testing.assert_allclose(diagnose(images, fold=True).table.loc["c1", "mean"], 0.4, atol=0.01)


def _mixed_images(P, sampler, centre=(0.44, 0.79), sd=0.02, seed=0):
    """Four chains (runs) each holding both Z2 images, half and half, as SMC's particles do."""
    rng = np.random.default_rng(seed)
    sign = np.where(rng.random((4, 400)) < 0.5, 1.0, -1.0)
    c1 = sign * centre[0] + sd * rng.standard_normal((4, 400))
    cG = sign * centre[1] + sd * rng.standard_normal((4, 400))
    idata = az.from_dict({"posterior": {"c1": c1, "cG": cG}})
    idata.posterior.attrs.update(
        activation="linear", sampler=sampler, P=float(P), L=25, V=5, chi=30.0, g_w=1.0, g_o=1.0,
        sigma2=30.0,
    )  # fmt: skip
    return idata


def test_one_fold_rule_for_every_sampler():
    """Above the linear P* (22.76 at Table 1) draws in both Z2 images are summarised folded,
    whether chains are stuck in one image each (NUTS) or every run holds both (SMC particles);
    below it the symmetric posterior is summarised as it is."""
    for sampler, word in (("smc", "runs hold"), ("nuts", "chains spend")):
        d = diagnose(_mixed_images(400.0, sampler))
        assert d.z2 is not None and word in d.z2 and "P* = 22.76" in d.z2, d.z2
        assert "folded summary" in str(d) and d.ok, d.warnings
        np.testing.assert_allclose(d.folded.loc["c1", "mean"], 0.44, atol=0.01)
        np.testing.assert_allclose(d.folded.loc["c1", "sd"], 0.02, atol=0.005)
        assert abs(d.table.loc["c1", "mean"]) < 0.05  # the raw table is still there
    # below P*: one state, symmetric about the origin; nothing folded
    low = _mixed_images(11.0, "smc", centre=(0.0, 0.0), sd=0.05)
    d = diagnose(low)
    assert d.z2 is None and "folded summary" not in str(d)
    assert abs(d.table.loc["c1", "mean"]) < 0.01


def test_linear_smc_is_folded_above_p_star(paper):
    """The issue's case: tempered SMC at P = 400 puts half of every run's particles in each image
    (raw c1 ~ 0 with sd ~ 0.45); diagnose now gives the folded summary, at the saddle's c1."""
    from bayes_attn.theory import global_saddle

    task, hyper = paper
    smc = run_smc(order_param_model, model_args=(task, hyper, 400.0, "linear"),
                  num_particles=200, num_runs=2, seed=0)  # fmt: skip
    d = diagnose(smc)
    assert d.z2 is not None and "runs hold" in d.z2, str(d)
    c1 = float(global_saddle(task, hyper, 400.0, "linear").c1)
    assert abs(d.folded.loc["c1", "mean"] - c1) < 0.05, (d.folded, c1)
    assert d.folded.loc["c1", "sd"] < 0.1 < d.table.loc["c1", "sd"]


def test_order_parameter_names_have_one_owner():
    from bayes_attn.models.levels import LEVELS, MODELS, level_of, order_parameters

    assert LEVELS == ("reduced", "kernel", "network")
    assert [level_of(MODELS[k]) for k in LEVELS] == list(LEVELS)
    assert order_parameters("linear") == ("c1", "cG")
    assert order_parameters("softmax") == ("a1", "aG")
    with pytest.raises(ValueError, match="activation"):
        order_parameters("relu")
    assert level_of(jnp.sum) is None


PROGRESS_SCRIPT = """
import jax, bayes_attn as ba
from bayes_attn.inference import run_smc
from bayes_attn.models import network_model
task, hyper = ba.CopyTask(4, 3), ba.Hyper.paper()
tok = task.sample(jax.random.key(0), 6)
idata = run_smc(network_model, task, hyper, tok, "linear", 2, num_particles=32, num_runs=1,
                progress_bar=True)
print("result", idata.posterior.attrs["sampler"])
"""


@pytest.mark.slow  # a subprocess running network SMC; test_cli checks the same stderr lines on Level 2
def test_network_smc_says_its_cost_and_steps_on_stderr():
    """Without any logging setup: what it does and its cost first, then the progress bar over
    lambda with each step (the per-step lines are at DEBUG), all on stderr; stdout holds only
    the script's result."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-c", PROGRESS_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout == "result smc\n"
    lines = res.stderr.splitlines()
    first = next(i for i, ln in enumerate(lines) if "run_smc:" in ln)
    assert "24 dimensions" in lines[first] and "about" in lines[first]
    assert "ms per gradient" in lines[first]
    step = next(i for i, ln in enumerate(lines) if "lambda" in ln and "step 1," in ln)
    assert first < step


def test_start_occupancy_says_what_it_does_and_its_cost(paper, caplog):
    import logging

    from bayes_attn.experiments.coexistence import start_occupancy

    task, hyper = paper
    # P = 276, 2 chains x (50 + 50): the NUTS program of tests/test_calling.py's
    # test_init_params_are_constrained_for_nuts (one compilation for both)
    with caplog.at_level(logging.INFO, logger="bayes_attn"):
        occ, _ = start_occupancy(
            task, hyper, 276.0, "reduced", num_chains=2, num_warmup=50, num_samples=50
        )
    text = caplog.text
    assert "start_occupancy: the reduced modes from both starts at P = 276" in text
    assert "start_occupancy: NUTS, 2 chains x (50 warm-up + 50) draws" in text
    assert "about" in text and "ms per gradient" in text
    assert occ.table.shape[0] == 2
