"""The LLC's target for the frozen-embedding network, W_O integrated out in closed form
(docs/theory.md, "The local learning coefficient at any width"): the ground truth that
:func:`~bayes_attn.inference.llc.exact_frozen_llc` samples by NUTS."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import with_changes
from bayes_attn.inference.llc_settings import LLCSettings
from bayes_attn.inference.llc_target import LLCTarget, default_nbeta
from bayes_attn.models.levels import order_parameters
from bayes_attn.models.network import init_params, network_model
from bayes_attn.theory.action import gram as design_gram

__all__ = ["frozen_llc_target"]


def _frozen_args(model, model_args, model_kwargs):
    """(task, hyper, tokens, activation, embeddings) of a frozen-embedding ``network_model`` call."""
    import inspect

    if model is not network_model:
        raise ValueError("model: the exact LLC is for network_model with frozen embeddings")
    bound = inspect.signature(model).bind(*model_args, **dict(model_kwargs or {}))
    bound.apply_defaults()
    a = bound.arguments
    if a["train_embeddings"] or a["factorized"]:
        raise ValueError(
            "model_kwargs: the exact LLC needs train_embeddings=False, W_G unfactorised"
        )
    emb = a["embeddings"]
    if emb is None:  # network_model's own default
        fixed = init_params(jax.random.key(0), a["task"], a["hyper"], a["d_model"])
        emb = (fixed["W_emb"], fixed["p"])
    return a["task"], a["hyper"], jnp.asarray(a["tokens"]), a["activation"], emb


def _check_w_star(w_star, d: int, V: int) -> None:
    """``w_star`` holds the network's W_G (d, d) and W_O (V, d), finite."""
    want = {"W_G": (d, d), "W_O": (V, d)}
    for name, shape in want.items():
        if not isinstance(w_star, dict) or name not in w_star:
            raise ValueError(f"w_star: a dict with the network's W_G {(d, d)} and W_O {(V, d)}")
        if tuple(np.shape(w_star[name])) != shape:
            raise ValueError(
                f"w_star: {name!r} must have shape {shape}, got {tuple(np.shape(w_star[name]))}"
            )
        if not np.all(np.isfinite(np.asarray(w_star[name], dtype=float))):
            raise ValueError(f"w_star: {name!r} has entries that are not finite (NaN or inf)")


class _Frozen(NamedTuple):
    """The constants of :func:`frozen_llc_target`'s closures (its docstring has the algebra)."""

    tokens: jax.Array
    V: int
    R: jax.Array
    activation: str
    a: float  # nβ χ / (n σ²)
    b0: jax.Array  # (γ/d) w~*
    c_m: float
    c_w: float
    m_mean: jax.Array
    fit: float
    const: float
    P: int
    d: int
    x_star: jax.Array
    w_st: jax.Array


def _frozen_parts(k: _Frozen):
    """The closures over the whitened gate x = M~: the log density, E[L_n | M~], the squared
    distance from w* (the readout's part integrated), the order parameters, and L_n at a given
    readout."""
    tokens, V, R, P, d, fit, const = k.tokens, k.V, k.R, k.P, k.d, k.fit, k.const
    n_f = int(round(math.sqrt(k.x_star.size)))

    def attention(x):
        return algebra.attention(
            algebra.logits_from_M(x.reshape(n_f, n_f), tokens, V, R), k.activation
        )

    def design(x):
        return design_gram(attention(x), tokens, V, R)

    def solve(x):
        G, B, yy = design(x)
        chol = jax.scipy.linalg.cho_factor(k.a * G + k.c_w * jnp.eye(n_f), lower=True)
        b = k.a * B + k.b0
        return G, B, yy, chol, b, jax.scipy.linalg.cho_solve(chol, b)

    def log_density(x):
        _, _, _, chol, b, mu = solve(x)
        logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol[0])))
        prior = -0.5 * k.c_m * jnp.sum((x - k.m_mean.ravel()) ** 2)
        return prior + 0.5 * jnp.sum(b * mu) - V / 2 * logdet

    def loss(x):
        G, B, yy, chol, _, mu = solve(x)
        resid = yy - 2 * jnp.sum(B * mu) + jnp.sum(mu * (G @ mu))
        trace = V * jnp.trace(jax.scipy.linalg.cho_solve(chol, G))
        return fit * (resid + trace) / P + const

    def sq_distance(x):
        # |M~ - M~*|² + E[|W_O - W_O*|² | M~], |W_O - W_O*|² = |w~ - w~*|²/d, w~ | M~ ~ N(mu, Λ^-1)
        _, _, _, chol, _, mu = solve(x)
        tr_inv = jnp.trace(jax.scipy.linalg.cho_solve(chol, jnp.eye(n_f)))
        return jnp.sum((x - k.x_star) ** 2) + (jnp.sum((mu - k.w_st) ** 2) + V * tr_inv) / d

    def order(x):
        pr = algebra.project(attention(x))
        return dict(zip(order_parameters(k.activation), (pr["c1"], pr["cG"]), strict=True))

    def loss_at(x, w):
        G, B, yy = design(x)
        return fit * (yy - 2 * jnp.sum(B * w) + jnp.sum(w * (G @ w))) / P + const

    return log_density, loss, sq_distance, order, loss_at


def frozen_llc_target(
    model, w_star: dict, *, model_args: tuple = (), model_kwargs: dict | None = None,
    n: int | None = None, settings: LLCSettings | None = None, **changes,
) -> LLCTarget:  # fmt: skip
    """:func:`~bayes_attn.inference.llc_target.llc_target` of the frozen-embedding network, W_O integrated out in closed form.

    Over the whitened gate M~ = U^T W_G U ((V+L)^2 numbers, :func:`bayes_attn.algebra.span_basis`)
    the target is (docs/theory.md, "The local learning coefficient at any width")

        log p(M~) = -c_M/2 |M~ - m|^2 + 1/2 sum_v b_v^T Λ^-1 b_v - (V/2) log det Λ + const,

    with Λ = a G + c_w I, b_v = a B_v + (γ/d) w~*_v, a = nβ χ / (n σ²), G = Φ~^T Φ~ and
    B = Φ~^T y of the whitened design Φ~ = Φ R; c_M = γ, c_w = γ/d, m = M~* (with the prior:
    c_M = γ + χ/ḡ_W, c_w = γ/d + χ/ḡ_O, m = γ M~*/c_M). Its ``loss`` is E[L_n | M~], the readout
    integrated exactly (|y - Φ~ μ|^2 + V tr(Λ^-1 G) in the fit term), so the mean of ``loss``
    under p is E_p[L_n] of the full network target. ``w_star`` holds the network's W_G and W_O;
    ``n`` is P (another is refused); ``settings, **changes`` are the fields of
    :class:`~bayes_attn.inference.llc_settings.LLCSettings`, of which the target reads ``nbeta``,
    ``gamma`` and ``include_prior`` (as :func:`~bayes_attn.inference.llc_target.llc_target`).
    """
    s = with_changes(settings, LLCSettings, changes, where="frozen_llc_target").target_checked()
    gamma, include_prior = s.gamma, s.include_prior
    task, hyper, tokens, activation, (W_emb, pos) = _frozen_args(model, model_args, model_kwargs)
    P, n_f, V = int(tokens.shape[0]), task.n_features, task.V
    d = int(np.shape(W_emb)[0])
    if d < n_f:
        raise ValueError(f"d_model: the exact LLC needs d >= V + L = {n_f}, got {d}")
    if n is not None and n != P:
        raise ValueError(f"n: the frozen target's number of examples is P = {P}, got {n!r}")
    nbeta = default_nbeta(P) if s.nbeta is None else s.nbeta
    _check_w_star(w_star, d, V)
    R = algebra.gram_factor(algebra.embedding_gram(W_emb, pos), n_f)
    U = algebra.span_basis(W_emb, pos)
    M_star = U.T @ jnp.asarray(w_star["W_G"]) @ U
    w_st = math.sqrt(d) * U.T @ jnp.asarray(w_star["W_O"]).T  # (n_f, V)
    a = nbeta / P * hyper.chi / hyper.sigma2
    c_m = gamma + (hyper.chi / hyper.g_w if include_prior else 0.0)
    c_w = gamma / d + (hyper.chi / hyper.g_o if include_prior else 0.0)
    if c_m <= 0 or c_w <= 0:
        raise ValueError("gamma: 0 leaves the target improper unless include_prior=True")
    m_mean = gamma * M_star / c_m
    const = task.L * V / 2 * math.log(2 * math.pi * hyper.sigma2 / hyper.chi)
    fit = hyper.chi / (2 * hyper.sigma2)
    x_star = M_star.ravel()
    parts = _Frozen(tokens, V, R, activation, a, gamma / d * w_st, c_m, c_w, m_mean, fit, const, P,
                    d, x_star, w_st)  # fmt: skip
    log_density, loss, sq_distance, order, loss_at = _frozen_parts(parts)

    init_loss, (g_m, g_w) = jax.jit(jax.value_and_grad(loss_at, argnums=(0, 1)))(x_star, w_st)
    grad_norm = math.sqrt(float(jnp.sum(g_m**2)) + d * float(jnp.sum(g_w**2)))
    return LLCTarget(
        loss, lambda x, key: loss(x), log_density, lambda x, key: log_density(x), x_star, P,
        float(nbeta), gamma, bool(include_prior), False, float(init_loss), grad_norm, None,
        sq_distance, order,
    )  # fmt: skip
