"""The one calling convention of ``run_nuts``, ``run_sgld``, ``run_smc`` (and ``train_adam``'s
key): the model's arguments apart from the sampler's options, a key or a seed, constrained
initial values.

    run_nuts(model, model_args=(task, hyper, P, "softmax"), model_kwargs={"include_logdet": True},
             seed=0, num_chains=4, init_params={"aG": ...})

The old form, ``run_nuts(model, task, hyper, P, "softmax", include_logdet=True)``, where the
model's keyword arguments shared one namespace with the sampler's options, still works for one
release and warns (``DeprecationWarning``).

The sampler's options are ``settings=`` (its frozen settings dataclass) plus keyword changes to
its fields (:func:`sampler_call`, through :func:`bayes_attn._validation.with_changes`).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import NamedTuple

from bayes_attn._deprecation import renamed
from bayes_attn._validation import with_changes


def model_call(name, legacy_args, legacy_kwargs, model_args, model_kwargs, stacklevel=3):
    """(model_args, model_kwargs) from the new keywords, or from the deprecated positional form."""
    if legacy_args or legacy_kwargs:
        if model_args or model_kwargs:
            raise TypeError(
                f"{name}: pass the model's arguments as model_args= and model_kwargs=, not also "
                f"positionally or as extra keywords (got {sorted(legacy_kwargs)} as keywords)"
            )
        warnings.warn(
            f"{name}(model, *model_args, **model_kwargs) is deprecated and will be removed in the "
            f"next release; call {name}(model, model_args=(...), model_kwargs={{...}}, ...)",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return tuple(legacy_args), dict(legacy_kwargs)
    return tuple(model_args or ()), dict(model_kwargs or {})


class SamplerCall(NamedTuple):
    """What :func:`sampler_call` makes of a sampler's arguments."""

    settings: object  # the sampler's settings dataclass, changed and checked
    model_args: tuple
    model_kwargs: dict
    progress: bool


def sampler_call(name, cls, settings, options: dict, args, model_args, model_kwargs,
                 progress, progress_bar) -> SamplerCall:  # fmt: skip
    """The settings, the model's arguments and the progress flag of a sampler called as
    ``name(model, model_args=..., model_kwargs=..., settings=..., progress=..., **options)``.

    ``options`` that name a field of the settings dataclass ``cls`` change ``settings``
    (:func:`~bayes_attn._validation.with_changes`: ``cls()`` when None), which are then checked
    (``cls.checked``). In the deprecated positional form (``args`` given) the other options are
    the model's keyword arguments, as they were; otherwise an option that is no field is a
    TypeError naming it. ``progress_bar`` is the old name of ``progress`` (it warns).
    """
    progress = renamed("progress_bar", progress_bar, "progress", progress, stacklevel=4)
    fields = {f.name for f in dataclasses.fields(cls)}
    legacy = {k: v for k, v in options.items() if k not in fields} if args else {}
    changes = {k: v for k, v in options.items() if k not in legacy}
    settings = with_changes(settings, cls, changes, where=name).checked()
    model_args, model_kwargs = model_call(name, args, legacy, model_args, model_kwargs, 4)
    return SamplerCall(settings, model_args, model_kwargs, progress)
