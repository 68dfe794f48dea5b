"""PRNG keys: the one way a run turns its ``seed=`` or ``key=`` into a key, and the one key scheme.

Every function that draws takes a ``seed`` (an integer, 0 when neither is given) or a JAX ``key``,
never both, and resolves them here (:func:`resolve_key`; :func:`run_key` for the key alone). A
run's key is then split or folded by purpose, never offset by an index (no ``seed + j``).

The scheme
----------
A seed becomes ``key = jax.random.key(seed)``. From that key each kind of run draws:

- ``bayes-attn sample``, the sweeps' ``nuts``/``sgld``/``smc`` points, the landscape and the LLC:
  the dataset from ``fold_in(key, DATASET_FOLD)`` (:func:`dataset_key`, used by
  :func:`bayes_attn.models.levels.model_with_data`); a frozen network's embeddings from
  ``fold_in(key, EMBEDDINGS_FOLD)`` (:func:`bayes_attn.models.levels.seed_embeddings`); the
  sampler from ``key`` itself.
- ``bayes-attn train`` and the ``adam`` sweep (:func:`bayes_attn.inference.train_adam`): the keys
  of :func:`bayes_attn.inference.adam.adam_keys`: member m's dataset from
  ``split(adam_keys(key).data, members)[m]``, the held-out set from ``.test``, the initial
  weights from ``.init``, the minibatches from ``.run``.
- the protocol, the ``protocol`` sweep and the frozen protocol: the keys of
  :func:`bayes_attn.experiments.protocol.protocol_keys`: the held-out set from ``.held_out``;
  at the point (activation, P), member m's dataset from ``split(point.data, members)[m]`` with
  ``point = protocol_keys(seed).point(activation, P)``, and Adam, SGLD and NUTS from
  ``point.adam``, ``point.sgld``, ``point.nuts``.

The same seed therefore draws the same dataset under ``sample``, the sweeps' sampler points, the
landscape and the LLC (tested in ``tests/test_keys.py``), but not under ``train`` or the protocol,
for these reasons (measured on 2026-12-06: at L = 6, V = 3, P = 20, seed 0 the three datasets
differ, as ``tests/test_keys.py`` asserts):

- an ensemble draws one dataset per member where a sampler draws one: no single key can be each
  member's, and making member 0's the sampler's would move every pinned Adam number and the
  committed ensemble results (docs/validation.md) without making the other members agree;
- the protocol folds each point's values (activation, P) into its key
  (:class:`~bayes_attn.experiments.protocol.ProtocolKeys`), so that a point draws the same
  numbers inside any grid, sweep or process; a seed's dataset then depends on the point, and the
  linear and softmax members of one P see different data by design. Its committed tables and
  figures (docs/validation.md, Table 1) are pinned to this layout.

Other named layouts: :func:`~bayes_attn.experiments.coexistence.free_energy_keys` (one key per
basin's SMC runs), and the hysteresis loop's pool (``split(key, members)``, one pool per member,
nested in P so that each P warm-starts from its neighbour on the same sequences).

References
----------
docs/architecture.md (the owner table).
"""

from __future__ import annotations

import jax
import numpy as np

from bayes_attn._validation import check_int

__all__ = ["DATASET_FOLD", "EMBEDDINGS_FOLD", "dataset_key", "resolve_key", "run_key"]

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


def dataset_key(key=None, seed: int | None = None) -> jax.Array:
    """The key of a run's dataset: ``fold_in(key, DATASET_FOLD)`` of the run's key (seed 0 when
    neither is given), so that a sampler started from the same key draws independently of the
    data (the module docstring, "The scheme")."""
    return jax.random.fold_in(run_key(key, seed), DATASET_FOLD)
