"""The induction task: causal next-token prediction on in-context Markov chains.

Each sequence draws its own Markov chain and its tokens from it (by default
``InContextMarkov(alpha=1)``, :mod:`bayes_attn.tokens`), and position a is asked for the next
token, y[a] = x[a+1] for a < L - 1; the last position has no target (no wrap-around). Its
target row is all zeros and :attr:`InductionTask.target_mask` says which positions have a
target. The features are the copy task's, psi[a] = (x[a], e_a).

The two layers' forward pass and order parameters (:func:`forward`, :func:`induction_scores`) live here,
below the models and the theory, which both read them. The exact reference predictors (Bayes-optimal, in-context unigram, uniform) and their expected
losses are :mod:`bayes_attn.theory.induction_refs`.

References
----------
docs/theory.md, "The induction task and its reference predictors" (with the full citation);
Edelman et al., "The evolution of statistical induction heads" (NeurIPS 2024).
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_int
from bayes_attn.task import SequenceTask
from bayes_attn.tokens import InContextMarkov, TokenSource

__all__ = [
    "SCORES",
    "STREAMS",
    "InductionTask",
    "attend",
    "fold_linear_scores",
    "forward",
    "induction_scores",
    "relabellings",
]

#: the order parameters of the two causal layers, in the order :func:`induction_scores` returns
#: them (their one list: the posterior study, the training curves and the two-layer record read it)
SCORES = ("uniform1", "copy1", "induction2", "induction2_excess", "uniform2")

#: the residual streams the readout may read, in the design's order: the features, layer 1's
#: output, layer 2's output (2n wide)
STREAMS = ("h0", "h1", "h2")


@dataclasses.dataclass(frozen=True)
class InductionTask(SequenceTask):
    """Sequences of ``L`` tokens from a vocabulary of ``V``; target y[a] = x[a+1] for a < L - 1.

    Parameters
    ----------
    L : int
        Sequence length, at least 2 (so that one position has a target).
    V : int
        Vocabulary size, at least 2.
    tokens : TokenSource or str
        The law of the sequences (:mod:`bayes_attn.tokens`), ``InContextMarkov(alpha=1.0)`` by
        default, or its spec (``"icl-markov:alpha=0.5"``). It takes part in equality and hashing,
        so the task is a static argument of ``jit``. The Bayes-optimal reference
        (:func:`bayes_attn.theory.induction_refs.bayes_optimal`) needs an ``InContextMarkov``
        source with Dirichlet rows.
    """

    L: int
    V: int
    tokens: TokenSource = InContextMarkov(alpha=1.0)

    @property
    def n_targets(self) -> int:
        """Positions with a target per sequence, L - 1."""
        return self.L - 1

    @property
    def target_mask(self) -> np.ndarray:
        """Boolean (L,): True where position a has a target (a < L - 1), False at the last."""
        return np.arange(self.L) < self.L - 1

    def sample_with_chains(self, key: jax.Array, P: int):
        """``(tokens, T)``: the tokens of :meth:`~bayes_attn.task.SequenceTask.sample` and each
        sequence's transition matrix (P, V, V) (sources with ``sample_with_chains`` only; a
        ``ValueError`` naming ``tokens`` otherwise)."""
        P = check_int("P", P, 1)
        if not hasattr(self.tokens, "sample_with_chains"):
            raise ValueError(f"tokens: {self.tokens} has no chains to return")
        tokens, T = self.tokens.sample_with_chains(key, P, self.L, self.V)
        if T.ndim == 2:
            T = jnp.broadcast_to(T, (P, *T.shape))
        return tokens, T

    def as_dict(self) -> dict:
        """``{"task", "L", "V", "tokens"}`` for a result's attrs (``tokens`` as its spec)."""
        return {"task": "induction", "L": self.L, "V": self.V, "tokens": str(self.tokens)}

    def targets(self, tokens) -> jax.Array:
        """Next-token targets y[a] = x[a+1] for a < L - 1, and zeros at a = L - 1: (P, L, V)."""
        x = self.one_hot(tokens)
        return jnp.concatenate([x[:, 1:], jnp.zeros_like(x[:, :1])], axis=1)

    def loss_per_token(self, outputs, tokens) -> jax.Array:
        """The package's Gaussian-likelihood loss, 1/2 sum_j (y_j - f_j)^2 per position, averaged
        over the sequences and the positions that have a target (the last has none): a scalar.
        ``outputs`` (P, L, V); the output at the last position is ignored."""
        y = self.targets(tokens)
        f = jnp.asarray(outputs)
        if f.shape != y.shape:
            raise ValueError(f"outputs must have shape (P, L, V) = {y.shape}, got {f.shape}")
        per = 0.5 * jnp.sum((y - f) ** 2, axis=-1)[:, :-1]
        return jnp.mean(per)


def attend(K, activation: str, causal: bool) -> jax.Array:
    """Attention from logits (..., L, L): :func:`bayes_attn.algebra.attention` with, when ``causal``,
    position a seeing b <= a only (linear: K / L on the triangle; softmax over b <= a)."""
    if not causal:
        return algebra.attention(K, activation)
    L = K.shape[-1]
    mask = jnp.tril(jnp.ones((L, L), dtype=bool))
    if activation == "linear":
        return jnp.where(mask, K, 0.0) / L
    return jax.nn.softmax(jnp.where(mask, K, -jnp.inf), axis=-1)


def forward(M1, M2, psi, activation: str, causal: bool, readout=STREAMS):
    """``(Phi, A1, A2)``: the readout design (P, L, width) on the ``readout`` streams and both
    attention patterns (P, L, L) (``A2`` None when ``M2`` is None: one layer).

    ``psi`` are the features (P, L, n), whitened already where embeddings are frozen."""
    K1 = jnp.einsum("pai,ij,pbj->pab", psi, M1, psi)
    A1 = attend(K1, activation, causal)
    h1 = A1 @ psi
    parts = {"h0": psi, "h1": h1}
    A2 = None
    if M2 is not None:
        zeta = jnp.concatenate([psi, h1], axis=-1)
        K2 = jnp.einsum("pai,ij,pbj->pab", zeta, M2, zeta)
        A2 = attend(K2, activation, causal)
        parts["h2"] = A2 @ zeta
    return jnp.concatenate([parts[s] for s in readout], axis=-1), A1, A2


def induction_scores(A1, A2, tokens, V: int) -> dict[str, jax.Array]:
    """The order parameters of the two causal layers, from the patterns over a dataset.

    Layer 1 (``A1``, (P, L, L)), projected as the one-layer copy score is but on the causal
    triangle: ``uniform1`` = L x the mean entry off the previous-token line, ``copy1`` = L x (the
    mean previous-token entry A1[a, a-1] minus it). Layer 2 (``A2``): ``induction2``, the attention
    mass on the positions b whose previous token equals the query's token (x[b-1] = x[a]), averaged
    over the queries that have one; ``induction2_excess``, that minus the share of such positions
    among those visible (0 for uniform attention, near 1 for an induction head); ``uniform2`` = L x
    the mean entry off those matches. The in-context-unigram strategy is uniform pooling read
    through the token block, so its score is the uniform score of the layer that pools."""
    P, L, _ = A1.shape
    tri = jnp.tril(jnp.ones((L, L), dtype=bool))
    prev = jnp.eye(L, k=-1, dtype=bool)
    A1m = jnp.mean(A1, axis=0)
    off1 = jnp.sum(jnp.where(tri & ~prev, A1m, 0.0)) / jnp.sum(tri & ~prev)
    out = {"uniform1": L * off1, "copy1": L * (jnp.sum(jnp.where(prev, A1m, 0.0)) / (L - 1) - off1)}
    if A2 is None:
        return out
    t = jnp.asarray(tokens)
    before = jnp.concatenate([jnp.full_like(t[:, :1], -1), t[:, :-1]], axis=1)  # x[b-1], -1 at b=0
    match = (before[:, None, :] == t[:, :, None]) & tri  # (P, a, b)
    has = jnp.any(match, axis=-1)
    mass = jnp.sum(jnp.where(match, A2, 0.0), axis=-1)
    share = jnp.sum(match, axis=-1) / jnp.arange(1, L + 1)
    n_has = jnp.maximum(jnp.sum(has), 1)
    out["induction2"] = jnp.sum(jnp.where(has, mass, 0.0)) / n_has
    out["induction2_excess"] = jnp.sum(jnp.where(has, mass - share, 0.0)) / n_has
    rest = tri & ~match
    out["uniform2"] = L * jnp.sum(jnp.where(rest, A2, 0.0)) / jnp.maximum(jnp.sum(rest), 1)
    return out


def fold_linear_scores(scores: dict) -> dict:
    """Linear attention's scores, each draw folded onto ``copy1 >= 0`` and ``induction2 >= 0``.

    With linear attention and the readout integrated out the posterior is even in each layer's
    sign: M2 -> -M2 flips A2 (the readout's h2 block absorbs it), and M1 -> -M1 flips A1 (the
    h0-h1 blocks of M2 and the readout's h1 block absorb it), so the draws of one mode come in
    four images whose layer-1 scores (``uniform1``, ``copy1``) and layer-2 scores (``induction2``,
    ``uniform2``) differ in sign; ``induction2_excess`` = induction2 - (the dataset's share of
    matches) becomes ``s induction2 - share``. Each draw's layer-1 scores are multiplied by the
    sign of its ``copy1``, its layer-2 scores by the sign of its ``induction2`` (+1 at 0), as the
    one-layer linear draws are folded (:func:`~bayes_attn.algebra.z2_sign`). Arrays of any
    shape, one entry per draw; the layer-2 names may be absent."""
    out = dict(scores)
    copy1 = np.asarray(scores["copy1"])
    s1 = np.where(copy1 < 0, -1.0, 1.0)
    out |= {k: s1 * np.asarray(scores[k]) for k in ("uniform1", "copy1")}
    if "induction2" in scores:
        ind = np.asarray(scores["induction2"])
        s2 = np.where(ind < 0, -1.0, 1.0)
        out |= {"induction2": s2 * ind, "uniform2": s2 * np.asarray(scores["uniform2"]),
                "induction2_excess": np.asarray(scores["induction2_excess"]) + (s2 - 1) * ind}  # fmt: skip
    return out


def relabellings(tokens, V: int) -> np.ndarray:
    """Every relabelling of the tokens: ``(V! * P, L)``, block k the sequences ``tokens`` (P, L)
    with token i renamed ``perm[i]``, ``perm`` the k-th of ``itertools.permutations(range(V))``
    (block 0 the identity, ``tokens`` themselves).

    A dataset closed under relabelling: every potential whose prior is token-exchangeable is then
    exactly invariant under permuting the token rows and columns of the forms, so a MAP that
    breaks the token symmetry on it breaks it spontaneously (docs/validation.md, "Is the symmetry
    breaking spontaneous?")."""
    V = check_int("V", V, 2)
    t = np.asarray(tokens)
    if t.ndim != 2:
        raise ValueError(f"tokens must have shape (P, L), got {t.shape}")
    if t.size and (t.min() < 0 or t.max() >= V):
        raise ValueError(f"tokens must lie in 0..{V - 1} (V = {V}), got {t.min()}..{t.max()}")
    perms = np.array(list(itertools.permutations(range(V))))
    return perms[:, t].reshape(-1, t.shape[1])
