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
