"""The reference predictors of the induction task, and their expected losses.

For a batch of tokens (P, L), every predictor here returns the predicted law of the next token at
each position a < L - 1, shape (P, L - 1, V) (position a has seen x[0..a]):

- :func:`bigram`, the Dirichlet-smoothed in-context bigram counts (n_ij + alpha) / (n_i + V alpha),
  i = x[a], n_ij the transitions i -> j inside x[0..a]; :func:`bayes_optimal` is it at the source's
  alpha. Under the package's Gaussian likelihood the best predictor is the posterior mean of the
  next one-hot token; the Dirichlet bigram is that mean when the first token is drawn independently
  of the chain. The package's ``InContextMarkov`` starts each chain from its stationary law, and
  then the first token is evidence too: :func:`posterior_mean` is the exact posterior mean of that
  source (importance sampling), a little better than the bigram (docs/theory.md);
- :func:`unigram`, the smoothed in-context unigram counts (n_j + alpha) / (a + 1 + V alpha),
  n_j the occurrences of j in x[0..a];
- :func:`uniform`, 1 / V;
- :func:`empirical_bigram`, the unsmoothed n_ij / n_i (all zeros where n_i = 0), the target of a
  hand-built induction circuit.

Losses follow the package's Gaussian-likelihood convention (``theory.action.loss_per_token``, the
protocol's train loss): 1/2 sum_j (y_j - f_j)^2 per token, averaged here over the sequences and the
positions that have a target. :func:`kl_to_strategies` is the metric of Edelman et al.: the mean
over those positions of KL(p_strategy || f_hat), f_hat the model's output clipped at a floor and
renormalised (:func:`to_distribution`).

Expected losses: :func:`exact_expected_losses` (all V^L sequences weighted by the Dirichlet-Markov
marginal in closed form, a product of Polya-urn factors, exact for a chain whose first token is
uniform), :func:`enumerated_expected_losses` (all V^L sequences, exactly given each chain, averaged
over chains drawn from the package's source, which starts each chain from its stationary law; it
also gives the exact posterior predictive of that source) and :func:`monte_carlo_expected_losses`
(sequences drawn from the task, with standard errors), for larger L and V.

References
----------
docs/theory.md, "The induction task and its reference predictors"; B. L. Edelman, E. Edelman,
S. Goel, E. Malach and N. Tsilivis, "The evolution of statistical induction heads: in-context
learning Markov chains" (NeurIPS 2024).
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, xlogy

from bayes_attn._validation import check_int, check_positive, check_tokens
from bayes_attn.induction import InductionTask
from bayes_attn.tokens import InContextMarkov, _log_gamma, stationary

__all__ = [
    "DEFAULT_FLOOR",
    "MAX_ENUMERATED",
    "STRATEGIES",
    "all_sequences",
    "bayes_optimal",
    "bigram",
    "compare_to_strategies",
    "empirical_bigram",
    "enumerated_expected_losses",
    "enumerated_posterior",
    "exact_expected_losses",
    "kl_to_strategies",
    "loss_per_sequence",
    "loss_per_token",
    "monte_carlo_expected_losses",
    "polya_log_marginal",
    "posterior_mean",
    "strategies",
    "to_distribution",
    "transition_counts",
    "unigram",
    "unigram_counts",
    "uniform",
]

#: the three references, in order of decreasing expected loss: uniform, unigram, bigram
STRATEGIES = ("bigram", "unigram", "uniform")
#: the floor at which a model's output is clipped before it is renormalised (to_distribution)
DEFAULT_FLOOR = 1e-4
#: the largest V^L that the enumerations accept
MAX_ENUMERATED = 2**16


# --------------------------------------------------------------------------------------------------
# Counts and predictors


def _tokens(tokens, V: int) -> jax.Array:
    t = jnp.asarray(check_tokens(tokens, None, V))
    if t.shape[-1] < 2:
        raise ValueError(f"tokens must have L >= 2 positions, got shape {t.shape}")
    return t


def _x(tokens, V: int) -> jax.Array:
    return jax.nn.one_hot(_tokens(tokens, V), V, dtype=jnp.float64)


def transition_counts(tokens, V: int) -> jax.Array:
    """n[p, a, j]: how often x[p, a] was followed by j inside x[p, 0..a], for a < L - 1:
    (P, L - 1, V)."""
    x = _x(tokens, V)
    pairs = x[:, :-1, :, None] * x[:, 1:, None, :]  # (P, L-1, V, V): transition b -> b+1
    done = jnp.cumsum(pairs, axis=1)  # transitions completed by position b + 1
    seen = jnp.concatenate([jnp.zeros_like(done[:, :1]), done[:, :-1]], axis=1)  # by position a
    return jnp.einsum("pai,paij->paj", x[:, :-1], seen)


def unigram_counts(tokens, V: int) -> jax.Array:
    """n[p, a, j]: the occurrences of j in x[p, 0..a], for a < L - 1: (P, L - 1, V)."""
    return jnp.cumsum(_x(tokens, V), axis=1)[:, :-1]


def bigram(tokens, V: int, alpha: float) -> jax.Array:
    """Dirichlet-smoothed in-context bigram, (n_ij + alpha) / (n_i + V alpha) with i = x[a]:
    (P, L - 1, V)."""
    alpha = check_positive("alpha", alpha)
    n = transition_counts(tokens, V)
    return (n + alpha) / (jnp.sum(n, axis=-1, keepdims=True) + V * alpha)


def empirical_bigram(tokens, V: int) -> jax.Array:
    """Unsmoothed in-context bigram n_ij / n_i with i = x[a]; rows where x[a] has not yet been
    followed by anything (n_i = 0) are all zeros: (P, L - 1, V)."""
    n = transition_counts(tokens, V)
    tot = jnp.sum(n, axis=-1, keepdims=True)
    return jnp.where(tot > 0, n / jnp.maximum(tot, 1.0), 0.0)


def unigram(tokens, V: int, alpha: float) -> jax.Array:
    """Smoothed in-context unigram (n_j + alpha) / (a + 1 + V alpha), n_j the occurrences of j in
    x[0..a] (the posterior mean under i.i.d. tokens with a Dirichlet(alpha 1) law):
    (P, L - 1, V)."""
    alpha = check_positive("alpha", alpha)
    n = unigram_counts(tokens, V)
    return (n + alpha) / (jnp.sum(n, axis=-1, keepdims=True) + V * alpha)


def uniform(tokens, V: int) -> jax.Array:
    """1 / V everywhere: (P, L - 1, V)."""
    t = _tokens(tokens, V)
    return jnp.full((t.shape[0], t.shape[1] - 1, V), 1.0 / V)


def _alpha(task: InductionTask, what: str) -> float:
    src = task.tokens
    if not isinstance(src, InContextMarkov):
        raise ValueError(f"tokens: {what}: defined for an in-context Markov source, got {src}")
    return src.alpha


def bayes_optimal(task: InductionTask, tokens) -> jax.Array:
    """The Dirichlet-bigram reference of an ``InContextMarkov(alpha)`` task, :func:`bigram` at the
    source's alpha: the posterior mean of the next token, hence Bayes-optimal under the Gaussian
    likelihood, for a first token independent of the chain: exact for
    ``InContextMarkov(alpha, start="uniform")``. The default source starts from the chain's
    stationary law, whose exact posterior mean is :func:`posterior_mean` (lower expected loss by
    0.00135 at L = 16, V = 3, alpha = 1). For a doubly-stochastic source it is not the posterior mean (the rows are
    not independent Dirichlet vectors), and this raises a ``ValueError`` naming ``tokens``
    (:func:`strategies` still gives the bigram reference of Edelman et al. there)."""
    alpha = _alpha(task, "the Bayes-optimal predictor")
    if task.tokens.doubly_stochastic:
        raise ValueError(
            "tokens: the Dirichlet bigram is not the posterior mean of a doubly-stochastic chain; "
            "use strategies(...)['bigram'] as the bigram reference"
        )
    return bigram(task.check(tokens), task.V, alpha)


def posterior_mean(task: InductionTask, tokens, key=None, n_draws: int = 256) -> jax.Array:
    """The exact posterior mean of the next token under the package's ``InContextMarkov(alpha)``
    source, whose chains start from their stationary law pi: (P, L - 1, V).

    Given x[0..a] the posterior of the chain is the Dirichlet posterior of its rows (the Polya
    update, rows ~ Dirichlet(n_i + alpha)) reweighted by pi_T(x[0]), which no closed form
    integrates. It is estimated by self-normalised importance sampling: ``n_draws`` chains from the
    Dirichlet posterior of each prefix, weighted by pi_T(x[0]) (a weight in (0, 1], so the
    estimate is stable); the estimate of E[T[x_a, j]] is Rao-Blackwellised over the row. Its bias
    and noise are O(1 / n_draws). Without the weight this is :func:`bigram`, which is what a
    source with ``start="uniform"`` gets, exactly."""
    alpha = _alpha(task, "the posterior mean")
    if task.tokens.doubly_stochastic:
        raise ValueError(
            "tokens: posterior_mean is derived for Dirichlet rows, not doubly stochastic"
        )
    if task.tokens.start == "uniform":  # x[0] says nothing of the chain: the Polya bigram
        return bigram(task.check(tokens), task.V, alpha)
    n_draws = check_int("n_draws", n_draws, 1)
    key = jax.random.key(0) if key is None else key
    t = task.check(tokens)
    return _posterior_mean(key, t, task.V, alpha, n_draws)


@functools.partial(jax.jit, static_argnames=("V", "alpha", "n_draws"))
def _posterior_mean_chunk(key, t, V: int, alpha: float, n_draws: int):
    """Dirichlet(n + alpha) rows as normalised Gamma(n + alpha) draws, Gamma(n + alpha) =
    Gamma(alpha) + (a sum of n unit exponentials): the sums are running sums along the counts, so
    one set of exponentials serves every position (each position's draws are exact)."""
    P, L = t.shape
    x = jax.nn.one_hot(t, V, dtype=jnp.float64)
    pairs = x[:, :-1, :, None] * x[:, 1:, None, :]
    done = jnp.cumsum(pairs, axis=1)
    seen = jnp.concatenate([jnp.zeros_like(done[:, :1]), done[:, :-1]], axis=1)  # (P, L-1, V, V)
    k0, k1 = jax.random.split(key)
    g0 = jnp.exp(_log_gamma(k0, alpha, (P, 1, n_draws, V, V)))
    e = jax.random.exponential(k1, (P, n_draws, V, V, L - 1), dtype=jnp.float64)
    s = jnp.concatenate([jnp.zeros_like(e[..., :1]), jnp.cumsum(e, axis=-1)], axis=-1)
    n = seen.astype(jnp.int32)[:, :, None]  # (P, L-1, 1, V, V)
    s = jnp.broadcast_to(s[:, None], (P, L - 1, n_draws, V, V, L))
    g = g0 + jnp.take_along_axis(s, jnp.broadcast_to(n, s.shape[:-1])[..., None], axis=-1)[..., 0]
    T = g / jnp.sum(g, axis=-1, keepdims=True)  # (P, L-1, K, V, V)
    w = jnp.einsum("pakv,pv->pak", stationary(T), x[:, 0])  # pi_T(x[0])
    row = jnp.einsum("pakij,pai->pakj", T, x[:, :-1])  # the row of the current token
    return jnp.einsum("pak,pakj->paj", w, row) / jnp.sum(w, axis=-1)[..., None]


def _posterior_mean(key, t, V: int, alpha: float, n_draws: int, chunk: int = 256):
    """:func:`_posterior_mean_chunk` over chunks of sequences, the last padded (one compile)."""
    P = t.shape[0]
    chunk = min(chunk, P)
    pad = -P % chunk
    t = jnp.concatenate([t, jnp.broadcast_to(t[:1], (pad, t.shape[1]))], axis=0)
    out = [
        _posterior_mean_chunk(jax.random.fold_in(key, i), t[i : i + chunk], V, alpha, n_draws)
        for i in range(0, P + pad, chunk)
    ]
    return jnp.concatenate(out, axis=0)[:P]


def strategies(task: InductionTask, tokens) -> dict[str, jax.Array]:
    """The three references at the source's alpha: ``{"bigram", "unigram", "uniform"}``, each
    (P, L - 1, V). ``bigram`` is the Bayes-optimal predictor for Dirichlet rows and the bigram
    reference of Edelman et al. for a doubly-stochastic source."""
    alpha = _alpha(task, "the reference predictors")
    t = task.check(tokens)
    return {
        "bigram": bigram(t, task.V, alpha),
        "unigram": unigram(t, task.V, alpha),
        "uniform": uniform(t, task.V),
    }


# --------------------------------------------------------------------------------------------------
# Losses and KL


def _predictions(f, P: int, L: int, V: int) -> jax.Array:
    f = jnp.asarray(f)
    if f.shape == (P, L, V):
        return f[:, :-1]
    if f.shape != (P, L - 1, V):
        raise ValueError(f"predictions must have shape (P, L, V) or (P, L - 1, V), got {f.shape}")
    return f


def loss_per_sequence(predictions, tokens, V: int) -> jax.Array:
    """1/2 sum_j (y_j - f_j)^2 averaged over the positions with a target, per sequence: (P,).
    ``predictions`` (P, L - 1, V), or a model's outputs (P, L, V) whose last row is ignored."""
    t = _tokens(tokens, V)
    P, L = t.shape
    f = _predictions(predictions, P, L, V)
    y = jax.nn.one_hot(t[:, 1:], V, dtype=jnp.float64)
    return 0.5 * jnp.mean(jnp.sum((y - f) ** 2, axis=-1), axis=-1)


def loss_per_token(predictions, tokens, V: int) -> jax.Array:
    """The package's loss per token, 1/2 sum_j (y_j - f_j)^2, averaged over the sequences and the
    positions with a target (:func:`loss_per_sequence` averaged): a scalar."""
    return jnp.mean(loss_per_sequence(predictions, tokens, V))


def to_distribution(f, floor: float = DEFAULT_FLOOR) -> jax.Array:
    """A model's real output vectors (..., V) as laws: clipped below at ``floor``, then
    renormalised over the last axis."""
    floor = check_positive("floor", floor)
    g = jnp.maximum(jnp.asarray(f), floor)
    return g / jnp.sum(g, axis=-1, keepdims=True)


def _kl(p, q) -> jax.Array:
    """KL(p || q) over the last axis, with 0 log 0 = 0."""
    return jnp.sum(xlogy(p, p) - xlogy(p, q), axis=-1)


def kl_to_strategies(
    task: InductionTask, tokens, outputs, floor: float = DEFAULT_FLOOR, per_sequence: bool = False
) -> dict[str, jax.Array]:
    """KL(p_strategy || f_hat) averaged over the positions with a target (and the sequences,
    unless ``per_sequence``), for each of :func:`strategies`; f_hat is
    ``to_distribution(outputs, floor)``. ``outputs`` (P, L, V) or (P, L - 1, V)."""
    t = task.check(tokens)
    P, L = t.shape
    f = to_distribution(_predictions(outputs, P, L, task.V), floor)
    out = {}
    for name, p in strategies(task, t).items():
        k = jnp.mean(_kl(p, f), axis=-1)
        out[name] = k if per_sequence else jnp.mean(k)
    return out


def compare_to_strategies(
    task: InductionTask, tokens, outputs, floor: float = DEFAULT_FLOOR
) -> dict[str, float]:
    """A model's held-out loss beside the three references on the same tokens, and its KL to each:
    ``{"loss", "loss_bigram", "loss_unigram", "loss_uniform", "kl_bigram", "kl_unigram",
    "kl_uniform"}`` (floats)."""
    t = task.check(tokens)
    out = {"loss": float(loss_per_token(outputs, t, task.V))}
    for name, p in strategies(task, t).items():
        out[f"loss_{name}"] = float(loss_per_token(p, t, task.V))
    for name, k in kl_to_strategies(task, t, outputs, floor).items():
        out[f"kl_{name}"] = float(k)
    return out


# --------------------------------------------------------------------------------------------------
# Expected losses


def _check_enumerable(task: InductionTask) -> None:
    if task.V**task.L > MAX_ENUMERATED:
        raise ValueError(
            f"L: V^L = {task.V}^{task.L} sequences is more than the {MAX_ENUMERATED} the "
            "enumeration accepts; use monte_carlo_expected_losses"
        )


def all_sequences(L: int, V: int) -> np.ndarray:
    """Every sequence of L tokens from V, (V^L, L), in lexicographic order (x[0] slowest)."""
    L, V = check_int("L", L, 1), check_int("V", V, 2)
    return np.array(list(itertools.product(range(V), repeat=L)), dtype=np.int32)


def _pair_counts(seqs, V: int) -> jax.Array:
    """Transition counts of whole sequences, (N, V, V)."""
    x = _x(seqs, V)
    return jnp.einsum("nbi,nbj->nij", x[:, :-1], x[:, 1:])


def polya_log_marginal(seqs, V: int, alpha: float) -> jax.Array:
    """log of the probability of each sequence (N, L) under a chain with rows ~ Dirichlet(alpha 1)
    and a uniform first token: log(1/V) + sum_i [log G(V a) - log G(n_i + V a)
    + sum_j (log G(n_ij + a) - log G(a))], G the Gamma function: (N,)."""
    alpha = check_positive("alpha", alpha)
    n = _pair_counts(seqs, V)
    rows = gammaln(V * alpha) - gammaln(jnp.sum(n, axis=-1) + V * alpha)
    cells = jnp.sum(gammaln(n + alpha) - gammaln(alpha), axis=-1)
    return -math.log(V) + jnp.sum(rows + cells, axis=-1)


def _sequence_losses(task: InductionTask, seqs, extra=None) -> dict[str, np.ndarray]:
    """Per-sequence loss (N,) of each strategy (and of the ``extra`` predictions)."""
    preds = dict(strategies(task, seqs))
    if extra:
        preds.update(extra)
    return {k: np.asarray(loss_per_sequence(p, seqs, task.V)) for k, p in preds.items()}


def exact_expected_losses(task: InductionTask) -> dict[str, float]:
    """The expected loss per token of each reference, exactly: a sum over all V^L sequences weighted
    by the Dirichlet-Markov marginal (:func:`polya_log_marginal`) of a source whose first token is
    uniform and independent of the chain. For the package's ``InContextMarkov``, which starts from
    the chain's stationary law, use :func:`enumerated_expected_losses`. ``{name: float}``."""
    alpha = _alpha(task, "the exact expected losses")
    if task.tokens.doubly_stochastic:
        raise ValueError(
            "tokens: the Polya marginal holds for Dirichlet rows, not doubly stochastic"
        )
    _check_enumerable(task)
    seqs = all_sequences(task.L, task.V)
    w = np.exp(np.asarray(polya_log_marginal(seqs, task.V, alpha)))
    return {k: float(np.dot(w, v)) for k, v in _sequence_losses(task, seqs).items()}


def _posterior_predictive(m, L: int, V: int) -> np.ndarray:
    """The exact next-token law at every prefix, from the marginal m (V^L,) of whole sequences:
    q[n, a, j] = m(x[0..a], j) / m(x[0..a]) for sequence n: (V^L, L - 1, V)."""
    m = np.asarray(m).reshape((V,) * L)
    seqs = all_sequences(L, V)
    q = np.empty((len(seqs), L - 1, V))
    for a in range(L - 1):
        nxt = m.sum(axis=tuple(range(a + 2, L))) if a + 2 < L else m  # (V,)*(a+2)
        idx = tuple(seqs[:, : a + 1].T)
        num = nxt[idx]  # (N, V)
        q[:, a] = num / num.sum(axis=-1, keepdims=True)
    return q


def enumerated_expected_losses(
    task: InductionTask, n_chains: int = 20_000, seed: int = 0, start: str = "stationary"
) -> dict[str, tuple[float, float]]:
    """The expected loss per token of each reference under the task's source: all V^L sequences,
    weighted exactly by their probability given each chain, averaged over ``n_chains`` chains drawn
    by ``task.sample_with_chains`` (seed ``seed``). ``{name: (mean, standard error)}``.

    ``start`` is the law of the first token: ``"stationary"`` (the package's source: each
    chain's own stationary law) or ``"uniform"`` (the law under which :func:`exact_expected_losses`
    is exact). Besides the references, ``"posterior"`` is the exact posterior mean of the next token
    under that law (the marginal of every prefix estimated from the same chains, so its loss is a
    little optimistic, by O(1/n_chains)): the Bayes-optimal predictor, which under the stationary
    start also uses what x[0] says about the chain."""
    seqs, probs = _chain_probabilities(task, n_chains, seed, start)
    q = _posterior_predictive(probs.mean(axis=0), task.L, task.V)
    losses = _sequence_losses(task, seqs, {"posterior": jnp.asarray(q)})
    out = {}
    for k, v in losses.items():
        per_chain = probs @ v  # (K,)
        out[k] = (float(per_chain.mean()), float(per_chain.std(ddof=1) / math.sqrt(n_chains)))
    return out


def enumerated_posterior(
    task: InductionTask, n_chains: int = 20_000, seed: int = 0, start: str = "stationary"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(seqs, marginal, q)``: all V^L sequences (V^L, L), their marginal probability under the
    task's source (the mean over ``n_chains`` chains of their exact probability given the chain;
    ``start`` as in :func:`enumerated_expected_losses`), and the posterior mean of the next token
    at every prefix, (V^L, L - 1, V), the ratio of the marginals of the prefixes."""
    seqs, probs = _chain_probabilities(task, n_chains, seed, start)
    m = probs.mean(axis=0)
    return seqs, m, _posterior_predictive(m, task.L, task.V)


def _chain_probabilities(task: InductionTask, n_chains: int, seed: int, start: str):
    """All sequences (N, L) and their probability given each of ``n_chains`` chains, (K, N)."""
    _alpha(task, "the enumeration")
    if start not in ("stationary", "uniform"):
        raise ValueError(f"start must be 'stationary' or 'uniform', got {start!r}")
    n_chains = check_int("n_chains", n_chains, 2)
    _check_enumerable(task)
    seqs = all_sequences(task.L, task.V)
    _, T = task.sample_with_chains(jax.random.key(seed), n_chains)
    T = jnp.asarray(T, dtype=jnp.float64)
    if start == "stationary":
        log_s = jnp.log(stationary(T))  # (K, V)
    else:
        log_s = jnp.full(T.shape[:2], -math.log(task.V))
    n = _pair_counts(seqs, task.V).reshape(len(seqs), -1)  # (N, V*V)
    # a zero entry of T: the floor makes exp(count * log floor) = 0 for the sequences that use it
    log_T = jnp.log(jnp.maximum(T, jnp.finfo(T.dtype).tiny)).reshape(n_chains, -1)
    logp = log_s[:, seqs[:, 0]] + log_T @ n.T  # (K, N)
    return seqs, np.asarray(jnp.exp(logp))


def monte_carlo_expected_losses(
    task: InductionTask,
    P: int = 100_000,
    seed: int = 0,
    batch: int = 50_000,
    posterior_draws: int = 0,
) -> dict[str, tuple[float, float]]:
    """The expected loss per token of each reference by Monte Carlo: ``P`` sequences drawn from the
    task (seed ``seed``, in batches), ``{name: (mean, standard error)}``, the error the standard
    deviation of the per-sequence loss over sqrt(P). Also ``"bigram-unigram"`` and
    ``"unigram-uniform"``: the paired differences, with their own (smaller) errors. With
    ``posterior_draws`` > 0, also ``"posterior"`` (:func:`posterior_mean` with that many draws)
    and ``"posterior-bigram"``."""
    P = check_int("P", P, 2)
    batch = check_int("batch", batch, 1)
    posterior_draws = check_int("posterior_draws", posterior_draws, 0)
    key = jax.random.key(seed)
    parts: dict[str, list] = {}
    done = 0
    while done < P:
        size = min(batch, P - done)
        t = task.sample(jax.random.fold_in(key, done), size)
        extra = None
        if posterior_draws:
            k_post = jax.random.fold_in(jax.random.fold_in(key, done), 1)
            extra = {"posterior": posterior_mean(task, t, k_post, posterior_draws)}
        for k, v in _sequence_losses(task, t, extra).items():
            parts.setdefault(k, []).append(v)
        done += size
    per = {k: np.concatenate(v) for k, v in parts.items()}
    per["bigram-unigram"] = per["bigram"] - per["unigram"]
    per["unigram-uniform"] = per["unigram"] - per["uniform"]
    if posterior_draws:
        per["posterior-bigram"] = per["posterior"] - per["bigram"]
    return {k: (float(v.mean()), float(v.std(ddof=1) / math.sqrt(P))) for k, v in per.items()}
