"""The local learning coefficient (LLC) of any NumPyro model around a point w*.

The target is the localized, tempered posterior of singular learning theory (docs/theory.md,
"The local learning coefficient"),

    p(w) ∝ exp(-nβ L_n(w) - γ/2 |w - w*|²)      [times the prior, with ``include_prior=True``],

over the model's flat unconstrained space (:mod:`bayes_attn.inference.potential`), with L_n the
mean per-example negative log likelihood of the model's observed sites (``numpyro.factor`` sites
included), n the number of examples (the plates around the observed sites: P sequences for the
network) and nβ = n / log n by default. The estimate is

    llc = nβ (E_p[L_n(w)] - L_n(w*)),

which :func:`bayes_attn.analysis.llc.llc_estimate` forms from :func:`run_llc`'s result. The
package calls it ``llc``: λ is the SMC tempering exponent here.

Samplers (``sampler=``), all with vectorised chains started from Gaussian noise around w*:

* ``"sgld"``: w <- w + ε ∇log p(w) + √(2ε) ξ, the package's SGLD convention (devinterp's step
  size is 2ε: its update is -ε'/2 ∇ + N(0, ε')); a minibatch gradient when the model has a
  subsample plate (``batch_size`` of the network), full batch otherwise.
* ``"rmsprop"``: the same step preconditioned by RMSProp's running second moment, G = 1 / (√v + δ)
  (Li et al. 2016, without the Γ correction, as devinterp).
* ``"mala"``: the full-batch Langevin step with its Metropolis correction (exact).
* ``"nuts"``: NumPyro's NUTS on the same log density (``num_burnin`` adapts the step).

Every SGLD step also records the exact full-batch MALA acceptance of the move it made,
min(1, p(w') q(w | w') / (p(w) q(w' | w))) with q the full-batch Langevin proposal: how far the
discretisation is from exact at that ε (near 1: negligible bias).

References
----------
E. Lau, Z. Furman, G. Wang, D. Murfet and S. Wei, "The local learning coefficient: a
singularity-aware complexity measure", AISTATS 2025; C. Li, C. Chen, D. Carlson and L. Carin,
"Preconditioned stochastic gradient Langevin dynamics", AAAI 2016.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from numpyro import handlers
from tqdm.auto import tqdm

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference._call import resolve_key
from bayes_attn.inference.convert import finish
from bayes_attn.inference.potential import Potential, flat_potential, full_plates
from bayes_attn.inference.record import RunRecord
from bayes_attn.models.levels import order_parameters
from bayes_attn.models.network import init_params, network_model
from bayes_attn.theory.action import gram as design_gram

__all__ = [
    "LLC_SAMPLERS",
    "LLCTarget",
    "default_nbeta",
    "exact_frozen_llc",
    "frozen_llc_target",
    "llc_target",
    "run_llc",
]

LLC_SAMPLERS = ("sgld", "rmsprop", "mala", "nuts")


def default_nbeta(n: int) -> float:
    """n / log n, the inverse temperature of the WBIC (Watanabe 2013) and devinterp's default."""
    n = check_int("n", n, 2)
    return n / math.log(n)


class LLCTarget(NamedTuple):
    """The localized tempered target of :func:`llc_target` over the flat unconstrained space.

    Attributes
    ----------
    loss : callable
        ``loss(x)``: L_n, the mean per-example negative log likelihood over the full data.
    batch_loss : callable
        ``batch_loss(x, key)``: its unbiased minibatch estimate (``loss`` when the model has no
        subsample plate).
    log_density : callable
        ``log_density(x) = -nβ loss(x) - γ/2 |x - x*|²`` (plus the log prior, Jacobians included,
        with ``include_prior``).
    batch_log_density : callable
        The same with ``batch_loss``.
    x_star : jax.Array
        w* in the flat unconstrained coordinates.
    n, nbeta, gamma, include_prior, subsampled
    init_loss : float
        L_n(w*).
    grad_norm : float
        |∇L_n(w*)|: zero at a critical point of L_n; a prior-regularised MAP is not one.
    potential : Potential
        The full-data potential (``potential.unravel`` maps a flat x to the sites).
    sq_distance : callable or None
        ``sq_distance(x)``: |w - w*|² at x where x is not all of w (the frozen target's x is the
        gate; the readout's part enters as its conditional mean given x); None: |x - x*|².
    order : callable or None
        ``order(x)``: {name: scalar} of order parameters recorded at each exact (NUTS) draw (the
        frozen target's c1/cG, or a1/aG for softmax, of the gate x); None records none.
    """

    loss: Callable
    batch_loss: Callable
    log_density: Callable
    batch_log_density: Callable
    x_star: jax.Array
    n: int
    nbeta: float
    gamma: float
    include_prior: bool
    subsampled: bool
    init_loss: float
    grad_norm: float
    potential: Potential
    sq_distance: Callable | None = None
    order: Callable | None = None


def _subsampled(model, model_args, model_kwargs) -> bool:
    """Whether a plate of the model draws a minibatch (subsample_size < size)."""
    with handlers.block():
        tr = handlers.trace(handlers.seed(model, 0)).get_trace(*model_args, **model_kwargs)
    return any(
        s["type"] == "plate" and s["args"][1] is not None and s["args"][1] < s["args"][0]
        for s in tr.values()
    )


def _x_star(pot: Potential, w_star):
    """w* as a flat unconstrained vector: a dict of constrained site values, or the vector."""
    if isinstance(w_star, dict):
        return pot.unconstrain(w_star)
    x = jnp.asarray(w_star, dtype=float)
    if x.shape != (pot.dim,):
        raise ValueError(
            f"w_star: a dict of the latent sites' values or a flat unconstrained vector of "
            f"length {pot.dim}, got shape {x.shape}"
        )
    return x


def llc_target(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
    n: int | None = None,
) -> LLCTarget:
    """The localized tempered target around ``w_star`` (module docstring).

    Parameters
    ----------
    w_star : dict or array
        Constrained values of every latent site (a trained network, a MAP, a draw), or the flat
        unconstrained vector.
    nbeta : float, optional
        nβ; default n / log n.
    gamma : float
        The localization strength γ >= 0 (0: none; then the loss or the prior must confine).
    include_prior : bool
        Multiply the target by the model's prior (default: localization only, as devinterp).
    n : int, optional
        The number of examples; default the plates around the observed sites (P for the
        network). A model whose likelihood is a plate-less ``numpyro.factor`` needs it.
    """
    model_args = tuple(model_args)
    model_kwargs = dict(model_kwargs or {})
    gamma = float(gamma)
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}")
    full = flat_potential(full_plates(model), model_args, model_kwargs)
    if n is None:
        n = full.num_examples()
        if n is None:
            raise ValueError(
                "n: the model's likelihood is in no plate; give the number of examples"
            )
    n = check_int("n", n, 1)
    nbeta = default_nbeta(n) if nbeta is None else check_positive("nbeta", nbeta)
    x_star = _x_star(full, w_star)
    subsampled = _subsampled(model, model_args, model_kwargs)
    batch_pot = flat_potential(model, model_args, model_kwargs) if subsampled else full

    def loss(x):
        return -full.log_likelihood(x) / n

    def batch_loss(x, key):
        return -batch_pot.log_likelihood(x, key) / n if subsampled else loss(x)

    def localized(x, value):
        out = -nbeta * value - 0.5 * gamma * jnp.sum((x - x_star) ** 2)
        return out + full.log_prior(x) if include_prior else out

    def log_density(x):
        return localized(x, loss(x))

    def batch_log_density(x, key):
        return localized(x, batch_loss(x, key))

    init_loss, grad = jax.jit(jax.value_and_grad(loss))(x_star)
    if not np.isfinite(float(init_loss)):
        raise ValueError("w_star: the loss is not finite there")
    return LLCTarget(
        loss, batch_loss, log_density, batch_log_density, x_star, n, float(nbeta), gamma,
        bool(include_prior), subsampled, float(init_loss), float(jnp.linalg.norm(grad)), full,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The Langevin samplers (SGLD, RMSProp-SGLD, MALA) as one scan


class _Chain(NamedTuple):
    x: jax.Array
    logp: jax.Array  # full-batch log density at x
    grad: jax.Array  # its gradient
    loss: jax.Array  # full-batch L_n at x
    v: jax.Array  # RMSProp's running second moment
    key: jax.Array


def _log_q(x_to, x_from, grad_from, eps, G):
    """log q(x_to | x_from) of the Langevin proposal N(x + εG∇, 2εG), up to a constant."""
    r = x_to - x_from - eps * G * grad_from
    return -jnp.sum(r**2 / (4 * eps * G))


def _langevin_step(target: LLCTarget, sampler: str, eps: float, rms: tuple, c: _Chain):
    """One step of one chain; returns the new chain and the exact MALA acceptance of the move."""
    key, k_noise, k_batch, k_accept = jax.random.split(c.key, 4)
    if target.subsampled and sampler != "mala":
        g = jax.grad(target.batch_log_density)(c.x, k_batch)
    else:
        g = c.grad
    alpha, delta = rms
    if sampler == "rmsprop":
        v = alpha * c.v + (1 - alpha) * g**2
        G = 1.0 / (jnp.sqrt(v) + delta)
    else:
        v, G = c.v, jnp.ones_like(c.x)
    noise = jax.random.normal(k_noise, c.x.shape, c.x.dtype)
    x = c.x + eps * G * g + jnp.sqrt(2 * eps * G) * noise

    def parts(x):
        loss = target.loss(x)
        return target.log_density(x), loss

    (logp, loss), grad = jax.value_and_grad(parts, has_aux=True)(x)
    log_a = logp - c.logp + _log_q(c.x, x, grad, eps, G) - _log_q(x, c.x, c.grad, eps, G)
    log_a = jnp.where(jnp.isfinite(log_a), log_a, -jnp.inf)
    accept = jnp.exp(jnp.minimum(log_a, 0.0))
    new = _Chain(x, logp, grad, loss, v, key)
    if sampler == "mala":
        take = jax.random.uniform(k_accept) < accept
        new = jax.tree.map(lambda a, b: jnp.where(take, a, b), new, c._replace(key=key))
    return new, accept


def _chunks(total: int, parts: int = 20) -> list[int]:
    size = max(1, -(-total // parts))
    return [min(size, total - i) for i in range(0, total, size)]


def _run_langevin(target, sampler, x0, keys, eps, rms, num_burnin, num_draws, thinning, bar):
    """Vectorised chains: burn-in then the kept draws, in chunks for the progress bar, every
    chunk one compiled program (the counts are traced)."""
    size = max(_chunks(num_draws))

    def record(c):
        return (c.loss, jnp.linalg.norm(c.x - target.x_star))

    def chain_chunk(c, n_draws, n_inner):
        def one(_, carry):
            c, acc = carry
            c, a = _langevin_step(target, sampler, eps, rms, c)
            return c, acc + a

        def draw(i, carry):
            c, buf = carry
            c, acc = jax.lax.fori_loop(0, n_inner, one, (c, jnp.zeros((), c.x.dtype)))
            rec = (*record(c), acc / n_inner)
            return c, jax.tree.map(lambda b, r: b.at[i].set(r), buf, rec)

        buf = tuple(jnp.zeros(size, c.x.dtype) for _ in range(3))
        return jax.lax.fori_loop(0, n_draws, draw, (c, buf))

    chunk = jax.jit(jax.vmap(chain_chunk, in_axes=(0, None, None)))

    def start(x, key):
        (logp, loss), grad = jax.value_and_grad(
            lambda x: (target.log_density(x), target.loss(x)), has_aux=True
        )(x)
        return _Chain(x, logp, grad, loss, jnp.zeros_like(x), key)

    chains = jax.jit(jax.vmap(start))(x0, keys)
    for steps in _chunks(num_burnin):
        chains = chunk(chains, 1, steps)[0]
        bar.update(steps)
    out = []
    for steps in _chunks(num_draws):
        chains, rec = chunk(chains, steps, thinning)
        out.append([np.asarray(r)[:, :steps] for r in rec])
        bar.update(steps * thinning)
    loss, dist, acc = (np.concatenate([o[i] for o in out], axis=1) for i in range(3))
    return loss, dist, acc


def _per_draw(f, x, batch_size: int = 16):
    """``f`` at every draw of ``x`` (chains, draws, dim), ``batch_size`` draws at a time: one
    vmap over all draws holds every draw's intermediates at once (the frozen target's design is
    P L (V + L) numbers a draw, so 4 x 1000 draws at P = 400 took 21 GB)."""
    c, n = x.shape[:2]
    out = jax.jit(lambda xs: jax.lax.map(f, xs, batch_size=batch_size))(x.reshape(c * n, -1))
    return jax.tree.map(lambda v: v.reshape(c, n, *v.shape[1:]), out)


def _run_nuts(target, x0, key, num_burnin, num_draws, thinning, progress_bar):
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(
        NUTS(potential_fn=lambda x: -target.log_density(x)),
        num_warmup=num_burnin,
        num_samples=num_draws * thinning,
        num_chains=x0.shape[0],
        thinning=thinning,
        chain_method="vectorized",
        progress_bar=progress_bar,
    )
    mcmc.run(key, init_params=x0, extra_fields=("accept_prob",))
    x = mcmc.get_samples(group_by_chain=True)
    loss = _per_draw(target.loss, x)
    if target.sq_distance is None:
        dist = jnp.linalg.norm(x - target.x_star, axis=-1)
    else:
        dist = jnp.sqrt(_per_draw(target.sq_distance, x))
    acc = mcmc.get_extra_fields(group_by_chain=True)["accept_prob"]
    order = {} if target.order is None else _per_draw(target.order, x)
    loss, dist, acc = (np.asarray(a) for a in (loss, dist, acc))
    return loss, dist, acc, {k: np.asarray(v) for k, v in order.items()}


def run_llc(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    sampler: str = "sgld",
    num_chains: int = 4,
    num_draws: int = 200,
    num_burnin: int = 0,
    thinning: int = 1,
    step_size: float = 1e-4,
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
    n: int | None = None,
    init_noise: float | None = None,
    rmsprop: tuple[float, float] = (0.99, 1e-8),
    seed: int | None = None,
    key=None,
    progress_bar: bool = False,
):
    """Sample the localized tempered target of :func:`llc_target` around ``w_star``.

    Parameters
    ----------
    sampler : {"sgld", "rmsprop", "mala", "nuts"}
        Module docstring. ``step_size`` is ε of the Langevin samplers (NUTS adapts its own).
    num_chains, num_draws, num_burnin, thinning : int
        Chains (vectorised); draws kept (each ``thinning`` steps); steps discarded first.
    nbeta, gamma, include_prior, n
        As in :func:`llc_target`.
    init_noise : float, optional
        Each chain starts at w* + init_noise ξ, ξ ~ N(0, I) (so that R-hat across chains means
        something); default √(2ε), one step's noise. 0 starts every chain at w* (devinterp).
    rmsprop : (alpha, delta)
        RMSProp's decay and its δ (``sampler="rmsprop"``).
    seed, key
        Either (seed 0 when neither is given).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``loss`` (L_n at each kept draw, full batch), ``llc`` (nβ (L_n - L_n(w*))),
        ``distance`` (|w - w*|, unconstrained); ``sample_stats``: ``acceptance`` (the exact
        full-batch MALA acceptance of the SGLD step, averaged over the ``thinning`` steps of a
        draw; NUTS's mean acceptance for NUTS); ``constant_data``: ``init_loss`` (L_n(w*)),
        ``grad_norm`` (|∇L_n(w*)|), ``nbeta``, ``gamma``, ``step_size``, ``n``; the run's record in
        the attrs (sampler ``llc``, the LLC sampler as ``llc_sampler``).
    """
    if sampler not in LLC_SAMPLERS:
        raise ValueError(f"sampler must be one of {LLC_SAMPLERS}, got {sampler!r}")
    num_chains = check_int("num_chains", num_chains, 1)
    num_draws = check_int("num_draws", num_draws, 1)
    num_burnin = check_int("num_burnin", num_burnin, 0)
    thinning = check_int("thinning", thinning, 1)
    step_size = check_positive("step_size", step_size)
    alpha, delta = (float(a) for a in rmsprop)
    if not (0 <= alpha < 1 and delta > 0):
        raise ValueError(f"rmsprop must be (alpha in [0, 1), delta > 0), got {rmsprop!r}")
    init_noise = math.sqrt(2 * step_size) if init_noise is None else float(init_noise)
    if not (math.isfinite(init_noise) and init_noise >= 0):
        raise ValueError(f"init_noise must be a finite number >= 0, got {init_noise!r}")
    rng, seed, key_attrs = resolve_key(key, seed)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    target = llc_target(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, nbeta=nbeta,
        gamma=gamma, include_prior=include_prior, n=n,
    )  # fmt: skip
    k_init, k_run = jax.random.split(rng)
    x0 = target.x_star + init_noise * jax.random.normal(
        k_init, (num_chains, target.x_star.size), target.x_star.dtype
    )
    if sampler == "nuts":
        loss, dist, acc, _ = _run_nuts(
            target, x0, k_run, num_burnin, num_draws, thinning, progress_bar
        )
    else:
        total = num_burnin + num_draws * thinning
        with tqdm(total=total, disable=not progress_bar, desc=f"llc {sampler}") as bar:
            loss, dist, acc = _run_langevin(
                target, sampler, x0, jax.random.split(k_run, num_chains), step_size,
                (alpha, delta), num_burnin, num_draws, thinning, bar,
            )  # fmt: skip
    record = RunRecord(
        "llc", seed, num_chains, num_burnin, num_draws, thinning,
        settings={
            "llc_sampler": sampler, "step_size": step_size, "nbeta": target.nbeta,
            "gamma": target.gamma, "include_prior": include_prior, "n": target.n,
            "init_noise": init_noise, "subsampled": target.subsampled, **key_attrs,
        },
    )  # fmt: skip
    return _result(target, record, loss, dist, acc, step_size, model, model_args, model_kwargs)


def _result(target, record, loss, dist, acc, step_size, model, model_args, model_kwargs,
            order=None):  # fmt: skip
    """The InferenceData of :func:`run_llc` (with ``order``, {name: per-draw values}, beside)."""
    idata = az.from_dict(
        {
            "posterior": {
                "loss": loss,
                "llc": target.nbeta * (loss - target.init_loss),
                "distance": dist,
                **(order or {}),
            },
            "sample_stats": {"acceptance": acc},
        }
    )
    const = xr.Dataset(
        {
            "init_loss": target.init_loss,
            "grad_norm": target.grad_norm,
            "nbeta": target.nbeta,
            "gamma": target.gamma,
            "step_size": float(step_size),
            "n": target.n,
        }
    )
    az.set_group(idata, "constant_data", const)
    return finish(idata, record, model, model_args, model_kwargs)


# --------------------------------------------------------------------------------------------------
# The same target for the frozen-embedding network, W_O integrated out (docs/theory.md)


def _frozen_args(model, model_args, model_kwargs):
    """(task, hyper, tokens, activation, embeddings) of a frozen-embedding ``network_model`` call."""
    import inspect

    if model is not network_model:
        raise ValueError("model: the exact LLC is for network_model with frozen embeddings")
    bound = inspect.signature(model).bind(*model_args, **dict(model_kwargs or {}))
    bound.apply_defaults()
    a = bound.arguments
    if a["train_embeddings"] or a["factorized"]:
        raise ValueError(
            "model_kwargs: the exact LLC needs train_embeddings=False, W_G unfactorised"
        )
    emb = a["embeddings"]
    if emb is None:  # network_model's own default
        fixed = init_params(jax.random.key(0), a["task"], a["hyper"], a["d_model"])
        emb = (fixed["W_emb"], fixed["p"])
    return a["task"], a["hyper"], jnp.asarray(a["tokens"]), a["activation"], emb


def frozen_llc_target(
    model,
    w_star: dict,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
) -> LLCTarget:
    """:func:`llc_target` of the frozen-embedding network, W_O integrated out in closed form.

    Over the whitened gate M~ = U^T W_G U ((V+L)^2 numbers, :func:`bayes_attn.algebra.span_basis`)
    the target is (docs/theory.md, "The local learning coefficient at any width")

        log p(M~) = -c_M/2 |M~ - m|^2 + 1/2 sum_v b_v^T Λ^-1 b_v - (V/2) log det Λ + const,

    with Λ = a G + c_w I, b_v = a B_v + (γ/d) w~*_v, a = nβ χ / (n σ²), G = Φ~^T Φ~ and
    B = Φ~^T y of the whitened design Φ~ = Φ R; c_M = γ, c_w = γ/d, m = M~* (with the prior:
    c_M = γ + χ/ḡ_W, c_w = γ/d + χ/ḡ_O, m = γ M~*/c_M). Its ``loss`` is E[L_n | M~], the readout
    integrated exactly (|y - Φ~ μ|^2 + V tr(Λ^-1 G) in the fit term), so the mean of ``loss``
    under p is E_p[L_n] of the full network target. ``w_star`` holds the network's W_G and W_O.
    """
    task, hyper, tokens, activation, (W_emb, pos) = _frozen_args(model, model_args, model_kwargs)
    P, n_f, V = int(tokens.shape[0]), task.n_features, task.V
    d = int(np.shape(W_emb)[0])
    if d < n_f:
        raise ValueError(f"d_model: the exact LLC needs d >= V + L = {n_f}, got {d}")
    nbeta = default_nbeta(P) if nbeta is None else check_positive("nbeta", nbeta)
    gamma = float(gamma)
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}")
    R = algebra.gram_factor(algebra.embedding_gram(W_emb, pos), n_f)
    U = algebra.span_basis(W_emb, pos)
    M_star = U.T @ jnp.asarray(w_star["W_G"]) @ U
    w_st = math.sqrt(d) * U.T @ jnp.asarray(w_star["W_O"]).T  # (n_f, V)
    a = nbeta / P * hyper.chi / hyper.sigma2
    c_m = gamma + (hyper.chi / hyper.g_w if include_prior else 0.0)
    c_w = gamma / d + (hyper.chi / hyper.g_o if include_prior else 0.0)
    if c_m <= 0 or c_w <= 0:
        raise ValueError("gamma: 0 leaves the target improper unless include_prior=True")
    m_mean = gamma * M_star / c_m
    const = task.L * V / 2 * math.log(2 * math.pi * hyper.sigma2 / hyper.chi)
    fit = hyper.chi / (2 * hyper.sigma2)

    def attention(x):
        return algebra.attention(
            algebra.logits_from_M(x.reshape(n_f, n_f), tokens, V, R), activation
        )

    def design(x):
        return design_gram(attention(x), tokens, V, R)

    def solve(x):
        G, B, yy = design(x)
        chol = jax.scipy.linalg.cho_factor(a * G + c_w * jnp.eye(n_f), lower=True)
        b = a * B + gamma / d * w_st
        return G, B, yy, chol, b, jax.scipy.linalg.cho_solve(chol, b)

    def log_density(x):
        _, _, _, chol, b, mu = solve(x)
        logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol[0])))
        return (
            -0.5 * c_m * jnp.sum((x - m_mean.ravel()) ** 2) + 0.5 * jnp.sum(b * mu) - V / 2 * logdet
        )

    def loss(x):
        G, B, yy, chol, _, mu = solve(x)
        resid = yy - 2 * jnp.sum(B * mu) + jnp.sum(mu * (G @ mu))
        trace = V * jnp.trace(jax.scipy.linalg.cho_solve(chol, G))
        return fit * (resid + trace) / P + const

    def sq_distance(x):
        # |M~ - M~*|² + E[|W_O - W_O*|² | M~], |W_O - W_O*|² = |w~ - w~*|²/d, w~ | M~ ~ N(mu, Λ^-1)
        _, _, _, chol, _, mu = solve(x)
        tr_inv = jnp.trace(jax.scipy.linalg.cho_solve(chol, jnp.eye(n_f)))
        return jnp.sum((x - x_star) ** 2) + (jnp.sum((mu - w_st) ** 2) + V * tr_inv) / d

    def order(x):
        pr = algebra.project(attention(x))
        return dict(zip(order_parameters(activation), (pr["c1"], pr["cG"]), strict=True))

    def loss_at(x, w):
        G, B, yy = design(x)
        return fit * (yy - 2 * jnp.sum(B * w) + jnp.sum(w * (G @ w))) / P + const

    x_star = M_star.ravel()
    init_loss, (g_m, g_w) = jax.jit(jax.value_and_grad(loss_at, argnums=(0, 1)))(x_star, w_st)
    grad_norm = math.sqrt(float(jnp.sum(g_m**2)) + d * float(jnp.sum(g_w**2)))
    return LLCTarget(
        loss, lambda x, key: loss(x), log_density, lambda x, key: log_density(x), x_star, P,
        float(nbeta), gamma, bool(include_prior), False, float(init_loss), grad_norm, None,
        sq_distance, order,
    )  # fmt: skip


def exact_frozen_llc(
    model,
    w_star: dict,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    num_chains: int = 4,
    num_draws: int = 1000,
    num_burnin: int = 500,
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
    init_noise: float = 1e-3,
    seed: int | None = None,
    key=None,
    progress_bar: bool = False,
):
    """The LLC of the frozen-embedding network by NUTS on :func:`frozen_llc_target` (M~, W_O
    integrated out): the ground truth for :func:`run_llc` on the explicit network at the same
    nβ and γ, at any width. The result has :func:`run_llc`'s form (``loss`` is E[L_n | M~],
    ``distance`` is the rms distance from w* in the embeddings' span given M~, the readout
    integrated: (|M~ - M~*|² + E[|W_O - W_O*|² | M~])^½; ``acceptance`` NUTS's), so
    :func:`bayes_attn.analysis.llc.llc_estimate` reads it; the record says ``llc_sampler``
    ``exact-nuts``."""
    num_chains = check_int("num_chains", num_chains, 1)
    num_draws = check_int("num_draws", num_draws, 1)
    num_burnin = check_int("num_burnin", num_burnin, 0)
    rng, seed, key_attrs = resolve_key(key, seed)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    target = frozen_llc_target(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, nbeta=nbeta,
        gamma=gamma, include_prior=include_prior,
    )  # fmt: skip
    k_init, k_run = jax.random.split(rng)
    x0 = target.x_star + init_noise * jax.random.normal(k_init, (num_chains, target.x_star.size))
    loss, dist, acc, order = _run_nuts(target, x0, k_run, num_burnin, num_draws, 1, progress_bar)
    record = RunRecord(
        "llc", seed, num_chains, num_burnin, num_draws, 1,
        settings={
            "llc_sampler": "exact-nuts", "nbeta": target.nbeta, "gamma": target.gamma,
            "include_prior": include_prior, "n": target.n, "init_noise": init_noise, **key_attrs,
        },
    )  # fmt: skip
    return _result(
        target, record, loss, dist, acc, math.nan, model, model_args, model_kwargs, order
    )
