"""The reduced (Level-2) theory for structured tokens: i.i.d. tokens with frequencies p, and a
global stationary Markov chain.

* **I.i.d. tokens** (``Uniform()``, ``Zipf(s)``): (c1, cG) still close. The equivalent-kernel data
  term is a (V+1)-dimensional matrix problem in (c1, cG) and p (:func:`data_ek_iid`); the prior is
  the uniform one. :class:`TokenScales` carries p beside the scales, and every solver of
  :mod:`bayes_attn.theory.saddles` and :mod:`bayes_attn.theory.boundaries` runs on it unchanged
  (:func:`bayes_attn.theory.action.data_ek` dispatches on ``p``): :func:`saddles`,
  :func:`phase_boundaries` and the closed-form linear P* :func:`second_order_closed_form_iid`.
* **A global Markov chain** (``Markov(...)``): (c1, cG) do not close. The closed set is the whole
  token-independent logit matrix K (L x L): :func:`action_general` is its reduced action (the exact
  equivalent-kernel average over the chain's pair law, :func:`pair_law`), :func:`second_order_general`
  its exact linear P*, :func:`general_path` its minima along P and :func:`general_first_order` the
  softmax equal-action point.

``InContextMarkov`` has no token-independent Level 2 (its pair law is a mixture over chains and the
copy competitor is in-context); every entry point refuses it with a ``ValueError`` naming ``tokens``.

References
----------
docs/theory.md §15 ("Level 2 for structured tokens"); docs/validation.md "Level 2 for structured
tokens".
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from scipy import optimize

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_positive_array
from bayes_attn.theory import boundaries
from bayes_attn.theory._lbfgs import lbfgs
from bayes_attn.theory.saddles import candidates, check_P_in_range, minima_at
from bayes_attn.tokens import InContextMarkov, Markov, Zipf, parse_tokens, stationary


class TokenScales(NamedTuple):
    """:class:`bayes_attn.theory.action.Scales` plus the token frequencies ``p`` (V,): the numbers
    the reduced action of i.i.d. tokens depends on (a pytree, vmappable like ``Scales``)."""

    L: jax.Array  # shape=(), float
    V: jax.Array  # shape=(), float
    g_w: jax.Array  # shape=()
    g_o: jax.Array  # shape=()
    sigma2: jax.Array  # shape=()
    p: jax.Array  # shape=(V,)


def _refuse(source, what: str):
    raise ValueError(f"tokens: {what} is not defined for {source} (docs/theory.md §15)")


def frequencies(source, V: int) -> np.ndarray:
    """The one-position law p (V,) of an i.i.d. source (``Uniform``, ``Zipf``); ``ValueError``
    naming ``tokens`` for a chain (use the general theory, :func:`pair_law`)."""
    source = parse_tokens(source)
    if isinstance(source, Zipf):
        return source.probabilities(V)
    if source.uniform_law and not isinstance(source, Markov | InContextMarkov):
        return np.full(V, 1.0 / V)
    _refuse(source, "the i.i.d. reduced theory in (c1, cG)")


def token_scales(task, hyper) -> TokenScales:
    """(L, V, g_W, g_O, sigma^2, p) of a task with i.i.d. tokens and a Hyper."""
    f = lambda x: jnp.asarray(x, dtype=jnp.float64)  # noqa: E731
    p = f(frequencies(task.tokens, task.V))
    return TokenScales(f(task.L), f(task.V), f(hyper.g_w), f(hyper.g_o), f(hyper.sigma2), p)


# --------------------------------------------------------------------------------------------------
# I.i.d. tokens: the data term and the closed-form linear P*


def iid_blocks(c1, cG, sc: TokenScales):
    """The (V+1)-dimensional problem of the i.i.d. data term, per sequence and per unit P L.

    With m = c1 + cG/L (row sum), rho = (c1 + cG)/L (copy entry), q = (L c1^2 + 2 c1 cG + cG^2)/L^2
    (squared row norm), Sigma = diag(p) - p p^T, a = (p, 1), c = (Sigma p, 0) and
    S~ = blockdiag(Sigma, 0): returns ``(H, N)`` with H = m^2 a a^T + q S~ (the design's moments in
    (token readout, constant positional readout)) and N = m^2 |p|^2 a a^T + m rho (a c^T + c a^T)
    + rho^2 S~^2 (the target overlaps summed over output channels).
    """
    p = sc.p
    V = p.shape[0]
    m = c1 + cG / sc.L
    rho = (c1 + cG) / sc.L
    q = (sc.L * c1**2 + 2 * c1 * cG + cG**2) / sc.L**2
    Sig = jnp.diag(p) - jnp.outer(p, p)
    a = jnp.concatenate([p, jnp.ones(1)])
    c = jnp.concatenate([Sig @ p, jnp.zeros(1)])
    St = jnp.zeros((V + 1, V + 1)).at[:V, :V].set(Sig)
    H = m**2 * jnp.outer(a, a) + q * St
    N = m**2 * (p @ p) * jnp.outer(a, a) + m * rho * (jnp.outer(a, c) + jnp.outer(c, a))
    return H, N + rho**2 * (St @ St)


def data_ek_iid(c1, cG, P, sc: TokenScales):
    """Equivalent-kernel data term of A = c1 J/L + cG G*/L on i.i.d. tokens with frequencies p.

    s_data = (P L / 2 sigma^2) [1 - P L tr((lam Lam + P L H)^-1 N)], Lam = diag(1_V, L),
    lam = sigma^2/g_O, with ``(H, N)`` of :func:`iid_blocks` (docs/theory.md §15). The inverse is
    taken in closed form: lam Lam + P L q S~ is diagonal in the eigenbasis of Sigma (fixed by p),
    and m^2 a a^T is a rank-one update (Sherman-Morrison). With p uniform it is
    :func:`bayes_attn.theory.action.data_ek` (the mode form). Broadcasts over c1, cG and P.
    """
    p, L = sc.p, sc.L
    sig, U = jnp.linalg.eigh(jnp.diag(p) - jnp.outer(p, p))
    up = U.T @ p  # a and c in the eigenbasis: a~ = (U^T p, 1), c~ = (sig U^T p, 0)
    c1, cG, P = (jnp.asarray(x)[..., None] for x in (c1, cG, P))
    m = c1 + cG / L
    rho = (c1 + cG) / L
    q = (L * c1**2 + 2 * c1 * cG + cG**2) / L**2
    lam = sc.sigma2 / sc.g_o
    b = 1.0 / (lam + P * L * q * sig)  # (..., V): the token eigenvalues of lam Lam + P L q S~
    b_pos = 1.0 / (lam * L)  # the constant positional readout's
    S_aa = jnp.sum(b * up**2, -1) + b_pos
    S_ac = jnp.sum(b * sig * up**2, -1)
    S_ss = jnp.sum(b * sig**2, -1)
    T_ss = jnp.sum(b**2 * sig**2 * up**2, -1)
    m, rho, P = m[..., 0], rho[..., 0], P[..., 0]
    pp = p @ p
    first = m**2 * pp * S_aa + 2 * m * rho * S_ac + rho**2 * S_ss
    u = P * L * m**2
    second = u * (m**2 * pp * S_aa**2 + 2 * m * rho * S_aa * S_ac + rho**2 * T_ss) / (1 + u * S_aa)
    return P * L / (2 * sc.sigma2) * (1.0 - P * L * (first - second))


def data_ek_iid_matrix(c1, cG, P, sc: TokenScales):
    """:func:`data_ek_iid` by a dense (V+1)-dimensional solve (its check), scalar arguments."""
    H, N = iid_blocks(c1, cG, sc)
    V = sc.p.shape[0]
    lam = sc.sigma2 / sc.g_o
    Lam = jnp.diag(jnp.concatenate([jnp.ones(V), jnp.full(1, sc.L)]))
    fit = P * sc.L * jnp.trace(jnp.linalg.solve(lam * Lam + P * sc.L * H, N))
    return P * sc.L / (2 * sc.sigma2) * (1.0 - fit)


def origin_coefficients(sc: TokenScales):
    """(K_p, kappa, tau): the data term's quadratic part at the origin, in m = c1 + cG/L and
    r = c1 + cG, is -(P^2 g_O / 2 sigma^4) [K_p m^2 + 2 kappa m r + tau r^2], with
    K_p = L^2 |p|^2 (|p|^2 + 1/L), kappa = L p^T Sigma p and tau = tr Sigma^2."""
    p, L = sc.p, sc.L
    Sig = jnp.diag(p) - jnp.outer(p, p)
    pp = p @ p
    return L**2 * pp * (pp + 1 / L), L * p @ Sig @ p, jnp.trace(Sig @ Sig)


def second_order_closed_form_iid(sc: TokenScales):
    """Exact linear P* for i.i.d. tokens: the Hessian of the action at the origin,
    [(a + B - g K_p) m^2 - 2 (B + g kappa) m r + (B - g tau) r^2] / (2 g_W) with g = P^2 g_O g_W /
    sigma^4, a = (LV/(L+V))^2, B = L^2/(L-1), is singular at the smaller root of
    (K_p tau - kappa^2) g^2 - [(a + B) tau + B K_p + 2 B kappa] g + a B = 0, P* = sigma^2
    sqrt(g* / (g_O g_W)). Uniform p gives :func:`bayes_attn.theory.boundaries.second_order_closed_form`.
    """
    L, V = sc.L, sc.V
    Kp, kappa, tau = origin_coefficients(sc)
    a = (L * V / (L + V)) ** 2
    B = L**2 / (L - 1)
    qa = Kp * tau - kappa**2
    qb = (a + B) * tau + B * Kp + 2 * B * kappa
    g = 2 * a * B / (qb + jnp.sqrt(qb**2 - 4 * qa * a * B))  # the smaller root, stably
    return sc.sigma2 * jnp.sqrt(g / (sc.g_o * sc.g_w))


# --------------------------------------------------------------------------------------------------
# I.i.d. tokens: saddles and phase boundaries by the uniform solvers


def saddles(task, hyper, P, activation: str) -> list:
    """Every local minimum of the reduced action on i.i.d. tokens (the task's source), global
    first: :func:`bayes_attn.theory.saddles.saddles` with the data term of :func:`data_ek_iid`."""
    check_activation(activation)
    P = check_P_in_range(task, hyper, P)
    return minima_at(activation, P, token_scales(task, hyper), hyper.chi)


def global_saddle(task, hyper, P, activation: str):
    """The global minimum (the first of :func:`saddles`)."""
    return saddles(task, hyper, P, activation)[0]


@functools.lru_cache(maxsize=64)
def phase_boundaries(task, hyper) -> boundaries.PhaseBoundaries:
    """Every phase boundary of the reduced theory on i.i.d. tokens (Uniform, Zipf): the solvers
    of :func:`bayes_attn.theory.boundaries.phase_boundaries` on :class:`TokenScales`, with
    :func:`second_order_closed_form_iid` for the closed form. ``second_order_leading`` is nan (the
    leading form is derived for uniform tokens only)."""
    sc = token_scales(task, hyper)
    P2 = boundaries.second_order_numeric(sc)
    cross = boundaries.crossover(sc, P2)
    soft = boundaries.softmax_boundaries(sc, P2)
    return boundaries.PhaseBoundaries(
        second_order=P2,
        second_order_closed_form=float(second_order_closed_form_iid(sc)),
        second_order_leading=math.nan,
        crossover=cross.pop("crossover"),
        crossover_markers=cross,
        first_order=soft["first_order"],
        spinodals=soft["spinodals"],
    )


# --------------------------------------------------------------------------------------------------
# Any token law with a pair law: the reduced action over the whole token-independent K


def pair_law(source, L: int, V: int) -> tuple[np.ndarray, np.ndarray]:
    """``(p, E)``: the one-position law p (V,) and the pair law E[b, b'] = E[x_b x_b'^T]
    (L, L, V, V) of an i.i.d. source or of a global stationary chain (E[b, b'] = diag(pi) T^(b'-b)
    for b' >= b). ``ValueError`` naming ``tokens`` for ``InContextMarkov``."""
    source = parse_tokens(source)
    if isinstance(source, Markov):
        T = source.matrix(V)
        pi = np.asarray(stationary(jnp.asarray(T)))
        powers = [np.eye(V)]
        for _ in range(L - 1):
            powers.append(powers[-1] @ T)
        E = np.empty((L, L, V, V))
        for b in range(L):
            for b2 in range(b, L):
                E[b, b2] = pi[:, None] * powers[b2 - b]
                E[b2, b] = E[b, b2].T
        return pi, E
    p = frequencies(source, V)
    E = np.broadcast_to(np.outer(p, p), (L, L, V, V)).copy()
    E[np.arange(L), np.arange(L)] = np.diag(p)
    return p, E


class TokenLaw(NamedTuple):
    """What the general reduced action needs of the tokens: p (V,), the pair law E (L, L, V, V)
    and Q[a, b] = E[b, a-1 mod L], the pair law of the keys with each query's target."""

    p: jax.Array
    E: jax.Array
    Q: jax.Array


def token_law(source, L: int, V: int) -> TokenLaw:
    """:class:`TokenLaw` of ``source`` (:func:`pair_law`)."""
    p, E = pair_law(source, L, V)
    Q = np.roll(np.transpose(E, (1, 0, 2, 3)), 1, axis=0)
    return TokenLaw(jnp.asarray(p), jnp.asarray(E), jnp.asarray(Q))


def general_moments(A, law: TokenLaw):
    """Per-sequence EK moments (C, D) of a token-independent attention A (L, L):
    C = E[sum_a Phi_a Phi_a^T] (V+L, V+L) and D = E[sum_a Phi_a y_a^T] (V+L, V)."""
    G = A.T @ A
    Cxx = jnp.einsum("bc,bcij->ij", G, law.E)
    Cxe = law.p[:, None] * G.sum(0)[None, :]
    C = jnp.block([[Cxx, Cxe], [Cxe.T, G]])
    Dx = jnp.einsum("ab,abij->ij", A, law.Q)
    De = A.sum(0)[:, None] * law.p[None, :]
    return C, jnp.concatenate([Dx, De], axis=0)


def data_general(A, P, law: TokenLaw, sigma2, g_o):
    """EK data term (P L - P^2 tr(D^T (lam + P C)^-1 D)) / (2 sigma^2) of any token-independent A."""
    C, D = general_moments(A, law)
    L = A.shape[-1]
    lam = sigma2 / g_o
    fit = P**2 * jnp.trace(D.T @ jnp.linalg.solve(lam * jnp.eye(C.shape[0]) + P * C, D))
    return (P * L - fit) / (2 * sigma2)


def prior_general(K, V: int, activation: str):
    """|M|^2 / 2 of the cheapest M realising K (linear), or of K with each row's mean removed
    (softmax ignores row offsets; the minimum over them is the row-centred K); divide by g_W."""
    if activation == "softmax":
        K = K - K.mean(axis=-1, keepdims=True)
    return algebra.min_norm_sq(K, V) / 2


def action_general(K, P, law: TokenLaw, hyper, activation: str):
    """Reduced action per unit chi of token-independent logits K (L, L) on the token law ``law``:
    the minimum-norm prior plus the exact EK data term. On K = c1 J + cG G* with an i.i.d. law it
    equals the (c1, cG) action (:func:`data_ek_iid`)."""
    V = law.p.shape[0]
    A = algebra.attention(K, activation)
    prior = prior_general(K, V, activation) / hyper.g_w
    return prior + data_general(A, P, law, hyper.sigma2, hyper.g_o)


def _law(task) -> TokenLaw:
    return _cached_law(task.tokens, task.L, task.V)


@functools.lru_cache(maxsize=32)
def _cached_law(source, L: int, V: int) -> TokenLaw:
    return token_law(source, L, V)


def second_order_general(task, hyper) -> float:
    """Exact linear P* of the reduced action over all token-independent K: the origin's Hessian
    (prior form Pi / g_W minus P^2 g_O / sigma^4 times the form Delta of tr(D^T D)) first becomes
    singular at P* = sigma^2 / sqrt(g_O g_W mu), mu the largest generalised eigenvalue of
    (Delta, Pi). For i.i.d. tokens it equals :func:`second_order_closed_form_iid`."""
    law = _law(task)
    L, V = task.L, task.V

    def realisation(k):  # the cheapest M, linear in K
        return algebra.min_norm_M(k.reshape(L, L), V).ravel()

    def overlap(k):  # D, linear in K
        return general_moments(k.reshape(L, L) / L, law)[1].ravel()

    zero = jnp.zeros(L * L)
    J_M = np.asarray(jax.jacrev(realisation)(zero))
    J_D = np.asarray(jax.jacrev(overlap)(zero))
    Pi, Delta = J_M.T @ J_M, J_D.T @ J_D
    mu = scipy.linalg.eigh(Delta, Pi, eigvals_only=True)[-1]
    return float(hyper.sigma2 / math.sqrt(hyper.g_o * hyper.g_w * mu))


# --------------------------------------------------------------------------------------------------
# The general reduced action: its minima along P and the softmax equal-action point


@functools.partial(jax.jit, static_argnames=("hyper", "activation", "L"))
def _value_and_grad(k, P, law: TokenLaw, hyper, activation: str, L: int):
    f = lambda x: action_general(x.reshape(L, L), P, law, hyper, activation)  # noqa: E731
    return jax.value_and_grad(f)(k)


def general_minimum(task, hyper, P, activation: str, K0) -> tuple[np.ndarray, float]:
    """A local minimum ``(K, action)`` of :func:`action_general` at ``P``, by L-BFGS from ``K0``."""
    L, law = task.L, _law(task)

    res = lbfgs(lambda x: _value_and_grad(x, jnp.float64(P), law, hyper, activation, L),
                K0, maxiter=5000, gtol=1e-10, ftol=1e-15)  # fmt: skip
    return res.x.reshape(L, L), float(res.fun)


def general_order(K, activation: str) -> dict[str, float]:
    """(c1, cG) of a token-independent K by :func:`bayes_attn.algebra.project` ((a1, aG) for
    softmax), and ``cD``, the self (diagonal) weight above the off-shift mean on the same scale:
    the attention the in-weights competitor (the reversed chain read from x[a]) uses."""
    A = algebra.attention(jnp.asarray(K), activation)
    pr = algebra.project(A[None])
    L = A.shape[-1]
    off = float(pr["c1"]) / L
    return {
        "c1": float(pr["c1"]),
        "cG": float(pr["cG"]),
        "cD": float(L * (jnp.mean(jnp.diagonal(A)) - off)),
    }


def _iid_start(task, hyper, P, activation: str) -> np.ndarray:
    """K of the global (c1, cG) saddle for i.i.d. tokens with the source's one-position law: a
    start for the general action (for softmax, c1 = -cG/L, the cheapest)."""
    p, _ = pair_law(task.tokens, 2, task.V)
    f = lambda x: jnp.asarray(x, dtype=jnp.float64)  # noqa: E731
    sc = TokenScales(f(task.L), f(task.V), f(hyper.g_w), f(hyper.g_o), f(hyper.sigma2), f(p))
    pts, vals, _, _ = candidates(activation, jnp.float64(P), sc)
    c = np.asarray(pts)[int(np.nanargmin(np.asarray(vals)))]
    if activation == "linear":
        return np.asarray(algebra.reduced_logits(c[0], c[1], task.L))
    return np.asarray(algebra.reduced_logits(-c[0] / task.L, c[0], task.L))


def general_path(task, hyper, Ps, activation: str, K0=None) -> dict[str, np.ndarray]:
    """Minima of :func:`action_general` along ``Ps`` (in the order given), by continuation: at
    each P the lower of the previous minimum and the (c1, cG) saddle of the source's one-position
    law (``_iid_start``) as starts. With ``K0`` only the continuation from ``K0`` runs (one
    branch). Returns arrays ``P``, ``action``, ``c1``, ``cG``, ``cD`` (:func:`general_order`) and
    ``K`` (n, L, L). Linear minima are reported in the Z2 image c1 + cG >= 0."""
    check_activation(activation)
    Ps = check_positive_array("P", Ps)
    rows, prev = [], None if K0 is None else np.asarray(K0, dtype=np.float64)
    for P in Ps:
        starts = [prev] if prev is not None else []
        if K0 is None:
            starts.append(_iid_start(task, hyper, float(P), activation))
        best = min(
            (general_minimum(task, hyper, P, activation, s) for s in starts), key=lambda r: r[1]
        )
        prev = best[0]
        order = general_order(best[0], activation)
        sign = float(algebra.z2_sign(order["c1"], order["cG"])) if activation == "linear" else 1.0
        rows.append((best[1], *(sign * order[k] for k in ("c1", "cG", "cD")), sign * best[0]))
    out = {k: np.array([r[i] for r in rows]) for i, k in enumerate(("action", "c1", "cG", "cD"))}
    return {"P": np.asarray(Ps, dtype=float), **out, "K": np.stack([r[4] for r in rows])}


def _branches(task, hyper, grid, K_weak, K_strong):
    """The softmax weak branch followed up ``grid`` from ``K_weak`` and the strong one down from
    ``K_strong``; returns both (in grid order) and where they are distinct minima."""
    weak = general_path(task, hyper, grid, "softmax", K0=K_weak)
    strong = general_path(task, hyper, grid[::-1], "softmax", K0=K_strong)
    strong = {k: v[::-1] for k, v in strong.items()}
    scale = np.maximum(1.0, 0.5 * np.abs(weak["cG"] + strong["cG"]))
    return weak, strong, np.abs(strong["cG"] - weak["cG"]) > 0.1 * scale


def _same_jump(cG_weak, cG_strong, jump: float = 1.0):
    """The grid interval i (between points i and i + 1) where the weak branch, followed up,
    jumps up by more than ``jump`` in cG (aG), and the strong branch, followed down, jumps down
    in the same interval: a coexistence window that falls between two grid points. None where
    the largest jumps differ or are smaller."""
    up, down = np.diff(cG_weak), np.diff(cG_strong)
    if not up.size:
        return None
    i, k = int(np.argmax(up)), int(np.argmax(down))
    return i if i == k and up[i] > jump and down[k] > jump else None


def general_first_order(task, hyper, P_lo: float, P_hi: float, n: int = 13) -> dict:
    """The softmax first-order point of :func:`action_general`: the weak-copy branch followed up
    from ``P_lo`` (start K = 0), the strong-copy branch down from ``P_hi`` (start: the i.i.d.
    saddle), both on a geometric grid of ``n`` points, then again on ``n`` points spanning the
    coexistence seen, or the one interval where both branches jump when no grid point shows two
    minima (so that a window narrower than the grid's spacing is resolved); where both
    minima exist, the P of equal action by root finding (each evaluation re-minimised from the
    nearest grid point).

    Returns ``first_order`` (nan where the branches do not cross), ``aG_weak`` and ``aG_strong``
    there, and ``spinodal_brackets``: the grid intervals where the strong branch is born (lower)
    and the weak one dies (upper), nan where the grid does not show it.
    """
    L = task.L
    grid = np.geomspace(P_lo, P_hi, n)
    weak, strong, both = _branches(
        task, hyper, grid, np.zeros((L, L)), _iid_start(task, hyper, float(P_hi), "softmax")
    )
    idx = np.flatnonzero(both)
    if idx.size and 0 < idx[0] and idx[-1] < n - 1:
        i, j = idx[0] - 1, idx[-1] + 1
    else:  # a window narrower than the spacing: both branches jump in the same interval
        k = _same_jump(weak["cG"], strong["cG"])
        i, j = (None, None) if k is None else (k, k + 1)
    if i is not None:
        grid = np.geomspace(grid[i], grid[j], n)
        weak, strong, both = _branches(task, hyper, grid, weak["K"][i], strong["K"][j])
        idx = np.flatnonzero(both)
    nan2 = (math.nan, math.nan)
    brackets = (
        (grid[idx[0] - 1], grid[idx[0]]) if idx.size and idx[0] > 0 else nan2,
        (grid[idx[-1]], grid[idx[-1] + 1]) if idx.size and idx[-1] < n - 1 else nan2,
    )
    gap = np.where(both, strong["action"] - weak["action"], np.nan)
    k = next((i for i in range(n - 1) if gap[i] > 0 > gap[i + 1]), None)
    out = {"first_order": math.nan, "aG_weak": math.nan, "aG_strong": math.nan,
           "spinodal_brackets": brackets}  # fmt: skip
    if k is None:
        return out

    def at(P):
        w = general_minimum(task, hyper, P, "softmax", weak["K"][k])
        s = general_minimum(task, hyper, P, "softmax", strong["K"][k + 1])
        return w, s

    def gap_at(P):
        w, s = at(P)
        return s[1] - w[1]

    P_star = optimize.brentq(gap_at, grid[k], grid[k + 1], xtol=1e-8)
    w, s = at(P_star)
    out.update(first_order=float(P_star), aG_weak=general_order(w[0], "softmax")["cG"],
               aG_strong=general_order(s[0], "softmax")["cG"])  # fmt: skip
    return out
