"""The induction head's experiments: the two-layer kernel limit's MAP at one P, read against the
reference predictors.

:func:`induction_map` finds the maximum a posteriori (M1, M2) of
:func:`~bayes_attn.models.two_layer.two_layer_kernel_model` from two starts, one near zero (no head
formed) and one at the hand-built induction circuit (:func:`circuit`), and keeps the lower
potential, as the one-layer study starts in each phase. At the MAP it reports the order parameters
of both layers (:func:`~bayes_attn.models.two_layer.induction_scores`) and the held-out loss of the
posterior-mean readout beside the bigram, unigram and uniform references, with the KL to each
(:func:`~bayes_attn.theory.induction_refs.compare_to_strategies`).

References
----------
docs/theory.md §12-13.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int, check_positive
from bayes_attn.inference.potential import find_modes
from bayes_attn.keys import dataset_key, run_key
from bayes_attn.models.two_layer import forward, induction_scores, two_layer_kernel_model
from bayes_attn.theory import induction_refs

__all__ = [
    "DESCRIPTIONS",
    "INDUCTION_DEFAULTS",
    "START_SCALE",
    "check_induction",
    "INDUCTION_FROZEN_DEFAULTS",
    "circuit",
    "features",
    "frozen_gram",
    "induction_map",
    "induction_point",
    "map_search",
    "readout_mean",
]

#: the entries' scale of the start near zero (every head unformed)
START_SCALE = 0.05


def circuit(task, beta: float) -> dict:
    """The hand-built induction circuit at strength ``beta``: M1 on the previous-token line of the
    position block; M2 from the query's token to the key's copied token, with ``-beta`` on the
    key at position 0 (docs/theory.md §13). ``{"M1", "M2"}``."""
    V, L, n = task.V, task.L, task.n_features
    M1 = jnp.zeros((n, n)).at[V + jnp.arange(1, L), V + jnp.arange(L - 1)].set(beta)
    M2 = jnp.zeros((2 * n, 2 * n)).at[jnp.arange(V), n + jnp.arange(V)].set(beta)
    return {"M1": M1, "M2": M2.at[jnp.arange(V), V].set(-beta)}


def features(task, tokens, gram=None) -> jax.Array:
    """The features psi (P, L, n), whitened by the Gram's square root R where embeddings are
    frozen (``gram``), as :func:`~bayes_attn.models.two_layer.two_layer_kernel_model` sees them."""
    psi = algebra.features(tokens, task.V)
    return psi if gram is None else psi @ algebra.gram_factor(jnp.asarray(gram), task.n_features)


def frozen_gram(key, task, d_model: int) -> np.ndarray:
    """The Gram W^T W / d of frozen embeddings W = [W_emb | p] (d x n), N(0, 1) entries drawn
    from ``key`` (the network's embedding prior)."""
    d = check_int("d_model", d_model, 1)
    W = jax.random.normal(key, (d, task.n_features))
    return np.asarray(algebra.embedding_gram(W[:, : task.V], W[:, task.V :]))


def readout_mean(M1, M2, task, hyper, tokens, activation: str, gram=None) -> jax.Array:
    """The posterior mean of the readout w (V x 4n) given (M1, M2) on the training tokens: the
    ridge solution (Phi^T Phi + sigma^2/g_O I)^-1 Phi^T y over the positions with a target
    (whitened coordinates with ``gram``)."""
    Phi, _, _ = forward(M1, M2, features(task, tokens, gram), activation, True)
    X = Phi[:, :-1].reshape(-1, Phi.shape[-1])
    Y = task.targets(tokens)[:, :-1].reshape(-1, task.V)
    lam = hyper.sigma2 / hyper.g_o
    return jnp.linalg.solve(X.T @ X + lam * jnp.eye(X.shape[1]), X.T @ Y).T


def map_search(task, hyper, P: int, activation: str, *, seed: int = 0, num_test: int = 2000,
               beta: float = 3.0, maxiter: int = 300, hvp: str = "difference",
               d_model: int | None = None) -> dict:  # fmt: skip
    """The search behind :func:`induction_map` (and
    :func:`~bayes_attn.experiments.induction_posterior.map_problem`): the dataset ``tokens`` from
    the run key's dataset key, the held-out ``test`` from the run key folded with 1, the two
    ``starts`` (``{"zero", "circuit"}``: near zero from the key folded with 2; the circuit), the
    frozen ``gram`` (None for the kernel limit), the ``modes`` found from each start, the kept
    start ``won`` and its forms ``map`` (``{"M1", "M2"}``)."""
    check_activation(activation)
    P = check_int("P", P, 1)
    num_test = check_int("num_test", num_test, 1)
    beta = check_positive("beta", beta)
    key = run_key(None, seed)
    tokens = task.sample(dataset_key(key), P)
    test = task.sample(jax.random.fold_in(key, 1), num_test)
    n = task.n_features
    k1, k2 = jax.random.split(jax.random.fold_in(key, 2))
    starts = {
        "zero": {
            "M1": START_SCALE * jax.random.normal(k1, (n, n)),
            "M2": START_SCALE * jax.random.normal(k2, (2 * n, 2 * n)),
        },
        "circuit": circuit(task, beta),
    }
    gram = None if d_model is None else frozen_gram(jax.random.fold_in(key, 3), task, d_model)
    args = (task, hyper, tokens, activation, gram)
    found = find_modes(two_layer_kernel_model, starts=list(starts.values()), model_args=args,
                       maxiter=maxiter, hvp=hvp)  # fmt: skip
    modes = dict(zip(starts, found, strict=True))
    won = min(modes, key=lambda k: modes[k].U)
    best = modes[won].potential.unravel(jnp.asarray(modes[won].x))
    return {"tokens": tokens, "test": test, "starts": starts, "gram": gram, "modes": modes,
            "won": won, "map": {"M1": best["M1"], "M2": best["M2"]}}  # fmt: skip


def induction_map(
    task,
    hyper,
    P: int,
    activation: str,
    *,
    seed: int = 0,
    num_test: int = 2000,
    beta: float = 3.0,
    maxiter: int = 300,
    hvp: str = "difference",
    d_model: int | None = None,
) -> dict:
    """The two-layer kernel limit's MAP on ``P`` sequences drawn from ``seed``, from two starts.

    Returns a flat ``{name: float}``: ``U_zero`` and ``U_circuit``, the potential at the mode found
    from each start, ``start_won`` (0 near zero, 1 the circuit), the scores of both layers at the
    kept mode on ``num_test`` held-out sequences, and its held-out ``loss`` beside ``loss_bigram``,
    ``loss_unigram``, ``loss_uniform`` and the KL to each. The test sequences come from the run key
    folded with 1, so every P and seed of a sweep is judged on its own fresh draw.

    With ``d_model`` the model is the two-layer network's exact posterior with frozen embeddings
    of that width (their Gram from the run key folded with 3, :func:`frozen_gram`; the starts and
    the scores in whitened coordinates), else the kernel limit.

    Both starts run on one compiled potential (:func:`~bayes_attn.inference.potential.find_modes`)
    whose Krylov steps use Hessian-vector products by a difference of gradients (``hvp``; one
    gradient per product instead of ~4 gradients' cost): the same modes as the exact products
    (``hvp="exact"``, the products of the first study runs), potentials within 1e-6 relative (to
    1e-16 at four of the study's points), in 2-3.5 x fewer gradient-equivalents
    (docs/performance.md, "Induction head").
    """
    s = map_search(task, hyper, P, activation, seed=seed, num_test=num_test, beta=beta,
                   maxiter=maxiter, hvp=hvp, d_model=d_model)  # fmt: skip
    tokens, test, gram, modes, won = s["tokens"], s["test"], s["gram"], s["modes"], s["won"]
    M1, M2 = s["map"]["M1"], s["map"]["M2"]
    w = readout_mean(M1, M2, task, hyper, tokens, activation, gram)
    Phi, A1, A2 = forward(M1, M2, features(task, test, gram), activation, True)
    out = {f"U_{k}": float(m.U) for k, m in modes.items()}
    out["start_won"] = float(won == "circuit")
    out["converged"] = float(modes[won].converged)
    out.update({k: float(v) for k, v in induction_scores(A1, A2, test, task.V).items()})
    out.update(induction_refs.compare_to_strategies(task, test, np.asarray(Phi @ w.T)))
    return out


# --------------------------------------------------------------------------------------------------
# The sweep kind ``induction`` (bayes_attn/configs/induction_*.toml)

#: the options of the ``induction`` sweep kind, with their defaults
INDUCTION_DEFAULTS = {"num_test": 2000, "beta": 3.0, "maxiter": 300}

#: the options of the ``induction_frozen`` sweep kind: the network's exact posterior with frozen
#: embeddings of width ``d_model`` (the study's "exact frozen network's MAP at d = 10^4")
INDUCTION_FROZEN_DEFAULTS = {**INDUCTION_DEFAULTS, "d_model": 10_000}

#: the variables an ``induction`` sweep writes whose meaning here differs from the one table,
#: :data:`bayes_attn.experiments.kinds.DESCRIPTIONS` (which describes the rest)
DESCRIPTIONS = {
    "loss": ("1", "held-out loss per token of the MAP's posterior-mean readout"),
    "kl_bigram": ("nats", "mean KL(bigram || model's clipped output)"),
    "kl_unigram": ("nats", "mean KL(unigram || model's clipped output)"),
    "kl_uniform": ("nats", "mean KL(uniform || model's clipped output)"),
}


def check_induction(cfg, options: dict) -> dict:
    """The induction kinds need an in-context Markov source (its references are defined for it),
    and (where the kind has them) integers ``num_test``, ``maxiter``, ``d_model`` >= 1 and
    ``beta`` > 0: a ``ValueError`` naming the first that is not, before any point runs."""
    from bayes_attn.tokens import InContextMarkov, parse_tokens

    if not isinstance(parse_tokens(cfg.tokens), InContextMarkov):
        raise ValueError(
            f"tokens: the induction kind needs an icl-markov source, got {cfg.tokens} "
            "(for example tokens = 'icl-markov:alpha=1,start=uniform')"
        )
    for name in ("num_test", "maxiter", "d_model"):
        if name in options:
            options[name] = check_int(name, options[name], 1)
    if "beta" in options:
        options["beta"] = check_positive("beta", options["beta"])
    return options


def induction_point(cfg, pt, task, hyper) -> dict:
    """One grid point of an ``induction`` sweep: :func:`induction_map` on the induction task at
    the point's (L, V) and the sweep's token source, every output a scalar."""
    from bayes_attn.induction import InductionTask

    task = InductionTask(task.L, task.V, task.tokens)
    out = induction_map(task, hyper, int(pt["P"]), pt["activation"], seed=int(pt["seed"]),
                        **cfg.options)  # fmt: skip
    return {name: ((), np.asarray(v)) for name, v in out.items()}
