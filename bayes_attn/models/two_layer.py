"""Two causal attention layers: the induction head's network and its kernel limit.

The disentangled residual form of Nichani, Damian and Lee ("How transformers learn causal structure
with gradient descent", ICML 2024), on the package's features psi[a] = (x[a], e_a) (n = V + L):

- layer 1 attends over the embedded features, logits psi[a]^T M1 psi[b] (M1: n x n);
- layer 2 attends over the stream zeta[b] = [psi[b], (A1 psi)[b]] (2n), logits
  zeta[a]^T M2 zeta[b] (M2: 2n x 2n);
- the readout is linear in Phi[a] = [psi[a], (A1 psi)[a], (A2 zeta)[a]] (4n), so that the uniform,
  in-context unigram, in-weights and induction strategies are all expressible.

A finite network with embeddings W (d x n) has exactly these logits and this readout with
M1 = W^T W_G1 W / d, M2 = W~^T W_G2 W~ / d (W~ = blockdiag(W, W)) and w = W_O (I_4 (x) W)
(:func:`network_forms`): one forward serves both levels (:func:`forward`). In the kernel limit M1 and
M2 are Gaussian and the readout is integrated out exactly (Woodbury in 4n dimensions,
:func:`bayes_attn.theory.action.woodbury_evidence`); with frozen embeddings the features are whitened
by the Gram's square root R, psi -> R psi, and the model is the network's exact posterior at any
width, as for one layer (docs/theory.md §13).

``layers=1`` with ``readout=("h1",)`` and the copy task (no mask, wrap-around targets) is today's
one-layer model exactly (tested at 1e-12).

References
----------
docs/theory.md §13 (the two-layer kernel limit); Nichani, Damian and Lee (ICML 2024); Edelman et al.,
"The evolution of statistical induction heads" (NeurIPS 2024).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_attn import algebra
from bayes_attn._validation import (
    check_activation,
    check_bool,
    check_gram,
    check_int,
    check_tokens,
)
from bayes_attn.induction import STREAMS, attend, forward, induction_scores
from bayes_attn.models._sites import record_order_parameters
from bayes_attn.theory.action import woodbury_evidence

__all__ = [
    "BLOCK",
    "STREAMS",
    "attend",
    "check_readout",
    "design_products",
    "forward",
    "head_products",
    "induction_scores",
    "init_network_params",
    "network_forms",
    "network_neg_log_posterior",
    "network_outputs",
    "network_prior_scales",
    "readout_factor",
    "to_blocks",
    "two_layer_kernel_model",
    "two_layer_network_model",
]


def check_readout(readout, layers: int) -> tuple[str, ...]:
    """The readout's streams as a tuple in :data:`STREAMS` order; a ``ValueError`` naming
    ``readout`` for an unknown or repeated stream, none, or ``h2`` with one layer."""
    readout = (readout,) if isinstance(readout, str) else tuple(readout)
    bad = [s for s in readout if s not in STREAMS]
    if bad or not readout or len(set(readout)) != len(readout):
        raise ValueError(f"readout must be distinct streams from {STREAMS}, got {readout!r}")
    if layers == 1 and "h2" in readout:
        raise ValueError("readout: h2 needs layers=2")
    return tuple(s for s in STREAMS if s in readout)


def _check_layers(layers, readout) -> tuple[int, tuple[str, ...]]:
    """``layers`` (1 or 2), and ``readout`` checked against it (:func:`check_readout`)."""
    layers = check_int("layers", layers, 1)
    if layers > 2:
        raise ValueError(f"layers must be 1 or 2, got {layers}")
    return layers, check_readout(readout, layers)


def _is_causal(task) -> bool:
    """Causal attention and next-token targets for the induction task; the copy task attends over
    the whole sequence (today's one-layer model)."""
    return hasattr(task, "target_mask")


def _targets(task, tokens):
    """(y, rows): targets (P, L, V) and the positions that carry one, (L,) bool (concrete, so
    that indexing by it traces)."""
    L = tokens.shape[-1]
    if _is_causal(task):
        return task.targets(tokens), np.asarray(task.target_mask)
    return algebra.targets(tokens, task.V), np.ones(L, dtype=bool)


def _record(A1, A2, tokens, task, activation: str) -> None:
    if not _is_causal(task) and A2 is None:  # the one-layer copy model's own sites
        record_order_parameters(A1, activation)
        return
    for name, value in induction_scores(A1, A2, tokens, task.V).items():
        numpyro.deterministic(name, value)


def _whiten(task, tokens, gram):
    psi = algebra.features(tokens, task.V)
    if gram is None:
        return psi
    n = task.n_features
    return psi @ algebra.gram_factor(jnp.asarray(check_gram(gram, n)), n)


#: sequences per block where the design's products are summed block by block (``block=`` of
#: :func:`two_layer_kernel_model` and :func:`design_products`; the MAP search's potential): small
#: enough that a block's attention patterns and their cotangents stay in the CPU's cache
BLOCK = 20


def to_blocks(x, block: int):
    """``x`` (P, ...) padded with zero sequences to a multiple of ``block`` and reshaped to
    (P / block, block, ...). Zero features give zero heads in every layer (no logit, so uniform
    attention over zero values), and zero targets, so padded sequences add nothing to the
    design's products."""
    block = check_int("block", block, 1)
    pad = -x.shape[0] % block
    x = jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)])
    return x.reshape(-1, block, *x.shape[1:])


def head_products(M1, M2, psi_blocks, y_blocks, activation: str, causal: bool, heads, rows):
    """(Psi^T H, H^T H, H^T y) summed over blocks of sequences: H the design's ``heads`` streams
    (h1, h2) and Psi the features, both at the positions ``rows`` (bool (L,), concrete);
    ``psi_blocks`` (k, b, L, n) and ``y_blocks`` (k, b, R, V) the targets at those positions
    (:func:`to_blocks`). A ``lax.scan`` whose body is rematerialised in the backward pass
    (``jax.checkpoint``), so that each block's small batched products and their cotangents work
    in cache instead of streaming (P, L, L) arrays through memory."""
    n, V = psi_blocks.shape[-1], y_blocks.shape[-1]

    @jax.checkpoint
    def add(acc, blk):
        ps, yb = blk
        Phi = forward(M1, M2, ps, activation, causal, heads)[0][:, rows]
        H, r = Phi.reshape(-1, Phi.shape[-1]), ps[:, rows].reshape(-1, n)
        return (acc[0] + r.T @ H, acc[1] + H.T @ H, acc[2] + H.T @ yb.reshape(-1, V)), None

    w = sum({"h1": n, "h2": 2 * n}[s] for s in heads)
    zero = (jnp.zeros((n, w)), jnp.zeros((w, w)), jnp.zeros((w, V)))
    return jax.lax.scan(add, zero, (psi_blocks, y_blocks))[0]


def design_products(M1, M2, psi, y, activation: str, causal: bool, readout=STREAMS, *,
                    rows=None, block: int | None = None):  # fmt: skip
    """The readout design's sufficient statistics, ``(G, B)`` = (Phi^T Phi, Phi^T y), Phi the
    ``readout`` streams of :func:`forward` at the positions ``rows`` (bool (L,), concrete; default
    all) and ``y`` (P, L, V) the targets.

    ``block=None``: one forward over the whole dataset. ``block=b``: the features' own products
    are formed directly (they do not depend on the forms) and the heads' by :func:`head_products`
    over blocks of b sequences: the same G and B up to the order of the sums, at 2.2-2.8x less
    CPU per gradient at P >= 1000 (docs/performance.md, "Induction head: the study's MAP
    sweep"); below P ~ 100 the scan's fixed cost makes it no faster."""
    rows = np.ones(psi.shape[-2], dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
    heads = tuple(s for s in readout if s != "h0")
    y = y[:, rows]
    if block is None or not heads:
        Phi = forward(M1, M2, psi, activation, causal, readout)[0][:, rows]
        X, Y = Phi.reshape(-1, Phi.shape[-1]), y.reshape(-1, y.shape[-1])
        return X.T @ X, X.T @ Y
    SpH, SHH, BH = head_products(M1, M2, to_blocks(psi, block), to_blocks(y, block), activation,
                                 causal, heads, rows)  # fmt: skip
    if "h0" not in readout:
        return SHH, BH
    R, Y = psi[:, rows].reshape(-1, psi.shape[-1]), y.reshape(-1, y.shape[-1])
    return jnp.block([[R.T @ R, SpH], [SpH.T, SHH]]), jnp.concatenate([R.T @ Y, BH])


def two_layer_kernel_model(
    task,
    hyper,
    tokens,
    activation: str,
    gram=None,
    *,
    layers: int = 2,
    readout=STREAMS,
    block: int | None = None,
):
    """The kernel-limit posterior of two attention layers: M1 (n x n) and M2 (2n x 2n) with
    N(0, g_W / chi) priors, the readout on the ``readout`` streams integrated out exactly (the
    Gaussian evidence, log-determinant included).

    ``task`` is an :class:`~bayes_attn.induction.InductionTask` (causal, next-token targets) or a
    :class:`~bayes_attn.task.CopyTask` (today's attention over the whole sequence). ``gram``: the
    Gram of frozen embeddings (:func:`bayes_attn.algebra.embedding_gram`); the model is then the
    exact posterior of :func:`two_layer_network_model` with those embeddings, at any width.
    ``layers=1`` drops layer 2 (and M2). Deterministic sites: :func:`induction_scores` (or, for
    the copy task with one layer, today's ``c1``/``cG`` or ``a1``/``aG``). ``block``: the design's
    products summed over blocks of that many sequences (:func:`design_products`; :data:`BLOCK`
    is what the induction study's samplers pass), the same density to rounding at about half the
    CPU per gradient where P is in the thousands.
    """
    check_activation(activation)
    layers, readout = _check_layers(layers, readout)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    psi = _whiten(task, tokens, gram)
    n = task.n_features
    scale = jnp.sqrt(hyper.g_w / hyper.chi)
    M1 = numpyro.sample("M1", dist.Normal(0.0, scale).expand((n, n)).to_event(2))
    M2 = None
    if layers == 2:
        M2 = numpyro.sample("M2", dist.Normal(0.0, scale).expand((2 * n, 2 * n)).to_event(2))
    _evidence(task, hyper, tokens, psi, M1, M2, activation, readout, block)


def _evidence(task, hyper, tokens, psi, M1, M2, activation, readout, block, factor=None):
    """The readout integrated out: the Woodbury evidence of the design on ``psi`` (its products
    by :func:`design_products`, read in the coordinates ``factor`` R, G -> R^T G R, B -> R^T B,
    when the readout's prior covariance is (g_O / chi) R R^T), as a factor, and the
    deterministic sites."""
    causal = _is_causal(task)
    y, rows = _targets(task, tokens)
    G, B = design_products(M1, M2, psi, y, activation, causal, readout, rows=rows, block=block)
    if factor is not None:
        G, B = factor.T @ G @ factor, factor.T @ B
    s_data, logdet = woodbury_evidence(G, B, jnp.sum(y[:, rows] ** 2), hyper.sigma2, hyper.g_o)
    numpyro.factor("evidence", -hyper.chi * s_data - logdet)
    _, A1, A2 = forward(M1, M2, psi, activation, causal, ("h0",))  # the sites' patterns
    _record(A1, A2, tokens, task, activation)


def network_forms(W, W_G1, W_G2, W_O):
    """``(M1, M2, w)`` of a two-layer network with embeddings W (d x n): M1 = W^T W_G1 W / d,
    M2 = W~^T W_G2 W~ / d with W~ = blockdiag(W, W), and w = W_O (I_k (x) W) for a readout W_O
    (V x k d) of k streams of width d each (h2 counts twice)."""
    d = W.shape[0]
    M1 = W.T @ W_G1 @ W / d
    M2 = None
    if W_G2 is not None:
        Wt = jax.scipy.linalg.block_diag(W, W)
        M2 = Wt.T @ W_G2 @ Wt / d
    if W_O is None:  # the attention's forms alone (the readout integrated out)
        return M1, M2, None
    k = W_O.shape[1] // d
    w = jnp.concatenate([W_O[:, i * d : (i + 1) * d] @ W for i in range(k)], axis=1)
    return M1, M2, w


def two_layer_network_model(
    task,
    hyper,
    tokens,
    activation: str,
    d_model: int,
    *,
    layers: int = 2,
    readout=STREAMS,
    embeddings: tuple | None = None,
    integrate_readout: bool = False,
    block: int | None = None,
):
    """The finite two-layer network (Level 0): W_emb, p ~ N(0, 1) (or held at ``embeddings``),
    W_G1 (d x d) and W_G2 (2d x 2d) ~ N(0, g_W / chi), W_O (V x width) ~ N(0, g_O / (chi d)),
    Gaussian likelihood with noise sigma^2 / chi on the positions that have a target. The forward
    is exact through the embeddings' span (:func:`network_forms`, :func:`forward`), so a step costs
    O(n d^2), not O(P L d^2). Deterministic sites as :func:`two_layer_kernel_model`'s.

    ``integrate_readout=True``: the same posterior with W_O integrated out exactly (no ``W_O``
    site). Given the other weights the outputs are Gaussian with covariance (g_O / chi)
    Phi K Phi^T, K = blockdiag(W^T W / d) over the readout's streams (h2's block
    blockdiag(W, W)), so the evidence is the kernel model's Woodbury evidence of the design
    whitened by K's Cholesky factor (:func:`readout_factor`); ``block`` sums the design's
    products as :func:`two_layer_kernel_model` does. A Langevin chain on this marginal does not
    carry the readout's stiff directions (docs/validation.md, "SGLD on the network")."""
    check_activation(activation)
    d = check_int("d_model", d_model, 1)
    layers, readout = _check_layers(layers, readout)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    g = (hyper.g_w / hyper.chi) ** 0.5
    if embeddings is None:
        W_emb = numpyro.sample("W_emb", dist.Normal(0.0, 1.0).expand((d, task.V)).to_event(2))
        pos = numpyro.sample("p", dist.Normal(0.0, 1.0).expand((d, task.L)).to_event(2))
    else:
        W_emb, pos = (jnp.asarray(e) for e in embeddings)
        if W_emb.shape != (d, task.V) or pos.shape != (d, task.L):
            raise ValueError(f"embeddings must have shapes {(d, task.V)} and {(d, task.L)}")
    W_G1 = numpyro.sample("W_G1", dist.Normal(0.0, g).expand((d, d)).to_event(2))
    W_G2 = None
    if layers == 2:
        W_G2 = numpyro.sample("W_G2", dist.Normal(0.0, g).expand((2 * d, 2 * d)).to_event(2))
    if check_bool("integrate_readout", integrate_readout):
        if d < task.n_features:  # K = W^T W / d has rank d < n: its Cholesky factor fails
            raise ValueError(f"d_model: integrate_readout needs d_model >= n = V + L = "
                             f"{task.n_features}, got {d}")  # fmt: skip
        W = jnp.concatenate([W_emb, pos], axis=1)
        M1, M2, _ = network_forms(W, W_G1, W_G2, None)
        psi = algebra.features(tokens, task.V)
        _evidence(task, hyper, tokens, psi, M1, M2, activation, readout, block,
                  readout_factor(W, readout))  # fmt: skip
        return
    width = _readout_width(readout) * d
    std_o = (hyper.g_o / (hyper.chi * d)) ** 0.5
    W_O = numpyro.sample("W_O", dist.Normal(0.0, std_o).expand((task.V, width)).to_event(2))
    M1, M2, w = network_forms(jnp.concatenate([W_emb, pos], axis=1), W_G1, W_G2, W_O)
    Phi, A1, A2 = forward(M1, M2, algebra.features(tokens, task.V), activation,
                          _is_causal(task), readout)  # fmt: skip
    y, rows = _targets(task, tokens)
    f = Phi[:, rows] @ w.T
    noise = (hyper.sigma2 / hyper.chi) ** 0.5
    with numpyro.plate("sequences", tokens.shape[0]):  # per-sequence log likelihood (run_sgld)
        numpyro.sample("y", dist.Normal(f, noise).to_event(2), obs=y[:, rows])
    _record(A1, A2, tokens, task, activation)


def readout_factor(W, readout=STREAMS) -> jax.Array:
    """The lower Cholesky factor of K = blockdiag(W^T W / d) over the ``readout`` streams (one
    n x n block for h0 and h1, two for h2): the prior covariance of the network's readout, read
    in the features' coordinates, is (g_O / chi) K."""
    d = W.shape[0]
    R = jnp.linalg.cholesky(W.T @ W / d)
    k = _readout_width(readout)
    return jnp.kron(jnp.eye(k), R)


# --------------------------------------------------------------------------------------------------
# The network as plain functions of its weights (what Adam trains: bayes_attn.inference.adam_nets)


def _readout_width(readout) -> int:
    """The readout's width in units of d (h2 counts twice)."""
    return sum({"h0": 1, "h1": 1, "h2": 2}[s] for s in readout)


def network_prior_scales(hyper, d_model: int) -> dict[str, float]:
    """The prior standard deviations of :func:`two_layer_network_model`'s weights: 1 for the
    embeddings ``W_emb`` and ``p``, sqrt(g_W / chi) for ``W_G1`` and ``W_G2``, sqrt(g_O / (chi d))
    for ``W_O``."""
    g = (hyper.g_w / hyper.chi) ** 0.5
    std_o = (hyper.g_o / (hyper.chi * d_model)) ** 0.5
    return {"W_emb": 1.0, "p": 1.0, "W_G1": g, "W_G2": g, "W_O": std_o}


def init_network_params(
    key, task, hyper, d_model: int, *, layers: int = 2, readout=STREAMS
) -> dict[str, jax.Array]:
    """A draw of :func:`two_layer_network_model`'s weights from its prior, one key per weight
    (split in the order of the sorted names, as :func:`bayes_attn.models.init_params` does)."""
    d = check_int("d_model", d_model, 1)
    layers, readout = _check_layers(layers, readout)
    shapes = {
        "W_emb": (d, task.V),
        "p": (d, task.L),
        "W_G1": (d, d),
        "W_O": (task.V, _readout_width(readout) * d),
    }
    if layers == 2:
        shapes["W_G2"] = (2 * d, 2 * d)
    std = network_prior_scales(hyper, d)
    keys = jax.random.split(key, len(shapes))
    return {
        n: std[n] * jax.random.normal(k, shapes[n])
        for k, n in zip(keys, sorted(shapes), strict=True)
    }


def network_outputs(params, tokens, task, activation: str, readout=STREAMS):
    """``(f, A1, A2)``: the network's outputs (P, L, V) and both attention patterns, for weights
    ``params`` (``W_emb``, ``p``, ``W_G1``, ``W_O`` and, with two layers, ``W_G2``), through
    :func:`network_forms` and :func:`forward` as in :func:`two_layer_network_model`."""
    W = jnp.concatenate([params["W_emb"], params["p"]], axis=1)
    M1, M2, w = network_forms(W, params["W_G1"], params.get("W_G2"), params["W_O"])
    Phi, A1, A2 = forward(M1, M2, algebra.features(tokens, task.V), activation,
                          _is_causal(task), readout)  # fmt: skip
    return Phi @ w.T, A1, A2


def network_neg_log_posterior(
    params, tokens, task, hyper, activation: str, *, frozen=None, scale=1.0, readout=STREAMS
):
    """The chi-scaled negative log-posterior of :func:`two_layer_network_model`, without constants:
    chi sum |y - f|^2 / (2 sigma^2) over the positions with a target, plus sum_w |w|^2 / (2 std_w^2)
    over the weights in ``params`` (:func:`network_prior_scales`); weights in ``frozen`` (held
    embeddings) enter the forward only. ``scale`` multiplies the likelihood (P / batch for a
    minibatch). Its minimum is the MAP; it equals the model's potential up to a constant, as
    :func:`bayes_attn.models.network.neg_log_posterior` does for one layer."""
    full = {**(frozen or {}), **params}
    f, _, _ = network_outputs(full, tokens, task, activation, readout)
    y, rows = _targets(task, tokens)
    lik = hyper.chi * jnp.sum((y[:, rows] - f[:, rows]) ** 2) / (2 * hyper.sigma2)
    std = network_prior_scales(hyper, full["W_emb"].shape[0])
    prior = sum(jnp.sum(w**2) / (2 * std[n] ** 2) for n, w in params.items())
    return scale * lik + prior
