"""The Level-1 (d -> infinity) action over the bilinear form M, and its MAP on a given dataset.

S(M) / chi = |M|^2 / (2 g_W) + s_data(Phi(M)), with the readout integrated out exactly
(:func:`bayes_attn.theory.action.data_exact`); the O(1) log-determinant is optional. Optimising it
is the brute-force check of the reduced (Level-2) theory and of its minimum-norm prior.

References
----------
Paper Sec. 3.1-3.2; docs/theory.md §2 (Level 1) and §7 ("Level 1 against Level 2");
docs/validation.md "Level 1 against Level 2 at Table 1".
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_gram, check_tokens
from bayes_attn.theory._lbfgs import lbfgs
from bayes_attn.theory.action import evidence_exact
from bayes_attn.theory.action import gram as gram_design


def level1_action(M, tokens, task, hyper, activation: str, include_logdet: bool = False, gram=None):
    """Level-1 action per unit chi for the bilinear form M ((V+L) x (V+L)) on ``tokens`` (P, L).

    With ``gram``, the Gram W^T W / d of frozen embeddings, it is the exact action of the network of
    any width with those embeddings, in the whitened coordinates M of
    :func:`bayes_attn.algebra.span_basis` (docs/theory.md, "Frozen embeddings at any width").
    """
    return _action(M, tokens, task, hyper, activation, include_logdet, _factor(gram, task))


def _factor(gram, task):
    """The factor R of ``gram`` (None for the d -> infinity limit), computed once per call."""
    return None if gram is None else algebra.gram_factor(gram, task.n_features)


def _action(M, tokens, task, hyper, activation, include_logdet, factor):
    """:func:`level1_action` on the whitened features R^T psi, R = ``factor`` (None: psi)."""
    A = algebra.attention(algebra.logits_from_M(M, tokens, task.V, factor), activation)
    s_data, logdet = evidence_exact(A, tokens, task.V, hyper.sigma2, hyper.g_o, factor)
    s = jnp.sum(M**2) / (2 * hyper.g_w) + s_data
    return s + logdet / hyper.chi if include_logdet else s


@functools.partial(jax.jit, static_argnames=("task", "hyper", "activation", "include_logdet"))
def _action_and_grad(x, tokens, factor, task, hyper, activation, include_logdet):
    """The action and its gradient in the flat M; compiled once per (task, hyper, activation,
    P), shared by every call of :func:`level1_map` (an ensemble's members, its starts)."""
    n = task.n_features

    def f(m):
        return _action(m.reshape(n, n), tokens, task, hyper, activation, include_logdet, factor)

    return jax.value_and_grad(f)(x)


@functools.lru_cache(maxsize=256)
def theory_start(task, hyper, P: int, activation: str) -> np.ndarray:
    """The minimum-norm M of the global Level-2 saddle at ``P`` (read-only; cached, so that an
    ensemble's members, which share it, solve the saddle once per (activation, P)). With tokens
    that are not uniform it is the uniform task's saddle: a start, not a prediction."""
    from bayes_attn.theory.saddles import global_saddle

    sd = global_saddle(task.uniform(), hyper, P, activation)
    c1 = sd.c1 if activation == "linear" else -sd.cG / task.L  # softmax: the cheapest c1
    M0 = np.asarray(algebra.min_norm_M(algebra.reduced_logits(c1, sd.cG, task.L), task.V))
    M0.flags.writeable = False
    return M0


def start_in_span(M0, factor) -> np.ndarray:
    """A start ``M0`` in the embeddings' coordinates (the V + L one-hot features) carried into the
    whitened coordinates of the factor R (``algebra.gram_factor``): R M R^T = M0 in least
    squares. ``factor`` None (the d -> infinity limit) returns ``M0``."""
    if factor is None:
        return np.asarray(M0)
    R_pinv = np.linalg.pinv(np.asarray(factor))
    return R_pinv @ np.asarray(M0) @ R_pinv.T


@dataclasses.dataclass(frozen=True)
class Level1Map:
    """A local minimum of the Level-1 action.

    ``c1``/``cG`` are the projections of the mean attention on the training tokens (read them as
    ``a1``/``aG`` for softmax); ``token_residual`` is the RMS token-dependent part of L * A.
    """

    M: np.ndarray
    action: float
    c1: float
    cG: float
    token_residual: float
    converged: bool
    n_iter: int


def level1_map(
    task,
    hyper,
    tokens,
    activation: str,
    M0=None,
    *,
    maxiter: int = 5000,
    gram=None,
    include_logdet: bool = False,
) -> Level1Map:
    """Minimise the Level-1 action over M by L-BFGS (float64) from ``M0``.

    The default start is the minimum-norm realisation of the global Level-2 saddle at P = len(tokens)
    (docs/theory.md §7). Pass a random ``M0`` to explore other, token-dependent local minima.

    With ``gram`` (frozen embeddings, :func:`bayes_attn.algebra.embedding_gram`) this is the exact MAP
    of the network of any width with those embeddings (the readout profiled out, no
    log-determinant), in the whitened coordinates of :func:`bayes_attn.algebra.span_basis`; the
    default start is then the least-squares image of the one above.
    """
    check_activation(activation)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    n = task.n_features
    if gram is not None:
        gram = jnp.asarray(check_gram(gram, n))
    factor = _factor(gram, task)
    if M0 is None:
        M0 = start_in_span(theory_start(task, hyper, int(tokens.shape[0]), activation), factor)
    M0 = np.asarray(M0, dtype=np.float64)
    if M0.shape != (n, n):
        raise ValueError(f"M0 must have shape ({n}, {n}), got {M0.shape}")

    # the action reads only L and V: the uniform task as the static key compiles once per (P, L, V)
    # for every token source (the 25 chains of a study share their programs)
    key = task.uniform()
    res = lbfgs(
        lambda x: _action_and_grad(x, tokens, factor, key, hyper, activation, include_logdet),
        M0, maxiter=maxiter, gtol=1e-9, ftol=1e-15,
    )  # fmt: skip
    M = res.x.reshape(n, n)
    A = algebra.attention(algebra.logits_from_M(jnp.asarray(M), tokens, task.V, factor), activation)
    pr = algebra.project(A)
    return Level1Map(
        M=M,
        action=float(res.fun),
        c1=float(pr["c1"]),
        cG=float(pr["cG"]),
        token_residual=float(pr["token_residual"]),
        converged=bool(res.success),
        n_iter=int(res.nit),
    )


def level1_fit(M, tokens, task, hyper, activation: str, gram=None) -> dict:
    """The network that the Level-1 form ``M`` stands for, on ``tokens``: the readout profiled out.

    The readout is the posterior mean (and the MAP) given the attention, w = (lam I + Phi^T Phi)^-1
    Phi^T y with lam = sigma^2 / g_O, in the whitened coordinates when ``gram`` is given. Returns
    that readout ``w`` ((V + L) x V), the train loss per token ``loss`` (1/2 |y - f|^2, averaged over
    sequences and positions, as :func:`bayes_attn.models.network.loss_per_token`) and the projection
    of the attention (``c1``, ``cG``, ``token_residual``; a1/aG for softmax).
    """
    factor = _factor(gram, task)
    A = algebra.attention(algebra.logits_from_M(jnp.asarray(M), tokens, task.V, factor), activation)
    G, B, yy = gram_design(A, tokens, task.V, factor)
    w = jnp.linalg.solve(hyper.sigma2 / hyper.g_o * jnp.eye(G.shape[0]) + G, B)
    residual = yy - 2 * jnp.sum(B * w) + jnp.sum(w * (G @ w))  # |y - Phi w|^2
    pr = algebra.project(A)
    return {
        "w": np.asarray(w),
        "loss": float(0.5 * residual / (tokens.shape[0] * task.L)),
        "c1": float(pr["c1"]),
        "cG": float(pr["cG"]),
        "token_residual": float(pr["token_residual"]),
    }
