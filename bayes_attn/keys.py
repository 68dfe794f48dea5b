"""PRNG keys: the one way a run turns its ``seed=`` or ``key=`` into a key, and the key layout.

Every function that draws takes a ``seed`` (an integer, 0 when neither is given) or a JAX ``key``,
never both, and resolves them here (:func:`resolve_key`). A run's key is then split or folded by
purpose, never offset by an index:

- ``fold_in(key, DATASET_FOLD)`` draws a run's dataset (:func:`bayes_attn.models.levels.model_with_data`,
  the CLI's ``sample`` and ``llc``, the sweeps' sampler points), so that a sampler started from the
  same key draws independently of its data;
- ``fold_in(key, EMBEDDINGS_FOLD)`` draws the frozen embeddings of a network
  (:func:`bayes_attn.models.levels.seed_embeddings`), shared by the landscape and the LLC;
- an ensemble trainer splits its key into the members' datasets, the held-out set, the initial
  weights and the minibatches (:class:`bayes_attn.inference.adam.AdamKeys`), because an ensemble
  draws one dataset per member where a sampler draws one;
- the protocol splits its seed into the held-out set and the grid points, and folds each point's
  values (activation, P) into the second (:class:`bayes_attn.experiments.protocol.ProtocolKeys`),
  so that a point's draws depend on its values only, not on its place in a grid.

References
----------
docs/architecture.md (the owner table).
"""

from __future__ import annotations

import jax
import numpy as np

from bayes_attn._validation import check_int

__all__ = ["DATASET_FOLD", "EMBEDDINGS_FOLD", "resolve_key", "run_key"]

#: what a dataset's key folds into the run's key, so that a sampler started from the same key or
#: seed draws independently of the data
DATASET_FOLD = 1
#: what the frozen embeddings' key folds into the run's key
EMBEDDINGS_FOLD = 2


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


def run_key(key=None, seed: int | None = None) -> jax.Array:
    """The run's PRNG key alone: :func:`resolve_key` without the record."""
    return resolve_key(key, seed)[0]
