"""Level 0: the finite-width attention network, its forward pass and its NumPyro model.

One forward serves every user (the NumPyro model, Adam, SGLD). It is exact and fast: every token's
embedding is W psi, with W = [W_emb | p] (d x (V + L)) and psi its feature (token and position
one-hot), so the logits are psi^T M psi with M = W^T W_G W / d ((V + L) x (V + L)), gathered from the
table of M on every (token, position) pair, and the readout is psi^T (W_O W)^T. The cost per step
grows with (V + L) d^2 plus gathers, not P L d^2 (per token) or V L d^2 (an embedding table).
:func:`forward_per_token` is the straightforward version, kept as the reference.

References
----------
Paper Sec. 2; docs/theory.md §1 (Level 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int, check_tokens
from bayes_attn.models._sites import record_order_parameters


def prior_scales(hyper, d_model: int, factorized: bool = False) -> dict[str, float]:
    """Prior standard deviations of the weights (paper Sec. 2; docs/theory.md §1, Level 0).

    W_emb, p ~ N(0, 1); W_G ~ N(0, g_W / chi); W_O ~ N(0, g_O / (chi d)). Factorised, W_G = W_Q^T W_K
    with W_Q, W_K (d x d) ~ N(0, (g_W / chi)^(1/2) / d^(1/2)), so that W_G has the same entry variance.
    """
    std = {"W_emb": 1.0, "p": 1.0, "W_O": (hyper.g_o / (hyper.chi * d_model)) ** 0.5}
    if factorized:
        std["W_Q"] = std["W_K"] = (hyper.g_w / hyper.chi) ** 0.25 / d_model**0.25
    else:
        std["W_G"] = (hyper.g_w / hyper.chi) ** 0.5
    return std


def param_shapes(task, d_model: int, factorized: bool = False) -> dict[str, tuple[int, int]]:
    d = d_model
    shapes = {"W_emb": (d, task.V), "p": (d, task.L), "W_O": (task.V, d)}
    shapes.update({"W_Q": (d, d), "W_K": (d, d)} if factorized else {"W_G": (d, d)})
    return shapes


def init_params(key, task, hyper, d_model: int, factorized: bool = False) -> dict[str, jax.Array]:
    """A draw from the prior."""
    d_model = check_int("d_model", d_model, 1)
    std = prior_scales(hyper, d_model, factorized)
    shapes = param_shapes(task, d_model, factorized)
    keys = jax.random.split(key, len(shapes))
    return {
        n: std[n] * jax.random.normal(k, shapes[n])
        for k, n in zip(keys, sorted(shapes), strict=True)
    }


def init_embeddings(key, task, hyper, d_model: int, factorized: bool = False):
    """The embeddings (W_emb, p) of :func:`init_params`'s draw from ``key``, without drawing W_G.

    The same numbers as ``init_params(key, ...)["W_emb"]`` and ``["p"]`` (the keys are split the
    same way), at (V + L) d memory instead of d^2: at d = 10^4 a member's embeddings are 3e5
    numbers, its W_G would be 1e8.
    """
    d_model = check_int("d_model", d_model, 1)
    shapes = param_shapes(task, d_model, factorized)
    keys = dict(zip(sorted(shapes), jax.random.split(key, len(shapes)), strict=True))
    std = prior_scales(hyper, d_model, factorized)
    return tuple(std[n] * jax.random.normal(keys[n], shapes[n]) for n in ("W_emb", "p"))


def _gate(params):
    """W_G, full or factorised."""
    return params["W_G"] if "W_G" in params else params["W_Q"].T @ params["W_K"]


def embedding_matrix(params) -> jax.Array:
    """W = [W_emb | p], shape (d, V + L): the embedding of every feature (token, then position)."""
    return jnp.concatenate([params["W_emb"], params["p"]], axis=1)


def bilinear_form(params) -> jax.Array:
    """The logits' bilinear form on the features, M = W^T W_G W / d, shape (V + L, V + L).

    Formed through the span of the embeddings: (W^T W_G) W costs (V + L) d^2, and so does its
    gradient in W_G, W (dL/dM) W^T / d; factorised, M = (W_Q W)^T (W_K W) / d.
    """
    W = embedding_matrix(params)
    d = W.shape[0]
    if "W_G" in params:
        return (W.T @ params["W_G"]) @ W / d
    return (params["W_Q"] @ W).T @ (params["W_K"] @ W) / d


def forward(params, tokens, activation: str):
    """Readout f (P, L, V) and attention A (P, L, L), contracted through the embeddings' span (exact).

    Every token's embedding is W psi for its feature psi (token and position one-hot), so the logits
    are psi_a^T M psi_b with M = W^T W_G W / d (:func:`bilinear_form`), gathered from the
    (V L) x (V L) table of M on every (token, position) pair (:func:`bayes_attn.algebra.logits_from_M`),
    and the readout is A (psi w^T) with w = W_O W (V x (V + L)). A step costs (V + L) d^2 for M and
    its gradient, plus gathers; Adam's own update is O(d^2).
    """
    W = embedding_matrix(params)
    V = params["W_emb"].shape[1]
    A = algebra.attention(algebra.logits_from_M(bilinear_form(params), tokens, V), activation)
    f = A @ algebra.readout_from_w(params["W_O"] @ W, tokens, V)
    return f, A


def forward_per_token(params, tokens, activation: str):
    """The straightforward forward: embed every token, then dense (P, L, d) products."""
    W_emb, pos, W_O = params["W_emb"], params["p"], params["W_O"]
    d, V = W_emb.shape
    h = algebra.one_hot(tokens, V) @ W_emb.T + pos.T
    K = jnp.einsum("pad,de,pbe->pab", h, _gate(params), h) / d
    A = algebra.attention(K, activation)
    return jnp.einsum("pab,pbd->pad", A, h) @ W_O.T, A


def loss_per_token(f, tokens):
    """The loss per token 1/2 sum_i (y_i - f_i)^2, averaged over sequences and positions."""
    return 0.5 * jnp.mean(jnp.sum((algebra.targets(tokens, f.shape[-1]) - f) ** 2, -1))


def neg_log_posterior(params, tokens, hyper, activation: str, *, frozen=None, scale=1.0):
    """The chi-scaled negative log-posterior of the finite network (Level 0), without constants.

    U = chi sum |y - f|^2 / (2 sigma^2) + sum_w |w|^2 / (2 std_w^2) over the weights in ``params``
    (so chi |W_G|^2 / (2 g_W), chi d |W_O|^2 / (2 g_O), |W_emb|^2 / 2, |p|^2 / 2); weights in
    ``frozen`` (e.g. fixed embeddings) enter the forward only. ``scale`` multiplies the likelihood
    (P / batch for an unbiased minibatch estimate). Its minimum is the MAP; it equals the potential
    energy of :func:`network_model` up to a constant.
    """
    std = prior_scales(hyper, params["W_O"].shape[1], "W_Q" in params)
    f, _ = forward({**(frozen or {}), **params}, tokens, activation)
    y = algebra.targets(tokens, f.shape[-1])
    lik = hyper.chi * jnp.sum((y - f) ** 2) / (2 * hyper.sigma2)
    prior = sum(jnp.sum(w**2) / (2 * std[n] ** 2) for n, w in params.items())
    return scale * lik + prior


def network_model(
    task,
    hyper,
    tokens,
    activation: str,
    d_model: int,
    *,
    factorized: bool = False,
    train_embeddings: bool = True,
    batch_size: int | None = None,
    embeddings: tuple | None = None,
):
    """The finite-width network with its Gaussian priors and Gaussian likelihood (Level 0).

    Parameters
    ----------
    tokens : (P, L) integer array
    d_model : int
    factorized : bool
        Sample W_Q, W_K with W_G = W_Q^T W_K instead of W_G.
    train_embeddings : bool
        If False, W_emb and p are held fixed at ``embeddings`` (a (W_emb, p) pair; by default a
        prior draw from ``jax.random.key(0)``).
    batch_size : int, optional
        The likelihood sits under ``numpyro.plate("sequences", P, subsample_size=batch_size)``, so a
        stochastic-gradient sampler sees minibatches; NUTS uses the full data (None). At most P.

    Notes
    -----
    Deterministic sites: ``c1``/``cG`` (linear) or ``a1``/``aG`` (softmax) projected from the mean
    attention over the tokens, and ``token_residual``.
    """
    check_activation(activation)
    d_model = check_int("d_model", d_model, 1)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    P = tokens.shape[0]
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1)
        if batch_size > P:
            raise ValueError(
                f"batch_size must be at most the number of sequences P = {P}, got {batch_size} "
                "(pass batch_size=None for the full batch)"
            )
    std = prior_scales(hyper, d_model, factorized)
    shapes = param_shapes(task, d_model, factorized)
    if not train_embeddings:
        if embeddings is None:
            fixed = init_params(jax.random.key(0), task, hyper, d_model, factorized)
            embeddings = (fixed["W_emb"], fixed["p"])
        W_emb, pos = (jnp.asarray(e) for e in embeddings)
        if W_emb.shape != shapes["W_emb"] or pos.shape != shapes["p"]:
            raise ValueError(f"embeddings must have shapes {shapes['W_emb']} and {shapes['p']}")
        params = {"W_emb": W_emb, "p": pos}
    else:
        params = {}
    for name in sorted(shapes):
        if name not in params:
            prior = dist.Normal(0.0, std[name]).expand(shapes[name]).to_event(2)
            params[name] = numpyro.sample(name, prior)
    y = algebra.targets(tokens, task.V)
    noise = (hyper.sigma2 / hyper.chi) ** 0.5
    with numpyro.plate("sequences", P, subsample_size=batch_size) as idx:
        batch = tokens if batch_size is None else tokens[idx]
        f, A = forward(params, batch, activation)
        numpyro.sample("y", dist.Normal(f, noise).to_event(2), obs=y[idx])
    if batch_size is not None:  # the order parameters always describe the whole dataset
        A = forward(params, tokens, activation)[1]
    record_order_parameters(A, activation)
