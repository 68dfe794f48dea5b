"""The parts of tempered SMC (issue 26, part 2): the kernel pieces, the settings, the evidence
statistics. The statistical checks of the sampler are in tests/test_smc.py; these are exact
(the same program, the same numbers) or pure bookkeeping."""

import functools
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.flatten_util import ravel_pytree

from bayes_attn.inference import potential, run_smc, smc_evidence, smc_kernel
from bayes_attn.inference.smc import SMCSettings
from bayes_attn.inference.smc_kernel import StepRecord


def gaussian_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def test_the_kernel_pieces_are_what_run_smc_runs():
    """``init`` and ``build_kernel`` driven by hand, with run_smc's key layout (one run), give
    run_smc's per-step records and its evidence exactly."""
    y = jnp.asarray([0.3, -0.2, 1.1])
    n, rng = 64, jax.random.key(5)
    split = potential.split_log_density(gaussian_model, (y,))
    flat0, unravel = ravel_pytree({k: jnp.zeros(s) for k, s in split.shapes.items()})
    moves = smc_kernel.build_moves("rwm", flat0.size)
    kernel = smc_kernel.build_kernel(
        *smc_kernel.tempered_log_densities(split, unravel), moves,
        num_mcmc_steps=2, max_mcmc_steps=200, mixing_target=0.05, target_ess=0.9,
    )  # fmt: skip
    init = jax.jit(jax.vmap(lambda k: smc_kernel.init(k, split.draw_reference, moves,
                                                      num_particles=n)))  # fmt: skip
    step = jax.jit(lambda k, s, force: jax.vmap(functools.partial(kernel, force=force))(k, s))
    key, k_init = jax.random.split(rng)
    state = init(jax.random.split(k_init, 1))
    records = []
    while float(state.smc.sampler_state.tempering_param[0]) < 1.0:
        key, sub = jax.random.split(key)
        state, rec = step(jax.random.split(sub, 1), state, False)
        assert isinstance(rec, StepRecord)
        records.append(StepRecord(*(float(v[0]) for v in rec)))
    lam = [r.tempering_param for r in records]
    assert np.all(np.diff(lam) > 0) and lam[-1] == 1.0
    eve = np.asarray(state.eve[0])
    assert eve.shape == (n,) and eve.min() >= 0 and eve.max() < n
    a = run_smc(gaussian_model, model_args=(y,), num_particles=n, num_runs=1, key=rng)
    a = a.posterior.attrs
    np.testing.assert_array_equal(a["tempering_schedule"], lam)
    np.testing.assert_array_equal(a["log_evidence_increments"], [r.log_increment for r in records])
    np.testing.assert_array_equal(a["num_moves"], [int(r.num_moves) for r in records])
    assert a["log_evidence_runs"][0] == smc_evidence.run_log_evidences([records])[0]


def test_settings_have_one_home_and_are_checked():
    """run_smc's defaults are SMCSettings' alone (settings= or **changes, no copy in its
    signature); every bad option is refused naming its parameter."""
    sig = inspect.signature(run_smc).parameters
    defaults = SMCSettings()
    assert not set(SMCSettings.__dataclass_fields__) & set(sig)
    s = defaults.checked()
    assert s.min_lineages == smc_evidence.default_min_lineages(1000) == 10
    assert s.for_dimension(10).kernel == "rwm" and s.for_dimension(10).dense
    assert s.for_dimension(11).kernel == "hmc" and s.for_dimension(100).dense
    assert not s.for_dimension(101).dense
    for name, value in [("num_particles", 1), ("max_mcmc_steps", 1), ("mixing_target", 1.0),
                        ("target_ess", 1.0), ("kernel", "nuts"), ("reference_scale", 0.0),
                        ("evidence_tolerance", -1.0), ("batch_size", -1)]:  # fmt: skip
        with pytest.raises(ValueError, match=name):
            SMCSettings(**{name: value}).checked()
    draws = s.of_the_draws()
    assert "num_particles" in draws and "min_lineages" not in draws


def test_step_records_and_evidence_statistics():
    """Per-step records to attrs by name; the log-mean evidence and its standard error, which
    basin_evidence shares; the runs' agreement test."""
    runs = [
        [StepRecord(0.5, -1.0, 0.3, 4.0, 0.04, 90.0, 0.7), StepRecord(1.0, -0.5, 0.2, 6.0, 0.05, 88.0, 0.6)],
        [StepRecord(1.0, -2.0, 0.25, 3.0, 0.03, 95.0, 0.8)],
    ]  # fmt: skip
    a = smc_evidence.step_attrs(runs)
    np.testing.assert_array_equal(a["num_tempering_steps"], [2, 1])
    np.testing.assert_array_equal(a["tempering_schedule"], [0.5, 1.0, 1.0])
    np.testing.assert_array_equal(a["num_moves"], [4, 6, 3])
    assert a["num_moves"].dtype == np.int64
    np.testing.assert_array_equal(a["ess_final"], [88.0, 95.0])
    log_z = smc_evidence.run_log_evidences(runs)
    np.testing.assert_array_equal(log_z, [-1.5, -2.0])
    mean, se = smc_evidence.log_evidence(log_z)
    assert mean == pytest.approx(math.log((math.exp(-1.5) + math.exp(-2.0)) / 2), abs=1e-15)
    assert se == pytest.approx(np.std(log_z, ddof=1) / math.sqrt(2), abs=1e-15)
    assert math.isnan(smc_evidence.log_evidence([-1.5])[1])
    summary = smc_evidence.evidence_summary(log_z, np.zeros(2), 0.1)
    assert summary["runs_chi2"] == pytest.approx(0.125 / 0.01)
    assert summary["runs_p_value"] < 1e-3  # 0.5 nats apart, against 0.1 nats of tolerance
