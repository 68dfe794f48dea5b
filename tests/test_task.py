import jax
import numpy as np
import pytest

import bayes_attn as ba
from bayes_attn.theory import phase_boundaries, saddles


def test_sample_shapes_and_targets():
    task = ba.CopyTask(L=6, V=3)
    tok = task.sample(jax.random.key(0), 7)
    assert tok.shape == (7, 6) and tok.dtype == np.int32
    assert 0 <= int(tok.min()) and int(tok.max()) < 3
    x, y, psi = task.one_hot(tok), task.targets(tok), task.features(tok)
    assert x.shape == (7, 6, 3) and y.shape == (7, 6, 3) and psi.shape == (7, 6, 9)
    # y[a] = x[a-1 mod L]
    np.testing.assert_array_equal(np.asarray(y[:, 1:]), np.asarray(x[:, :-1]))
    np.testing.assert_array_equal(np.asarray(y[:, 0]), np.asarray(x[:, -1]))
    np.testing.assert_array_equal(np.asarray(psi[..., :3]), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(psi[0, :, 3:]), np.eye(6))


def test_presets():
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    assert (task.L, task.V) == (25, 5)
    # the paper's Table 1
    assert (hyper.chi, hyper.g_w, hyper.g_o, hyper.sigma2) == (30.0, 1.0, 1.0, 30.0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"L": 1, "V": 5}, "L"),
        ({"L": 25, "V": 1}, "V"),
        ({"L": 2.5, "V": 5}, "L"),
        ({"L": "a", "V": 5}, "L"),
    ],
)
def test_task_rejects_bad_sizes(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        ba.CopyTask(**kwargs)


@pytest.mark.parametrize("name", ["chi", "g_w", "g_o", "sigma2"])
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_hyper_rejects_bad_scales(name, bad):
    kw = dict(chi=30.0, g_w=1.0, g_o=1.0, sigma2=131.8)
    kw[name] = bad
    with pytest.raises(ValueError, match=rf"^{name} "):
        ba.Hyper(**kw)


def test_bad_P_and_activation(paper):
    task, hyper = paper
    for P in (0, -3):
        with pytest.raises(ValueError, match="^P "):
            task.sample(jax.random.key(0), P)
    for P in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="^P "):
            saddles(task, hyper, P, "linear")
    with pytest.raises(ValueError, match="activation must be one of 'linear', 'softmax'"):
        saddles(task, hyper, 100.0, "relu")


def test_bad_tokens(paper):
    from bayes_attn.theory import level1_map

    task, hyper = paper
    with pytest.raises(ValueError, match="tokens must have shape"):
        level1_map(task, hyper, np.zeros((4, 7), int), "linear")
    with pytest.raises(ValueError, match="tokens must lie in"):
        level1_map(task, hyper, np.full((4, 25), 9), "linear")
    with pytest.raises(ValueError, match="tokens must be integers"):
        level1_map(task, hyper, np.full((4, 25), np.nan), "linear")


def test_phase_boundaries_is_typed(paper):
    b = phase_boundaries(*paper)
    assert set(b.as_dict()) >= {"second_order", "crossover", "first_order", "spinodals"}


def test_task_and_algebra_refuse_tokens_they_would_misread():
    """Each of these gave a silent wrong answer before (all-zero one-hot rows, zero logits)."""
    import jax.numpy as jnp

    from bayes_attn import algebra

    task = ba.CopyTask(L=5, V=3)
    bad = {
        "shape": jnp.zeros((4, 6), int),  # (P, L + 1)
        "lie in": jnp.full((4, 5), 5),  # token >= V: an all-zero one-hot row
        "shape ": jnp.zeros(5, int),  # one sequence without its P axis
        "integers": jnp.full((4, 5), 1.5),
        "integers ": jnp.full((4, 5), True),
    }
    for method in (task.one_hot, task.targets, task.features):
        for match, tokens in bad.items():
            with pytest.raises(ValueError, match=f"tokens must.*{match.strip()}"):
                method(tokens)
    # whole-number floats are read as the integers they are
    assert float(task.one_hot(jnp.full((2, 5), 2.0)).sum()) == 10.0
    with pytest.raises(ValueError, match="tokens must lie in"):
        algebra.logits_from_M(jnp.zeros((8, 8)), jnp.full((2, 5), 7), 3)
    with pytest.raises(ValueError, match="M must have shape"):
        algebra.logits_from_M(jnp.zeros((7, 7)), jnp.zeros((2, 5), int), 3)
    with pytest.raises(ValueError, match="tokens must lie in"):
        algebra.one_hot(jnp.full((2, 5), -1), 3)


def test_project_refuses_what_is_not_a_batch_of_attention_patterns():
    import jax.numpy as jnp

    from bayes_attn import algebra

    with pytest.raises(ValueError, match=r"A must be an attention tensor of shape \(P, L, L\)"):
        algebra.project(jnp.ones((3, 3)))  # gave c1 = 3
    with pytest.raises(ValueError, match="A must be an attention tensor"):
        algebra.project(jnp.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="A must be finite"):
        algebra.project(jnp.full((2, 3, 3), jnp.nan))
    pr = algebra.project(algebra.reduced_attention(0.3, 0.7, 6)[None])
    assert abs(float(pr["c1"]) - 0.3) < 1e-12 and abs(float(pr["cG"]) - 0.7) < 1e-12


def test_network_model_refuses_a_minibatch_larger_than_the_data():
    import numpyro

    from bayes_attn.inference import run_sgld
    from bayes_attn.models import network_model

    task, hyper = ba.CopyTask(L=4, V=2), ba.Hyper.paper()
    tok = task.sample(jax.random.key(0), 20)
    with pytest.raises(
        ValueError, match="batch_size must be at most the number of sequences P = 20"
    ):
        with numpyro.handlers.seed(rng_seed=0):
            network_model(task, hyper, tok, "linear", 4, batch_size=1000)
    with pytest.raises(ValueError, match="batch_size must be at most"):
        run_sgld(
            network_model,
            model_args=(task, hyper, tok, "linear", 4),
            model_kwargs={"batch_size": 1000},
            num_samples=2,
        )
