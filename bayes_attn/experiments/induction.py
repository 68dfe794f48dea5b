"""The induction head's experiments: the two-layer kernel limit's MAP at one P, read against the
reference predictors.

:func:`induction_map` finds the maximum a posteriori (M1, M2) of
:func:`~bayes_attn.models.two_layer.two_layer_kernel_model` from three starts, one near zero
(no head formed) and two at the hand-built induction circuit (:func:`circuit`, strong and weak),
and keeps the lowest potential, as the one-layer study starts in each phase. At the MAP it reports
the order parameters of both layers (:func:`~bayes_attn.models.two_layer.induction_scores`) and
the held-out loss of the posterior-mean readout beside the bigram, unigram and uniform references, with the KL to each
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
from bayes_attn._validation import (
    check_activation,
    check_bool,
    check_int,
    check_nonnegative,
    check_positive,
)
from bayes_attn.inference.potential import Mode, find_modes, flat_potential
from bayes_attn.keys import dataset_key, run_key
from bayes_attn.models.two_layer import (
    BLOCK,
    forward,
    head_products,
    induction_scores,
    to_blocks,
    two_layer_kernel_model,
)
from bayes_attn.theory import induction_refs
from bayes_attn.theory.action import woodbury_evidence

__all__ = [
    "DESCRIPTIONS",
    "BLOCK",
    "INDUCTION_DEFAULTS",
    "LBFGS_FTOL",
    "LBFGS_XTOL",
    "SEARCH_ITER",
    "SEARCH_METHODS",
    "START_SCALE",
    "WEAK_BETA",
    "blocked_data",
    "blocked_potential",
    "blocked_scales",
    "blocked_value_and_grad",
    "check_induction",
    "INDUCTION_FROZEN_DEFAULTS",
    "circuit",
    "features",
    "frozen_gram",
    "induction_map",
    "induction_point",
    "lbfgs_modes",
    "MAP_DIMS",
    "map_reading",
    "map_search",
    "readout_mean",
]

#: the entries' scale of the start near zero (every head unformed)
START_SCALE = 0.05

#: the strength of the third start, a weak induction circuit: at softmax P = 1000 (dataset 2) it
#: alone reaches the lowest mode found, 1.65 nats below the two other starts' (and 0.96 below the
#: trust region's); at P = 700, 1500 and 2000 (datasets 0-2) it adds nothing (docs/validation.md,
#: "The induction head: the study across P")
WEAK_BETA = 1.0
WEAK_ZERO = "0: no weak circuit start"


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


def blocked_data(task, tokens, gram=None, block: int = BLOCK) -> dict:
    """The data of :func:`blocked_potential`: the features (whitened with ``gram``) and the
    targets of the positions that have one, in blocks of ``block`` sequences
    (:func:`~bayes_attn.models.two_layer.to_blocks`), and what does not depend on the forms: the
    features' Gram ``Spp`` and products with the targets ``Bp``, and ``yy``."""
    block = check_int("block", block, 1)
    psi = features(task, tokens, gram)
    y = task.targets(tokens)[:, :-1]
    rows, yr = psi[:, :-1].reshape(-1, psi.shape[-1]), y.reshape(-1, task.V)
    return {"psi": to_blocks(psi, block), "y": to_blocks(y, block),
            "Spp": rows.T @ rows, "Bp": rows.T @ yr, "yy": jnp.sum(yr**2)}  # fmt: skip


def blocked_scales(hyper) -> tuple:
    """The ``scales`` argument of :func:`blocked_potential`: (chi, g_W, g_O, sigma^2)."""
    return (hyper.chi, hyper.g_w, hyper.g_o, hyper.sigma2)


def blocked_potential(x, data: dict, scales, activation: str):
    """The potential of :func:`~bayes_attn.models.two_layer.two_layer_kernel_model` (causal, two
    layers, every stream) at the flat ``x`` = (M1, M2) raveled, computed block by block.

    The design Phi = [psi, H] (H the heads h1, h2) enters the evidence only through its Gram and
    its products with the targets: the psi blocks are fixed data (``Spp``, ``Bp`` of
    :func:`blocked_data`), and the H blocks are summed over blocks of sequences
    (:func:`~bayes_attn.models.two_layer.head_products`, the model's own ``block=``), with the
    data as arguments so that one compiled program serves every dataset of a shape. ``scales`` =
    (chi, g_W, g_O, sigma^2), :func:`blocked_scales`. The same function as the model's potential
    up to the order of the sums (1e-13 relative; tests/test_two_layer.py)."""
    chi, g_w, g_o, sigma2 = scales
    psi = data["psi"]
    n = psi.shape[-1]
    M1, M2 = x[: n * n].reshape(n, n), x[n * n :].reshape(2 * n, 2 * n)
    rows = np.arange(psi.shape[-2]) < psi.shape[-2] - 1
    SpH, SHH, BH = head_products(M1, M2, psi, data["y"], activation, True, ("h1", "h2"), rows)
    G = jnp.block([[data["Spp"], SpH], [SpH.T, SHH]])
    B = jnp.concatenate([data["Bp"], BH])
    s_data, logdet = woodbury_evidence(G, B, data["yy"], sigma2, g_o)
    var = g_w / chi
    prior = 0.5 * jnp.sum(x**2) / var + 0.5 * x.size * jnp.log(2 * jnp.pi * var)
    return chi * s_data + logdet + prior


#: L-BFGS iterations per ``maxiter`` in :func:`map_search` (``maxiter`` counts trust-krylov
#: steps, ~10 gradients each; an L-BFGS step costs ~1.5)
SEARCH_ITER = 10

#: the optimisers of :func:`map_search`
SEARCH_METHODS = ("trust-krylov", "l-bfgs")

#: L-BFGS's stop in :func:`map_search`, in the forms' units: the gradient's largest entry times
#: the prior's variance g_W / chi (the step the prior's curvature alone would take), so
#: ``gtol`` = 9e-6 at the study's preset; or (:data:`LBFGS_FTOL`) a step that lowers the
#: potential by less than 1e-15 of it. The search then ends within 2e-6 of the float64 floor's
#: end point in 1.1-1.8 x fewer calls (softmax P = 1000-8000): past it the calls mostly fail line
#: searches at the floor (docs/performance.md, "Induction head: the study's MAP sweep")
LBFGS_XTOL = 3e-7

#: the relative decrease of the potential in one L-BFGS step below which :func:`map_search`
#: stops (scipy's ``ftol``; ~5 float64 ulps): at P >= 3000 the float64 floor of the gradient
#: lies above ``LBFGS_XTOL``'s
LBFGS_FTOL = 1e-15


def lbfgs_modes(pot, value_and_grad, starts, maxiter: int, gtol: float | None = None,
                ftol: float = 0.0) -> list:  # fmt: skip
    """The modes of the potential ``pot`` from each of ``starts`` (constrained) by scipy's
    L-BFGS-B (30 corrections) on ``value_and_grad`` (``x -> (U, grad U)``), until the gradient's
    largest entry is below ``gtol`` or a step lowers the potential by no more than ``ftol`` of it
    (0: no step lowers it in float64), at most ``maxiter`` iterations; ``converged`` reports
    either stop (or a gradient norm below 1e-7). ``gtol=None``: 1e-7 / sqrt(dim), with
    ``ftol=0`` in effect run to the float64 floor (the search before :data:`LBFGS_XTOL`). A list
    of :class:`~bayes_attn.inference.potential.Mode`, as
    :func:`~bayes_attn.inference.potential.find_modes` returns them."""
    from scipy import optimize

    def fun(x):
        v, g = value_and_grad(jnp.asarray(x))
        return float(v), np.asarray(g, dtype=np.float64)

    modes = []
    for start in starts:
        x0 = np.asarray(pot.unconstrain(start), dtype=np.float64)
        stop = 1e-7 / np.sqrt(x0.size) if gtol is None else check_positive("gtol", gtol)
        if not np.isfinite(fun(x0)[0]):
            raise ValueError("start: the log density is not finite there")
        res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B",
                                options={"maxiter": maxiter, "maxfun": 2 * maxiter, "maxcor": 30,
                                         "gtol": stop, "ftol": ftol})  # fmt: skip
        converged = bool(res.success) or float(np.linalg.norm(res.jac)) < 1e-7
        modes.append(Mode(np.asarray(res.x), float(res.fun), converged, pot))
    return modes


#: the value and gradient of :func:`blocked_potential`, compiled once per data shape and
#: activation (so every seed of a P reuses it)
blocked_value_and_grad = jax.jit(
    jax.value_and_grad(blocked_potential), static_argnames="activation"
)


def map_search(task, hyper, P: int, activation: str, *, seed: int = 0, num_test: int = 2000,
               beta: float = 3.0, maxiter: int = 300, hvp: str = "difference",
               d_model: int | None = None, method: str = "trust-krylov",
               xtol: float | None = LBFGS_XTOL, weak_beta: float = WEAK_BETA) -> dict:  # fmt: skip
    """The search behind :func:`induction_map` (and
    :func:`~bayes_attn.experiments.induction_posterior.map_problem`): the dataset ``tokens`` from
    the run key's dataset key, the held-out ``test`` from the run key folded with 1, the
    ``starts`` (``{"zero", "circuit", "weak_circuit"}``: near zero from the key folded with 2;
    the circuit at ``beta``; the circuit at ``weak_beta``, left out where it is 0), the
    frozen ``gram`` (None for the kernel limit), the ``modes`` found from each start, the kept
    start ``won`` and its forms ``map`` (``{"M1", "M2"}``).

    With ``hvp="difference"`` (the default) the optimiser evaluates :func:`blocked_potential`,
    the model's potential in blocks of sequences, compiled once per P and activation: the same
    modes as on the model's own potential (1e-10 relative; docs/performance.md, "Induction head:
    the study's MAP sweep") at about half the cost per gradient. ``hvp="exact"`` differentiates
    the model's potential as before.

    ``method="trust-krylov"`` (the default: the trust region of
    :func:`~bayes_attn.inference.potential.find_modes`, ``maxiter`` steps of ~10 gradients
    each); ``"l-bfgs"``, the ``induction`` sweep's, runs L-BFGS on the value and gradient alone
    (:func:`lbfgs_modes`), at most ``SEARCH_ITER`` x ``maxiter`` iterations, stopped where the
    gradient's largest entry is below ``xtol`` x chi / g_W (:data:`LBFGS_XTOL`) or a step lowers
    the potential by less than :data:`LBFGS_FTOL` of it (``xtol=None``: run to the float64
    floor, the search before, to the same modes in more calls). Against the trust region it
    takes 1.5-4.3 x fewer calls, mostly to the same modes, but where the posterior has several
    a start can end in another (softmax P = 1000, datasets 1 and 2; docs/performance.md,
    "Induction head: the study's MAP sweep")."""
    check_activation(activation)
    if method not in SEARCH_METHODS:
        raise ValueError(f"method: {method!r} is not one of {SEARCH_METHODS}")
    P = check_int("P", P, 1)
    num_test = check_int("num_test", num_test, 1)
    beta = check_positive("beta", beta)
    weak_beta = check_nonnegative("weak_beta", weak_beta, WEAK_ZERO)
    xtol = None if xtol is None else check_positive("xtol", xtol)
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
    if weak_beta > 0:
        starts["weak_circuit"] = circuit(task, weak_beta)
    gram = None if d_model is None else frozen_gram(jax.random.fold_in(key, 3), task, d_model)
    args = (task, hyper, tokens, activation, gram)
    fg = None
    if hvp == "difference":  # the same potential in blocks of sequences, compiled once per P
        data = blocked_data(task, tokens, gram)
        scales = blocked_scales(hyper)

        def fg(x):
            return blocked_value_and_grad(x, data, scales, activation=activation)

    if method == "l-bfgs":
        pot = flat_potential(two_layer_kernel_model, args)
        fg = fg or jax.jit(jax.value_and_grad(pot.U))
        iters = SEARCH_ITER * check_int("maxiter", maxiter, 1)
        stop = (None, 0.0) if xtol is None else (xtol * hyper.chi / hyper.g_w, LBFGS_FTOL)
        found = lbfgs_modes(pot, fg, list(starts.values()), iters, *stop)
    else:
        found = find_modes(two_layer_kernel_model, starts=list(starts.values()), model_args=args,
                           maxiter=maxiter, hvp=hvp, value_and_grad=fg)  # fmt: skip
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
    """The two-layer kernel limit's MAP on ``P`` sequences drawn from ``seed``, from three starts
    (:func:`map_search`).

    Returns a flat ``{name: float}``: ``U_zero``, ``U_circuit`` and ``U_weak_circuit``, the
    potential at the mode found from each start, ``start_won`` (0 near zero, 1 the circuit, 2 the
    weak circuit), the scores of both layers at the
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
    return map_reading(task, hyper, activation, s)[0]


def map_reading(task, hyper, activation: str, search: dict) -> tuple[dict, dict]:
    """What :func:`induction_map` reports of a :func:`map_search` ``search``, and the MAP's forms
    and attention patterns on the held-out set.

    Returns ``(scalars, maps)``: ``scalars`` the flat ``{name: float}`` of :func:`induction_map`;
    ``maps`` the arrays ``M1`` (n x n), ``M2`` (2n x 2n), ``A1_mean`` and ``A2_mean`` (L x L,
    both layers' attention averaged over the held-out sequences), ``A1_example``,
    ``A2_example`` and ``tokens_example`` (held-out sequence 0), as the ``induction`` sweep
    writes them with ``store_maps`` (docs/figures/induction/patterns.png draws them).
    """
    tokens, test, gram = search["tokens"], search["test"], search["gram"]
    modes, won = search["modes"], search["won"]
    M1, M2 = search["map"]["M1"], search["map"]["M2"]
    w = readout_mean(M1, M2, task, hyper, tokens, activation, gram)
    Phi, A1, A2 = forward(M1, M2, features(task, test, gram), activation, True)
    out = {f"U_{k}": float(m.U) for k, m in modes.items()}
    out["start_won"] = float(list(modes).index(won))
    out["converged"] = float(modes[won].converged)
    out.update({k: float(v) for k, v in induction_scores(A1, A2, test, task.V).items()})
    out.update(induction_refs.compare_to_strategies(task, test, np.asarray(Phi @ w.T)))
    maps = {"M1": M1, "M2": M2, "A1_mean": A1.mean(0), "A2_mean": A2.mean(0),
            "A1_example": A1[0], "A2_example": A2[0], "tokens_example": test[0]}  # fmt: skip
    return out, {k: np.asarray(v) for k, v in maps.items()}


# --------------------------------------------------------------------------------------------------
# The sweep kind ``induction`` (bayes_attn/configs/induction_*.toml)

#: the options of the ``induction`` sweep kind, with their defaults; ``store_maps`` also writes
#: each point's MAP forms and attention patterns (:data:`MAP_DIMS`, :func:`map_reading`);
#: ``method`` is :func:`map_search`'s (the kernel limit's search by L-BFGS; files written before
#: the option existed read it back as this default)
INDUCTION_DEFAULTS = {
    "num_test": 2000, "beta": 3.0, "maxiter": 300, "store_maps": False, "method": "l-bfgs",
    "weak_beta": WEAK_BETA,
}  # fmt: skip

#: the options of the ``induction_frozen`` sweep kind: the network's exact posterior with frozen
#: embeddings of width ``d_model`` (the study's "exact frozen network's MAP at d = 10^4"),
#: searched by the trust region (as measured there; L-BFGS not measured for it)
INDUCTION_FROZEN_DEFAULTS = {**INDUCTION_DEFAULTS, "d_model": 10_000, "method": "trust-krylov"}

#: the extra dims of the arrays an ``induction`` sweep writes with ``store_maps``: M1's rows and
#: columns (n = V + L features), M2's (2n), and the queries and keys of the attention patterns
MAP_DIMS = {
    "M1": ("M1_row", "M1_col"),
    "M2": ("M2_row", "M2_col"),
    "A1_mean": ("query", "key"),
    "A2_mean": ("query", "key"),
    "A1_example": ("query", "key"),
    "A2_example": ("query", "key"),
    "tokens_example": ("query",),
}

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
    and (where the kind has them) integers ``num_test``, ``maxiter``, ``d_model`` >= 1,
    ``beta`` > 0, ``weak_beta`` >= 0 and ``method`` one of :data:`SEARCH_METHODS`: a
    ``ValueError`` naming the first that is not, before any point runs."""
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
    if "weak_beta" in options:
        options["weak_beta"] = check_nonnegative("weak_beta", options["weak_beta"], WEAK_ZERO)
    if options.get("method", SEARCH_METHODS[0]) not in SEARCH_METHODS:
        raise ValueError(f"method: {options['method']!r} is not one of {SEARCH_METHODS}")
    if "store_maps" in options:
        if check_bool("store_maps", options["store_maps"]) and (len(cfg.L) > 1 or len(cfg.V) > 1):
            raise ValueError(
                f"store_maps: the forms' and patterns' shapes depend on L and V, so a sweep that "
                f"stores them takes one L and one V, got L = {list(cfg.L)}, V = {list(cfg.V)}"
            )
    return options


def induction_point(cfg, pt, task, hyper) -> dict:
    """One grid point of an ``induction`` sweep: :func:`induction_map` on the induction task at
    the point's (L, V) and the sweep's token source, searched by the option ``method``
    (:func:`map_search`'s), every output a scalar; with the option
    ``store_maps``, also the MAP's forms and patterns (:func:`map_reading`, dims
    :data:`MAP_DIMS`)."""
    from bayes_attn.induction import InductionTask

    task = InductionTask(task.L, task.V, task.tokens)
    options = dict(cfg.options)
    store = options.pop("store_maps", False)
    s = map_search(task, hyper, int(pt["P"]), pt["activation"], seed=int(pt["seed"]), **options)
    out, maps = map_reading(task, hyper, pt["activation"], s)
    result = {name: ((), np.asarray(v)) for name, v in out.items()}
    if store:
        result.update({name: (MAP_DIMS[name], v) for name, v in maps.items()})
    return result
