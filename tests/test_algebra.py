"""The copy-task attention algebra against brute force (dense einsums, enumeration, least squares)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayes_attn import algebra
from bayes_attn.theory import action as act


def _tokens(P, L, V, seed=0):
    return jax.random.randint(jax.random.key(seed), (P, L), 0, V)


def test_logits_by_gathers_equal_dense_bilinear_form():
    L, V, P = 7, 4, 5
    tok = _tokens(P, L, V)
    M = jax.random.normal(jax.random.key(1), (V + L, V + L))
    psi = algebra.features(tok, V)
    dense = jnp.einsum("pai,ij,pbj->pab", psi, M, psi)
    np.testing.assert_allclose(algebra.logits_from_M(M, tok, V), dense, rtol=1e-13, atol=1e-13)


def test_phi_equals_dense_sum_over_keys():
    L, V, P = 6, 3, 4
    tok = _tokens(P, L, V)
    A = jax.random.normal(jax.random.key(2), (P, L, L))
    psi = algebra.features(tok, V)
    np.testing.assert_allclose(
        algebra.phi(A, tok, V), jnp.einsum("pab,pbi->pai", A, psi), atol=1e-13
    )


# L and V change array shapes, so they are drawn from a few values to keep compilation cached.
SIZES_L = st.sampled_from([2, 3, 8, 25])
SIZES_V = st.sampled_from([2, 5, 11])


@given(st.floats(-3, 3), st.floats(-3, 3), SIZES_L)
def test_projection_recovers_order_parameters(c1, cG, L):
    pr = algebra.project(algebra.reduced_attention(c1, cG, L)[None])  # one sequence
    assert abs(float(pr["c1"]) - c1) < 1e-12 and abs(float(pr["cG"]) - cG) < 1e-12
    assert float(pr["token_residual"]) < 1e-12


@given(st.floats(-8, 8), st.floats(-3, 3), SIZES_L)
def test_softmax_of_reduced_logits_is_reduced_with_a(cG, c1, L):
    A = algebra.attention(algebra.reduced_logits(c1, cG, L), "softmax")
    a1, aG = algebra.softmax_order(cG, L)
    np.testing.assert_allclose(A, algebra.reduced_attention(a1, aG, L), atol=1e-13)
    assert abs(float(a1) - (1 - float(aG) / L)) < 1e-13
    assert -L / (L - 1) < float(aG) < L
    assert abs(float(algebra.softmax_logit(aG, L)) - cG) < 1e-8 * (1 + abs(cG))
    d = jax.grad(lambda a: algebra.softmax_logit(a, L))(aG)
    assert abs(float(d) - float(algebra.softmax_dlogit(aG, L))) < 1e-9 * abs(float(d))


def test_min_norm_realisation_realises_K_and_matches_formula():
    L, V = 5, 3
    K = jax.random.normal(jax.random.key(3), (L, L))
    M = algebra.min_norm_M(K, V)
    tok = _tokens(20, L, V)
    np.testing.assert_allclose(
        algebra.logits_from_M(M, tok, V), jnp.broadcast_to(K, (20, L, L)), atol=1e-12
    )
    assert abs(float(jnp.sum(M**2)) - float(algebra.min_norm_sq(K, V))) < 1e-12


@pytest.mark.parametrize("L, V", [(3, 2), (4, 3), (5, 2)])
def test_min_norm_prior_equals_brute_force_least_squares(L, V):
    """min |M|^2 s.t. psi_a^T M psi_b = K_ab on a random dataset, by lstsq (its minimum-norm solution).

    P = 300 sequences cover every (token, token, position, position) combination with probability
    > 1 - 1e-12, so the dataset's constraints are the population's.
    """
    tok = np.asarray(_tokens(300, L, V, seed=L * 10 + V))
    psi = np.asarray(algebra.features(tok, V))
    rows = np.einsum("pai,pbj->pabij", psi, psi).reshape(-1, (V + L) ** 2)
    rng = np.random.default_rng(0)
    for K in (rng.normal(size=(L, L)), np.asarray(algebra.reduced_logits(0.7, -1.3, L))):
        rhs = np.broadcast_to(K, (300, L, L)).reshape(-1)
        sol, *_ = np.linalg.lstsq(rows, rhs, rcond=None)
        assert np.abs(rows @ sol - rhs).max() < 1e-9  # it does realise K
        brute = float(sol @ sol)
        assert abs(brute - float(algebra.min_norm_sq(jnp.asarray(K), V))) < 1e-9 * brute
    # the reduced prior is this minimum at K = c1 J + cG G*
    sc = act.Scales(*(jnp.float64(x) for x in (L, V, 1.0, 1.0, 1.0)))
    assert abs(2 * float(act.prior_linear(0.7, -1.3, sc)) - brute) < 1e-9 * brute


@pytest.mark.parametrize("L, V", [(3, 2), (4, 3)])
def test_ek_moments_equal_exact_enumeration(L, V):
    """Average Phi^T Phi and Phi^T y over all V^L sequences, against the closed-form moments."""
    tok = jnp.asarray(list(itertools.product(range(V), repeat=L)))
    for c1, cG in [(0.4, 1.7), (-1.1, 0.3)]:
        A = algebra.reduced_attention(c1, cG, L)
        Phi = algebra.phi(A, tok, V)
        y = algebra.targets(tok, V)
        C = jnp.einsum("pai,paj->ij", Phi, Phi) / tok.shape[0]
        D = jnp.einsum("pai,pav->iv", Phi, y) / tok.shape[0]
        C_ek, D_ek = algebra.ek_moments(c1, cG, L, V)
        np.testing.assert_allclose(C_ek, C, atol=1e-12)
        np.testing.assert_allclose(D_ek, D, atol=1e-12)


@given(
    st.floats(-3, 3),
    st.floats(-5, 5),
    st.floats(1, 1e4),
    SIZES_L,
    SIZES_V,
    st.floats(1e-2, 1e3),
)
def test_mode_form_equals_full_matrices(c1, cG, P, L, V, sigma2):
    sc = act.Scales(*(jnp.float64(x) for x in (L, V, 0.7, 1.3, sigma2)))
    full = act.data_ek_matrix(c1, cG, P, sc, L, V)
    modes = act.data_ek(c1, cG, P, sc)
    assert abs(float(full) - float(modes)) <= 1e-9 * (abs(float(full)) + P * L / sigma2)
    C, _ = algebra.ek_moments(c1, cG, L, V)
    ld = V / 2 * jnp.linalg.slogdet(jnp.eye(L + V) + P * 1.3 / sigma2 * C)[1]
    assert abs(float(ld) - float(act.logdet_ek(c1, cG, P, sc))) <= 1e-8 * (1 + abs(float(ld)))


def test_network_gate_realises_M_and_inverts_span_basis():
    """W_G = d W^+ M W^+T reproduces M exactly through the network's logits (W W_G W^T / d = M),
    and span_basis maps it back (M = U^T W_G U in the whitened coordinates: R M' R^T = M)."""
    V, L, d = 3, 4, 12
    kW, kp, kM = jax.random.split(jax.random.key(5), 3)
    W_emb, p = jax.random.normal(kW, (d, V)), jax.random.normal(kp, (d, L))
    M = jax.random.normal(kM, (V + L, V + L))
    W_G = algebra.network_gate(M, (W_emb, p))
    W = jnp.concatenate([W_emb.T, p.T], axis=0)
    np.testing.assert_allclose(W @ W_G @ W.T / d, M, atol=1e-10)
    U = algebra.span_basis(W_emb, p)
    R = algebra.gram_factor(algebra.embedding_gram(W_emb, p))
    np.testing.assert_allclose(R @ (U.T @ W_G @ U) @ R.T, M, atol=1e-9)
    with pytest.raises(ValueError, match="d_model"):
        algebra.network_gate(M, (W_emb[:5], p[:5]))
