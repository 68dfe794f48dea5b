"""The copy task and the scales of the Bayesian model.

References
----------
Paper Sec. 2 ("A minimal model for the emergence of copy heads"); docs/theory.md §1 (Level 0).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive, check_tokens


@dataclasses.dataclass(frozen=True)
class CopyTask:
    """Sequences of ``L`` i.i.d. uniform tokens from a vocabulary of ``V``; target y[a] = x[a-1 mod L].

    Parameters
    ----------
    L : int
        Sequence length, at least 2.
    V : int
        Vocabulary size, at least 2.
    """

    L: int
    V: int

    def __post_init__(self):
        object.__setattr__(self, "L", check_int("L", self.L, 2))
        object.__setattr__(self, "V", check_int("V", self.V, 2))

    @classmethod
    def paper(cls) -> CopyTask:
        """The paper's task, L = 25 and V = 5."""
        return cls(L=25, V=5)

    @property
    def n_features(self) -> int:
        """Dimension V + L of the features psi = (onehot, e_a)."""
        return self.V + self.L

    def sample(self, key: jax.Array, P: int) -> jax.Array:
        """Draw ``P`` sequences of integer tokens, shape (P, L)."""
        P = check_int("P", P, 1)
        return jax.random.randint(key, (P, self.L), 0, self.V, dtype=jnp.int32)

    def check(self, tokens):
        """Tokens of this task: integers of shape (P, L) in [0, V), else a ``ValueError`` naming
        ``tokens`` (under ``jit`` only the shape and dtype are checked)."""
        return jnp.asarray(check_tokens(tokens, self.L, self.V))

    def one_hot(self, tokens) -> jax.Array:
        """One-hot inputs x, shape (P, L, V)."""
        return algebra.one_hot(self.check(tokens), self.V)

    def targets(self, tokens) -> jax.Array:
        """Shifted one-hot targets y[a] = x[a-1 mod L], shape (P, L, V)."""
        return algebra.targets(self.check(tokens), self.V)

    def features(self, tokens) -> jax.Array:
        """Features psi[a] = (x[a], e_a), shape (P, L, V + L)."""
        return algebra.features(self.check(tokens), self.V)


@dataclasses.dataclass(frozen=True)
class Hyper:
    """Scales of the Bayesian model (paper Sec. 2 and Table 1; docs/theory.md §1).

    Parameters
    ----------
    chi : float
        Concentration. Weight variances are divided by chi and so is the noise variance.
    g_w : float
        Attention-weight scale g_W (prior variance g_W / chi of the entries of M).
    g_o : float
        Readout scale g_O.
    sigma2 : float
        Noise scale sigma^2 (the likelihood variance is sigma^2 / chi).
    """

    chi: float
    g_w: float
    g_o: float
    sigma2: float

    def __post_init__(self):
        for name in ("chi", "g_w", "g_o", "sigma2"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))

    @classmethod
    def paper(cls) -> Hyper:
        """The paper's Table 1: chi = 30, g_W = g_O = 1, noise level sigma^2 = 30.

        At L = 25, V = 5 this puts the linear second-order P* at 22.76 and the softmax first-order P*
        at 275.97 (docs/theory.md, section 8). ``Hyper(chi=30, g_w=1, g_o=1, sigma2=131.8)`` is the
        scale that puts the linear P* at 100 instead; it is not the paper's.
        """
        return cls(chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)

    def replace(self, **changes) -> Hyper:
        """A copy with some scales changed."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, float]:
        """``{"chi", "g_w", "g_o", "sigma2"}``: the scales, e.g. for a result's attrs."""
        return dataclasses.asdict(self)


def preset_attrs(task: CopyTask, hyper: Hyper) -> dict:
    """The task and the scales as flat attrs (L, V, chi, g_w, g_o, sigma2) for a result file."""
    return {"L": task.L, "V": task.V, **hyper.as_dict()}
