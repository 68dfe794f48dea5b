"""The one calling form of the samplers (issue 44): ``settings=`` plus keyword changes to its
fields (``_validation.with_changes``). An unknown keyword is a TypeError naming it, raised before
any work (no model is traced: the model here would fail if it were); ``settings=`` and the
keywords give the same settings; the deprecated positional form still sends the other keywords
to the model."""

import dataclasses
import warnings

import pytest

from bayes_attn.inference import run_nuts, run_sgld, run_smc, train_adam
from bayes_attn.inference._call import sampler_call
from bayes_attn.inference.adam import AdamSettings, adam_settings
from bayes_attn.inference.nuts import NUTSSettings
from bayes_attn.inference.sgld import SGLDSettings
from bayes_attn.inference.smc import SMCSettings
from bayes_attn.inference.umbrella import UmbrellaSettings, run_umbrella, umbrella_settings


def untraceable(*args, **kwargs):
    raise AssertionError("the model must not run before the options are checked")


SAMPLERS = [
    ("run_nuts", lambda **kw: run_nuts(untraceable, **kw), NUTSSettings),
    ("run_sgld", lambda **kw: run_sgld(untraceable, **kw), SGLDSettings),
    ("run_smc", lambda **kw: run_smc(untraceable, **kw), SMCSettings),
    ("run_umbrella", lambda **kw: run_umbrella(untraceable, "x", **kw), UmbrellaSettings),
    ("train_adam", lambda **kw: train_adam(None, None, "linear", 4, 2, **kw), AdamSettings),
]


@pytest.mark.parametrize("name, call, cls", SAMPLERS, ids=[s[0] for s in SAMPLERS])
def test_an_unknown_option_is_a_type_error_naming_it(name, call, cls):
    with pytest.raises(TypeError, match=rf"{name}: unknown option\(s\) \['num_warmpu'\]"):
        call(num_warmpu=10, progress=False)
    with pytest.raises(TypeError, match=f"settings must be a {cls.__name__}"):
        call(settings={"num_warmup": 10}, progress=False)


@pytest.mark.parametrize("name, call, cls", SAMPLERS[:4], ids=[s[0] for s in SAMPLERS[:4]])
def test_a_bad_value_is_refused_before_any_work_naming_its_field(name, call, cls):
    field = "num_samples" if cls is not SMCSettings else "num_particles"
    with pytest.raises(ValueError, match=field):
        call(**{field: 0}, progress=False)
    with pytest.raises(ValueError, match=field):
        call(settings=cls(**{field: 0}), progress=False)


def test_settings_and_changes_make_the_same_settings():
    """``settings=s, x=v`` is ``dataclasses.replace(s, x=v)``, checked; no change gives ``s``."""
    cases = [
        (NUTSSettings(metric="laplace"), "num_warmup"),
        (SGLDSettings(thinning=2), "num_warmup"),
        (SMCSettings(num_runs=2), "num_particles"),
    ]
    for s, field in cases:
        got = sampler_call("f", type(s), s, {field: 64}, (), (), None, True, None)
        assert got.settings == dataclasses.replace(s, **{field: 64}).checked()
        assert (got.model_args, got.model_kwargs, got.progress) == ((), {}, True)
    got = sampler_call("f", NUTSSettings, None, {}, (), (1,), {"a": 2}, False, None)
    assert got == (NUTSSettings(), (1,), {"a": 2}, False)
    assert umbrella_settings(None, num_chains=1) == UmbrellaSettings(num_chains=1)
    assert adam_settings(AdamSettings(lr=0.1), max_steps=7) == AdamSettings(lr=0.1, max_steps=7)


def test_the_deprecated_forms_still_resolve():
    """Positional model arguments: the keywords that are no field are the model's (warns);
    ``progress_bar=`` is ``progress=`` (warns); ``run_smc(max_steps=)`` is
    ``max_tempering_steps``; ``dense`` is not an option (``for_dimension`` sets it)."""
    with pytest.warns(DeprecationWarning, match=r"run_nuts\(model, model_args="):
        got = sampler_call("run_nuts", NUTSSettings, None, {"num_chains": 2, "scale": 3.0},
                           (1.0,), (), None, True, None)  # fmt: skip
    assert got.settings.num_chains == 2 and got.model_args == (1.0,)
    assert got.model_kwargs == {"scale": 3.0}
    with pytest.warns(DeprecationWarning, match="progress="):
        got = sampler_call("f", SGLDSettings, None, {}, (), (), None, True, False)
    assert got.progress is False
    with pytest.raises(TypeError, match="not also"):
        sampler_call("f", SGLDSettings, None, {}, (1.0,), (1.0,), None, True, None)
    with pytest.warns(DeprecationWarning, match="max_tempering_steps"):
        with pytest.raises(ValueError, match="max_tempering_steps"):
            run_smc(untraceable, max_steps=0)
    with pytest.raises(TypeError, match="dense"):
        run_smc(untraceable, dense=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler_call("f", SMCSettings, None, {"kernel": "rwm"}, (), (), None, False, None)
