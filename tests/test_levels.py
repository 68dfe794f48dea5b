"""The one model factory (models.levels): model_at on given data, model_with_data on a drawn dataset."""

import jax
import numpy as np
import pytest

import bayes_attn as ba
from bayes_attn.models import kernel_limit_model, network_model, order_param_model
from bayes_attn.models.levels import (
    DATASET_FOLD,
    EMBEDDINGS_FOLD,
    model_at,
    model_with_data,
    seed_embeddings,
)

TASK, HYPER = ba.CopyTask(6, 3), ba.Hyper.paper()


def test_model_with_data_draws_its_dataset_from_the_named_fold():
    """The dataset comes from fold_in(key, DATASET_FOLD), key = key(seed): the layout the sweeps and
    the CLI's ``sample`` have always used (fold 1), so their draws are unchanged."""
    assert DATASET_FOLD == 1
    tokens = TASK.sample(jax.random.fold_in(jax.random.key(3), 1), 12)
    m, args, kw = model_with_data("kernel", TASK, HYPER, 12, "softmax", seed=3)
    assert m is kernel_limit_model and kw == {}
    np.testing.assert_array_equal(args[2], tokens)
    _, by_key, _ = model_with_data("kernel", TASK, HYPER, 12, "softmax", key=jax.random.key(3))
    np.testing.assert_array_equal(by_key[2], tokens)
    m, args, kw = model_with_data("network", TASK, HYPER, 12, "linear", seed=3, d_model=8,
                                  batch_size=5)  # fmt: skip
    assert m is network_model and args[4] == 8 and kw == {"batch_size": 5}
    np.testing.assert_array_equal(args[2], tokens)
    assert model_with_data("network", TASK, HYPER, 12, "linear", seed=3, d_model=8,
                           batch_size=20)[2] == {}  # fmt: skip
    m, args, kw = model_with_data("reduced", TASK, HYPER, 12, "softmax", include_logdet=True)
    assert (m, args, kw) == model_at("reduced", TASK, HYPER, 12.0, "softmax", include_logdet=True)
    assert m is order_param_model and kw == {"include_logdet": True}


def test_model_with_data_bad_input():
    with pytest.raises(ValueError, match="seed: pass a key or a seed"):
        model_with_data("kernel", TASK, HYPER, 12, "softmax", seed=1, key=jax.random.key(1))
    with pytest.raises(ValueError, match="P"):
        model_with_data("kernel", TASK, HYPER, 12.5, "softmax")
    with pytest.raises(ValueError, match="P"):
        model_with_data("reduced", TASK, HYPER, -1.0, "softmax")
    with pytest.raises(ValueError, match="level"):
        model_with_data("deep", TASK, HYPER, 12, "softmax")
    with pytest.raises(ValueError, match="d_model"):
        model_with_data("network", TASK, HYPER, 12, "softmax")


def test_landscape_and_llc_see_the_same_network_at_a_seed():
    """seed_embeddings owns the frozen embeddings' key (fold 2, apart from the data's fold 1): the
    landscape's Gram at ``gram_width=d`` and the LLC's network at ``d_model=d`` are one network on
    one dataset, so a profile and an LLC at the same seed can be compared."""
    from bayes_attn.algebra import embedding_gram
    from bayes_attn.experiments.landscape import landscape_model
    from bayes_attn.experiments.llc import llc_problem
    from bayes_attn.models.network import init_embeddings

    assert EMBEDDINGS_FOLD == 2
    emb = seed_embeddings(TASK, HYPER, 16, seed=3)
    direct = init_embeddings(jax.random.fold_in(jax.random.key(3), 2), TASK, HYPER, 16)
    np.testing.assert_array_equal(emb[0], direct[0])
    _, l_args, l_kw = landscape_model(TASK, HYPER, 12, "kernel", gram_width=16, seed=3)
    _, n_args, n_kw, _, _ = llc_problem("network", TASK, HYPER, 12, "softmax", d_model=16, seed=3)
    np.testing.assert_array_equal(l_args[2], n_args[2])
    np.testing.assert_allclose(l_kw["gram"], embedding_gram(*n_kw["embeddings"]), rtol=0, atol=0)
    with pytest.raises(ValueError, match="seed: pass a key or a seed"):
        seed_embeddings(TASK, HYPER, 16, seed=1, key=jax.random.key(1))
    with pytest.raises(ValueError, match="d_model"):
        seed_embeddings(TASK, HYPER, 0)


def test_sweep_model_at_level_is_model_with_data():
    from bayes_attn.experiments.sweep import model_at_level

    opts = {"level": "network", "d_model": 8, "batch_size": None, "include_logdet": False}
    pt = {"activation": "linear", "P": 12, "seed": 4}
    m, args, kw = model_at_level(opts, pt, TASK, HYPER)
    ref = model_with_data("network", TASK, HYPER, 12, "linear", seed=4, d_model=8)
    assert m is ref[0] and kw == ref[2]
    np.testing.assert_array_equal(args[2], ref[1][2])
