"""The copy-task attention algebra, shared by every level of the model.

Everything that turns tokens and an attention matrix into the objects of the theory lives here:
features psi = (onehot, e_a), logits from a bilinear form M by gathers, linear and softmax attention,
the readout design Phi, the projection of an attention tensor onto the order parameters (c1, cG),
the softmax change of variables (cG <-> a1, aG), the minimum-norm realisation of token-independent
logits, and the equivalent-kernel moments of Phi.

Conventions
-----------
* Positions a, b = 0..L-1; G*[a, b] = 1 when b = a - 1 (mod L), the copy (shift-by-one) pattern.
* Reduced attention: A = c1 J / L + cG G* / L, with J the all-ones L x L matrix. For linear attention the
  reduced logits are K = c1 J + cG G* and A = K / L; for softmax the same form holds with (a1, aG).
* Features psi[a] = (x[a], e_a) in R^(V+L): token block first, position block second.

References
----------
Paper Sec. 3.3 (order parameters), App. F; docs/theory.md §1 (projection), §2 (Level 1: logits by
gathers) and §3 (Level 2: the minimum-norm realisation).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import check_activation, check_attention, check_tokens

# --------------------------------------------------------------------------------------------------
# Data


def _tokens(tokens, V: int) -> jax.Array:
    """Integer tokens (..., L) in [0, V); under ``jit`` only rank and dtype can be checked."""
    return jnp.asarray(check_tokens(tokens, None, V, batched=False))


def one_hot(tokens, V: int) -> jax.Array:
    """One-hot inputs x, shape (..., L, V).

    ``tokens`` are integers (..., L) in [0, V); a ``ValueError`` names them otherwise (under
    ``jit`` only their rank and dtype are checked).
    """
    return _one_hot(_tokens(tokens, V), V)


def _one_hot(t, V: int) -> jax.Array:
    """:func:`one_hot` of tokens already checked."""
    return jax.nn.one_hot(t, V, dtype=jnp.result_type(float))


def targets(tokens, V: int) -> jax.Array:
    """Targets y[a] = x[a-1 mod L], shape (..., L, V)."""
    return _one_hot(jnp.roll(_tokens(tokens, V), 1, axis=-1), V)


def features(tokens, V: int) -> jax.Array:
    """Features psi[a] = (x[a], e_a), shape (..., L, V + L)."""
    x = one_hot(tokens, V)
    L = x.shape[-2]
    e = jnp.broadcast_to(jnp.eye(L, dtype=x.dtype), x.shape[:-1] + (L,))
    return jnp.concatenate([x, e], axis=-1)


# --------------------------------------------------------------------------------------------------
# Attention


def shift_matrix(L: int, dtype=None) -> jax.Array:
    """The copy pattern G*[a, b] = delta(b, a-1 mod L)."""
    return jnp.roll(jnp.eye(L, dtype=dtype or jnp.result_type(float)), -1, axis=1)


def reduced_attention(c1, cG, L: int) -> jax.Array:
    """A = c1 J / L + cG G* / L, broadcast over the shapes of c1 and cG: shape (..., L, L)."""
    c1 = jnp.asarray(c1)[..., None, None]
    cG = jnp.asarray(cG)[..., None, None]
    return (c1 * jnp.ones((L, L)) + cG * shift_matrix(L)) / L


def reduced_logits(c1, cG, L: int) -> jax.Array:
    """Token-independent logits K = c1 J + cG G*, shape (..., L, L)."""
    return L * reduced_attention(c1, cG, L)


def attention(K, activation: str) -> jax.Array:
    """Attention from logits (..., L, L): linear A = K / L, softmax A[a, :] = softmax_b K[a, :]."""
    check_activation(activation)
    if activation == "linear":
        return K / K.shape[-1]
    return jax.nn.softmax(K, axis=-1)


def symbols(tokens, V: int) -> jax.Array:
    """Index of each (token, position) pair, a * V + t[a], in the frame of :func:`feature_frame`."""
    return _symbols(_tokens(tokens, V), V)


def _symbols(t, V: int) -> jax.Array:
    """:func:`symbols` of tokens already checked."""
    return jnp.arange(t.shape[-1]) * V + t


def logits_from_M(M, tokens, V: int, factor=None) -> jax.Array:
    """Level-1 logits K[p, a, b] = psi[p, a]^T M psi[p, b], shape (P, L, L), by one table gather.

    Every feature is one of the V * L columns of the frame X (a token at a position), so all logits
    are entries of the (V L) x (V L) table T = X^T M X, gathered by (token, position) symbol. No
    (P, L, V+L) tensor is formed, and the backward pass is one scatter into T.

    With ``factor`` R, the :func:`gram_factor` of frozen embeddings' Gram W^T W / d, ``M`` is the
    form on the whitened features R^T psi, and the logits are psi^T (R M R^T) psi
    (docs/theory.md, "Frozen embeddings at any width").
    """
    tokens = _tokens(tokens, V)
    L = tokens.shape[-1]
    if jnp.shape(M) != (V + L, V + L):
        raise ValueError(
            f"M must have shape (V + L, V + L) = ({V + L}, {V + L}), got {jnp.shape(M)}"
        )
    if factor is not None:
        M = factor @ M @ factor.T
    X = jnp.asarray(feature_frame(L, V), dtype=M.dtype)
    T = X.T @ M @ X
    s = _symbols(tokens, V)  # checked above
    return T[s[..., :, None], s[..., None, :]]


def embedding_gram(W_emb, p) -> jax.Array:
    """The Gram g = W^T W / d of the embeddings W = [W_emb | p] (d x (V + L)), shape (V + L, V + L)."""
    W = jnp.concatenate([jnp.asarray(W_emb), jnp.asarray(p)], axis=1)
    return W.T @ W / W.shape[0]


def _gram_eigh(gram):
    """Eigenvalues and eigenvectors of the symmetrised Gram: the one decomposition that
    :func:`gram_factor` and :func:`span_basis` share, so that W = sqrt(d) U R^T holds exactly."""
    gram = jnp.asarray(gram)
    return jnp.linalg.eigh(0.5 * (gram + gram.T))


def gram_factor(gram, n: int | None = None) -> jax.Array:
    """The symmetric square root R = g^(1/2) of ``gram`` ((V + L) x (V + L), symmetric positive
    semidefinite), so R R^T = g.

    R = Q diag(sqrt(lambda)) Q^T from the eigendecomposition, so it exists at every width: for
    d < V + L the Gram has rank d and R annihilates the directions outside the embeddings' span
    (which the data never see). Any factor gives the same model (the whitened prior is rotation
    invariant); the symmetric one keeps the whitened coordinates close to the features' own when
    g is close to I (wide embeddings), so members with different embedding draws share one
    geometry there (an eigenvector factor Q diag(sqrt(lambda)) would rotate each member's
    coordinates at random). Jit-safe: the shape does not depend on the rank. ``n`` checks the
    shape when given.
    """
    gram = jnp.asarray(gram)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or (n is not None and gram.shape[0] != n):
        want = f"({n}, {n})" if n is not None else "square"
        raise ValueError(f"gram must have shape {want}, got {gram.shape}")
    lam, Q = _gram_eigh(gram)
    return (Q * jnp.sqrt(jnp.clip(lam, 0.0, None))) @ Q.T


def span_basis(W_emb, p) -> jax.Array:
    """U (d x (V + L)) with W = sqrt(d) U R^T, R = :func:`gram_factor` of the embeddings' Gram.

    U^T U is the orthogonal projector onto the Gram's range (the identity when d >= V + L), so a
    network's weights map onto the whitened Level-1 coordinates as M = U^T W_G U and
    w = sqrt(d) W_O U: with them W^T W_G W / d = R M R^T and W_O W = w R^T exactly, and under the
    prior M and w are i.i.d. N(0, g_W / chi) and N(0, g_O / chi) like Level 1's on that range
    (docs/theory.md, "Frozen embeddings at any width"). For d < V + L, R M R^T only sees M on the
    range, where the same holds.
    """
    W = jnp.concatenate([jnp.asarray(W_emb), jnp.asarray(p)], axis=1)
    lam, Q = _gram_eigh(embedding_gram(W_emb, p))
    keep = lam > 1e-12 * jnp.max(lam)
    inv = jnp.where(keep, 1.0 / jnp.sqrt(jnp.where(keep, lam, 1.0)), 0.0)
    return W @ ((Q * inv) @ Q.T) / jnp.sqrt(W.shape[0])


def network_gate(M, embeddings) -> jax.Array:
    """The W_G (d x d) of smallest norm whose network logits equal the kernel-limit form M.

    The network's logits are psi^T (W W_G W^T / d) psi with W = [W_emb^T; p^T] ((V + L) x d), so
    ``W_G = d W^+ M W^+T`` gives exactly M when W has full row rank (d >= V + L): the inverse
    direction of :func:`span_basis`'s M = U^T W_G U.

    Parameters
    ----------
    M : ((V + L), (V + L)) array
    embeddings : (W_emb (d, V), p (d, L))

    Raises
    ------
    ValueError
        If d < V + L (M cannot be realised exactly).
    """
    W_emb, pos = (jnp.asarray(e) for e in embeddings)
    W = jnp.concatenate([W_emb.T, pos.T], axis=0)
    n, d = W.shape
    if d < n:
        raise ValueError(f"d_model must be >= V + L = {n} to realise M exactly, got {d}")
    Wp = jnp.linalg.pinv(W)
    return d * Wp @ jnp.asarray(M) @ Wp.T


def readout_from_w(w, tokens, V: int) -> jax.Array:
    """Per-token readout values psi[p, b]^T w^T, shape (P, L, V), for a readout w (V, V + L) on the
    features, gathered from its (V L) x V table on every (token, position) pair."""
    tokens = _tokens(tokens, V)
    L = tokens.shape[-1]
    X = jnp.asarray(feature_frame(L, V), dtype=w.dtype)
    return (X.T @ w.T)[_symbols(tokens, V)]


def phi(A, tokens, V: int) -> jax.Array:
    """Readout design Phi[p, a] = sum_b A[p, a, b] psi[p, b], shape (P, L, V + L).

    ``A`` is (L, L) (token-independent) or (P, L, L). The token block is A @ onehot, the position
    block is A itself.
    """
    x = one_hot(tokens, V)
    A = jnp.broadcast_to(A, x.shape[:-2] + A.shape[-2:])
    return jnp.concatenate([A @ x, A], axis=-1)


def project(A) -> dict[str, jax.Array]:
    """Project an attention tensor (..., L, L) onto the order parameters.

    The batch axes are averaged to give the mean pattern A_bar. Then c1 = L * mean(off-shift entries),
    cG = L * (mean(shift entries) - mean(off-shift entries)), so that A_bar = c1 J / L + cG G* / L
    exactly when A_bar lies in span{J, G*}. For softmax attention read (c1, cG) as (a1, aG).
    ``token_residual`` is the RMS of L * (A - A_bar), the token-dependent part on the logit scale.
    ``A`` must be (P, L, L) or have more batch axes, with L >= 2 and finite entries (under ``jit``
    only the shape is checked); a single pattern is ``A[None]``.
    """
    A = jnp.asarray(check_attention(A, "A"))
    L = A.shape[-1]
    batch_axes = tuple(range(A.ndim - 2))
    A_bar = A.mean(axis=batch_axes) if batch_axes else A
    shift = jnp.sum(A_bar * shift_matrix(L, A.dtype))
    off = (jnp.sum(A_bar) - shift) / (L * L - L)
    resid = jnp.sqrt(jnp.mean((L * (A - A_bar)) ** 2))
    return {"c1": L * off, "cG": L * (shift / L - off), "token_residual": resid, "A_bar": A_bar}


def z2_sign(c1, cG):
    """The package's one Z2 convention for linear attention: +1 on the image c1 + cG >= 0, else -1.

    The logits K and -K give the same evidence for linear attention (the readout flips sign), so
    (c1, cG) and (-c1, -cG) are images of one state. Every fold in the package (theory's saddles
    and boundaries, the precursor quadrature, networks, chains) picks the image with this sign. In
    the ordered phase c1 and cG share their sign (measured along the Table-1 global path up to
    P = 1e5), so this is also the image with c1 >= 0; unlike c1, c1 + cG stays away from zero at
    large P, where c1 -> 0 and a network's c1 is noise. The metastable minimum far above the
    crossover (from P = 527.5 at Table 1) has them anti-aligned; in this image it reads
    c1 < 0 < cG (docs/theory.md §7).
    """
    return jnp.where(jnp.asarray(c1) + jnp.asarray(cG) < 0, -1.0, 1.0)


def fold_sign(c1, cG):
    """Fold (c1, cG) -> (-c1, -cG) onto the image c1 + cG >= 0 (:func:`z2_sign`)."""
    s = z2_sign(c1, cG)
    return s * jnp.asarray(c1), s * jnp.asarray(cG)


def fold_attention(A, c1, cG):
    """Fold attention patterns (..., L, L) with order parameters (c1, cG) of shape (...) onto the
    image of :func:`fold_sign` (A -> -A where c1 + cG < 0)."""
    return z2_sign(c1, cG)[..., None, None] * jnp.asarray(A)


# --------------------------------------------------------------------------------------------------
# Softmax change of variables


def softmax_order(cG, L):
    """Softmax of the reduced logits c1 J + cG G*: returns (a1, aG), with a1 = 1 - aG / L.

    aG = L (e^cG - 1) / (e^cG + L - 1), written with sigmoids so that it is stable for any cG.
    """
    z = cG - jnp.log(L - 1.0)
    aG = L * (jax.nn.sigmoid(z) - jax.nn.sigmoid(-z) / (L - 1.0))
    return 1.0 - aG / L, aG


def softmax_logit(aG, L):
    """Inverse of :func:`softmax_order`: cG = log[(1 + (L-1) aG / L) / (1 - aG / L)], aG in (-L/(L-1), L)."""
    return jnp.log1p((L - 1.0) * aG / L) - jnp.log1p(-aG / L)


def softmax_dlogit(aG, L):
    """Jacobian d cG / d aG of :func:`softmax_logit`."""
    return ((L - 1.0) / L) / (1.0 + (L - 1.0) * aG / L) + (1.0 / L) / (1.0 - aG / L)


# --------------------------------------------------------------------------------------------------
# Minimum-norm realisation of token-independent logits


@functools.lru_cache(maxsize=64)
def feature_frame(L: int, V: int) -> np.ndarray:
    """Columns psi(i, a) = (e_i, e_a) for every token i and position a: shape (V+L, V*L), order (a, i)."""
    cols = [np.concatenate([np.eye(V)[i], np.eye(L)[a]]) for a in range(L) for i in range(V)]
    frame = np.stack(cols, axis=1)
    frame.flags.writeable = False
    return frame


def min_norm_M(K, V: int) -> jax.Array:
    """The smallest-Frobenius-norm M with psi(i, a)^T M psi(j, b) = K[a, b] for all tokens i, j.

    Closed form M = X^+T T X^+, with X the frame of all features and T[(a,i),(b,j)] = K[a, b].
    """
    K = jnp.asarray(K)
    L = K.shape[-1]
    Xp = jnp.asarray(np.linalg.pinv(feature_frame(L, V)))  # (V*L, V+L)
    T = jnp.repeat(jnp.repeat(K, V, axis=0), V, axis=1)
    return Xp.T @ T @ Xp


def min_norm_sq(K, V: int):
    """|M|^2 of :func:`min_norm_M`: sum K^2 - (sum_a r_a^2 + sum_b c_b^2)/(L+V) + s^2/(L+V)^2."""
    K = jnp.asarray(K)
    L = K.shape[-1]
    r, c, s = K.sum(-1), K.sum(-2), K.sum((-1, -2))
    n = L + V
    return (K**2).sum((-1, -2)) - ((r**2).sum(-1) + (c**2).sum(-1)) / n + s**2 / n**2


# --------------------------------------------------------------------------------------------------
# Equivalent-kernel moments


def _token_moments(L: int, V: int):
    """U = E[u u^T] with u = sum_b psi_b, and W = sum_a E[psi_{a-1} psi_{a-1}^T], per sequence."""
    IV, IL = jnp.eye(V), jnp.eye(L)
    oVV, oVL, oLL = jnp.ones((V, V)), jnp.ones((V, L)), jnp.ones((L, L))
    U = jnp.block([[L / V * IV + L * (L - 1) / V**2 * oVV, L / V * oVL], [L / V * oVL.T, oLL]])
    W = jnp.block([[L / V * IV, oVL / V], [oVL.T / V, IL]])
    return U, W


def ek_moments(c1, cG, L: int, V: int):
    """Per-sequence averages over uniform tokens of Phi^T Phi and Phi^T y for A = c1 J/L + cG G*/L.

    Returns ``(C, D)`` with C = E[sum_a Phi_a Phi_a^T] of shape (V+L, V+L) and D = E[sum_a Phi_a y_a^T]
    of shape (V+L, V). With u = sum_b psi_b and v_a = psi_{a-1}, Phi_a = (c1 u + cG v_a) / L, and
    sum_a v_a = u gives ``C = [(L c1^2 + 2 c1 cG) U + cG^2 W] / L^2``, ``D = [c1 U + cG W][:, :V] / L``.
    """
    U, W = _token_moments(L, V)
    C = ((L * c1**2 + 2 * c1 * cG) * U + cG**2 * W) / L**2
    D = (c1 * U[:, :V] + cG * W[:, :V]) / L
    return C, D


def ek_modes(c1, cG, L, V):
    """The equivalent-kernel moments in the token-permutation eigenbasis (scalars, any shape).

    The mean mode (k = 0) and the V - 1 contrast modes (k >= 1) decouple. Returns per-sequence
    ``(g0, gk, hk)``: g0 = m^2 (L+V)/V with m = c1 + cG/L is the k = 0 signal variance (and its fitted
    signal, the mode being rank one); gk = (L c1^2 + 2 c1 cG + cG^2)/(L V) is the contrast variance and
    hk = (c1 + cG)^2/(L V) <= gk its overlap with the target (Cauchy-Schwarz).
    """
    m = c1 + cG / L
    g0 = m**2 * (L + V) / V
    gk = (L * c1**2 + 2 * c1 * cG + cG**2) / (L * V)
    hk = (c1 + cG) ** 2 / (L * V)
    return g0, gk, hk
