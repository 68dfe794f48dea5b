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

import jax
import numpy as np

from bayes_attn._validation import check_int


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


def resolve_key(key, seed):
    """(PRNG key, seed for the record, extra attrs): ``key`` when given (``seed`` must then be
    None), else ``jax.random.key(seed)`` (seed 0 when both are None). A key has no seed: the
    record stores seed -1 and the key's data (``key_data``)."""
    if key is None:
        seed = check_int("seed", 0 if seed is None else seed, 0)
        return jax.random.key(seed), seed, {}
    if seed is not None:
        raise ValueError("seed: pass a key or a seed, not both")
    if not jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(np.asarray(key, dtype=np.uint32))
    data = np.asarray(jax.random.key_data(key)).astype(np.int64)
    return key, -1, {"key_data": data}
