"""The reduced action of the order parameters, and the Level-1 action it reduces.

Every function here returns the action per unit chi, s = S / chi, in float64. The log-determinant,
O(1) against O(chi), is kept separate (:func:`logdet_ek`, :func:`logdet_exact`).

References
----------
Paper Sec. 3.3, App. F and H; docs/theory.md §2 (Level 1) and §3-6 (Level 2) for the derivation.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayes_attn import algebra
from bayes_attn.tokens import check_uniform


class Scales(NamedTuple):
    """The numbers the reduced action depends on (a pytree, so it can be vmapped)."""

    L: jax.Array  # shape=(), float
    V: jax.Array  # shape=(), float
    g_w: jax.Array  # shape=()
    g_o: jax.Array  # shape=()
    sigma2: jax.Array  # shape=()


def scales(task, hyper) -> Scales:
    """Collect (L, V, g_W, g_O, sigma^2) from a CopyTask and a Hyper.

    The gate of the reduced theory: a task whose tokens are not i.i.d. uniform raises a
    ``ValueError`` naming ``tokens`` (:func:`bayes_attn.tokens.check_uniform`)."""
    source = getattr(task, "tokens", None)
    if source is not None:
        check_uniform(source)
    f = lambda x: jnp.asarray(x, dtype=jnp.float64)  # noqa: E731
    return Scales(f(task.L), f(task.V), f(hyper.g_w), f(hyper.g_o), f(hyper.sigma2))


# --------------------------------------------------------------------------------------------------
# Prior


def prior_linear(c1, cG, sc: Scales):
    """Minimum-norm prior of K = c1 J + cG G*: [(LV/(L+V))^2 (c1 + cG/L)^2 + (L-1) cG^2] / (2 g_W)."""
    L, V = sc.L, sc.V
    return ((L * V / (L + V)) ** 2 * (c1 + cG / L) ** 2 + (L - 1) * cG**2) / (2 * sc.g_w)


def prior_softmax(cG, sc: Scales):
    """Softmax ignores c1; minimising (or marginalising) the linear prior over c1 leaves (L-1) cG^2/(2 g_W)."""
    return (sc.L - 1) * cG**2 / (2 * sc.g_w)


# --------------------------------------------------------------------------------------------------
# Data term


def data_ek(c1, cG, P, sc: Scales):
    """Equivalent-kernel data term for the attention A = c1 J/L + cG G*/L (use (a1, aG) for softmax).

    s_data = (P L / 2 sigma^2) [1 - (1/V) P g0/(lam + P g0) - ((V-1)/V) P hk/(lam + P gk)],
    lam = sigma^2 / g_O, with the mode variances of :func:`bayes_attn.algebra.ek_modes`.
    A :class:`bayes_attn.theory.structured.TokenScales` (i.i.d. tokens with frequencies p) gets
    :func:`bayes_attn.theory.structured.data_ek_iid` instead.
    """
    if getattr(sc, "p", None) is not None:
        from bayes_attn.theory.structured import data_ek_iid

        return data_ek_iid(c1, cG, P, sc)
    g0, gk, hk = algebra.ek_modes(c1, cG, sc.L, sc.V)
    lam = sc.sigma2 / sc.g_o
    fit = (P * g0 / (lam + P * g0)) / sc.V + (sc.V - 1) / sc.V * (P * hk / (lam + P * gk))
    return P * sc.L / (2 * sc.sigma2) * (1.0 - fit)


def data_ek_matrix(c1, cG, P, sc: Scales, L: int, V: int):
    """The same term from the full (V+L)-dimensional moments (a check on :func:`data_ek`)."""
    C, D = algebra.ek_moments(c1, cG, L, V)
    lam = sc.sigma2 / sc.g_o
    G = lam * jnp.eye(L + V) + P * C
    fit = P**2 * jnp.trace(D.T @ jnp.linalg.solve(G, D))
    return (P * L - fit) / (2 * sc.sigma2)


def gram(A, tokens, V: int, factor=None):
    """Exact Phi^T Phi (V+L, V+L), Phi^T y (V+L, V) and sum |y|^2 for a dataset.

    With ``factor`` R (:func:`bayes_attn.algebra.gram_factor` of frozen embeddings' Gram) the design
    is on the whitened features, Phi R.
    """
    Phi = algebra.phi(A, tokens, V).reshape(-1, A.shape[-1] + V)
    if factor is not None:
        Phi = Phi @ factor
    y = algebra.targets(tokens, V).reshape(-1, V)
    return Phi.T @ Phi, Phi.T @ y, jnp.sum(y**2)


def evidence_exact(A, tokens, V: int, sigma2, g_o, factor=None):
    """Exact finite-P data term and log-determinant for a dataset, from one Gram matrix and one
    Cholesky factor in V+L dimensions (Woodbury; no EK step).

    Returns ``(s_data, logdet)`` with
    s_data = [sum |y|^2 - tr(B^T (lam + Phi^T Phi)^-1 B)] / (2 sigma^2), B = Phi^T y, lam = sigma^2/g_O,
    logdet = (V/2) log det(I + Phi^T Phi / lam). ``A`` is (L, L) or (P, L, L). With ``factor``
    R of frozen embeddings' Gram g (any width) Phi is the whitened design Phi R: the readout W_O
    of the network enters only through w = W_O W, whose prior is N(0, (g_O/chi) g).
    """
    return woodbury_evidence(*gram(A, tokens, V, factor), sigma2, g_o)


def woodbury_evidence(G, B, yy, sigma2, g_o):
    """``(s_data, logdet)`` of a Gaussian linear readout from its sufficient statistics: the
    design's Gram G = Phi^T Phi (n, n), B = Phi^T y (n, V) and sum |y|^2, with the readout's
    prior N(0, g_O / chi) per entry and noise sigma^2 / chi, integrated out (one Cholesky factor in
    n dimensions). :func:`evidence_exact` is it on the one-layer design; the two-layer model
    (:mod:`bayes_attn.models.two_layer`) on its own."""
    n, V = B.shape
    lam = sigma2 / g_o
    chol = jax.scipy.linalg.cho_factor(lam * jnp.eye(n) + G, lower=True)
    fit = jnp.sum(B * jax.scipy.linalg.cho_solve(chol, B))
    logdet = V * (jnp.sum(jnp.log(jnp.diagonal(chol[0]))) - n / 2 * jnp.log(lam))
    return (yy - fit) / (2 * sigma2), logdet


def data_exact(A, tokens, V: int, sigma2, g_o):
    """Exact finite-P data term for a dataset (the first output of :func:`evidence_exact`)."""
    return evidence_exact(A, tokens, V, sigma2, g_o)[0]


def logdet_ek(c1, cG, P, sc: Scales):
    """(V/2) log det(I + g_O P C / sigma^2) from the EK moments, per mode.

    The eigenvalues of C are g0 (once), gk (V-1 times) and cG^2/L^2 (L-1 times, positions
    orthogonal to the all-ones vector); the rest vanish.
    """
    g0, gk, _ = algebra.ek_modes(c1, cG, sc.L, sc.V)
    r = P * sc.g_o / sc.sigma2
    ld = (
        jnp.log1p(r * g0)
        + (sc.V - 1) * jnp.log1p(r * gk)
        + (sc.L - 1) * jnp.log1p(r * cG**2 / sc.L**2)
    )
    return sc.V / 2 * ld


def logdet_exact(A, tokens, V: int, sigma2, g_o):
    """(V/2) log det(I + g_O Phi^T Phi / sigma^2) for a dataset (second output of :func:`evidence_exact`)."""
    return evidence_exact(A, tokens, V, sigma2, g_o)[1]


# --------------------------------------------------------------------------------------------------
# Reduced actions


def action_linear(c, P, sc: Scales):
    """Reduced linear action per unit chi, s(c1, cG), for c = (c1, cG)."""
    c1, cG = c[..., 0], c[..., 1]
    return prior_linear(c1, cG, sc) + data_ek(c1, cG, P, sc)


def action_softmax(cG, P, sc: Scales):
    """Reduced softmax action per unit chi as a function of the logit gap cG (the Gaussian coordinate)."""
    a1, aG = algebra.softmax_order(cG, sc.L)
    return prior_softmax(cG, sc) + data_ek(a1, aG, P, sc)


def loss_per_token(c1, cG, P, sc: Scales):
    """Theory loss per token, 1/2 <sum |y - f|^2> / (P L) = -sigma^4 d s_data / d sigma^2 / (P L).

    The derivative is taken at fixed attention (c1, cG) -- the envelope theorem makes it the total
    derivative at a saddle. For softmax pass (a1, aG).
    """

    def s(sigma2):
        return data_ek(c1, cG, P, sc._replace(sigma2=sigma2))

    return -(sc.sigma2**2) * jax.grad(s)(sc.sigma2) / (P * sc.L)
