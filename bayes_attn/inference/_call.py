"""The one calling convention of ``run_nuts``, ``run_sgld``, ``run_smc`` (and ``train_adam``'s
key): the model's arguments apart from the sampler's options, a key or a seed, constrained
initial values.

    run_nuts(model, model_args=(task, hyper, P, "softmax"), model_kwargs={"include_logdet": True},
             seed=0, num_chains=4, init_params={"aG": ...})

The old form, ``run_nuts(model, task, hyper, P, "softmax", include_logdet=True)``, where the
model's keyword arguments shared one namespace with the sampler's options, still works for one
release and warns (``DeprecationWarning``).
"""

from __future__ import annotations

import warnings


def model_call(name, legacy_args, legacy_kwargs, model_args, model_kwargs):
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
            stacklevel=3,
        )
        return tuple(legacy_args), dict(legacy_kwargs)
    return tuple(model_args or ()), dict(model_kwargs or {})
