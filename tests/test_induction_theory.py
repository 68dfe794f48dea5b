"""The reduced two-layer (induction-head) theory: its prior, its algebra against the kernel limit's
forward, and its saddles (docs/theory.md §13, "Order parameters for two layers")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_attn import algebra
from bayes_attn.induction import InductionTask
from bayes_attn.models.two_layer import forward
from bayes_attn.task import Hyper
from bayes_attn.theory import induction_action as ia
from bayes_attn.theory.action import woodbury_evidence
from bayes_attn.tokens import InContextMarkov

HYPER = Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)


def _task(L=6, V=2):
    return InductionTask(L, V, InContextMarkov(1.0, start="uniform"))


@pytest.mark.parametrize(("L", "V"), [(4, 2), (6, 3)])
def test_layer1_prior_without_the_mask_is_the_one_layer_schur_complement(L, V):
    assert ia.layer1_prior_coefficient(L, V, causal=False) == pytest.approx(L - 1, rel=1e-10)
    assert 0 < ia.layer1_prior_coefficient(L, V) < L - 1  # the mask frees the upper triangle


def test_layer1_form_realises_the_copy_pattern_more_cheaply_than_the_plain_one():
    """The least-squares M1 gives the causal softmax pattern of cG1 G* (per-query constants drop
    out), at norm q1 cG1^2, below the plain realisation's (L - 1) cG1^2 (cG1 on the position
    entries (a, a - 1))."""
    L, V, cG = 5, 2, 1.7
    task = _task(L, V)
    psi = algebra.features(task.sample(jax.random.PRNGKey(0), 8), V)
    M1 = ia.induction_forms(jnp.array([cG, 0.0]), L, V)[0]
    plain = jnp.zeros((L + V, L + V)).at[V + jnp.arange(1, L), V + jnp.arange(L - 1)].set(cG)
    A = [forward(M, None, psi, "softmax", True, ("h0", "h1"))[1] for M in (M1, plain)]
    np.testing.assert_allclose(np.asarray(A[0]), np.asarray(A[1]), atol=1e-12)
    q1 = ia.layer1_prior_coefficient(L, V)
    assert float(jnp.sum(M1**2)) == pytest.approx(q1 * cG**2, rel=1e-12)
    assert q1 * cG**2 < float(jnp.sum(plain**2))


def test_layer2_block_is_orthogonal_to_the_null_directions():
    """kappa2 (I - J/V) on (query token, key's copied token) cannot be shortened: the features'
    linear dependencies (token and position blocks each sum to one, in psi and in A1 psi) have no
    component on centred token vectors, so the prior is (V - 1) kappa2^2 / (2 g_W)."""
    L, V, k = 5, 3, 0.9
    n = V + L
    M2 = ia.induction_forms(jnp.array([0.4, k]), L, V)[1]
    null = np.zeros((2, 2 * n))
    null[0, :V], null[0, V:n] = 1.0, -1.0
    null[1, n : n + V], null[1, n + V :] = 1.0, -1.0
    proj = null.T @ np.linalg.pinv(null.T)
    assert np.max(np.abs(proj @ np.asarray(M2))) < 1e-12
    assert np.max(np.abs(np.asarray(M2) @ proj)) < 1e-12
    assert float(jnp.sum(M2**2)) == pytest.approx((V - 1) * k**2)


def test_reduced_patterns_equal_the_kernel_limit_forward_at_the_realisation():
    task = _task(7, 3)
    tokens = task.sample(jax.random.PRNGKey(3), 20)
    psi = algebra.features(tokens, task.V)
    theta = jnp.array([1.3, 2.1])
    M1, M2 = ia.induction_forms(theta, task.L, task.V)
    for a, b in zip(forward(M1, M2, psi, "softmax", True), ia.reduced_patterns(theta, psi, task.V),
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-13)


def test_action_is_the_kernel_limit_action_on_the_reference_batch_at_P_equal_N():
    """At P = N the equivalent-kernel data term on the reference batch is the exact Woodbury data
    term of that batch, and the prior is the realisation's |M|^2 with q1 for layer 1."""
    task = _task(6, 2)
    ref = ia.induction_reference(task, HYPER, num=64, seed=1)
    theta = jnp.array([0.8, -1.1])
    Phi = ia.reduced_patterns(theta, ref.psi, task.V)[0][:, : task.L - 1].reshape(-1, 4 * 8)
    y = ref.y.reshape(-1, task.V)
    exact = woodbury_evidence(Phi.T @ Phi, Phi.T @ y, jnp.sum(y**2), 30.0, 1.0)[0]
    prior = (ref.q1 * 0.8**2 + (task.V - 1) * 1.1**2) / 2
    assert float(ia.induction_action(theta, 64.0, ref)) == pytest.approx(float(exact + prior),
                                                                         rel=1e-12)  # fmt: skip


@pytest.mark.slow
def test_saddles_and_branches_are_the_minima_of_a_dense_grid():
    """At a small size every minimum found is a local minimum of the action on a dense grid around
    it, the global one is the grid's lowest point (to the grid's spacing), and the continuation
    branches end on minima that the multi-start search finds."""
    ref = ia.induction_reference(_task(6, 2), HYPER, num=64, seed=2)
    P = 400.0
    found = ia.induction_saddles(P, ref)
    assert found and all(m.grad_norm < 1e-4 and m.min_eig > 0 for m in found)
    g1, g2 = np.linspace(-3, 3, 61), np.linspace(-6, 6, 61)
    grid = np.stack(np.meshgrid(g1, g2, indexing="ij"), -1).reshape(-1, 2)
    s = np.asarray(jax.vmap(lambda t: ia.induction_action(t, P, ref))(jnp.asarray(grid)))
    lowest = grid[np.argmin(s)]
    assert np.all(np.abs(found[0].theta - lowest) <= [g1[1] - g1[0], g2[1] - g2[0]])
    assert found[0].s <= s.min() + 1e-9
    br = ia.induction_branches([100.0, P], ref)
    for theta, _ in br.values():
        assert any(np.max(np.abs(theta[-1] - m.theta)) < 1e-3 for m in found)


def test_reference_refuses_a_task_without_next_token_targets():
    from bayes_attn.task import CopyTask

    with pytest.raises(ValueError, match="task must be an InductionTask"):
        ia.induction_reference(CopyTask(6, 2), HYPER, num=4)
    with pytest.raises(ValueError, match="num"):
        ia.induction_reference(_task(), HYPER, num=0)
