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
  accurate; :class:`Quadrature` states its range and step, :data:`FAST` is the action's default).
  Each (query, t) is one forward sweep over the keys (:func:`sweep_terms`) that contracts the
  pair marginals with the weights as it goes: O(L^2 V^2), against O(L^2 V^3) for
  :func:`pair_marginals` (kept as the reference, ``method="pairs"``).

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
    analyticity.

    With ``tail`` the rule's nodes below u_lo are added in their leading order, e^{-tZ} = 1 (one
    more sweep at t = 0, weighted by the geometric sums of h t and h t^2 over the missing nodes):
    the truncation error drops to a relative (exp(u_lo) Z_max)^2 / 2, so u_lo can be about half
    as low."""

    u_lo: float = -52.0
    u_hi: float = 4.0
    h: float = 0.25
    tail: bool = False

    def nodes(self) -> np.ndarray:
        n = int(math.floor((self.u_hi - self.u_lo) / self.h)) + 1
        return np.exp(self.u_lo + self.h * np.arange(n))

    def rule(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(t, w1, w2)``: the nodes and the weights of 1/Z = int e^{-tZ} dt (h t) and of
        1/Z^2 = int t e^{-tZ} dt (h t^2), with the tail node t = 0 first when ``tail``."""
        t = self.nodes()
        w1, w2 = self.h * t, self.h * t * t
        if self.tail:
            e1, e2 = math.exp(-self.h), math.exp(-2 * self.h)
            t = np.concatenate([[0.0], t])
            w1 = np.concatenate([[self.h * math.exp(self.u_lo) * e1 / (1 - e1)], w1])
            w2 = np.concatenate([[self.h * math.exp(2 * self.u_lo) * e2 / (1 - e2)], w2])
        return t, w1, w2

    def max_spread(self, L: int, tol: float = 1e-13) -> float:
        """The largest logit spread the lower cut covers to relative ``tol``."""
        if self.tail:
            return -self.u_lo + 0.5 * math.log(2 * tol) - math.log(L)
        return -self.u_lo + math.log(tol) - math.log(L)


EXACT = Quadrature()  # 1e-13: the enumeration checks
STUDY = Quadrature(u_lo=-36.0, u_hi=4.0, h=0.4)  # about 1e-8 (spread <= 10 at L = 25)
# 64 sweeps: 1e-10 against EXACT at Table 1's chain minima (spread <= 4.3; docs/theory.md §15)
FAST = Quadrature(u_lo=-18.0, u_hi=3.6, h=0.35, tail=True)


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


def _messages(law: ChainLaw, g):
    """The chain's forward messages f[c] = E[prod_{m<=c} g[m, x_m]; x_c] (from pi) and backward
    messages b[c] = E[prod_{m>c} g[m, x_m] | x_c], each (L, V)."""
    T, V = law.T, g.shape[1]

    def fwd(f, gc):
        f = (f @ T) * gc
        return f, f

    def bwd(b, gc):
        b = T @ (gc * b)
        return b, b

    f0 = law.pi * g[0]
    _, fs = lax.scan(fwd, f0, g[1:])
    _, bs = lax.scan(bwd, jnp.ones(V, g.dtype), g[1:][::-1])
    return jnp.concatenate([f0[None], fs]), jnp.concatenate([bs[::-1], jnp.ones((1, V), g.dtype)])


def pair_marginals(law: ChainLaw, g) -> jax.Array:
    """Pt[c, c', j, j'] = E[prod_m g[m, x_m] 1{x_c = j, x_c' = j'}] for a chain started from pi
    with potentials ``g`` (L, V); Pt[c, c] is diagonal in (j, j') (the one-position marginal).

    Forward messages f, backward messages b and the transfer products prod_{m=c+1}^{c'} T diag(g_m)
    for every c <= c' (a scan over the offset c' - c): O(L^2 V^3)."""
    L, V = g.shape
    T = law.T

    f, b = _messages(law, g)
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


def sweep_terms(law: ChainLaw, W, g, r):
    """:func:`_query_terms` of ``pair_marginals(law, g)`` without the pair marginals: one forward
    sweep over the key position c' that carries X[c] = (f_c W_c)^T S_{c->c'} (L, V), Y = sum_{c<c'}
    diag(f_c W_c) S_{c->c'} and, past the target ``r``, diag(f_r) S_{r->c'} (V, V), with S the
    transfer products of :func:`pair_marginals`. O(L^2 V^2) per query and node against
    O(L^2 V^3), and no (L, L, V, V) array. ``g`` (L, V) carries the query's pin."""
    L, V = g.shape
    T = law.T

    f, b = _messages(law, g)
    u, v, fb = f * W, W * b, W * f * b
    q = W * fb  # the pairs c = c'

    def step(carry, xs):
        X, Y, Z, Cxx, Xv, Dxl = carry
        d, ud, vd, fd, bd, gn = xs
        past, at = d > r, d == r
        out = (X @ vd, Y @ vd, jnp.where(past, Z @ vd, 0.0),  # Cpp[c<d, d], Cxp[j, d], De[d > r]
               jnp.where(at, X * bd, 0.0), jnp.where(at, Y * bd, 0.0))  # De[c < r], Dx  # fmt: skip
        carry = (((X.at[d].set(ud)) @ T) * gn, ((Y + jnp.diag(ud)) @ T) * gn,
                 (jnp.where(at, jnp.diag(fd), Z) @ T) * gn, Cxx + Y * vd, Xv + X * vd,
                 Dxl + jnp.where(past, Z * vd, 0.0))  # fmt: skip
        return carry, out

    zLV, zVV = jnp.zeros((L, V), g.dtype), jnp.zeros((V, V), g.dtype)
    gnext = jnp.concatenate([g[1:], g[-1:]])
    (_, _, _, Cxx, Xv, Dxl), (col, yv, de, de_up, dx_up) = lax.scan(
        step, (zLV, zVV, zVV, zVV, zLV, zVV), (jnp.arange(L), u, v, f, b, gnext)
    )
    Cpp = col.T + col + jnp.diag(q.sum(1))
    Cxp = yv.T + Xv.T + q.T
    Cxx = Cxx + Cxx.T + jnp.diag(q.sum(0))
    De = de + de_up.sum(0) + jnp.where((jnp.arange(L) == r)[:, None], fb, 0.0)
    Dx = Dxl.T + dx_up.sum(0) + jnp.diag(fb[r])
    return (Cxx, Cxp, Cpp), (Dx, De, fb.sum(1))


def _pair_terms(law, W, g, r):
    return _query_terms(pair_marginals(law, g), W, r)


def _query(M, law, L, V, a, i, activation, quad, method):
    """The moment blocks of query (a, x_a = i): linear in closed form, softmax as the Laplace
    rule's weighted sum over its nodes (``method``: "sweep" vmaps :func:`sweep_terms` over the
    nodes, "pairs" scans :func:`pair_marginals` over them, the reference)."""
    kap = logit_table(M, L, V)[a, i]
    r = (a - 1) % L
    terms = sweep_terms if method == "sweep" else _pair_terms
    if activation == "linear":  # A[a, c] = kappa / L
        return terms(law, kap / L, _pin(jnp.ones((L, V), M.dtype), a, i), r)
    W = jnp.exp(kap - kap[a, i])  # the self logit as reference: Z >= 1
    t, w1, w2 = (jnp.asarray(x, dtype=M.dtype) for x in quad.rule())

    def node(t):  # 1/Z^2 = int t e^{-tZ} dt, 1/Z = int e^{-tZ} dt: weights w2, w1
        (Cxx, Cxp, Cpp), (Dx, De, Ab) = terms(law, W, _pin(jnp.exp(-t * W), a, i), r)
        return jnp.concatenate([Cxx.ravel(), Cxp.ravel(), Cpp.ravel()]), jnp.concatenate(
            [Dx.ravel(), De.ravel(), Ab]
        )

    if method == "sweep":
        c2, c1 = jax.vmap(node)(t)
        s2, s1 = w2 @ c2, w1 @ c1
    else:
        node = jax.checkpoint(node)

        def acc(carry, tw):
            c2, c1 = node(tw[0])
            return (carry[0] + tw[2] * c2, carry[1] + tw[1] * c1), None

        n2, n1 = V * V + V * L + L * L, V * V + L * V + L
        zeros = (jnp.zeros(n2, M.dtype), jnp.zeros(n1, M.dtype))
        (s2, s1), _ = lax.scan(acc, zeros, jnp.stack([t, w1, w2], axis=1))
    Cxx, Cxp, Cpp = s2[: V * V].reshape(V, V), s2[V * V : V * V + V * L].reshape(V, L), s2[V * V + V * L :].reshape(L, L)  # fmt: skip
    Dx, De, Ab = s1[: V * V].reshape(V, V), s1[V * V : V * V + L * V].reshape(L, V), s1[-L:]
    return (Cxx, Cxp, Cpp), (Dx, De, Ab)


@functools.partial(
    jax.jit, static_argnames=("L", "V", "activation", "quad", "method", "batch_size")
)
def _moments(M, law: ChainLaw, L: int, V: int, activation: str, quad: Quadrature,
             method: str = "sweep", batch_size: int | None = None):  # fmt: skip
    a_idx = jnp.repeat(jnp.arange(L), V)
    i_idx = jnp.tile(jnp.arange(V), L)

    def one(ai):
        return _query(M, law, L, V, ai[0], ai[1], activation, quad, method)

    if batch_size is None or activation == "linear":
        (Cxx, Cxp, Cpp), (Dx, De, Ab) = jax.vmap(one)((a_idx, i_idx))
    else:  # queries in batches, each recomputed in the gradient: bounded memory
        (Cxx, Cxp, Cpp), (Dx, De, Ab) = lax.map(
            jax.checkpoint(one), (a_idx, i_idx), batch_size=batch_size
        )
    C, D = _assemble(Cxx.sum(0), Cxp.sum(0), Cpp.sum(0), Dx.sum(0), De.sum(0))
    A_bar = jax.ops.segment_sum(Ab, a_idx, num_segments=L)  # E[A[a, c]]: sum over the pinned i
    return Moments(C, D, A_bar)


def moments(M, law: ChainLaw, activation: str, quad: Quadrature = EXACT, *,
            method: str = "sweep", batch_size: int | None = None) -> Moments:  # fmt: skip
    """Exact EK moments of the Level-1 attention of the bilinear form ``M`` (V+L, V+L) on the
    chain ``law``: C = E[sum_a Phi_a Phi_a^T], D = E[sum_a Phi_a y_a^T] (y_a = x_{a-1 mod L}) and
    A_bar = E[A] (L, L). Linear: closed form. Softmax: the Laplace integrals by ``quad``.

    ``method``: "sweep" (:func:`sweep_terms`, the default) or "pairs" (:func:`pair_marginals`,
    the reference; equal to rounding). ``batch_size``: softmax queries per batch (None: all at
    once; a batch bounds the gradient's memory at some cost in time)."""
    check_activation(activation)
    if method not in ("sweep", "pairs"):
        raise ValueError(f"method must be 'sweep' or 'pairs', got {method!r}")
    V = law.pi.shape[0]
    M = jnp.asarray(M, dtype=jnp.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < V + 2:
        raise ValueError(f"M must have shape (V + L, V + L) with V = {V}, L >= 2, got {M.shape}")
    L = M.shape[0] - V
    return _moments(M, law, L, V, activation, quad, method, batch_size)


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


def action(M, P, law: ChainLaw, hyper, activation: str, quad: Quadrature = FAST, **kwargs):
    """The token-dependent reduced action per unit chi, |M|^2 / (2 g_W) + the EK data term of
    :func:`moments` (``kwargs``: its ``method``, ``batch_size``): Level 1's action with its data
    term averaged over the chain."""
    mom = moments(M, law, activation, quad, **kwargs)
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


@functools.partial(jax.jit, static_argnames=("hyper", "activation", "quad", "L", "V", "batch_size"))
def _value_and_grad(m, P, law, hyper, activation, quad, L, V, batch_size=None):
    def f(x):  # P is traced: one compilation serves every P
        M = x.reshape(L + V, L + V)
        return action(M, P, law, hyper, activation, quad, batch_size=batch_size)

    return jax.value_and_grad(f)(m)


@functools.partial(jax.jit, static_argnames=("hyper", "activation", "V"))
def _value_and_grad_sampled(m, P, tokens, hyper, activation, V):
    def f(x):
        n = V + tokens.shape[-1]
        mom = moments_sampled(x.reshape(n, n), tokens, V, activation)
        return jnp.sum(x**2) / (2 * hyper.g_w) + data_term(mom, P, hyper.sigma2, hyper.g_o)

    return jax.value_and_grad(f)(m)


def minimum(task, hyper, P, activation: str, M0, quad: Quadrature = FAST, sample=None,
            gtol=1e-7, batch_size: int | None = 25):  # fmt: skip
    """A local minimum of :func:`action` over M at ``P``, by L-BFGS from ``M0``; with ``sample``
    (N, L) tokens, of the action with the Monte Carlo moments :func:`moments_sampled` instead.

    Returns ``(M, action, order)``: ``order`` holds the (c1, cG) ((a1, aG) for softmax) of the
    mean attention E[A] by :func:`bayes_attn.algebra.project`, ``resid`` (the RMS of
    L (A - E[A]), Level 1's token residual), ``spread`` (:func:`logit_spread`, to compare with
    ``quad.max_spread``) and ``nit``. ``batch_size``: :func:`moments`'s (softmax queries per
    batch of the exact gradient; 25 keeps it near 1.5 GB at Table 1)."""
    check_activation(activation)
    L, V = task.L, task.V
    law = chain_law(task.tokens, V)

    def value_and_grad(x):
        if sample is None:
            return _value_and_grad(x, jnp.float64(P), law, hyper, activation, quad, L, V,
                                   batch_size)  # fmt: skip
        return _value_and_grad_sampled(x, jnp.float64(P), sample, hyper, activation, V)

    res = lbfgs(value_and_grad, M0, maxiter=3000, gtol=gtol, ftol=1e-14)
    M = res.x.reshape(L + V, L + V)
    if sample is None:
        mom = moments(M, law, activation, quad, batch_size=batch_size)
    else:
        mom = moments_sampled(M, sample, V, activation)
    pr = algebra.project(mom.A_bar[None])
    second = jnp.trace(mom.C[V:, V:])  # sum over (a, c) of E[A[a, c]^2]
    resid = float(jnp.sqrt(jnp.maximum(second - jnp.sum(mom.A_bar**2), 0.0)))
    order = {"c1": float(pr["c1"]), "cG": float(pr["cG"]), "resid": resid,
             "spread": logit_spread(M, L, V), "nit": int(res.nit)}  # fmt: skip
    return M, float(res.fun), order
