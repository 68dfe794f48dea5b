"""Properties of the reduced action: symmetries, the perfect-fit bound, EK against exact data terms."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bayes_attn import algebra
from bayes_attn.theory import action as act

SCALES = st.tuples(
    st.integers(2, 200),
    st.integers(2, 50),
    st.floats(0.05, 20),
    st.floats(0.05, 20),
    st.floats(0.5, 1e4),
)


def _sc(L, V, g_w, g_o, sigma2):
    return act.Scales(*(jnp.float64(x) for x in (L, V, g_w, g_o, sigma2)))


@given(st.floats(-4, 4), st.floats(-6, 6), st.floats(0.1, 1e5), SCALES)
def test_linear_action_is_Z2_symmetric(c1, cG, P, s):
    sc = _sc(*s)
    c = jnp.array([c1, cG])
    a, b = float(act.action_linear(c, P, sc)), float(act.action_linear(-c, P, sc))
    assert abs(a - b) <= 1e-12 * max(1.0, abs(a))


@given(st.floats(-4, 4), st.floats(-6, 6), st.floats(0.1, 1e5), SCALES)
def test_data_term_respects_perfect_fit_bound(c1, cG, P, s):
    """sum |y - Phi w|^2 >= 0 for every readout, so the data term is >= 0 (Cauchy-Schwarz per mode)."""
    sc = _sc(*s)
    assert float(act.data_ek(c1, cG, P, sc)) >= -1e-12 * P * s[0] / s[4]
    # softmax evaluates the same term at (a1, aG)
    a1, aG = algebra.softmax_order(cG, sc.L)
    assert float(act.data_ek(a1, aG, P, sc)) >= -1e-12 * P * s[0] / s[4]


def test_exact_data_term_respects_bound_and_perfect_copy_reaches_it():
    L, V, P = 6, 3, 40
    tok = jax.random.randint(jax.random.key(0), (P, L), 0, V)
    for c1, cG in [(0.3, -2.0), (1.0, 1.0), (0.0, 0.0)]:
        A = algebra.reduced_attention(c1, cG, L)
        assert float(act.data_exact(A, tok, V, 10.0, 1.0)) >= 0.0
    # pure copy attention fits exactly: only the O(1) readout penalty |w|^2/(2 g_O) = V/2 is left,
    # nothing of the O(P L / sigma^2) scale of the data term
    A = algebra.reduced_attention(0.0, float(L), L)
    sigma2 = 1e-3
    d = float(act.data_exact(A, tok, V, sigma2, 1.0))
    assert 0.0 <= d <= V / 2 + 1e-9
    assert d < 1e-4 * P * L / (2 * sigma2)


@given(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3))
def test_softmax_is_invariant_to_c1(c1, c1b, cG):
    """softmax(c1 J + cG G*) does not depend on c1, so neither does any data term."""
    L, V = 7, 3
    tok = jax.random.randint(jax.random.key(1), (9, L), 0, V)
    A = algebra.attention(algebra.reduced_logits(c1, cG, L), "softmax")
    B = algebra.attention(algebra.reduced_logits(c1b, cG, L), "softmax")
    np.testing.assert_allclose(A, B, atol=1e-14)
    da = act.data_exact(A, tok, V, 5.0, 1.0)
    db = act.data_exact(B, tok, V, 5.0, 1.0)
    assert abs(float(da) - float(db)) < 1e-10


def test_softmax_prior_is_linear_prior_minimised_over_c1():
    sc = _sc(25, 5, 1.3, 1.0, 100.0)
    for cG in (-2.0, 0.4, 3.0):
        best = float(act.prior_linear(-cG / 25, cG, sc))  # the minimiser over c1 is c1 = -cG/L
        grid = min(float(act.prior_linear(c1, cG, sc)) for c1 in np.linspace(-1, 1, 2001))
        assert abs(best - float(act.prior_softmax(cG, sc))) < 1e-12
        assert best <= grid + 1e-12


def test_equivalent_kernel_converges_to_exact_data_term():
    """Mean exact data term over datasets against the EK term: the relative error shrinks with P.

    400 datasets per P. The gap is the finite-P fitting bias (the readout adapts to each dataset), of
    order (V+L) V / (P L) relative; each decrease must be resolved at 3 combined standard errors of the
    dataset means (measured here: errors ~2e-2, 8e-3, 2e-3 against standard errors <= 1e-3).
    """
    L, V, sigma2, g_o = 5, 2, 1.0, 1.0
    sc = _sc(L, V, 1.0, g_o, sigma2)
    c1, cG = 0.5, 1.0
    A = algebra.reduced_attention(c1, cG, L)
    errs, ses = [], []
    for i, P in enumerate((40, 160, 640)):
        keys = jax.random.split(jax.random.key(100 + i), 400)
        toks = jax.vmap(lambda k, P=P: jax.random.randint(k, (P, L), 0, V))(keys)
        exact = np.asarray(jax.vmap(lambda t: act.data_exact(A, t, V, sigma2, g_o))(toks))
        ek = float(act.data_ek(c1, cG, P, sc))
        errs.append(abs(exact.mean() - ek) / ek)
        ses.append(exact.std(ddof=1) / np.sqrt(len(exact)) / ek)
    assert errs[0] > errs[1] + 3 * np.hypot(ses[0], ses[1])
    assert errs[1] > errs[2] + 3 * np.hypot(ses[1], ses[2])
    assert errs[2] < 0.005


def test_loss_per_token_is_the_posterior_mean_residual():
    """-sigma^4 d s_data/d sigma^2 / (P L) equals 1/2 |y - f_bar|^2 / (P L) for the posterior-mean readout.

    Checked exactly on a dataset with the exact data term, then the EK loss against the dataset value.
    """
    L, V, P, sigma2, g_o = 10, 4, 3000, 50.0, 1.0
    tok = jax.random.randint(jax.random.key(5), (P, L), 0, V)
    c1, cG = 0.4, 1.5
    A = algebra.reduced_attention(c1, cG, L)
    Phi = algebra.phi(A, tok, V).reshape(-1, L + V)
    y = algebra.targets(tok, V).reshape(-1, V)
    w = jnp.linalg.solve(sigma2 / g_o * jnp.eye(L + V) + Phi.T @ Phi, Phi.T @ y)
    direct = 0.5 * float(jnp.sum((y - Phi @ w) ** 2)) / (P * L)
    via = -(sigma2**2) * jax.grad(lambda s2: act.data_exact(A, tok, V, s2, g_o))(sigma2) / (P * L)
    assert abs(float(via) - direct) < 1e-10
    ek = float(act.loss_per_token(c1, cG, P, _sc(L, V, 1.0, g_o, sigma2)))
    assert abs(ek - direct) < 0.01 * direct
    # no attention, no fit: half the squared norm of a one-hot target
    assert abs(float(act.loss_per_token(0.0, 0.0, P, _sc(L, V, 1.0, g_o, sigma2))) - 0.5) < 1e-12
