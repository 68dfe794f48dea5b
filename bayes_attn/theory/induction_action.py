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

The two coordinates do not close the exact posterior (docs/validation.md). The extended family
(:func:`induction_family`) spans any set of the candidate order parameters: a copy strength per
query position, the token-token logits of both layers and the position profiles of both layers,
each realised at the least norm, with the same action (:func:`family_action`, for linear attention
too) and its minimum (:func:`family_minimum`).

References
----------
docs/theory.md §13, "Order parameters for two layers" and "The extended family";
docs/validation.md, "The induction head: order parameters".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int, check_positive
from bayes_attn.theory._lbfgs import lbfgs
from bayes_attn.theory.action import woodbury_evidence

__all__ = [
    "LAYER1_COMPONENTS",
    "LAYER2_COMPONENTS",
    "InductionFamily",
    "InductionReference",
    "InductionSaddle",
    "family_action",
    "family_forms",
    "family_minimum",
    "family_scores",
    "induction_action",
    "induction_family",
    "induction_forms",
    "induction_minimum",
    "induction_reference",
    "induction_saddles",
    "induction_branches",
    "transition_P",
    "layer1_basis",
    "layer1_form",
    "layer1_prior_coefficient",
    "layer2_basis",
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
    r = lbfgs(lambda x: _value_and_grad(x, P, ref), x0, gtol=1e-8, maxiter=500)
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


# --------------------------------------------------------------------------------------------------
# The extended family: the candidate closed set of order parameters (docs/theory.md §13)

#: layer 1's components, as logit functions of (query token i, position a; key token j, position b)
#: on the causal triangle, realised at least norm (:func:`layer1_basis`): ``copy`` (cG1, the line
#: b = a - 1), ``copy_line`` (one strength per query position a = 1..L-1), ``match1`` (the centred
#: token-token logit tau1, [i = j] - 1/V) and ``pos1`` (every position pair b <= a: the whole
#: token-independent layer 1; b >= 1 for softmax, whose per-query shift makes b = 0 redundant)
LAYER1_COMPONENTS = ("copy", "copy_line", "match1", "pos1")

#: layer 2's components, as blocks of M2 over zeta = (x, e, A1 x, A1 e), projected off the
#: features' fixed linear identities (:func:`layer2_basis`): ``induction`` (kappa2, query token x
#: key's copied token), ``match2`` (the other three centred token-token blocks: x.x, A1x.x,
#: A1x.A1x) and ``pos2`` (every position pair b <= a of the e.e block: layer 2's position profile)
LAYER2_COMPONENTS = ("induction", "match2", "pos2")


def _layer1_targets(component: str, L: int, V: int, shift: bool):
    """``(labels, f)``: the component's coordinates and its logit functions f_k(i, a, j, b)."""
    if component == "copy":
        return ["cG1"], [lambda i, a, j, b: float(b == a - 1)]
    if component == "copy_line":
        return [f"cG1[{k}]" for k in range(1, L)], [
            (lambda i, a, j, b, k=k: float(a == k and b == k - 1)) for k in range(1, L)
        ]
    if component == "match1":
        return ["tau1"], [lambda i, a, j, b: float(i == j) - 1.0 / V]
    pairs = [(a, b) for a in range(L) for b in range(1 if shift else 0, a + 1)]
    return [f"W1[{a},{b}]" for a, b in pairs], [
        (lambda i, a, j, b, p=p: float((a, b) == p)) for p in pairs
    ]


@functools.lru_cache(maxsize=8)
def _layer1_pinv(L: int, V: int, shift: bool):
    """The least-norm map from causal logits (every token pair, key b <= a; differences against
    the key (token 0, position 0) when ``shift``, softmax's per-query invariance) to M1."""
    psi = lambda i, a: np.concatenate([np.eye(V)[i], np.eye(L)[a]])  # noqa: E731
    idx = [(i, a, j, b) for a in range(L) for i in range(V) for b in range(a + 1) for j in range(V)]
    rows = [np.outer(psi(i, a), psi(j, b) - (psi(0, 0) if shift else 0.0)).ravel()
            for i, a, j, b in idx]  # fmt: skip
    return np.linalg.pinv(np.asarray(rows), rcond=1e-10), idx


def layer1_basis(components, L: int, V: int, activation: str = "softmax"):
    """``(labels, B1)``: the least-norm M1 (k, n, n) of each coordinate of layer 1's
    ``components`` (:data:`LAYER1_COMPONENTS`), so that M1(theta) = sum_k theta_k B1[k] realises
    the summed logits on every visible key at the least norm (the pseudo-inverse is linear, so the
    least norm of the sum is the sum of the least norms). ``copy`` is :func:`layer1_form`."""
    shift = check_activation(activation) == "softmax"
    pinv, idx = _layer1_pinv(check_int("L", L, 2), check_int("V", V, 2), shift)
    labels, cols = [], []
    for comp in components:
        names, fs = _layer1_targets(comp, L, V, shift)
        for name, f in zip(names, fs, strict=True):
            # softmax: logit differences against the key (token 0, position 0)
            rhs = [f(i, a, j, b) - (f(i, a, 0, 0) if shift else 0.0) for i, a, j, b in idx]
            labels.append(name)
            cols.append(rhs)
    B = (pinv @ np.stack(cols, axis=1)).T.reshape(len(cols), V + L, V + L)
    return labels, B


def _layer2_nulls(L: int, V: int, softmax: bool):
    """Orthonormal bases (left, right) of the directions along which M2 does not change layer 2's
    logits for any layer 1: the token and position parts of psi and of A1 psi have equal sums
    (1, or A1's row sum for linear attention); softmax also ignores key-side constants."""
    n = V + L
    blk = lambda *parts: np.concatenate(parts)  # noqa: E731
    o, z = np.ones, np.zeros
    left = [blk(o(V), -o(L), z(n)), blk(z(n), o(V), -o(L))]
    if softmax:
        left.append(blk(o(V), z(L), -o(V), z(L)))
    right = list(left)
    if softmax:
        right += [blk(o(V), z(L + n)), blk(z(n), o(V), z(L))]

    def basis(vs):  # an orthonormal basis of their span (they are dependent)
        u, sv, _ = np.linalg.svd(np.stack(vs, axis=1), full_matrices=False)
        return u[:, sv > 1e-10 * sv[0]]

    return basis(left), basis(right)


def layer2_basis(components, L: int, V: int, activation: str = "softmax"):
    """``(labels, B2)``: M2 (k, 2n, 2n) of each coordinate of layer 2's ``components``
    (:data:`LAYER2_COMPONENTS`), projected off the null directions of :func:`_layer2_nulls` (so
    ``induction`` is :func:`induction_forms`' kappa2 block, already orthogonal to them)."""
    softmax = check_activation(activation) == "softmax"
    L, V = check_int("L", L, 2), check_int("V", V, 2)
    n = V + L
    x, cx = slice(0, V), slice(n, n + V)
    c = np.eye(V) - 1.0 / V
    labels, mats = [], []

    def add(name, rows, cols, block):
        M = np.zeros((2 * n, 2 * n))
        M[rows, cols] = block
        labels.append(name)
        mats.append(M)

    for comp in components:
        if comp == "induction":
            add("kappa2", x, cx, c)
        elif comp == "match2":
            for name, r, k in (
                ("tau2[x,x]", x, x),
                ("tau2[A1x,x]", cx, x),
                ("tau2[A1x,A1x]", cx, cx),
            ):
                add(name, r, k, c)
        elif comp == "pos2":
            for a in range(L):
                for b in range(a + 1):
                    add(f"W2[{a},{b}]", V + a, V + b, 1.0)
        else:
            raise ValueError(f"components: layer 2 has {LAYER2_COMPONENTS}, got {comp!r}")
    left, right = _layer2_nulls(L, V, softmax)
    Pl, Pr = np.eye(2 * n) - left @ left.T, np.eye(2 * n) - right @ right.T
    return labels, np.stack([Pl @ M @ Pr for M in mats]) if mats else np.zeros((0, 2 * n, 2 * n))


class InductionFamily(NamedTuple):
    """A linear family of (M1, M2): ``M1(theta) = theta[:k1] . B1``, ``M2(theta) = theta[k1:] .
    B2`` (:func:`induction_family`), ``labels`` naming each coordinate and ``activation`` the
    attention it is for. Close over it (it holds strings), do not pass it to a jitted function."""

    B1: jax.Array  # shape=(k1, n, n)
    B2: jax.Array  # shape=(k2, 2n, 2n)
    labels: tuple[str, ...]
    activation: str

    @property
    def size(self) -> int:
        return len(self.labels)


def induction_family(components, L: int, V: int, activation: str = "softmax") -> InductionFamily:
    """The family spanned by ``components`` (names from :data:`LAYER1_COMPONENTS` and
    :data:`LAYER2_COMPONENTS`), each coordinate realised at least norm (layer 1 exactly; layer 2
    off its fixed null directions). ``("copy", "induction")`` is the two-parameter family of
    :func:`induction_forms` (tested); ``("copy_line", "match1", "induction", "pos2")`` is the
    candidate closed set of docs/theory.md §13."""
    comps = list(components)
    bad = [c for c in comps if c not in LAYER1_COMPONENTS + LAYER2_COMPONENTS]
    if bad or not comps:
        raise ValueError(
            f"components must be among {LAYER1_COMPONENTS + LAYER2_COMPONENTS}, got {comps!r}"
        )
    l1, B1 = (
        layer1_basis([c for c in comps if c in LAYER1_COMPONENTS], L, V, activation)
        if any(c in LAYER1_COMPONENTS for c in comps)
        else ([], np.zeros((0, V + L, V + L)))
    )
    l2, B2 = layer2_basis([c for c in comps if c in LAYER2_COMPONENTS], L, V, activation)
    return InductionFamily(jnp.asarray(B1), jnp.asarray(B2), tuple(l1 + l2), activation)


def family_forms(theta, fam: InductionFamily):
    """``(M1, M2)`` of the family at ``theta``."""
    theta = jnp.asarray(theta, dtype=jnp.float64)
    k1 = fam.B1.shape[0]
    return jnp.tensordot(theta[:k1], fam.B1, 1), jnp.tensordot(theta[k1:], fam.B2, 1)


def family_action(theta, P, ref: InductionReference, fam: InductionFamily, chi=None):
    """The family's action per unit chi at ``theta``: the prior ``(|M1|^2 + |M2|^2) / (2 g_W)`` of
    its realisation plus the equivalent-kernel Woodbury data term at ``P`` from the reference
    batch's per-sequence moments, as :func:`induction_action` (which it is on the two-parameter
    family). With ``chi`` the evidence's log-determinant / chi is added, so that at ``P = N``
    chi times the action is the kernel limit's potential at the realisation, up to a constant
    (tested to 1e-10)."""
    from bayes_attn.induction import forward

    M1, M2 = family_forms(theta, fam)
    prior = (jnp.sum(M1**2) + jnp.sum(M2**2)) / (2 * ref.g_w)
    Phi = forward(M1, M2, ref.psi, fam.activation, True)[0][:, : ref.L - 1]
    Phi = Phi.reshape(-1, Phi.shape[-1])
    N = ref.psi.shape[0]
    y = ref.y.reshape(-1, ref.V)
    G, B, yy = Phi.T @ Phi / N, Phi.T @ y / N, jnp.sum(y**2) / N
    s, ld = woodbury_evidence(P * G, P * B, P * yy, ref.sigma2, ref.g_o)
    return prior + s + (0.0 if chi is None else ld / chi)


def family_minimum(fam: InductionFamily, P, ref: InductionReference, x0=None, chi=None,
                   maxiter: int = 2000):  # fmt: skip
    """``(theta, s)``: the local minimum of :func:`family_action` (with the log-determinant when
    ``chi`` is given) that L-BFGS reaches from ``x0`` (default zero; gradient tolerance 1e-8)."""
    P = check_positive("P", P)
    vg = jax.jit(jax.value_and_grad(lambda t, r: family_action(t, P, r, fam, chi)))
    x0 = np.zeros(fam.size) if x0 is None else x0
    r = lbfgs(lambda x: vg(x, ref), x0, gtol=1e-8, maxiter=maxiter, maxcor=30)
    return r.x, float(r.fun)


def family_scores(theta, fam: InductionFamily, ref: InductionReference) -> dict:
    """The order parameters of :func:`~bayes_attn.models.two_layer.induction_scores` at the
    family's point ``theta``, on the reference batch."""
    from bayes_attn.induction import forward, induction_scores

    M1, M2 = family_forms(theta, fam)
    _, A1, A2 = forward(M1, M2, ref.psi, fam.activation, True)
    return {k: float(v) for k, v in induction_scores(A1, A2, ref.tokens, ref.V).items()}
