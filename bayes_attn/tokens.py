"""Token sources: the law of the copy task's input sequences, one home for every level.

A source is a small frozen dataclass (hashable, so a :class:`~bayes_attn.task.CopyTask` that holds
it stays a static argument of ``jit``) with one method, ``sample(key, P, L, V)``, that draws
integer tokens of shape (P, L):

- :class:`Uniform` (the default): i.i.d. uniform tokens, ``jax.random.randint`` exactly as the
  task always drew them;
- :class:`Zipf`: i.i.d. tokens with p_k proportional to (k + 1)^(-s) (s = 0 is uniform);
- :class:`Markov`: one Markov chain for every sequence, started from its stationary law; a given
  V x V row-stochastic matrix, or one drawn once from a seed (rows ~ Dirichlet(alpha 1));
- :class:`InContextMarkov`: each sequence draws its own chain (rows ~ Dirichlet(alpha 1), or a
  random doubly-stochastic matrix), started from that chain's stationary law, as in the in-context
  Markov-chain task of Edelman et al. (NeurIPS 2024); :meth:`InContextMarkov.sample_with_chains`
  returns the per-sequence matrices beside the tokens.

Every source has a one-line spec (``str(source)``: ``uniform``, ``zipf:s=1``,
``markov:alpha=0.3,seed=2``, ``markov:transition=[[...]]``, ``icl-markov:alpha=1``,
``icl-markov:alpha=1,doubly_stochastic=true``) that :func:`parse_tokens` reads back; the CLI's
``--tokens``, the configs and the results' attrs carry it.

The reduced (Level-2) theory is derived for uniform tokens; :func:`check_uniform` is its gate.

References
----------
docs/theory.md, "Token sources".
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from numbers import Integral, Real
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "InContextMarkov",
    "Markov",
    "TokenSource",
    "Uniform",
    "Zipf",
    "check_uniform",
    "parse_tokens",
    "stationary",
]

ROW_TOLERANCE = 1e-9  # |row sum - 1| allowed in a given transition matrix


# --------------------------------------------------------------------------------------------------
# Checks (the style of bayes_attn._validation: one line naming the parameter)


def _check_nonnegative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"tokens: {name} must be a finite number >= 0, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"tokens: {name} must be a finite number >= 0, got {value!r}")
    return x


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"tokens: {name} must be a positive finite number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"tokens: {name} must be a positive finite number, got {value!r}")
    return x


def _check_seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral | np.integer) or value < 0:
        raise ValueError(f"tokens: seed must be an integer >= 0, got {value!r}")
    return int(value)


def _check_transition(value) -> tuple[tuple[float, ...], ...]:
    """A square, non-negative, row-stochastic matrix (rows sum to 1 within ROW_TOLERANCE), as
    nested tuples of floats."""
    try:
        T = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"tokens: transition must be a V x V matrix of numbers, got {value!r}"
        ) from None
    if T.ndim != 2 or T.shape[0] != T.shape[1] or T.shape[0] < 2:
        raise ValueError(f"tokens: transition must be a V x V matrix (V >= 2), got shape {T.shape}")
    if not np.all(np.isfinite(T)):
        raise ValueError("tokens: transition must be finite (got NaN or inf entries)")
    if np.any(T < 0):
        raise ValueError(f"tokens: transition must be non-negative, got min entry {T.min():g}")
    err = np.abs(T.sum(axis=1) - 1.0)
    if np.any(err > ROW_TOLERANCE):
        i = int(np.argmax(err))
        raise ValueError(
            f"tokens: transition rows must sum to 1 (within {ROW_TOLERANCE:g}); row {i} sums to "
            f"{T[i].sum():.12g}"
        )
    return tuple(tuple(float(x) for x in row) for row in T)


def _num(x: float) -> str:
    """A float in the spec: exact (``repr``), without a trailing ``.0``."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


# --------------------------------------------------------------------------------------------------
# Sampling kernels (jitted; shapes static)


#: up to this V the inverse CDF compares u with every cumulative value; above it, binary search
LINEAR_SEARCH_MAX_V = 8


def _inverse_cdf(cdf, u):
    """Index k with cdf[k-1] <= u < cdf[k]: the count of the first V-1 cumulative values <= u
    (never V, whatever rounding left in the last one). ``cdf`` is (V,) or u's shape + (V,). Above
    ``LINEAR_SEARCH_MAX_V`` by :func:`_search` (the same index: ``cdf`` is non-decreasing)."""
    V = cdf.shape[-1]
    if V <= LINEAR_SEARCH_MAX_V:
        return jnp.sum(cdf[..., :-1] <= u[..., None], axis=-1, dtype=jnp.int32)
    if cdf.ndim == 1:
        return _search(lambda m: cdf[m], u, V)
    return _search(lambda m: jnp.take_along_axis(cdf, m[..., None], axis=-1)[..., 0], u, V)


def _search(value_at, u, V: int):
    """The count of the first V-1 values of a non-decreasing sequence that are <= u, by
    ceil(log2 V) halvings of [lo, hi] (each one gather of ``value_at(mid)``, mid <= V-2, per
    element): the linear count's index, bit for bit, at log2 V instead of V-1 comparisons and no
    (..., V) row in memory (at V = 64 the row gather of a chain step was most of its time)."""
    lo = jnp.zeros(u.shape, jnp.int32)
    hi = jnp.full(u.shape, V - 1, jnp.int32)
    for _ in range(math.ceil(math.log2(V))):
        mid = (lo + hi) // 2
        active = lo < hi
        right = value_at(jnp.where(active, mid, 0)) <= u
        lo = jnp.where(active & right, mid + 1, lo)
        hi = jnp.where(active & ~right, mid, hi)
    return lo


def stationary(T):
    """The stationary law of the row-stochastic matrices ``T`` (..., V, V), by the
    Grassmann-Taksar-Heyman elimination (no subtraction, no pivoting: stable for any irreducible
    chain; a state that cannot be left is guarded by a tiny floor)."""
    T = jnp.asarray(T)
    V = T.shape[-1]
    tiny = jnp.finfo(T.dtype).tiny
    A = T
    for n in range(V - 1, 0, -1):
        s = jnp.maximum(jnp.sum(A[..., n, :n], axis=-1), tiny)  # mass leaving n downwards
        col = A[..., :n, n] / s[..., None]
        A = A.at[..., :n, n].set(col)
        A = A.at[..., :n, :n].add(col[..., :, None] * A[..., n, None, :n])
    pis = [jnp.ones(T.shape[:-2], T.dtype)]
    for n in range(1, V):
        pi_prev = jnp.stack(pis, axis=-1)
        pis.append(jnp.sum(pi_prev * A[..., :n, n], axis=-1))
    pi = jnp.stack(pis, axis=-1)
    return pi / jnp.sum(pi, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("P", "L", "V"))
def _randint(key, P: int, L: int, V: int):
    """``jax.random.randint(key, (P, L), 0, V)`` compiled as one program (the same bits; called
    op by op, eagerly, it took up to 1.7 times as long: ``benchmarks/bench_tokens.py``)."""
    return jax.random.randint(key, (P, L), 0, V, dtype=jnp.int32)


@functools.partial(jax.jit, static_argnames=("P", "L"))
def _iid(key, cdf, P: int, L: int):
    u = jax.random.uniform(key, (P, L), dtype=cdf.dtype)
    return _inverse_cdf(cdf, u)


def _chain(key, start_cdf, cum, P: int, L: int):
    """Tokens (P, L) of chains with per-sequence (or shared) cumulative rows ``cum`` ((P,) V, V),
    the first token from ``start_cdf`` ((P,) V): a scan over positions, each drawing one uniform
    per sequence (``key`` split per position) and comparing it with the previous token's row. The
    uniforms are drawn inside the scan, not as one (P, L) array first: less memory traffic, about
    twice as fast on a CPU (``benchmarks/bench_tokens.py``)."""
    keys = jax.random.split(key, L)
    dtype = cum.dtype
    x0 = _inverse_cdf(start_cdf, jax.random.uniform(keys[0], (P,), dtype=dtype))
    shared = cum.ndim == 2

    V = cum.shape[-1]
    rows_P = jnp.arange(P)

    def step(x, k):
        u = jax.random.uniform(k, (P,), dtype=dtype)
        if V > LINEAR_SEARCH_MAX_V:  # gather one cumulative value per halving, not the row
            at = (lambda m: cum[x, m]) if shared else (lambda m: cum[rows_P, x, m])
            nxt = _search(at, u, V)
        else:
            rows = cum[x] if shared else jnp.take_along_axis(cum, x[:, None, None], axis=1)[:, 0]
            nxt = _inverse_cdf(rows, u)
        return nxt, nxt

    _, rest = jax.lax.scan(step, x0, keys[1:])
    return jnp.concatenate([x0[None], rest], axis=0).T


@functools.partial(jax.jit, static_argnames=("P", "L"))
def _markov(key, T, P: int, L: int):
    pi = stationary(T)
    return _chain(key, jnp.cumsum(pi), jnp.cumsum(T, axis=-1), P, L)


def _log_gamma(key, alpha: float, shape):
    """log of Gamma(alpha, 1) draws, exactly, in vectorised rejection rounds.

    ``jax.random.gamma`` runs a rejection loop per element, which is slow on a CPU for millions of
    draws. Here Marsaglia and Tsang's method proposes once for every element; the few rejected
    ones (under 5 %) are gathered into a buffer of an eighth of the size, where rounds of fresh
    proposals run until each has accepted once, and any left over (never, in practice) finish in
    full-size rounds. Every element keeps its first accepted proposal, so the draws are exact.
    alpha = 1 is an exponential draw; alpha < 1 is boosted, Gamma(alpha) = Gamma(alpha + 1)
    U^(1/alpha), in logs (no underflow at small alpha)."""
    if alpha == 1.0:
        return jnp.log(jax.random.exponential(key, shape, dtype=jnp.float64))
    a = alpha if alpha >= 1.0 else alpha + 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    k_boost, k_first, k_buffer, k_rest = jax.random.split(key, 4)
    n = math.prod(shape)
    m = n // 8 + 64  # the buffer of rejected elements

    def propose(k, size):
        k_x, k_u = jax.random.split(k)
        x = jax.random.normal(k_x, (size,), dtype=jnp.float64)
        v = (1.0 + c * x) ** 3
        logu = jnp.log(jax.random.uniform(k_u, (size,), dtype=jnp.float64))
        safe_v = jnp.where(v > 0, v, 1.0)
        ok = (v > 0) & (logu < 0.5 * x**2 + d - d * safe_v + d * jnp.log(safe_v))
        return ok, jnp.log(d) + jnp.log(safe_v)

    def rounds(k, done, out):
        def body(state):
            i, done, out = state
            ok, value = propose(jax.random.fold_in(k, i), done.shape[0])
            return i + 1, done | ok, jnp.where(ok & ~done, value, out)

        _, done, out = jax.lax.while_loop(lambda s: ~jnp.all(s[1]), body, (0, done, out))
        return done, out

    ok, out = propose(k_first, n)
    idx = jnp.nonzero(~ok, size=m, fill_value=n)[0]  # n: an empty slot
    done_b, out_b = rounds(k_buffer, idx == n, jnp.zeros(m))
    ok = ok.at[idx].set(done_b, mode="drop")
    out = out.at[idx].set(out_b, mode="drop")
    _, out = rounds(k_rest, ok, out)  # more rejections than the buffer holds: no round in practice
    out = out.reshape(shape)
    if alpha < 1.0:
        out = out + jnp.log(jax.random.uniform(k_boost, shape, dtype=jnp.float64)) / alpha
    return out


def _dirichlet(key, alpha: float, shape, V: int):
    """Dirichlet(alpha 1) vectors of length V, shape (*shape, V): normalised Gamma draws, in logs."""
    return jax.nn.softmax(_log_gamma(key, alpha, (*shape, V)), axis=-1)


@functools.partial(jax.jit, static_argnames=("alpha", "P", "V", "doubly"))
def _chains(key, alpha: float, P: int, V: int, doubly: bool):
    """Per-sequence transition matrices (P, V, V): rows ~ Dirichlet(alpha 1), or (``doubly``) a
    Dirichlet(alpha 1) mixture of V uniformly random permutation matrices."""
    if not doubly:
        return _dirichlet(key, alpha, (P, V), V)
    k_w, k_p = jax.random.split(key)
    w = _dirichlet(k_w, alpha, (P,), V)  # (P, K = V)
    perms = jnp.argsort(jax.random.uniform(k_p, (P, V, V)), axis=-1)  # (P, K, V): row -> column
    onehots = jax.nn.one_hot(perms, V, dtype=w.dtype)  # (P, K, V, V)
    return jnp.einsum("pk,pkij->pij", w, onehots)


#: the laws of an in-context chain's first token: its stationary law, or uniform
STARTS = ("stationary", "uniform")


@functools.partial(jax.jit, static_argnames=("alpha", "P", "L", "V", "doubly", "start"))
def _icl(key, alpha: float, P: int, L: int, V: int, doubly: bool, start: str = "stationary"):
    k_T, k_u = jax.random.split(key)
    T = _chains(k_T, alpha, P, V, doubly)
    if doubly or start == "uniform":  # a doubly-stochastic chain's stationary law is uniform
        start = jnp.broadcast_to(jnp.arange(1, V + 1, dtype=T.dtype) / V, (P, V))
    else:
        start = jnp.cumsum(stationary(T), axis=-1)
    return _chain(k_u, start, jnp.cumsum(T, axis=-1), P, L), T


# --------------------------------------------------------------------------------------------------
# The sources


class TokenSource:
    """The interface of a source: ``sample(key, P, L, V)``, its spec ``str(source)``, whether its
    law is i.i.d. uniform (``uniform_law``), and ``check_vocabulary(V)``."""

    name: ClassVar[str]
    uniform_law: ClassVar[bool] = False

    def sample(self, key, P: int, L: int, V: int) -> jax.Array:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_vocabulary(self, V: int) -> None:
        """Raise a ``ValueError`` naming ``tokens`` if the source cannot draw from ``V`` tokens."""

    def __str__(self) -> str:
        return self.spec

    @property
    def spec(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Uniform(TokenSource):
    """I.i.d. uniform tokens: ``jax.random.randint(key, (P, L), 0, V)``, bit for bit the draws of
    every earlier version of the package."""

    name: ClassVar[str] = "uniform"
    uniform_law: ClassVar[bool] = True

    @property
    def spec(self) -> str:
        return "uniform"

    def sample(self, key, P: int, L: int, V: int) -> jax.Array:
        return _randint(key, int(P), int(L), int(V))


@dataclasses.dataclass(frozen=True)
class Zipf(TokenSource):
    """I.i.d. tokens with p_k proportional to (k + 1)^(-s), k = 0..V-1 (s = 0: uniform, though
    drawn by the inverse CDF, not by ``randint``)."""

    s: float = 1.0
    name: ClassVar[str] = "zipf"

    def __post_init__(self):
        object.__setattr__(self, "s", _check_nonnegative("s", self.s))

    @property
    def uniform_law(self) -> bool:  # type: ignore[override]
        return self.s == 0.0

    @property
    def spec(self) -> str:
        return f"zipf:s={_num(self.s)}"

    def probabilities(self, V: int) -> np.ndarray:
        p = np.arange(1, V + 1, dtype=float) ** (-self.s)
        return p / p.sum()

    def sample(self, key, P: int, L: int, V: int) -> jax.Array:
        cdf = jnp.asarray(np.cumsum(self.probabilities(V)))
        return _iid(key, cdf, int(P), int(L))


@dataclasses.dataclass(frozen=True)
class Markov(TokenSource):
    """One Markov chain for every sequence, each sequence started from the chain's stationary law
    (so every position has that law).

    Either a given V x V row-stochastic ``transition`` (kept as nested tuples of floats, so the
    source stays hashable), or ``Markov.dirichlet(alpha, seed)``: a matrix with rows
    ~ Dirichlet(alpha 1), drawn once from ``seed`` for the task's V (NumPy's generator, so the
    same on every machine and JAX version).
    """

    transition: tuple | None = None
    alpha: float | None = None
    seed: int | None = None
    name: ClassVar[str] = "markov"

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        if self.transition is not None:
            if self.alpha is not None or self.seed is not None:
                raise ValueError("tokens: give a Markov source transition, or alpha and seed")
            set_("transition", _check_transition(self.transition))
        elif self.alpha is None:
            raise ValueError("tokens: a Markov source needs transition, or alpha (and seed)")
        else:
            set_("alpha", _check_positive("alpha", self.alpha))
            set_("seed", _check_seed(0 if self.seed is None else self.seed))

    @classmethod
    def dirichlet(cls, alpha: float, seed: int = 0) -> Markov:
        """A chain with rows ~ Dirichlet(alpha 1), drawn from ``seed`` for the task's V."""
        return cls(alpha=alpha, seed=seed)

    @property
    def spec(self) -> str:
        if self.transition is not None:
            return "markov:transition=" + json.dumps([list(r) for r in self.transition])
        return f"markov:alpha={_num(self.alpha)},seed={self.seed}"

    @property
    def uniform_law(self) -> bool:  # type: ignore[override]
        if self.transition is None:
            return False
        T = np.asarray(self.transition)
        return bool(np.all(T == T[0, 0]))

    def check_vocabulary(self, V: int) -> None:
        if self.transition is not None and len(self.transition) != V:
            n = len(self.transition)
            raise ValueError(
                f"tokens: the Markov transition is {n} x {n}, but the task has V = {V}"
            )

    def matrix(self, V: int) -> np.ndarray:
        """The V x V transition matrix."""
        self.check_vocabulary(V)
        if self.transition is not None:
            return np.asarray(self.transition, dtype=float)
        T = np.random.default_rng(self.seed).dirichlet(np.full(V, self.alpha), size=V)
        return T / T.sum(axis=1, keepdims=True)

    def sample(self, key, P: int, L: int, V: int) -> jax.Array:
        return _markov(key, jnp.asarray(self.matrix(V)), int(P), int(L))

    def sample_with_chains(self, key, P: int, L: int, V: int):
        """``(tokens, T)``: the tokens of :meth:`sample` and the (V, V) matrix they follow."""
        T = jnp.asarray(self.matrix(V))
        return _markov(key, T, int(P), int(L)), T


@dataclasses.dataclass(frozen=True)
class InContextMarkov(TokenSource):
    """Each sequence draws its own chain, then its tokens from it, the first from that chain's
    stationary law (``start="stationary"``, the default) or uniformly and independently of the
    chain (``start="uniform"``: then the Dirichlet-smoothed bigram counts are the exact posterior
    mean of the next token, docs/theory.md §12).

    The chain's rows are i.i.d. Dirichlet(alpha 1) or, with ``doubly_stochastic``, the matrix is a
    mixture of V uniformly random permutation matrices with Dirichlet(alpha 1) weights (rows and
    columns sum to 1; its stationary law is uniform). :meth:`sample_with_chains` returns the
    matrices beside the tokens (for Bayes-optimal references).
    """

    alpha: float = 1.0
    doubly_stochastic: bool = False
    start: str = "stationary"
    name: ClassVar[str] = "icl-markov"

    def __post_init__(self):
        object.__setattr__(self, "alpha", _check_positive("alpha", self.alpha))
        if not isinstance(self.doubly_stochastic, bool | np.bool_):
            raise ValueError(
                f"tokens: doubly_stochastic must be true or false, got {self.doubly_stochastic!r}"
            )
        object.__setattr__(self, "doubly_stochastic", bool(self.doubly_stochastic))
        if self.start not in STARTS:
            raise ValueError(
                f"tokens: start must be one of {', '.join(STARTS)}, got {self.start!r}"
            )

    @property
    def spec(self) -> str:
        extra = ",doubly_stochastic=true" if self.doubly_stochastic else ""
        extra += f",start={self.start}" if self.start != "stationary" else ""
        return f"icl-markov:alpha={_num(self.alpha)}{extra}"

    def sample_with_chains(self, key, P: int, L: int, V: int):
        """``(tokens, T)``: tokens (P, L) and each sequence's transition matrix, (P, V, V)."""
        return _icl(key, self.alpha, int(P), int(L), int(V), self.doubly_stochastic, self.start)

    def sample(self, key, P: int, L: int, V: int) -> jax.Array:
        return self.sample_with_chains(key, P, L, V)[0]


SOURCES = {c.name: c for c in (Uniform, Zipf, Markov, InContextMarkov)}


# --------------------------------------------------------------------------------------------------
# Specs


def _value(key: str, text: str):
    """A spec value: JSON (numbers, true/false, lists), else the text itself (``start``)."""
    if key == "start":
        return text.strip().lower()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        if low == "nan":
            return float("nan")
        raise ValueError(f"tokens: {key} has the value {text!r}, not a number") from None


def _from_fields(name: str, fields: dict) -> TokenSource:
    cls = SOURCES.get(name)
    if cls is None:
        raise ValueError(f"tokens: unknown source {name!r}; known: {', '.join(SOURCES)}")
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(fields) - set(known))
    if unknown:
        keys = ", ".join(known) if known else "none"
        raise ValueError(f"tokens: unknown key {unknown[0]!r} for {name} (known: {keys})")
    return cls(**fields)


def parse_tokens(spec) -> TokenSource:
    """A source from a spec: a source (returned as is), None (``Uniform()``), a string
    ``name[:key=value,...]`` (``str(source)`` reads back) or a mapping ``{"source": name, ...}``
    (a TOML table). Bad input raises one ``ValueError`` naming ``tokens`` and the parameter."""
    if spec is None:
        return Uniform()
    if isinstance(spec, TokenSource):
        return spec
    if isinstance(spec, dict):
        fields = dict(spec)
        name = fields.pop("source", None)
        if not isinstance(name, str):
            raise ValueError(f"tokens: a table needs source = one of {', '.join(SOURCES)}")
        return _from_fields(name.strip().lower(), fields)
    if not isinstance(spec, str):
        raise ValueError(f"tokens: expected a spec such as 'zipf:s=1', got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    name, rest = name.strip().lower(), rest.strip()
    fields = {}
    if rest.startswith("transition="):  # a JSON matrix, whose commas are its own
        fields["transition"] = _value("transition", rest.removeprefix("transition="))
    elif rest:
        for item in rest.split(","):
            key, eq, text = item.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ValueError(f"tokens: {item.strip()!r} in {spec!r} is not key=value")
            fields[key] = _value(key, text.strip())
    return _from_fields(name, fields)


def check_uniform(source: TokenSource, what: str = "the reduced (Level-2) theory") -> None:
    """Raise a ``ValueError`` naming ``tokens`` unless ``source`` draws i.i.d. uniform tokens."""
    if not parse_tokens(source).uniform_law:
        raise ValueError(f"tokens: {what} is derived for uniform tokens only; got {source}")
