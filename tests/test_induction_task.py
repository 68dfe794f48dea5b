"""The induction task (next-token prediction on in-context Markov chains) and its exact reference
predictors: shapes, targets and mask, validation, the predictors on a hand-counted sequence, the
expected losses exactly (all sequences) against Monte Carlo, and the KL metric."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_attn.induction import InductionTask
from bayes_attn.task import CopyTask
from bayes_attn.theory import induction_refs as R
from bayes_attn.tokens import InContextMarkov, Uniform

Z = 4.0  # the z budget of every Monte Carlo comparison (two-sided p ~ 6e-5 per check)


# --------------------------------------------------------------------------------------------------
# The task


def test_task_shapes_targets_and_mask():
    task = InductionTask(5, 3)
    assert task.tokens == InContextMarkov(alpha=1.0)
    t = task.sample(jax.random.key(0), 7)
    assert t.shape == (7, 5)
    x, y, psi = task.one_hot(t), task.targets(t), task.features(t)
    assert x.shape == y.shape == (7, 5, 3) and psi.shape == (7, 5, 8) == (7, 5, task.n_features)
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:])  # y[a] = x[a+1], no wrap-around
    np.testing.assert_array_equal(y[:, -1], 0.0)
    np.testing.assert_array_equal(task.target_mask, [True, True, True, True, False])
    assert task.n_targets == 4
    np.testing.assert_array_equal(psi, CopyTask(5, 3).features(t))  # the copy task's features
    tokens, T = task.sample_with_chains(jax.random.key(0), 7)
    np.testing.assert_array_equal(tokens, t)
    assert T.shape == (7, 3, 3)
    assert task.as_dict() == {"task": "induction", "L": 5, "V": 3, "tokens": "icl-markov:alpha=1"}


def test_task_equality_hashing_and_jit():
    a = InductionTask(4, 2, "icl-markov:alpha=0.5")
    b = InductionTask(4, 2, InContextMarkov(0.5))
    assert a == b and hash(a) == hash(b) and a != InductionTask(4, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.L = 3

    g = jax.jit(lambda t, task: task.targets(t).sum(), static_argnums=1)
    t = a.sample(jax.random.key(1), 3)
    assert float(g(t, a)) == 3 * 3  # L - 1 one-hot targets per sequence
    assert float(g(t, b)) == 9


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"L": 1, "V": 3}, "L must be an integer >= 2"),
        ({"L": 4, "V": 1}, "V must be an integer >= 2"),
        ({"L": 4.5, "V": 3}, "L must be an integer"),
        ({"L": 4, "V": 3, "tokens": "icl-markov:alpha=-1"}, "tokens: alpha"),
        ({"L": 4, "V": 3, "tokens": "nonsense"}, "tokens: unknown source"),
        ({"L": 4, "V": 3, "tokens": "markov:transition=[[1,0],[0,1]]"}, "tokens: the Markov"),
    ],
)
def test_task_validation_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        InductionTask(**kwargs)


def test_task_checks_tokens_samples_and_outputs():
    task = InductionTask(4, 2)
    with pytest.raises(ValueError, match="P must"):
        task.sample(jax.random.key(0), 0)
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, V\)"):
        task.targets(np.array([[0, 1, 2, 0]]))
    with pytest.raises(ValueError, match="tokens must have shape"):
        task.one_hot(np.zeros((2, 3), int))
    with pytest.raises(ValueError, match="outputs must have shape"):
        task.loss_per_token(np.zeros((1, 3, 2)), np.zeros((1, 4), int))
    with pytest.raises(ValueError, match="tokens: uniform has no chains"):
        InductionTask(4, 2, Uniform()).sample_with_chains(jax.random.key(0), 2)
    with pytest.raises(
        ValueError, match="tokens: the reference predictors: defined for an in-context"
    ):
        R.strategies(InductionTask(4, 2, Uniform()), np.zeros((1, 4), int))
    with pytest.raises(ValueError, match="tokens: the Dirichlet bigram is not the posterior"):
        R.bayes_optimal(InductionTask(4, 2, "icl-markov:alpha=1,doubly_stochastic=true"),
                        np.zeros((1, 4), int))  # fmt: skip
    with pytest.raises(ValueError, match="L: V\\^L"):
        R.exact_expected_losses(InductionTask(17, 2))
    with pytest.raises(ValueError, match="floor must be"):
        R.to_distribution(np.ones(3), floor=0.0)


# --------------------------------------------------------------------------------------------------
# The predictors, counted by hand


def test_predictors_on_a_hand_counted_sequence():
    t = np.array([[0, 1, 0, 1, 1]])  # transitions seen at a = 0..3: -, 0>1, 0>1 1>0, 0>1 1>0 0>1
    np.testing.assert_array_equal(R.transition_counts(t, 2)[0], [[0, 0], [0, 0], [0, 1], [1, 0]])
    np.testing.assert_allclose(
        R.bigram(t, 2, 1.0)[0], [[1 / 2, 1 / 2], [1 / 2, 1 / 2], [1 / 3, 2 / 3], [2 / 3, 1 / 3]]
    )
    np.testing.assert_allclose(
        R.unigram(t, 2, 1.0)[0], [[2 / 3, 1 / 3], [2 / 4, 2 / 4], [3 / 5, 2 / 5], [3 / 6, 3 / 6]]
    )
    np.testing.assert_allclose(R.empirical_bigram(t, 2)[0], [[0, 0], [0, 0], [0, 1], [1, 0]])
    np.testing.assert_allclose(R.uniform(t, 2)[0], 0.5)
    task = InductionTask(5, 2, InContextMarkov(0.3))
    np.testing.assert_allclose(R.bayes_optimal(task, t), R.bigram(t, 2, 0.3))
    # the loss of a predictor that is right with certainty is 0; of uniform, 1/2 (1 - 1/V)
    y = InductionTask(5, 2).targets(t)
    assert float(R.loss_per_token(y, t, 2)) == 0.0
    assert float(R.loss_per_token(R.uniform(t, 2), t, 2)) == pytest.approx(0.25)
    assert float(task.loss_per_token(y + 0.5, t)) == pytest.approx(0.25)  # 1/2 (2 x 0.25)


# --------------------------------------------------------------------------------------------------
# Expected losses

# L = 6, V = 2, alpha = 1, a first token independent of the chain: exact, by the Polya marginal
EXACT_6_2 = {"bigram": 0.22188889, "unigram": 0.24045597, "uniform": 0.25}


def test_exact_expected_losses_order_the_references():
    task = InductionTask(6, 2)
    seqs = R.all_sequences(6, 2)
    w = np.exp(np.asarray(R.polya_log_marginal(seqs, 2, 1.0)))
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    ex = R.exact_expected_losses(task)
    for k, v in EXACT_6_2.items():
        assert ex[k] == pytest.approx(v, abs=1e-7), k
    assert ex["bigram"] < ex["unigram"] < ex["uniform"]


def test_enumeration_agrees_with_the_polya_marginal_and_with_monte_carlo():
    """Exactly over sequences, averaged over chains: with a uniform first token it reproduces the
    closed form, and its posterior is the Dirichlet bigram; with the package's stationary start it
    agrees with sequences drawn by ``sample_with_chains``."""
    task = InductionTask(6, 2)
    ex = R.exact_expected_losses(task)
    uni = R.enumerated_expected_losses(task, n_chains=20_000, seed=1, start="uniform")
    for k in R.STRATEGIES[:2]:
        m, se = uni[k]
        assert abs(m - ex[k]) < Z * se, (k, m, se, ex[k])
    # the exact posterior mean under a uniform start is the Polya bigram: the same loss
    assert abs(uni["posterior"][0] - ex["bigram"]) < Z * uni["posterior"][1]
    st = R.enumerated_expected_losses(task, n_chains=20_000, seed=2)
    mc = R.monte_carlo_expected_losses(task, P=50_000, seed=3)
    for k in R.STRATEGIES[:2]:
        z = (st[k][0] - mc[k][0]) / math.hypot(st[k][1], mc[k][1])
        assert abs(z) < Z, (k, st[k], mc[k])
    # no reference beats the exact posterior (the Bayes-optimal predictor) beyond its error
    best, se = st["posterior"]
    for k in R.STRATEGIES:
        assert st[k][0] > best - Z * math.hypot(se, st[k][1]), k
    assert st["bigram"][0] < st["unigram"][0] < st["uniform"][0]


def test_posterior_mean_is_the_enumerated_posterior():
    """The importance-sampled posterior mean of the stationary-start source against the ratio of
    enumerated prefix marginals; and how far the Dirichlet bigram is from it."""
    task = InductionTask(4, 2)
    seqs, m, q = R.enumerated_posterior(task, n_chains=200_000, seed=4)
    assert m.sum() == pytest.approx(1.0, rel=1e-2)
    qs = np.asarray(R.posterior_mean(task, seqs, jax.random.key(5), n_draws=8192))
    assert np.sqrt(np.mean((qs - q) ** 2)) < 0.01
    assert np.abs(np.asarray(R.bigram(seqs, 2, 1.0)) - q).max() > 0.05  # the start is informative


def test_monte_carlo_paired_differences_at_a_small_preset():
    task = InductionTask(16, 3)
    mc = R.monte_carlo_expected_losses(task, P=20_000, seed=0)
    assert mc["uniform"] == (pytest.approx(1 / 3), pytest.approx(0.0, abs=1e-15))
    assert mc["bigram-unigram"][0] < -Z * mc["bigram-unigram"][1]
    assert mc["unigram-uniform"][0] < -Z * mc["unigram-uniform"][1]


# --------------------------------------------------------------------------------------------------
# KL to the strategies


def test_kl_of_a_strategy_to_itself_is_zero():
    task = InductionTask(8, 3)
    t = task.sample(jax.random.key(2), 50)
    refs = R.strategies(task, t)
    for name, p in refs.items():
        kl = R.kl_to_strategies(task, t, p)
        assert float(kl[name]) == pytest.approx(0.0, abs=1e-12), name
        assert all(float(v) >= -1e-12 for v in kl.values())
    out = R.compare_to_strategies(task, t, refs["unigram"])
    assert out["loss"] == pytest.approx(out["loss_unigram"]) and out["kl_unigram"] < 1e-12
    assert out["kl_bigram"] > 0 and out["kl_uniform"] > 0
    # a model's (P, L, V) outputs: the last row is ignored, negative entries clipped at the floor
    f = jnp.concatenate([refs["bigram"], -jnp.ones((50, 1, 3))], axis=1)
    assert float(R.kl_to_strategies(task, t, f)["bigram"]) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(R.to_distribution(np.array([-1.0, 1.0, 1.0]), 1e-4).sum(), 1.0)
    assert float(R.to_distribution(np.array([-1.0, 1.0, 1.0]), 1e-4)[0]) == pytest.approx(
        1e-4 / 2.0001
    )


def test_uniform_start_makes_the_dirichlet_bigram_the_exact_posterior():
    """``InContextMarkov(start="uniform")``: the first token is uniform whatever the chain, so the
    posterior mean is the Polya bigram (the enumerated posterior agrees with it to the
    enumeration's Monte Carlo error), and the source draws a uniform first token."""
    src = InContextMarkov(1.0, start="uniform")
    task = InductionTask(4, 2, src)
    seqs, m, q = R.enumerated_posterior(task, n_chains=200_000, seed=4, start="uniform")
    big = np.asarray(R.bigram(seqs, 2, 1.0))
    assert np.abs(big - q).max() < 0.01  # stationary start: > 0.05 (the test above)
    np.testing.assert_array_equal(np.asarray(R.posterior_mean(task, seqs)), big)
    x = np.asarray(src.sample(jax.random.key(3), 40_000, 3, 4))
    freq = np.bincount(x[:, 0], minlength=4) / x.shape[0]
    assert np.abs(freq - 0.25).max() < 5 * np.sqrt(0.25 * 0.75 / x.shape[0])  # 5 binomial sds
    assert str(src) == "icl-markov:alpha=1,start=uniform"
    from bayes_attn.tokens import parse_tokens

    assert parse_tokens(str(src)) == src and hash(parse_tokens(str(src))) == hash(src)
    with pytest.raises(ValueError, match="tokens: start must be one of"):
        InContextMarkov(1.0, start="first")
