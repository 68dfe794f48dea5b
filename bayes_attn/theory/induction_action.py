"""Order parameters of the two causal softmax layers, and their action (the reduced induction head).

The one-layer reduction (docs/theory.md §3-5) carried over to the two-layer kernel limit of
:mod:`bayes_attn.models.two_layer`, softmax attention: layer 1's logits are ``cG1`` on the
previous-token line (``M1`` on the position block), layer 2's are ``kappa2`` times the centred
match of the query's token with the key's *copied* token, ``x[a]^T (I - J/V) (A1 x)[b]`` (``M2`` on
the query-token x copied-token block). The prior of this pair is a quadratic form with
coefficients computed once (:func:`layer1_prior_coefficient`; ``V - 1`` for layer 2). The data term
is the equivalent-kernel one: the design moments ``E[Phi^T Phi]`` and ``E[Phi^T y]`` per sequence,
which for an in-context Markov source have no closed form (they hold the joint statistics of copy
and match), are averaged over a fixed reference batch (:class:`InductionReference`), so the action
is a smooth function of ``(cG1, kappa2)`` and ``P`` alone. Everything is per unit chi, float64,
without the log-determinant.

References
----------
docs/theory.md §13, "Order parameters for two layers"; docs/validation.md, "The induction head:
order parameters".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive
from bayes_attn.theory.action import woodbury_evidence

__all__ = [
    "InductionReference",
    "InductionSaddle",
    "induction_action",
    "induction_forms",
    "induction_minimum",
    "induction_reference",
    "induction_saddles",
    "induction_branches",
    "transition_P",
    "layer1_form",
    "layer1_prior_coefficient",
    "reduced_patterns",
]

#: the starts of :func:`induction_saddles` in units of the prior bounds (cG1, kappa2)
_FRACS = np.array([-0.5, 0.0, 0.15, 0.4, 0.8])


@functools.lru_cache(maxsize=16)
def _layer1_unit_form(L: int, V: int, causal: bool) -> np.ndarray:
    psi = lambda i, a: np.concatenate([np.eye(V)[i], np.eye(L)[a]])  # noqa: E731
    rows, rhs = [], []
    for a in range(L):
        for i in range(V):
            q = psi(i, a)
            for b in range(a + 1 if causal else L):
                for j in range(V):
                    rows.append(np.outer(q, psi(j, b) - psi(0, 0)).ravel())
                    rhs.append(float(b == (a - 1) % L) - float(a == 1))
    M = np.linalg.lstsq(np.asarray(rows), np.asarray(rhs), rcond=None)[0].reshape(V + L, V + L)
    M.setflags(write=False)
    return M


def layer1_form(L: int, V: int, causal: bool = True) -> np.ndarray:
    """The cheapest M1 (n x n) whose logits, on every token pair and every visible key b <= a
    (every key with ``causal=False``), equal ``G*`` (1 on b = a - 1) up to a constant per query.

    Least squares over all those constraints, written as differences against the key (token 0,
    position 0) so that per-query constants drop out (``V^2 L (L+1) / 2`` rows when causal)."""
    L, V = check_int("L", L, 2), check_int("V", V, 2)
    return _layer1_unit_form(L, V, bool(causal))


def layer1_prior_coefficient(L: int, V: int, causal: bool = True) -> float:
    """``q1 = |M1|^2`` of :func:`layer1_form`: the prior of ``cG1`` is ``q1 cG1^2 / (2 g_W)``.

    Without the mask (``causal=False``) this is the one-layer Schur complement L - 1
    (docs/theory.md §5); the mask frees the logits above the diagonal, so the causal q1 is smaller."""
    M = layer1_form(L, V, causal)
    return float(np.sum(M**2))


class InductionReference(NamedTuple):
    """What the reduced action needs (a pytree, so one compiled action serves every batch): the
    reference batch's features ``psi`` (N, L, n) and targets ``y`` (N, L - 1, V) on the positions
    that have one, ``tokens`` (N, L), the scales, and ``q1``."""

    psi: jax.Array  # shape=(N, L, V + L)
    y: jax.Array  # shape=(N, L - 1, V)
    tokens: jax.Array  # shape=(N, L), int
    g_w: jax.Array  # shape=()
    g_o: jax.Array  # shape=()
    sigma2: jax.Array  # shape=()
    q1: jax.Array  # shape=()

    @property
    def L(self) -> int:
        return self.psi.shape[-2]

    @property
    def V(self) -> int:
        return self.y.shape[-1]


def induction_reference(task, hyper, num: int = 4096, seed: int = 0) -> InductionReference:
    """The reference batch of ``num`` sequences of ``task`` (an InductionTask) drawn from ``seed``:
    the equivalent-kernel moments are averages over it (Monte Carlo error ~ num^-1/2, shared by
    every (cG1, kappa2, P): common random numbers keep the action smooth)."""
    num = check_int("num", num, 1)
    if not hasattr(task, "target_mask"):
        raise ValueError(f"task must be an InductionTask (next-token targets), got {task!r}")
    tokens = task.sample(jax.random.PRNGKey(seed), num)
    y = task.targets(tokens)[:, np.asarray(task.target_mask)]
    f = lambda x: jnp.asarray(x, dtype=jnp.float64)  # noqa: E731
    return InductionReference(
        algebra.features(tokens, task.V), y, tokens, f(hyper.g_w), f(hyper.g_o), f(hyper.sigma2),
        f(layer1_prior_coefficient(task.L, task.V)),
    )  # fmt: skip


def induction_forms(theta, L: int, V: int):
    """``(M1, M2)`` realising ``theta = (cG1, kappa2)`` at the least norm: ``cG1`` times
    :func:`layer1_form`, and ``kappa2 (I - J/V)`` on M2's block from the query's token to the key's
    copied token (docs/theory.md §13). So ``|M1|^2 + |M2|^2`` is ``2 g_W`` times the prior of
    :func:`induction_action`, and the kernel limit's potential at these forms is its action."""
    n = V + L
    M1 = theta[0] * jnp.asarray(layer1_form(L, V))
    block = theta[1] * (jnp.eye(V) - 1.0 / V)
    M2 = jnp.zeros((2 * n, 2 * n)).at[:V, n : n + V].set(block)
    return M1, M2


def _causal_softmax(K):
    L = K.shape[-1]
    return jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((L, L), dtype=bool)), K, -jnp.inf), axis=-1)


def reduced_patterns(theta, psi, V: int):
    """``(Phi, A1, A2)`` of the reduced attention at ``theta`` on features ``psi`` (P, L, n): the
    design (P, L, 4n) and both causal softmax patterns, as
    :func:`bayes_attn.models.two_layer.forward` gives them at :func:`induction_forms` (tested),
    but without the n x n bilinear forms: A1 is one (L, L) pattern, and layer 2's logits are
    ``kappa2 (x[a] . (A1 x)[b] - 1/V)``."""
    theta = jnp.asarray(theta, dtype=jnp.float64)
    L = psi.shape[-2]
    A1 = _causal_softmax(theta[0] * jnp.eye(L, k=-1))
    h1 = jnp.einsum("ab,pbi->pai", A1, psi)
    K2 = theta[1] * (jnp.einsum("pai,pbi->pab", psi[..., :V], h1[..., :V]) - 1.0 / V)
    A2 = _causal_softmax(K2)
    zeta = jnp.concatenate([psi, h1], axis=-1)
    Phi = jnp.concatenate([psi, h1, A2 @ zeta], axis=-1)
    return Phi, jnp.broadcast_to(A1, A2.shape), A2


def induction_action(theta, P, ref: InductionReference):
    """The reduced action per unit chi, ``s(cG1, kappa2; P)`` = prior + equivalent-kernel data term:
    ``[q1 cG1^2 + (V-1) kappa2^2] / (2 g_W)`` plus the Woodbury data term of
    :func:`~bayes_attn.theory.action.woodbury_evidence` at ``P`` times the reference batch's
    per-sequence moments (no log-determinant)."""
    theta = jnp.asarray(theta, dtype=jnp.float64)
    prior = (ref.q1 * theta[0] ** 2 + (ref.V - 1) * theta[1] ** 2) / (2 * ref.g_w)
    Phi = reduced_patterns(theta, ref.psi, ref.V)[0][:, : ref.L - 1]
    Phi = Phi.reshape(-1, Phi.shape[-1])
    N = ref.psi.shape[0]
    y = ref.y.reshape(-1, ref.V)
    G, B, yy = Phi.T @ Phi / N, Phi.T @ y / N, jnp.sum(y**2) / N
    return prior + woodbury_evidence(P * G, P * B, P * yy, ref.sigma2, ref.g_o)[0]


_value_and_grad = jax.jit(jax.value_and_grad(induction_action))
_hessian = jax.jit(jax.hessian(induction_action))


@dataclasses.dataclass(frozen=True)
class InductionSaddle:
    """A local minimum of :func:`induction_action`: ``theta`` = (cG1, kappa2), its action ``s``,
    the smallest Hessian eigenvalue ``min_eig`` and the gradient norm ``grad_norm``."""

    theta: np.ndarray
    s: float
    min_eig: float
    grad_norm: float


def induction_saddles(P, ref: InductionReference, starts=None, tol: float = 1e-3):
    """Every local minimum of :func:`induction_action` at ``P`` found from ``starts`` (default: a
    5 x 5 grid in the box where a minimum can lie, prior <= s(0)), lowest action first.

    L-BFGS from each start; minima closer than ``tol`` (in theta) are merged, and only those with a
    positive-definite Hessian are kept."""
    P = check_positive("P", P)
    if starts is None:
        s0 = float(_value_and_grad(jnp.zeros(2), P, ref)[0])
        b1 = np.sqrt(2 * ref.g_w * s0 / ref.q1)
        b2 = np.sqrt(2 * ref.g_w * s0 / (ref.V - 1))
        starts = np.stack(np.meshgrid(b1 * _FRACS, b2 * _FRACS), -1).reshape(-1, 2)

    found: list[InductionSaddle] = []
    for x0 in np.atleast_2d(starts):
        x, v = induction_minimum(x0, P, ref)
        if any(np.max(np.abs(x - m.theta)) < tol for m in found):
            continue
        grad = float(np.linalg.norm(np.asarray(_value_and_grad(jnp.asarray(x), P, ref)[1])))
        eig = float(np.linalg.eigvalsh(np.asarray(_hessian(jnp.asarray(x), P, ref)))[0])
        if eig > 0:
            found.append(InductionSaddle(np.asarray(x), v, eig, grad))
    return sorted(found, key=lambda m: m.s)


def induction_minimum(x0, P, ref: InductionReference):
    """``(theta, s)``: the local minimum of :func:`induction_action` at ``P`` that L-BFGS reaches
    from ``x0`` (gradient tolerance 1e-8, at most 500 iterations)."""
    from scipy import optimize

    def fun(x):
        v, g = _value_and_grad(jnp.asarray(x), P, ref)
        return float(v), np.asarray(g, dtype=np.float64)

    r = optimize.minimize(fun, np.asarray(x0, dtype=np.float64), jac=True, method="L-BFGS-B",
                          options={"gtol": 1e-8, "maxiter": 500})  # fmt: skip
    return r.x, float(r.fun)


def induction_branches(Ps, ref: InductionReference, start_low=(0.0, 0.0), start_high=(4.0, 4.0)):
    """The two branches of minima along the increasing grid ``Ps`` by continuation: ``"up"`` from
    ``start_low`` at ``Ps[0]`` (every head unformed) carried up in P, and ``"down"`` from
    ``start_high`` at ``Ps[-1]`` (both heads formed) carried down. Each step starts L-BFGS at the
    previous step's minimum, so a branch is followed while it exists and jumps where it ends (a
    spinodal between two grid points). Returns ``{"up": (theta (n, 2), s (n,)), "down": ...}``
    on the grid's order."""
    Ps = np.asarray(Ps, dtype=np.float64)
    if Ps.ndim != 1 or Ps.size < 2 or np.any(np.diff(Ps) <= 0) or Ps[0] <= 0:
        raise ValueError(f"Ps must be an increasing grid of positive P, got {Ps!r}")
    out = {}
    for name, x, order in (("up", start_low, range(Ps.size)),
                           ("down", start_high, range(Ps.size - 1, -1, -1))):  # fmt: skip
        theta, s = np.zeros((Ps.size, 2)), np.zeros(Ps.size)
        for k in order:
            x, s[k] = induction_minimum(x, Ps[k], ref)
            theta[k] = x
        out[name] = (theta, s)
    return out


def transition_P(Ps, branches) -> float:
    """Where the two branches of :func:`induction_branches` have equal action (first-order P*),
    by linear interpolation of their action gap in log P; ``nan`` where they never cross or are
    one branch."""
    Ps = np.asarray(Ps, dtype=np.float64)
    gap = branches["up"][1] - branches["down"][1]
    apart = np.max(np.abs(branches["up"][0] - branches["down"][0]), axis=1) > 1e-3
    for k in range(Ps.size - 1):
        if apart[k] and apart[k + 1] and gap[k] < 0 <= gap[k + 1]:
            t = gap[k] / (gap[k] - gap[k + 1])
            return float(np.exp(np.log(Ps[k]) + t * np.log(Ps[k + 1] / Ps[k])))
    return float("nan")
