"""The token-dependent reduced (Level-2) action for a global Markov chain: the equivalent-kernel
(EK) average of the Level-1 action over the whole bilinear form M.

Level 2 proper (:mod:`bayes_attn.theory.structured`) keeps the logits token-independent. For a
global chain that family is not closed under the Level-1 action (docs/theory.md §15), and no
symmetry of the chain's task is left to reduce M: the smallest closed set is M itself, (V+L)^2
entries less the directions no logit sees. This module builds that action with its moments exact:

* the logits of query (a, x_a = i) are kappa[a, i, c, j] = psi(a, i)^T M psi(c, j)
  (:func:`logit_table`); given x_a = i they are a function of each key's (position, token);
* the EK moments C = E[sum_a Phi_a Phi_a^T] and D = E[sum_a Phi_a y_a^T] need the law of the
  query, two keys and the target jointly: for a Markov chain that is a product of V x V transfer
  matrices with the query's token pinned (:func:`pair_marginals`), so linear attention is exact in
  closed form (:func:`moments`);
* softmax attention divides by Z_a = sum_c exp(kappa[a, i, c, x_c]), which couples every key. The
  Laplace identities 1/Z = int_0^inf exp(-t Z) dt and 1/Z^2 = int_0^inf t exp(-t Z) dt turn
  exp(-t Z) into a product over positions, i.e. a chain with position-dependent potentials: each t
  is one transfer-matrix computation, and the t integral is a trapezoid rule in log t (spectrally
  accurate; :class:`Quadrature` states its range and step).

:func:`moments_enumerated` is the brute-force check (every V^L sequence), :func:`action` the
reduced action |M|^2 / (2 g_W) + EK data term, :func:`minimum` an L-BFGS minimiser over M.

References
----------
docs/theory.md §15 ("The token-dependent Level 2 of a chain"); docs/validation.md "Level 2 for
structured tokens".
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayes_attn import algebra
from bayes_attn._validation import check_activation
from bayes_attn.theory._lbfgs import lbfgs
from bayes_attn.theory.structured import frequencies
from bayes_attn.tokens import Markov, parse_tokens, stationary


class ChainLaw(NamedTuple):
    """A stationary chain: start law ``pi`` (V,) and transition ``T`` (V, V). I.i.d. tokens with
    frequencies p are the chain T = 1 p^T, pi = p."""

    pi: jax.Array
    T: jax.Array


def chain_law(source, V: int) -> ChainLaw:
    """:class:`ChainLaw` of a global chain or an i.i.d. source; ``ValueError`` naming ``tokens``
    for ``InContextMarkov`` (no global law)."""
    source = parse_tokens(source)
    if isinstance(source, Markov):
        T = jnp.asarray(source.matrix(V))
        return ChainLaw(stationary(T), T)
    p = jnp.asarray(frequencies(source, V))
    return ChainLaw(p, jnp.broadcast_to(p, (V, V)))


class Quadrature(NamedTuple):
    """The trapezoid rule in u = log t for the softmax Laplace integrals: nodes u = u_lo + k h up
    to ``u_hi``. With the self logit as reference (Z >= 1), truncation below u_lo costs a relative
    exp(u_lo) Z_max (Z_max <= L exp(spread), spread = the largest logit minus the self logit,
    reported by :func:`logit_spread`), above u_hi a factor exp(2 u_hi - exp(u_hi)); the step's
    error is of order exp(-2 pi d / h), d ~ 1.2 the half-width of the integrand's strip of
    analyticity."""

    u_lo: float = -52.0
    u_hi: float = 4.0
    h: float = 0.25

    def nodes(self) -> np.ndarray:
        n = int(math.floor((self.u_hi - self.u_lo) / self.h)) + 1
        return np.exp(self.u_lo + self.h * np.arange(n))

    def max_spread(self, L: int, tol: float = 1e-13) -> float:
        """The largest logit spread the lower cut covers to relative ``tol``."""
        return -self.u_lo + math.log(tol) - math.log(L)


EXACT = Quadrature()  # 1e-13: the enumeration checks
STUDY = Quadrature(u_lo=-36.0, u_hi=4.0, h=0.4)  # about 1e-8 (spread <= 10 at L = 25)


def logit_table(M, L: int, V: int) -> jax.Array:
    """kappa[a, i, c, j] = psi(a, i)^T M psi(c, j), shape (L, V, L, V), psi = (e_token, e_position)."""
    xx, xe, ex, ee = M[:V, :V], M[:V, V:], M[V:, :V], M[V:, V:]
    return xx[None, :, None, :] + xe[None, :, :, None] + ex[:, None, None, :] + ee[:, None, :, None]


def logit_spread(M, L: int, V: int) -> float:
    """max over (a, i, c, j) of kappa[a, i, c, j] - kappa[a, i, a, i]: what :class:`Quadrature`
    must cover."""
    kap = logit_table(jnp.asarray(M), L, V)
    self_ = kap[jnp.arange(L), :, jnp.arange(L), :][:, jnp.arange(V), jnp.arange(V)]  # (L, V)
    return float(jnp.max(kap - self_[:, :, None, None]))


def pair_marginals(law: ChainLaw, g) -> jax.Array:
    """Pt[c, c', j, j'] = E[prod_m g[m, x_m] 1{x_c = j, x_c' = j'}] for a chain started from pi
    with potentials ``g`` (L, V); Pt[c, c] is diagonal in (j, j') (the one-position marginal).

    Forward messages f, backward messages b and the transfer products prod_{m=c+1}^{c'} T diag(g_m)
    for every c <= c' (a scan over the offset c' - c): O(L^2 V^3)."""
    L, V = g.shape
    T = law.T

    def fwd(f, gc):
        f = (f @ T) * gc
        return f, f

    def bwd(b, gc):
        b = T @ (gc * b)
        return b, b

    f0 = law.pi * g[0]
    _, fs = lax.scan(fwd, f0, g[1:])
    f = jnp.concatenate([f0[None], fs])
    _, bs = lax.scan(bwd, jnp.ones(V, g.dtype), g[1:][::-1])
    b = jnp.concatenate([bs[::-1], jnp.ones((1, V), g.dtype)])
    TG = T[None] * g[:, None, :]  # TG[m] = T diag(g_m)
    pos = jnp.arange(L)

    def step(S, d):
        S = S @ TG[jnp.minimum(pos + d, L - 1)]
        return S, S

    S0 = jnp.broadcast_to(jnp.eye(V, dtype=g.dtype), (L, V, V))
    _, Ss = lax.scan(step, S0, jnp.arange(1, L))
    S = jnp.concatenate([S0[None], Ss])  # S[d, c] = prod_{m=c+1}^{c+d} T diag(g_m)
    d = pos[None, :] - pos[:, None]
    up = S[jnp.clip(d, 0, L - 1), pos[:, None]]  # (c, c', V, V), valid where c' >= c
    up = f[:, None, :, None] * up * b[None, :, None, :]
    return jnp.where((d >= 0)[:, :, None, None], up, jnp.swapaxes(jnp.swapaxes(up, 0, 1), 2, 3))


def _query_terms(Pt, W, r):
    """The moment blocks of one query (pinned token), one Laplace node: second moments of the keys'
    weights W (L, V) from Pt, and their overlap with the target position ``r``."""
    WW = jnp.einsum("cj,dk,cdjk->cdjk", W, W, Pt)
    Cpp = WW.sum((2, 3))
    Cxp = WW.sum((0, 3)).T  # [j, c']: sum over c of key c with token j, key c' any token
    Cxx = WW.sum((0, 1))
    Ptr = Pt[:, r]  # (c, j, k): key c has token j, the target x_r = k
    Dx = jnp.einsum("cj,cjk->jk", W, Ptr)
    De = jnp.einsum("cj,cjk->ck", W, Ptr)
    Abar = jnp.einsum("cj,cjj->c", W, Pt[jnp.arange(W.shape[0]), jnp.arange(W.shape[0])])
    return (Cxx, Cxp, Cpp), (Dx, De, Abar)


def _pin(g, a, i):
    """Potentials with the query's position ``a`` pinned to token ``i``."""
    V = g.shape[1]
    return g.at[a].set(jnp.where(jnp.arange(V) == i, g[a], 0.0))


def _assemble(Cxx, Cxp, Cpp, Dx, De):
    C = jnp.block([[Cxx, Cxp], [Cxp.T, Cpp]])
    return C, jnp.concatenate([Dx, De], axis=0)


class Moments(NamedTuple):
    """Per-sequence EK moments: C (V+L, V+L), D (V+L, V) and the mean attention A_bar (L, L)."""

    C: jax.Array
    D: jax.Array
    A_bar: jax.Array


def _linear_query(M, law, L, V, a, i):
    W = logit_table(M, L, V)[a, i] / L  # A[a, c] = kappa / L
    Pt = pair_marginals(law, _pin(jnp.ones((L, V), M.dtype), a, i))
    return _query_terms(Pt, W, (a - 1) % L)


def _softmax_query(M, law, L, V, a, i, t_nodes, h):
    kap = logit_table(M, L, V)[a, i]
    W = jnp.exp(kap - kap[a, i])  # the self logit as reference: Z >= 1

    @jax.checkpoint
    def node(t):
        Pt = pair_marginals(law, _pin(jnp.exp(-t * W), a, i))
        (Cxx, Cxp, Cpp), (Dx, De, Ab) = _query_terms(Pt, W, (a - 1) % L)
        # 1/Z^2 = int t e^{-tZ} dt, 1/Z = int e^{-tZ} dt; dt = t du
        return (h * t * t) * jnp.concatenate([Cxx.ravel(), Cxp.ravel(), Cpp.ravel()]), (h * t) * (
            jnp.concatenate([Dx.ravel(), De.ravel(), Ab])
        )

    def acc(carry, t):
        c2, c1 = node(t)
        return (carry[0] + c2, carry[1] + c1), None

    n2 = V * V + V * L + L * L
    n1 = V * V + L * V + L
    (s2, s1), _ = lax.scan(acc, (jnp.zeros(n2, M.dtype), jnp.zeros(n1, M.dtype)), t_nodes)
    Cxx, Cxp, Cpp = (
        s2[: V * V].reshape(V, V),
        s2[V * V : V * V + V * L].reshape(V, L),
        s2[V * V + V * L :].reshape(L, L),
    )
    Dx, De, Ab = s1[: V * V].reshape(V, V), s1[V * V : V * V + L * V].reshape(L, V), s1[-L:]
    return (Cxx, Cxp, Cpp), (Dx, De, Ab)


@functools.partial(jax.jit, static_argnames=("L", "V", "activation", "quad"))
def _moments(M, law: ChainLaw, L: int, V: int, activation: str, quad: Quadrature):
    a_idx = jnp.repeat(jnp.arange(L), V)
    i_idx = jnp.tile(jnp.arange(V), L)
    if activation == "linear":
        one = lambda a, i: _linear_query(M, law, L, V, a, i)  # noqa: E731
    else:
        t = jnp.asarray(quad.nodes(), dtype=M.dtype)
        one = lambda a, i: _softmax_query(M, law, L, V, a, i, t, quad.h)  # noqa: E731
    (Cxx, Cxp, Cpp), (Dx, De, Ab) = jax.vmap(one)(a_idx, i_idx)
    C, D = _assemble(Cxx.sum(0), Cxp.sum(0), Cpp.sum(0), Dx.sum(0), De.sum(0))
    A_bar = jax.ops.segment_sum(Ab, a_idx, num_segments=L)  # E[A[a, c]]: sum over the pinned i
    return Moments(C, D, A_bar)


def moments(M, law: ChainLaw, activation: str, quad: Quadrature = EXACT) -> Moments:
    """Exact EK moments of the Level-1 attention of the bilinear form ``M`` (V+L, V+L) on the
    chain ``law``: C = E[sum_a Phi_a Phi_a^T], D = E[sum_a Phi_a y_a^T] (y_a = x_{a-1 mod L}) and
    A_bar = E[A] (L, L). Linear: closed form. Softmax: the Laplace integrals by ``quad``."""
    check_activation(activation)
    V = law.pi.shape[0]
    M = jnp.asarray(M, dtype=jnp.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < V + 2:
        raise ValueError(f"M must have shape (V + L, V + L) with V = {V}, L >= 2, got {M.shape}")
    L = M.shape[0] - V
    return _moments(M, law, L, V, activation, quad)


def moments_enumerated(M, source, L: int, V: int, activation: str) -> Moments:
    """:func:`moments` by brute force: every one of the V^L sequences weighted by its probability
    (a check; small L and V only)."""
    import itertools

    law = chain_law(source, V)
    pi, T = np.asarray(law.pi), np.asarray(law.T)
    tok = np.array(list(itertools.product(range(V), repeat=L)))
    prob = jnp.asarray(pi[tok[:, 0]] * np.prod(T[tok[:, :-1], tok[:, 1:]], axis=1))
    tok = jnp.asarray(tok)
    A = algebra.attention(algebra.logits_from_M(jnp.asarray(M), tok, V), activation)
    Phi, y = algebra.phi(A, tok, V), algebra.targets(tok, V)
    C = jnp.einsum("p,pai,paj->ij", prob, Phi, Phi)
    D = jnp.einsum("p,pai,pav->iv", prob, Phi, y)
    return Moments(C, D, jnp.einsum("p,pab->ab", prob, A))


def data_term(mom: Moments, P, sigma2, g_o):
    """EK data term (P L - P^2 tr(D^T (lam + P C)^-1 D)) / (2 sigma^2), lam = sigma^2 / g_O."""
    L = mom.A_bar.shape[0]
    lam = sigma2 / g_o
    C, D = mom.C, mom.D
    fit = P**2 * jnp.trace(D.T @ jnp.linalg.solve(lam * jnp.eye(C.shape[0]) + P * C, D))
    return (P * L - fit) / (2 * sigma2)


def action(M, P, law: ChainLaw, hyper, activation: str, quad: Quadrature = STUDY):
    """The token-dependent reduced action per unit chi, |M|^2 / (2 g_W) + the EK data term of
    :func:`moments`: Level 1's action with its data term averaged over the chain."""
    mom = moments(M, law, activation, quad)
    return jnp.sum(jnp.asarray(M) ** 2) / (2 * hyper.g_w) + data_term(
        mom, P, hyper.sigma2, hyper.g_o
    )


def moments_sampled(M, tokens, V: int, activation: str) -> Moments:
    """The Monte Carlo estimate of :func:`moments`: sample means over the sequences ``tokens``
    (N, L). With N = P sequences, P times these moments are Level 1's ``Phi^T Phi`` and
    ``Phi^T y``, so :func:`data_term` is then Level 1's data term on those sequences."""
    M = jnp.asarray(M)
    A = algebra.attention(algebra.logits_from_M(M, tokens, V), activation)
    Phi, y = algebra.phi(A, tokens, V), algebra.targets(tokens, V)
    N, n = tokens.shape[0], M.shape[0]
    Phi, y = Phi.reshape(-1, n), y.reshape(-1, V)
    return Moments(Phi.T @ Phi / N, Phi.T @ y / N, A.mean(0))


@functools.partial(jax.jit, static_argnames=("hyper", "activation", "quad", "L", "V"))
def _value_and_grad(m, P, law, hyper, activation, quad, L, V):
    f = lambda x: action(x.reshape(L + V, L + V), P, law, hyper, activation, quad)  # noqa: E731
    return jax.value_and_grad(f)(m)


@functools.partial(jax.jit, static_argnames=("hyper", "activation", "V"))
def _value_and_grad_sampled(m, P, tokens, hyper, activation, V):
    def f(x):
        n = V + tokens.shape[-1]
        mom = moments_sampled(x.reshape(n, n), tokens, V, activation)
        return jnp.sum(x**2) / (2 * hyper.g_w) + data_term(mom, P, hyper.sigma2, hyper.g_o)

    return jax.value_and_grad(f)(m)


def minimum(task, hyper, P, activation: str, M0, quad: Quadrature = STUDY, sample=None,
            gtol=1e-7):  # fmt: skip
    """A local minimum of :func:`action` over M at ``P``, by L-BFGS from ``M0``; with ``sample``
    (N, L) tokens, of the action with the Monte Carlo moments :func:`moments_sampled` instead.

    Returns ``(M, action, order)``: ``order`` holds the (c1, cG) ((a1, aG) for softmax) of the
    mean attention E[A] by :func:`bayes_attn.algebra.project`, ``resid`` (the RMS of
    L (A - E[A]), Level 1's token residual), ``spread`` (:func:`logit_spread`, to compare with
    ``quad.max_spread``) and ``nit``."""
    check_activation(activation)
    L, V = task.L, task.V
    law = chain_law(task.tokens, V)

    def value_and_grad(x):
        if sample is None:
            return _value_and_grad(x, jnp.float64(P), law, hyper, activation, quad, L, V)
        return _value_and_grad_sampled(x, jnp.float64(P), sample, hyper, activation, V)

    res = lbfgs(value_and_grad, M0, maxiter=3000, gtol=gtol, ftol=1e-14)
    M = res.x.reshape(L + V, L + V)
    if sample is None:
        mom = moments(M, law, activation, quad)
    else:
        mom = moments_sampled(M, sample, V, activation)
    pr = algebra.project(mom.A_bar[None])
    second = jnp.trace(mom.C[V:, V:])  # sum over (a, c) of E[A[a, c]^2]
    resid = float(jnp.sqrt(jnp.maximum(second - jnp.sum(mom.A_bar**2), 0.0)))
    order = {"c1": float(pr["c1"]), "cG": float(pr["cG"]), "resid": resid,
             "spread": logit_spread(M, L, V), "nit": int(res.nit)}  # fmt: skip
    return M, float(res.fun), order
