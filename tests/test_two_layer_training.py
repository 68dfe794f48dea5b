"""Adam on the two-layer induction network (issue 43 part 4): one trainer, one loss owner per model.

The objective is the model's own negative log-posterior (to 1e-9, as for one layer); training
records both layers' order parameters and the KL to each reference strategy; frozen embeddings
stay frozen; the training-curve sweep kind runs its quick config end to end and its plateau
measure reads the steps it should on a hand-made curve.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_density

import bayes_attn as ba
from bayes_attn.induction import InductionTask
from bayes_attn.inference import train_adam
from bayes_attn.models.two_layer import (
    init_network_params,
    network_neg_log_posterior,
    two_layer_network_model,
)
from bayes_attn.tokens import InContextMarkov

TASK = InductionTask(6, 2, InContextMarkov(1.0, start="uniform"))
HYPER = ba.Hyper.paper()


@pytest.mark.parametrize("frozen", [False, True])
def test_objective_is_the_two_layer_models_negative_log_posterior(frozen):
    """U(theta) + log p(theta, y) is the same constant at two weight draws (to 1e-9), with the
    embeddings trained or held."""
    d = 4
    tok = TASK.sample(jax.random.key(0), 5)
    held = init_network_params(jax.random.key(9), TASK, HYPER, d)
    emb = {k: held[k] for k in ("W_emb", "p")} if frozen else {}
    kwargs = {"embeddings": (emb["W_emb"], emb["p"])} if frozen else {}
    gaps = []
    for k in (1, 2):
        prm = init_network_params(jax.random.key(k), TASK, HYPER, d)
        prm = {n: w for n, w in prm.items() if n not in emb}
        logp, _ = log_density(
            two_layer_network_model, (TASK, HYPER, tok, "softmax", d), kwargs, prm
        )
        gaps.append(float(network_neg_log_posterior(prm, tok, TASK, HYPER, "softmax", frozen=emb)
                          + logp))  # fmt: skip
    assert abs(gaps[0] - gaps[1]) < 1e-9 * abs(gaps[0])


def test_train_adam_trains_the_two_layer_network_on_the_induction_task():
    """The record holds both layers' scores and the KL to each strategy per step; the references'
    held-out losses are attrs, ordered bigram < unigram < uniform; the objective falls; held
    embeddings come back unchanged and trained ones do not. ``keep_params_at`` adds the weights
    at recorded steps (at the last, the final weights) and nothing else; a step that is not
    recorded is refused before any training."""
    kw = dict(members=2, max_steps=60, chunk=20, patience=10**6, num_test=50, progress=False)
    out = train_adam(TASK, HYPER, "softmax", 8, 30, return_params=True, keep_params_at=[60, 20],
                     **kw)  # fmt: skip
    assert list(out.params_step.values) == [20, 60]
    assert out.W_G2_at.dims == ("member", "params_step", "stream", "stream_k")
    for name in ("W_emb", "p", "W_G1", "W_G2", "W_O"):
        np.testing.assert_array_equal(out[f"{name}_at"].sel(params_step=60), out[name])
    assert not np.array_equal(out.W_G1_at.sel(params_step=20), out.W_G1)
    with pytest.raises(ValueError, match=r"keep_params_at: \[30\] are not recorded steps"):
        train_adam(TASK, HYPER, "softmax", 8, 30, keep_params_at=[20, 30], **kw)
    assert out.attrs["model"] == "two_layer_network_model"
    for name in ("copy1", "induction2_excess", "uniform2", "kl_bigram", "kl_unigram", "test_loss"):
        assert out[name].dims == ("member", "step") and np.all(np.isfinite(out[name]))
    assert out.attrs["loss_bigram"] < out.attrs["loss_unigram"] < out.attrs["loss_uniform"]
    assert out.A2_bar.shape == (2, 6, 6)
    assert np.all(out.objective.isel(step=-1) < out.objective.isel(step=0))
    held = train_adam(TASK, HYPER, "softmax", 8, 30, return_params=True, train_embeddings=False,
                      **kw)  # fmt: skip
    assert "params_step" not in held.dims  # keep_params_at adds these variables, nothing else:
    assert set(out) - set(held) == {f"{n}_at" for n in ("W_emb", "p", "W_G1", "W_G2", "W_O")}
    start = jax.vmap(lambda k: init_network_params(k, TASK, HYPER, 8))(
        jax.random.split(ba.inference.adam.adam_keys(seed=0).init, 2)
    )
    np.testing.assert_array_equal(held.W_emb, start["W_emb"])
    assert not np.allclose(out.W_emb, start["W_emb"])
    with pytest.raises(ValueError, match="factorized"):
        train_adam(TASK, HYPER, "softmax", 8, 30, factorized=True, **kw)


def test_plateau_reads_the_steps_of_a_hand_made_curve():
    """A loss that reaches the unigram level at step 200 and crosses the unigram-bigram midpoint
    at step 700: entry 200, jump 700, plateau 500; a curve that never jumps: nan."""
    from bayes_attn.experiments.induction_training import plateau

    steps = np.arange(50, 1001, 50)
    refs = {"loss_uniform": 0.33, "loss_unigram": 0.32, "loss_bigram": 0.30}
    loss = np.where(steps < 200, 0.335, np.where(steps < 700, 0.321, 0.301))
    out = plateau(steps, loss, **refs)
    assert (out["entry_step"], out["jump_step"], out["plateau_steps"]) == (200, 700, 500)
    flat = plateau(steps, np.full(steps.shape, 0.321), **refs)
    assert flat["entry_step"] == 50 and np.isnan(flat["jump_step"])


@pytest.mark.slow
def test_induction_training_config_runs_at_its_quick_size(tmp_path):
    """The study's config (bayes_attn/configs/induction_training.toml) at its quick size, end to
    end: curves on both sources, per step, and the plateau measures; the file labels the sources
    by their flags (False, True)."""
    from pathlib import Path

    import bayes_attn
    from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep

    path = Path(bayes_attn.__file__).parent / "configs" / "induction_training.toml"
    cfg = SweepConfig.from_dict(read_sweep_table(path, quick=True))
    run_sweep(cfg, tmp_path / "curves.nc", progress=False)
    ds = load_sweep(tmp_path / "curves.nc")
    assert bool(ds.done.all())
    assert ds.kl_bigram.sizes["doubly_stochastic"] == 2
    assert ds.doubly_stochastic.values.tolist() == [False, True]
    assert np.all(np.isfinite(ds.test_loss)) and np.all(np.isfinite(ds.copy1))
    assert "plateau_steps" in ds and "jump_step" in ds


@pytest.mark.slow
@pytest.mark.parametrize("integrate_readout", [False, True])
def test_sgld_check_runs_on_the_two_layer_network(integrate_readout):
    """SGLD on the two-layer network from an Adam start, at a tiny size, with the readout
    sampled and integrated out: every summary finite, the step from the curvature rule positive
    and at most 5e-4 / d."""
    from bayes_attn.experiments.induction_training import SCORES, sgld_check

    out = sgld_check(TASK, HYPER, 30, d_model=8, adam_steps=40, num_warmup=10, num_samples=20,
                     thinning=4, integrate_readout=integrate_readout)  # fmt: skip
    assert 0 < out["step_size"] <= 5e-4 / 8
    assert all(np.isfinite(out[k]) for k in SCORES)
    assert all(np.isfinite(out[f"{k}_adam"]) for k in SCORES)


@pytest.mark.slow  # the same sgld_check as the test above, through the sweep: its stand-in
def test_induction_sgld_config_runs_at_its_quick_size(tmp_path):
    """The ``induction_sgld`` kind (configs/induction_sgld.toml) at its quick size, end to end:
    every order parameter's mean, R-hat and ESS and U's R-hat finite in the file."""
    from pathlib import Path

    import bayes_attn
    from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep

    path = Path(bayes_attn.__file__).parent / "configs" / "induction_sgld.toml"
    cfg = SweepConfig.from_dict(read_sweep_table(path, quick=True))
    run_sweep(cfg, tmp_path / "sgld.nc", progress=False)
    ds = load_sweep(tmp_path / "sgld.nc")
    assert bool(ds.done.all())
    for name in ("copy1", "copy1_rhat", "induction2_ess", "U_rhat", "step_size"):
        assert np.all(np.isfinite(ds[name].values)), name


def test_induction_sgld_refuses_bad_options_naming_them():
    """The kind's check, before any work: a source that is not in-context Markov, and each bad
    option, named."""
    from bayes_attn.experiments.sweep import SweepConfig

    base = {"kind": "induction_sgld", "P": [20], "L": [4], "V": [2], "activation": ["softmax"],
            "tokens": "icl-markov:alpha=1"}  # fmt: skip
    SweepConfig.from_dict(base)
    with pytest.raises(ValueError, match="tokens"):
        SweepConfig.from_dict({**base, "tokens": "uniform"})
    for opt, name in (({"d_model": 0}, "d_model"), ({"step_size": -1.0}, "step_size"),
                      ({"preconditioner": "full"}, "preconditioner"),
                      ({"integrate_readout": 3}, "integrate_readout")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            SweepConfig.from_dict({**base, "options": opt})


@pytest.mark.parametrize(
    ("options", "match"),
    [({"llc_draws": 0}, "llc_draws"), ({"llc_sampler": "nuts"}, "llc_sampler must be")],
)
def test_induction_training_refuses_bad_llc_options_naming_them(options, match):
    from bayes_attn.experiments.sweep import SweepConfig

    with pytest.raises(ValueError, match=match):
        SweepConfig(kind="induction_training", P=(20,), L=(4,), V=(2,),
                    tokens="icl-markov:alpha=1", options={"llc_every": 1, **options})  # fmt: skip


@pytest.mark.slow  # 25 s of CPU on the shared cores: the default suite's budget is spent (issue 44)
def test_llc_along_training_records_the_llc_at_the_runs_own_weights():
    """``llc_every``: the LLC at w(t) of every k-th record. The weights of a snapshot are the one
    run's at that step (``keep_params_at``), bit for bit those of the same run retrained up to
    the step (the path before 2026-12-07); every snapshot has a finite λ̂, MCSE, R-hat (2 chains), |∇L_n(w(t))| > 0 and
    the curvature step; a record without a snapshot is NaN. Tiny (L = 4, V = 2, P = 20, d = 4,
    2 x 10 draws): this checks the plumbing, not the estimate."""
    from bayes_attn.experiments.induction_training import llc_along_training
    from bayes_attn.experiments.sweep import SweepConfig
    from bayes_attn.inference.adam import AdamSettings

    task = InductionTask(4, 2, InContextMarkov(1.0, start="uniform"))
    s = AdamSettings(max_steps=30, patience=30, chunk=10, batch_size=8, num_test=20)
    long = train_adam(task, HYPER, "softmax", 4, 20, members=1, seed=0, settings=s,
                      keep_params_at=[20], progress=False)  # fmt: skip
    short = train_adam(task, HYPER, "softmax", 4, 20, members=1, seed=0, max_steps=20,
                       settings=s, return_params=True, progress=False)  # fmt: skip
    for name in ("W_emb", "p", "W_G1", "W_G2", "W_O"):
        np.testing.assert_array_equal(long[f"{name}_at"].sel(params_step=20), short[name])
    out = llc_along_training(task, HYPER, "softmax", 4, 20, seed=0, settings=s, every=2,
                             num_chains=2, num_draws=10)  # fmt: skip
    assert out["test_loss"][1] == float(long.test_loss[0, 1])  # the long run's w(20)
    assert np.isnan(out["llc"][[0, 2]]).all() and np.isnan(out["test_loss"][[0, 2]]).all()
    for name in ("llc", "llc_mcse", "llc_rhat", "llc_acceptance"):
        assert np.isfinite(out[name][1]), name
    assert out["llc_grad_norm"][1] > 0 and out["llc_step"][1] > 0
    with pytest.raises(ValueError, match="llc_draws"):
        SweepConfig(kind="induction_training", P=(20,), L=(4,), V=(2,),
                    tokens="icl-markov:alpha=1", options={"llc_every": 1, "llc_draws": 0})  # fmt: skip


def test_training_script_labels_old_and_new_files_by_the_flags():
    """docs/scripts/induction_training.py labels the sources 0/1 by their flags: a sweep writes
    the flags (True/False) as the doubly_stochastic coordinate; a file from before 2026-12-07
    holds the index into the option's list there (the script reads the flags from the option)."""
    import importlib.util
    import json
    import sys
    from pathlib import Path

    import xarray as xr

    scripts = Path(__file__).resolve().parents[1] / "docs" / "scripts"
    sys.path.insert(0, str(scripts))  # the script imports docs/scripts/_study.py
    try:
        spec = importlib.util.spec_from_file_location("training", scripts / "induction_training.py")
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
    finally:
        sys.path.remove(str(scripts))
    config = json.dumps({"options": {"doubly_stochastic": [1, 0]}})
    old = xr.Dataset({"x": ("doubly_stochastic", [1.0, 2.0])},
                     coords={"doubly_stochastic": [0, 1]}, attrs={"config": config})  # fmt: skip
    new = old.assign_coords(doubly_stochastic=[True, False])
    for ds in (old, new):
        assert script.source_flags(ds).doubly_stochastic.values.tolist() == [1, 0]
