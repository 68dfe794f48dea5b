"""The one key scheme (bayes_attn.keys): which key draws a run's dataset under each entry point.

The layout is documented in the module docstring of :mod:`bayes_attn.keys`; these tests pin it, so
that a change to it is a decision, not an accident."""

import jax
import numpy as np
import pytest

import bayes_attn as ba
from bayes_attn.keys import DATASET_FOLD, dataset_key, resolve_key, run_key

TASK, HYPER, P, SEED = ba.CopyTask(6, 3), ba.Hyper.paper(), 20, 0


def test_dataset_key_is_the_named_fold_of_the_run_key():
    ref = jax.random.fold_in(jax.random.key(SEED), DATASET_FOLD)
    for key in (dataset_key(seed=SEED), dataset_key(), dataset_key(key=jax.random.key(SEED))):
        np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(ref))
    with pytest.raises(ValueError, match="seed"):
        run_key(jax.random.key(0), 0)
    assert resolve_key(None, 5)[1] == 5 and resolve_key(jax.random.key(5), None)[1] == -1


def test_sample_and_the_sweeps_sampler_points_draw_the_same_dataset():
    """``bayes-attn sample`` (experiments.runs.sample_posterior -> model_with_data) and a sweep's
    nuts/sgld/smc point (sweep.model_at_level) draw ``task.sample(dataset_key(seed), P)``."""
    from bayes_attn.experiments.sweep import model_at_level
    from bayes_attn.models.levels import model_with_data

    ref = np.asarray(TASK.sample(dataset_key(seed=SEED), P))
    _, args, _ = model_with_data("kernel", TASK, HYPER, P, "linear", seed=SEED)
    np.testing.assert_array_equal(args[2], ref)
    pt = {"P": P, "activation": "softmax", "seed": SEED}
    _, args, _ = model_at_level({"level": "network", "d_model": 8}, pt, TASK, HYPER)
    np.testing.assert_array_equal(args[2], ref)


def test_an_ensemble_and_the_protocol_draw_their_own_datasets():
    """The layouts whose datasets differ from the sampler's, for the reasons in keys.py: one
    dataset per member (adam_keys), and per-point keys (protocol_keys)."""
    from bayes_attn.experiments.protocol import ProtocolConfig, member_datasets, protocol_keys
    from bayes_attn.inference.adam import _datasets, adam_keys

    sample = np.asarray(TASK.sample(dataset_key(seed=SEED), P))
    keys = adam_keys(seed=SEED)
    train, _ = _datasets(TASK, P, 3, None, None, 5, keys)
    split = jax.random.split(keys.data, 3)
    np.testing.assert_array_equal(train[1], TASK.sample(split[1], P))
    cfg = ProtocolConfig.quick(L=6, V=3, members=3, Ps=(P,), seed=SEED)
    proto = np.asarray(member_datasets(cfg, "linear", P))
    point = jax.random.split(protocol_keys(SEED).point("linear", P).data, 3)
    np.testing.assert_array_equal(proto[2], TASK.sample(point[2], P))
    assert not np.array_equal(train[0], sample) and not np.array_equal(proto[0], sample)
