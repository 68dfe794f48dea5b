"""The induction task: causal next-token prediction on in-context Markov chains.

Each sequence draws its own Markov chain and its tokens from it (by default
``InContextMarkov(alpha=1)``, :mod:`bayes_attn.tokens`), and position a is asked for the next
token, y[a] = x[a+1] for a < L - 1; the last position has no target (no wrap-around). Its
target row is all zeros and :attr:`InductionTask.target_mask` says which positions have a
target. The features are the copy task's, psi[a] = (x[a], e_a).

The exact reference predictors (Bayes-optimal, in-context unigram, uniform) and their expected
losses are :mod:`bayes_attn.theory.induction_refs`.

References
----------
docs/theory.md, "The induction task and its reference predictors"; B. L. Edelman, E. Edelman,
S. Goel, E. Malach and N. Tsilivis, "The evolution of statistical induction heads: in-context
learning Markov chains" (NeurIPS 2024).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import check_int
from bayes_attn.task import SequenceTask
from bayes_attn.tokens import InContextMarkov, TokenSource

__all__ = ["InductionTask"]


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
