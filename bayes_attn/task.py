"""The copy task and the scales of the Bayesian model.

References
----------
Paper Sec. 2 ("A minimal model for the emergence of copy heads"); docs/theory.md §1 (Level 0).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive, check_tokens
from bayes_attn.tokens import TokenSource, Uniform, parse_tokens


class SequenceTask:
    """What every task of the package shares: ``L`` tokens from a vocabulary of ``V`` drawn from
    a token source (the dataclass fields ``L``, ``V``, ``tokens`` of the task), their checks, the
    one-hot inputs and the features psi[a] = (x[a], e_a). A task adds its targets."""

    def __post_init__(self):
        object.__setattr__(self, "L", check_int("L", self.L, 2))
        object.__setattr__(self, "V", check_int("V", self.V, 2))
        object.__setattr__(self, "tokens", parse_tokens(self.tokens))
        self.tokens.check_vocabulary(self.V)

    @property
    def n_features(self) -> int:
        """Dimension V + L of the features psi = (onehot, e_a)."""
        return self.V + self.L

    def sample(self, key: jax.Array, P: int) -> jax.Array:
        """Draw ``P`` sequences of integer tokens from the task's source, shape (P, L) (with
        ``Uniform()``, ``jax.random.randint(key, (P, L), 0, V)``)."""
        P = check_int("P", P, 1)
        return self.tokens.sample(key, P, self.L, self.V)

    def check(self, tokens):
        """Tokens of this task: integers of shape (P, L) in [0, V), else a ``ValueError`` naming
        ``tokens`` (under ``jit`` only the shape and dtype are checked)."""
        return jnp.asarray(check_tokens(tokens, self.L, self.V))

    def one_hot(self, tokens) -> jax.Array:
        """One-hot inputs x, shape (P, L, V)."""
        return algebra.one_hot(self.check(tokens), self.V)

    def features(self, tokens) -> jax.Array:
        """Features psi[a] = (x[a], e_a), shape (P, L, V + L)."""
        return algebra.features(self.check(tokens), self.V)


@dataclasses.dataclass(frozen=True)
class CopyTask(SequenceTask):
    """Sequences of ``L`` tokens from a vocabulary of ``V``; target y[a] = x[a-1 mod L].

    Parameters
    ----------
    L : int
        Sequence length, at least 2.
    V : int
        Vocabulary size, at least 2.
    tokens : TokenSource or str
        The law of the sequences (:mod:`bayes_attn.tokens`): ``Uniform()`` (the default, i.i.d.
        uniform tokens), ``Zipf(s)``, ``Markov(...)`` or ``InContextMarkov(alpha)``, or its spec
        (``"zipf:s=1"``). It takes part in equality and hashing. The reduced (Level-2) theory
        is derived for uniform tokens and refuses any other source.
    """

    L: int
    V: int
    tokens: TokenSource = Uniform()

    @classmethod
    def paper(cls) -> CopyTask:
        """The paper's task, L = 25 and V = 5."""
        return cls(L=25, V=5)

    def uniform(self) -> CopyTask:
        """The same L and V with uniform tokens (for what only the uniform theory can say, such as
        a starting point)."""
        return CopyTask(self.L, self.V)

    def as_dict(self) -> dict:
        """``{"L", "V", "tokens"}`` for a result's attrs (``tokens`` as its spec)."""
        return {"L": self.L, "V": self.V, "tokens": str(self.tokens)}

    def targets(self, tokens) -> jax.Array:
        """Shifted one-hot targets y[a] = x[a-1 mod L], shape (P, L, V)."""
        return algebra.targets(self.check(tokens), self.V)


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
    """The task and the scales as flat attrs (L, V, tokens, chi, g_w, g_o, sigma2) for a result
    file (``tokens`` as the source's spec); :func:`preset_from_attrs` reads them back."""
    return {**task.as_dict(), **hyper.as_dict()}


def _scalar(value):
    value = np.asarray(value)
    return value.item() if value.size == 1 else value


def preset_from_attrs(attrs) -> tuple[CopyTask, Hyper]:
    """``(task, hyper)`` from a result's attrs (those of :func:`preset_attrs`, or a run record's);
    a file without ``tokens`` (written before token sources) has uniform tokens. A missing key
    raises a ``ValueError`` naming it."""
    a = dict(attrs)
    missing = [k for k in ("L", "V", "chi", "g_w", "g_o", "sigma2") if k not in a]
    if missing:
        raise ValueError(f"{missing[0]}: not in the attrs, so the preset cannot be read back")
    tokens = a.get("tokens", "uniform")
    task = CopyTask(int(_scalar(a["L"])), int(_scalar(a["V"])), str(_scalar(tokens)))
    hyper = Hyper(*(float(_scalar(a[k])) for k in ("chi", "g_w", "g_o", "sigma2")))
    return task, hyper
