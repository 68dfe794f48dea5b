"""The LLC functions' one calling form (issue 44): ``settings: LLCSettings | None = None`` plus
keyword ``**changes`` (its fields), built by ``_validation.with_changes``. An old keyword call is
the settings call, draw for draw (fixed seed; equality, no tolerance); an unknown keyword raises
``TypeError`` naming it before any work."""

import dataclasses
import inspect

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from bayes_attn.experiments.llc import llc_free_energy, localization_free_energy
from bayes_attn.inference.llc import (
    EXACT_SETTINGS,
    LLCSettings,
    exact_frozen_llc,
    frozen_llc_target,
    llc_target,
    run_llc,
)
from bayes_attn.inference.llc_smc import run_llc_smc

A = np.array([1.0, 4.0, 0.25])
ENTRY_POINTS = [run_llc, run_llc_smc, exact_frozen_llc, llc_target, frozen_llc_target,
                llc_free_energy, localization_free_energy]  # fmt: skip


def quadratic(n=100):
    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand((3,)).to_event(1))
    numpyro.factor("loss", -n * 0.5 * jnp.sum(jnp.asarray(A) * w**2))


@pytest.mark.parametrize("fn", ENTRY_POINTS, ids=lambda f: f.__name__)
def test_every_entry_point_takes_settings_and_changes(fn):
    """No LLCSettings field is a parameter of its own: LLCSettings is their defaults' one home."""
    params = inspect.signature(fn).parameters
    assert params["settings"].default is None
    assert params["changes"].kind is inspect.Parameter.VAR_KEYWORD
    assert not {f.name for f in dataclasses.fields(LLCSettings)} & set(params)
    for kept in ("model_args", "model_kwargs"):
        assert kept in params


@pytest.mark.parametrize("fn", ENTRY_POINTS, ids=lambda f: f.__name__)
def test_unknown_option_is_a_type_error_naming_it(fn):
    with pytest.raises(TypeError, match=rf"{fn.__name__}: unknown option\(s\) \['num_draw'\]"):
        fn(quadratic, jnp.zeros(3), num_draw=5)


def test_settings_of_another_class_is_refused():
    with pytest.raises(TypeError, match="run_llc: settings must be a LLCSettings"):
        run_llc(quadratic, jnp.zeros(3), settings={"num_draws": 5})


def test_bad_option_values_still_name_their_parameter():
    for bad, name in [({"num_draws": 0}, "num_draws"), ({"gamma": -1.0}, "gamma"),
                      ({"sampler": "hmc"}, "sampler"), ({"nbeta": 0.0}, "nbeta")]:  # fmt: skip
        with pytest.raises(ValueError, match=name):
            run_llc(quadratic, jnp.zeros(3), n=100, **bad)


def test_old_keyword_call_is_the_settings_call():
    """``run_llc(..., num_draws=20, ...)`` is ``run_llc(..., settings=LLCSettings(...))``, bit for
    bit, the record included; a change overrides the settings' field."""
    opts = dict(sampler="mala", num_chains=2, num_draws=20, num_burnin=5, step_size=2e-3,
                nbeta=50.0, gamma=10.0)  # fmt: skip
    z = jnp.zeros(3)
    old = run_llc(quadratic, z, n=100, seed=0, **opts)
    new = run_llc(quadratic, z, n=100, seed=0, settings=LLCSettings(**{**opts, "num_draws": 7}),
                  num_draws=20)  # fmt: skip
    for group in ("posterior", "sample_stats", "constant_data"):
        for name in old[group].data_vars:
            np.testing.assert_array_equal(new[group][name], old[group][name])
    a, b = ({k: v for k, v in r.posterior.attrs.items() if not k.startswith("created")}
            for r in (old, new))  # fmt: skip
    np.testing.assert_equal(b, a)  # the same record


def test_target_reads_the_target_fields():
    z = jnp.zeros(3)
    s = LLCSettings(nbeta=50.0, gamma=10.0, include_prior=True, sampler="nuts")
    old = llc_target(quadratic, z, n=100, nbeta=50.0, gamma=10.0, include_prior=True)
    new = llc_target(quadratic, z, n=100, settings=s)
    assert (new.nbeta, new.gamma, new.include_prior) == (old.nbeta, old.gamma, True)
    x = z + 0.1
    assert float(new.log_density(x)) == float(old.log_density(x))


def test_exact_defaults_are_exact_settings():
    """exact_frozen_llc's defaults are EXACT_SETTINGS (NUTS, 1000 draws after 500 steps)."""
    assert (EXACT_SETTINGS.sampler, EXACT_SETTINGS.num_draws, EXACT_SETTINGS.num_burnin) == (
        "nuts", 1000, 500,
    )  # fmt: skip
    changed = {f.name for f in dataclasses.fields(LLCSettings)
               if getattr(EXACT_SETTINGS, f.name) != getattr(LLCSettings(), f.name)}  # fmt: skip
    assert changed == {"sampler", "num_draws", "num_burnin", "init_noise"}
