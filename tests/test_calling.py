"""One calling convention for run_nuts, run_sgld, run_smc and train_adam."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.distributions import biject_to

import bayes_attn as ba
from bayes_attn.inference import adam_keys, run_nuts, run_sgld, run_smc, train_adam
from bayes_attn.inference.potential import unconstrained_init
from bayes_attn.models import network_model, order_param_model
from bayes_attn.models.order_params import softmax_support

TASK, HYPER = ba.CopyTask.paper(), ba.Hyper.paper()
ARGS = (TASK, HYPER, 276.0, "softmax")
NUTS = dict(num_chains=2, num_warmup=30, num_samples=20, progress_bar=False)


@pytest.mark.slow  # the deprecated call form (three compiled samplers); the new forms are checked below
def test_old_form_warns_and_gives_the_same_draws():
    new = run_nuts(
        order_param_model, model_args=ARGS, model_kwargs={"include_logdet": True}, **NUTS
    )
    with pytest.warns(DeprecationWarning, match="model_args="):
        old = run_nuts(order_param_model, *ARGS, include_logdet=True, **NUTS)
    np.testing.assert_array_equal(old.posterior.aG.values, new.posterior.aG.values)
    assert old.posterior.attrs["include_logdet"] == new.posterior.attrs["include_logdet"] == 1
    with pytest.raises(TypeError, match="not also"):
        run_nuts(order_param_model, TASK, model_args=ARGS, **NUTS)


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_key_or_seed_the_same_for_every_sampler():
    key = jax.random.key(3)
    a = run_nuts(order_param_model, model_args=ARGS, key=key, **NUTS)
    b = run_nuts(order_param_model, model_args=ARGS, seed=3, **NUTS)
    np.testing.assert_array_equal(a.posterior.aG.values, b.posterior.aG.values)
    assert a.posterior.attrs["seed"] == -1 and b.posterior.attrs["seed"] == 3
    np.testing.assert_array_equal(a.posterior.attrs["key_data"], jax.random.key_data(key))
    with pytest.raises(ValueError, match="seed: pass a key or a seed"):
        run_nuts(order_param_model, model_args=ARGS, key=key, seed=3, **NUTS)
    s1 = run_smc(order_param_model, model_args=ARGS, num_particles=32, num_runs=1, key=key)
    s2 = run_smc(order_param_model, model_args=ARGS, num_particles=32, num_runs=1, seed=3)
    np.testing.assert_array_equal(s1.posterior.aG.values, s2.posterior.aG.values)
    g1 = run_sgld(order_param_model, model_args=ARGS, key=key, step_size=1e-4, **NUTS)
    g2 = run_sgld(order_param_model, model_args=ARGS, seed=3, step_size=1e-4, **NUTS)
    np.testing.assert_array_equal(g1.posterior.aG.values, g2.posterior.aG.values)
    t1 = train_adam(
        TASK, HYPER, "linear", 4, 10, members=1, max_steps=5, key=key, progress_bar=False
    )
    t2 = train_adam(
        TASK, HYPER, "linear", 4, 10, members=1, max_steps=5, seed=3, progress_bar=False
    )
    np.testing.assert_array_equal(t1.train_loss.values, t2.train_loss.values)


def test_init_params_are_constrained_for_nuts():
    aG = jnp.array([0.4, 3.5])
    u = unconstrained_init(order_param_model, ARGS, {}, {"aG": aG}, 2)
    np.testing.assert_allclose(u["aG"], biject_to(softmax_support(TASK.L)).inv(aG), rtol=1e-12)
    with pytest.raises(ValueError, match="init_params: no sample site"):
        unconstrained_init(order_param_model, ARGS, {}, {"aG": aG, "zz": aG}, 2)
    with pytest.raises(ValueError, match="init_params: give a value for every site"):
        unconstrained_init(order_param_model, ARGS, {}, {"zz": aG}, 2)
    # chains started in the two phases stay in them (the barrier at P* is high): the values
    # given are where the chains are, not their unconstrained images
    idata = run_nuts(
        order_param_model, model_args=ARGS, init_params={"aG": aG}, num_chains=2,
        num_warmup=50, num_samples=50, progress_bar=False,
    )  # fmt: skip
    means = idata.posterior.aG.mean("draw").values
    assert means[0] < 1.0 < 3.0 < means[1], means


def test_smc_refuses_a_minibatched_model_and_renames_max_steps():
    tok = ba.CopyTask(4, 3).sample(jax.random.key(0), 6)
    args = (ba.CopyTask(4, 3), HYPER, tok, "linear", 2)
    with pytest.raises(ValueError, match="model_kwargs: run_smc needs the full likelihood"):
        run_smc(network_model, model_args=args, model_kwargs={"batch_size": 3}, num_particles=8)
    with pytest.warns(DeprecationWarning, match="max_tempering_steps"):
        with pytest.raises(RuntimeError, match="max_tempering_steps"):
            run_smc(order_param_model, model_args=ARGS, num_particles=32, max_steps=1)


def test_adam_keys_are_the_keys_train_adam_uses():
    keys = adam_keys(seed=5)
    test = TASK.sample(keys.test, 100)
    ds = train_adam(
        TASK, HYPER, "linear", 4, 10, members=1, max_steps=5, seed=5, progress_bar=False
    )
    same = train_adam(
        TASK, HYPER, "linear", 4, 10, members=1, max_steps=5, seed=5, test_tokens=test,
        progress_bar=False,
    )  # fmt: skip
    np.testing.assert_array_equal(ds.test_loss.values, same.test_loss.values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adam_keys(key=jax.random.key(5))


def test_basin_evidence_takes_model_args_apart_and_a_seed_or_a_key():
    """basin_evidence(model, model_args=..., model_kwargs=..., seed= or key=): the old form
    (the model's arguments positionally and as extra keywords) warns and gives the same numbers;
    a key gives what its seed gives. The posterior is not Gaussian, so the SMC evidences depend
    on the draws (the two replicates differ) and the comparisons are exact."""
    import numpyro
    import numpyro.distributions as dist

    from bayes_attn.inference import basin_evidence
    from bayes_attn.inference.smc_evidence import log_evidence

    def quartic(a, scale=1.0):
        x = numpyro.sample("x", dist.Normal(0.0, 1.0).expand((2,)).to_event(1))
        numpyro.factor("q", -scale * jnp.sum((x - a) ** 4))

    opts = dict(start={"x": jnp.zeros(2)}, num_particles=64, replicates=2)
    new = basin_evidence(quartic, model_args=(0.5,), model_kwargs={"scale": 2.0}, seed=3, **opts)
    assert new.log_Z_smc[0] != new.log_Z_smc[1] and (new.num_tempering_steps > 1).all()
    assert (new.log_Z_smc_mean, new.log_Z_smc_se) == log_evidence(new.log_Z_smc)
    with pytest.warns(DeprecationWarning, match=r"basin_evidence\(model, model_args="):
        old = basin_evidence(quartic, 0.5, scale=2.0, seed=3, **opts)
    keyed = basin_evidence(
        quartic, model_args=(0.5,), model_kwargs={"scale": 2.0}, key=jax.random.key(3), **opts
    )
    for b in (old, keyed):
        np.testing.assert_array_equal(b.log_Z_smc, new.log_Z_smc)
        assert b.log_Z_laplace == new.log_Z_laplace
    with pytest.raises(ValueError, match="seed: pass a key or a seed"):
        basin_evidence(quartic, model_args=(0.5,), key=jax.random.key(3), seed=3, **opts)
    with pytest.raises(TypeError, match="not also"):
        basin_evidence(quartic, 0.5, model_args=(0.5,), **opts)


def test_phase_free_energies_takes_seed_or_key_and_smc_options_apart(monkeypatch):
    """phase_free_energies (experiments.coexistence): ``seed=`` or ``key=`` (the same basin keys,
    the record says which), its SMC options in ``smc_options=`` apart from the model's; the old
    form (SMC options as keywords) warns and passes the same options; bad options fail before any
    work. The basin evidence is stubbed (it records its call): the real SMC runs are
    tests/test_coexistence.py's."""
    from bayes_attn.experiments import coexistence, phase_free_energies
    from bayes_attn.inference import basins

    calls = []

    def stub(model, *args, start, **kw):
        calls.append(kw)
        return basins.BasinEvidence(mode={"aG": start["aG"]}, potential=0.0, log_Z_laplace=0.0,
                                    log_Z_smc=np.zeros(2), log_Z_smc_mean=0.0, log_Z_smc_se=0.0,
                                    num_tempering_steps=np.ones(2), distance=1.0, dim=1,
                                    converged=True)  # fmt: skip

    monkeypatch.setattr(coexistence, "basin_evidence", stub)
    smc = {"num_particles": 32, "replicates": 3, "mixing_target": 0.1}
    run = dict(tokens=276.0, level="reduced", progress=False)
    a = phase_free_energies(TASK, HYPER, seed=3, smc_options=smc, **run)
    b = phase_free_energies(TASK, HYPER, key=jax.random.key(3), smc_options=smc, **run)
    assert calls[0] == calls[2] and calls[1] == calls[3]  # the same basin keys from seed or key
    assert calls[0]["num_particles"] == 32 and calls[0]["replicates"] == 3
    assert calls[0]["mixing_target"] == 0.1
    assert "include_logdet" not in calls[0]["model_kwargs"]  # the model's default
    assert a.attrs["seed"] == 3 and b.attrs["seed"] == -1
    np.testing.assert_array_equal(b.attrs["key_data"], jax.random.key_data(jax.random.key(3)))
    assert a.attrs["num_particles"] == 32 and a.attrs["include_logdet"] == 0
    with pytest.warns(DeprecationWarning, match="smc_options="):
        phase_free_energies(TASK, HYPER, seed=3, **smc, **run)
    assert calls[4:] == calls[:2]
    phase_free_energies(TASK, HYPER, seed=3, include_logdet=True, smc_options=smc, **run)
    assert calls[-1]["model_kwargs"]["include_logdet"] is True  # the model's, apart from SMC's
    n = len(calls)
    with pytest.raises(ValueError, match="seed: pass a key or a seed"):
        phase_free_energies(TASK, HYPER, seed=3, key=jax.random.key(3), **run)
    with pytest.raises(ValueError, match="smc_options"):
        phase_free_energies(TASK, HYPER, smc_options={"particles": 32}, **run)
    with pytest.raises(ValueError, match="replicates"):
        phase_free_energies(TASK, HYPER, smc_options={"replicates": 0}, **run)
    with pytest.raises(TypeError, match="unexpected"):
        phase_free_energies(TASK, HYPER, include_logdt=True, **run)
    assert len(calls) == n
