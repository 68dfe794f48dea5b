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
* ``"smc"``: tempered SMC over the inverse temperature, from the prior or the localization up to
  nβ (:mod:`bayes_attn.inference.llc_smc`): λ̂ and log Z at every temperature on the way, the
  error bar from independent runs.

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
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from numpyro import handlers

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import SamplerDiverged, check_int, check_positive
from bayes_attn.inference.convert import finish
from bayes_attn.inference.potential import Potential, flat_potential, full_plates
from bayes_attn.inference.record import RunRecord
from bayes_attn.keys import resolve_key
from bayes_attn.models.levels import order_parameters
from bayes_attn.models.network import init_params, network_model
from bayes_attn.progress import bar as make_bar
from bayes_attn.theory.action import gram as design_gram

__all__ = [
    "LLC_SAMPLERS",
    "LLCTarget",
    "default_nbeta",
    "exact_frozen_llc",
    "frozen_llc_target",
    "llc_schedule",
    "llc_step_size",
    "llc_target",
    "run_llc",
]

LLC_SAMPLERS = ("sgld", "rmsprop", "mala", "nuts", "smc")


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
    """w* as a flat unconstrained vector: a dict of constrained site values, or the vector;
    checked (the sites, their shapes, finite values) before the model is run at it."""
    if isinstance(w_star, dict):
        missing = sorted(set(pot.shapes) - set(w_star))
        unknown = sorted(set(w_star) - set(pot.shapes))
        if missing or unknown:
            raise ValueError(
                f"w_star: needs a value for every latent site {sorted(pot.shapes)} and no other"
                f" (missing {missing}, unknown {unknown})"
            )
        with handlers.block():
            tr = handlers.trace(handlers.seed(pot.model, 0)).get_trace(
                *pot.model_args, **pot.model_kwargs
            )
        for name in pot.shapes:
            want, got = tuple(np.shape(tr[name]["value"])), tuple(np.shape(w_star[name]))
            if got != want:
                raise ValueError(f"w_star: {name!r} must have shape {want}, got {got}")
            if not np.all(np.isfinite(np.asarray(w_star[name], dtype=float))):
                raise ValueError(f"w_star: {name!r} has entries that are not finite (NaN or inf)")
        return pot.unconstrain(w_star)
    x = jnp.asarray(w_star, dtype=float)
    if x.shape != (pot.dim,):
        raise ValueError(
            f"w_star: a dict of the latent sites' values or a flat unconstrained vector of "
            f"length {pot.dim}, got shape {x.shape}"
        )
    if not np.all(np.isfinite(np.asarray(x))):
        raise ValueError("w_star: has entries that are not finite (NaN or inf)")
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


STEP_FRACTION = 0.1
"""The ``step_size="auto"`` rule's ε h_max (:func:`llc_step_size`)."""
BURNIN_RELAXATIONS = 5.0
"""The ``num_burnin="auto"`` rule's steps, in units of 1/(εγ) (:func:`run_llc`)."""


def llc_step_size(target: LLCTarget, fraction: float = STEP_FRACTION, iterations: int = 20):
    """The step size that follows the target's curvature: ε = ``fraction`` / h_max, with h_max the
    largest eigenvalue (in size) of the Hessian of -log p at w* (full batch), by ``iterations``
    steps of the power method on Hessian-vector products (about 2 ``iterations`` gradients).

    Along a direction of curvature h, the unadjusted Langevin step has the stationary variance
    (1/h) / (1 - εh/2) and diverges for εh > 2; at εh_max = 0.1 the stiffest direction is 5 %
    too wide and the others less. On the networks of docs/validation.md it lands at or below the
    steps measured there: 1.6e-4 on the L = 8 network at d = 16 (h_max 624; 2.5e-4 was the rung
    that converged) and 1.1e-6 at Table 1, d = 256, P = 300 (h_max 8.8e4; the LLC study ran
    2e-6). The power method approaches h_max from below, and a minibatch's gradient noise is not
    in it: ``calibrate_llc`` certifies a step; this one is where to start.
    """
    fraction = check_positive("fraction", fraction)
    iterations = check_int("iterations", iterations, 1)
    grad = jax.grad(lambda x: -target.log_density(x))

    @jax.jit
    def power(x, v):
        def body(_, carry):
            v, _ = carry
            w = jax.jvp(grad, (x,), (v,))[1]
            norm = jnp.linalg.norm(w)
            return w / jnp.where(norm > 0, norm, 1.0), norm

        return jax.lax.fori_loop(0, iterations, body, (v, jnp.zeros((), x.dtype)))[1]

    v = jax.random.normal(jax.random.key(0), target.x_star.shape, target.x_star.dtype)
    h_max = float(power(target.x_star, v / jnp.linalg.norm(v)))
    if not (math.isfinite(h_max) and h_max > 0):
        raise ValueError(
            f"step_size: 'auto' needs a finite, nonzero curvature at w*, got {h_max}; give a "
            "step size"
        )
    return fraction / h_max


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


def llc_schedule(target: LLCTarget, sampler: str, step_size, num_burnin) -> tuple[float, int]:
    """(ε, burn-in steps) of :func:`run_llc` on ``target``, ``"auto"`` resolved (its docstring):
    ε = :func:`llc_step_size` (1e-4 for NUTS, where it only sets the default init noise), the
    burn-in :data:`BURNIN_RELAXATIONS` / (εγ) (500 for NUTS)."""
    if isinstance(step_size, str):
        step_size = 1e-4 if sampler == "nuts" else llc_step_size(target)
    if isinstance(num_burnin, str) and sampler == "nuts":
        num_burnin = 500
    elif isinstance(num_burnin, str):
        relax = step_size * target.gamma
        num_burnin = math.ceil(BURNIN_RELAXATIONS / relax) if relax > 0 else 0
    return step_size, num_burnin


def _chunks(total: int, parts: int = 20) -> list[int]:
    size = max(1, -(-total // parts))
    return [min(size, total - i) for i in range(0, total, size)]


BLOWUP = 1e3
"""A chain has blown up when its log density falls more than ``BLOWUP (D + 10)`` below its
start: a chain in equilibrium sits O(D) below w*'s, D the flat dimension."""

CHUNK_SECONDS = 1.0
"""The wall time a compiled chunk of steps aims at: progress, divergence checks and Ctrl-C act
between chunks."""


class _Chunker:
    """Chunk sizes that aim at :data:`CHUNK_SECONDS` each: from 1 unit, at most 4 times the last
    (the first call also compiles) and never above ``cap``."""

    def __init__(self, cap: int):
        self.cap, self.n = max(1, cap), 1

    def __call__(self, left: int) -> int:
        return max(1, min(self.n, left, self.cap))

    def timed(self, n: int, seconds: float) -> None:
        rate = seconds / n
        grow = CHUNK_SECONDS / rate if rate > 0 else 4 * n
        self.n = int(max(1, min(4 * n, grow, self.cap)))


def _run_langevin(target, sampler, x0, keys, eps, rms, num_burnin, num_draws, thinning, bar):
    """Vectorised chains: burn-in then the kept draws, in chunks of about
    :data:`CHUNK_SECONDS` each (every chunk one compiled program: the counts are traced, and the
    draws do not depend on the chunks). Each chunk carries per chain the first step (from 1) whose
    log density is not finite or has blown up (:data:`BLOWUP`); after a chunk in which one did,
    :class:`~bayes_attn._validation.SamplerDiverged`."""
    size = max(_chunks(num_draws))

    def record(c):
        return (c.loss, jnp.linalg.norm(c.x - target.x_star))

    def chain_chunk(c, bad, floor, n_draws, n_inner, first):
        def one(_, carry):
            c, acc, bad, k = carry
            c, a = _langevin_step(target, sampler, eps, rms, c)
            k = k + 1
            wrong = ~jnp.isfinite(c.logp) | (c.logp < floor)
            return c, acc + a, jnp.where((bad == 0) & wrong, k, bad), k

        def draw(i, carry):
            c, bad, buf, k = carry
            zero = jnp.zeros((), c.x.dtype)
            c, acc, bad, k = jax.lax.fori_loop(0, n_inner, one, (c, zero, bad, k))
            rec = (*record(c), acc / n_inner)
            return c, bad, jax.tree.map(lambda b, r: b.at[i].set(r), buf, rec), k

        buf = tuple(jnp.zeros(size, c.x.dtype) for _ in range(3))
        c, bad, buf, _ = jax.lax.fori_loop(0, n_draws, draw, (c, bad, buf, first))
        return c, bad, buf

    chunk = jax.jit(jax.vmap(chain_chunk, in_axes=(0, 0, 0, None, None, None)))

    def start(x, key):
        (logp, loss), grad = jax.value_and_grad(
            lambda x: (target.log_density(x), target.loss(x)), has_aux=True
        )(x)
        return _Chain(x, logp, grad, loss, jnp.zeros_like(x), key)

    chains = jax.jit(jax.vmap(start))(x0, keys)
    floor = chains.logp - BLOWUP * (target.x_star.size + 10)
    bad = jnp.zeros(x0.shape[0], dtype=int)
    done = 0

    def advance(chains, bad, n_draws, n_inner):
        nonlocal done
        chains, bad, rec = chunk(chains, bad, floor, n_draws, n_inner, done)
        b = np.asarray(bad)
        if b.any():
            raise SamplerDiverged(
                sampler, int(b[b > 0].min()), eps, np.flatnonzero(b),
                hint="halve step_size, or leave it to the curvature (step_size='auto')",
            )  # fmt: skip
        done += n_draws * n_inner
        return chains, bad, rec

    sizes = _Chunker(max(_chunks(num_burnin)) if num_burnin else 1)
    left = num_burnin
    while left:
        n, t0 = sizes(left), time.perf_counter()
        chains, bad, _ = advance(chains, bad, 1, n)
        sizes.timed(n, time.perf_counter() - t0)
        left -= n
        bar.update(n)
    out = []
    sizes = _Chunker(size)
    left = num_draws
    while left:
        n, t0 = sizes(left), time.perf_counter()
        chains, bad, rec = advance(chains, bad, n, thinning)
        out.append([np.asarray(r)[:, :n] for r in rec])
        sizes.timed(n, time.perf_counter() - t0)
        left -= n
        bar.update(n * thinning)
    loss, dist, acc = (np.concatenate([o[i] for o in out], axis=1) for i in range(3))
    return loss, dist, acc


def _per_draw(f, x, batch_size: int = 16):
    """``f`` at every draw of ``x`` (chains, draws, dim), ``batch_size`` draws at a time: one
    vmap over all draws holds every draw's intermediates at once (the frozen target's design is
    P L (V + L) numbers a draw, so 4 x 1000 draws at P = 400 took 21 GB)."""
    c, n = x.shape[:2]
    out = jax.jit(lambda xs: jax.lax.map(f, xs, batch_size=batch_size))(x.reshape(c * n, -1))
    return jax.tree.map(lambda v: v.reshape(c, n, *v.shape[1:]), out)


CHECKPOINT_FORMAT = "bayes_attn.llc.nuts.checkpoint/2"  # /2: acceptance and diverging per draw
CHECKPOINT_SECONDS = 30.0
"""A NUTS checkpoint is written after a chunk when this many seconds have passed since the last."""


def _nuts_fingerprint(target, x0, key, num_burnin, num_draws, thinning) -> str:
    """What determines a NUTS run's draws: the target (its settings and its log density at two
    points, which tells closures apart), the starts, the key and the counts."""
    from bayes_attn.inference.smc_checkpoint import digest

    probe = target.x_star + 0.01 * jnp.cos(jnp.arange(target.x_star.size))
    dens = [float(jax.jit(target.log_density)(x)) for x in (target.x_star, probe)]
    dens = [np.format_float_scientific(v, precision=9) for v in dens]
    return digest(
        CHECKPOINT_FORMAT, np.asarray(target.x_star), target.n, target.nbeta, target.gamma,
        target.include_prior, dens, np.asarray(x0), np.asarray(jax.random.key_data(key)),
        num_burnin, num_draws, thinning,
    )  # fmt: skip


def _save_nuts(path, fingerprint, state, steps, x, acc):
    """The NUTS state after ``steps`` steps and the kept draws so far, atomically (npz, no
    pickles; a temporary file beside it, then ``os.replace``)."""
    import os

    arrays = {"format": np.array(CHECKPOINT_FORMAT), "fingerprint": np.array(fingerprint)}
    arrays.update(steps=np.array(steps), x=np.asarray(x), acceptance=np.asarray(acc))
    for i, leaf in enumerate(jax.tree.leaves(state)):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        arrays[f"state/{i}"] = np.asarray(leaf)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _load_nuts(path, fingerprint, template):
    """(state, steps, x, acceptance) from ``path``, or None when there is no file; a file made
    by a run with other arguments is refused (``ValueError`` naming ``checkpoint``)."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
        raise ValueError(f"checkpoint: {path} is not a readable checkpoint ({err})") from None
    if str(data.get("format", "")) != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint: {path} is not an LLC NUTS checkpoint ({CHECKPOINT_FORMAT})")
    if str(data["fingerprint"]) != fingerprint:
        raise ValueError(
            f"checkpoint: {path} was written by a run with other arguments; rerun with the "
            "arguments it was made with, or remove the file to start afresh"
        )
    flat, treedef = jax.tree.flatten(template)
    leaves = []
    for i, t in enumerate(flat):
        v = data[f"state/{i}"]
        if jax.dtypes.issubdtype(t.dtype, jax.dtypes.prng_key):
            leaves.append(jax.random.wrap_key_data(v, impl=jax.random.key_impl(t)))
        else:
            leaves.append(jnp.asarray(v, dtype=t.dtype))
    state = jax.tree.unflatten(treedef, leaves)
    return state, int(data["steps"]), data["x"], data["acceptance"]


def _run_nuts(target, x0, key, num_burnin, num_draws, thinning, progress_bar, checkpoint=None):
    """NumPyro's NUTS kernel on the target, chains vectorised, stepped as ``MCMC`` steps it (the
    same init, keys and steps) in compiled chunks of about :data:`CHUNK_SECONDS`, warm-up
    included (the kernel adapts while its step count is below ``num_burnin``), so that Ctrl-C
    stops it within seconds. With ``checkpoint`` (a path) the state and the draws so far are
    written after a chunk every :data:`CHECKPOINT_SECONDS` and read back by a rerun with the same
    arguments (refused when made with others), and the file is removed when the run completes."""
    from pathlib import Path

    from numpyro.infer import NUTS

    kernel = NUTS(potential_fn=lambda x: -target.log_density(x))
    chains = x0.shape[0]
    keys = jax.random.split(key, chains) if chains > 1 else key
    x0 = jax.lax.convert_element_type(x0, jnp.result_type(x0))
    state = kernel.init(keys, num_burnin, x0, (), {})
    total = num_burnin + num_draws * thinning
    start = num_burnin  # the first step MCMC collects (0-based); it keeps each block's last
    # per kept draw and chain: NUTS's acceptance and whether the transition diverged (0 / 1)
    xs, accs, steps = np.zeros((0, chains, x0.shape[-1])), np.zeros((0, chains, 2)), 0
    path, fp = None, None
    if checkpoint is not None:
        path = Path(checkpoint)
        fp = _nuts_fingerprint(target, x0, key, num_burnin, num_draws, thinning)
        saved = _load_nuts(path, fp, state)
        if saved is not None:
            state, steps, xs, accs = saved
    cap = max(1, -(-total // 20))

    @jax.jit
    def advance(state, n):
        """``n`` steps: the state and, per step, z and (the acceptance, diverged)."""

        def one(i, carry):
            s, zs, acc = carry
            s = kernel.sample(s, (), {})
            stats = jnp.stack([s.accept_prob, s.diverging.astype(s.accept_prob.dtype)], -1)
            return s, zs.at[i].set(s.z), acc.at[i].set(stats)

        zs = jnp.zeros((cap, *state.z.shape), state.z.dtype)
        acc = jnp.zeros((cap, *state.accept_prob.shape, 2), state.accept_prob.dtype)
        return jax.lax.fori_loop(0, n, one, (state, zs, acc))

    sizes, saved = _Chunker(cap), time.perf_counter()
    with make_bar(total, "llc nuts", progress_bar, initial=steps) as bar:
        while steps < total:
            n, t0 = sizes(total - steps), time.perf_counter()
            state, zs, acc = advance(state, n)
            idx = np.arange(steps, steps + n)
            keep = (idx >= start) & ((idx - start) % thinning == thinning - 1)  # MCMC's rule
            zs, acc = np.asarray(zs)[:n], np.asarray(acc)[:n]
            zs = zs.reshape(n, chains, -1) if chains > 1 else zs.reshape(n, 1, -1)
            acc = acc.reshape(n, chains, 2)
            xs = np.concatenate([xs, zs[keep]])
            accs = np.concatenate([accs, acc[keep]])
            steps += n
            sizes.timed(n, time.perf_counter() - t0)
            bar.update(n)
            if path is not None and time.perf_counter() - saved >= CHECKPOINT_SECONDS:
                _save_nuts(path, fp, state, steps, xs, accs)
                saved = time.perf_counter()
    x = jnp.asarray(np.swapaxes(xs, 0, 1))
    loss = _per_draw(target.loss, x)
    if target.sq_distance is None:
        dist = jnp.linalg.norm(x - target.x_star, axis=-1)
    else:
        dist = jnp.sqrt(_per_draw(target.sq_distance, x))
    order = {} if target.order is None else _per_draw(target.order, x)
    loss, dist = (np.asarray(a) for a in (loss, dist))
    if path is not None:
        path.unlink(missing_ok=True)
    stats = {"acceptance": np.swapaxes(accs[..., 0], 0, 1),
             "diverging": np.swapaxes(accs[..., 1], 0, 1) > 0.5}  # fmt: skip
    return loss, dist, stats, {k: np.asarray(v) for k, v in order.items()}


def run_llc(
    model,
    w_star,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    sampler: str = "sgld",
    num_chains: int = 4,
    num_draws: int = 200,
    num_burnin: int | str = 0,
    thinning: int = 1,
    step_size: float | str = "auto",
    nbeta: float | None = None,
    gamma: float = 100.0,
    include_prior: bool = False,
    n: int | None = None,
    init_noise: float | None = None,
    rmsprop: tuple[float, float] = (0.99, 1e-8),
    seed: int | None = None,
    key=None,
    progress_bar: bool = False,
    checkpoint=None,
):
    """Sample the localized tempered target of :func:`llc_target` around ``w_star``.

    Parameters
    ----------
    sampler : {"sgld", "rmsprop", "mala", "nuts", "smc"}
        Module docstring. ``"smc"``: tempered SMC from the base up to nβ
        (:func:`bayes_attn.inference.llc_smc.run_llc_smc`, with ``num_chains`` independent runs
        of ``num_draws`` particles; the burn-in, thinning, step and start options do not apply).
    step_size : float or "auto"
        ε of the Langevin samplers. ``"auto"`` (default): 0.1 / h_max, h_max the largest
        curvature of the target at w* (:func:`llc_step_size`), so that the step follows the
        model's scale (the fixed 1e-4 of earlier versions diverges on the Table-1 network at
        d = 256). NUTS adapts its own step; for it ε only sets the default ``init_noise``, and
        ``"auto"`` stands for 1e-4 there. A chain whose state stops being finite or blows up
        raises :class:`~bayes_attn._validation.SamplerDiverged` (one line: the step, ε).
    num_chains, num_draws, num_burnin, thinning : int
        Chains (vectorised); draws kept (each ``thinning`` steps); steps discarded first.
        ``num_burnin="auto"``: :data:`BURNIN_RELAXATIONS` / (εγ) for the Langevin samplers, five
        relaxation times of the directions that γ alone holds (the chains start at w*, and
        those directions relax slowest: docs/validation.md, "λ̂ against P at Table 1"); 0
        without localization; 500 for NUTS (its warm-up, as :func:`exact_frozen_llc`).
    nbeta, gamma, include_prior, n
        As in :func:`llc_target`.
    init_noise : float, optional
        Each chain starts at w* + init_noise ξ, ξ ~ N(0, I) (so that R-hat across chains means
        something); default √(2ε), one step's noise. 0 starts every chain at w* (devinterp).
    rmsprop : (alpha, delta)
        RMSProp's decay and its δ (``sampler="rmsprop"``).
    seed, key
        Either (seed 0 when neither is given).
    checkpoint : path, optional
        NUTS only: a file that keeps the run's state and draws (every 30 s of steps), so
        that a rerun with the same arguments resumes where an interrupted one stopped (refused
        when made with other arguments; removed when the run completes).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``loss`` (L_n at each kept draw, full batch), ``llc`` (nβ (L_n - L_n(w*))),
        ``distance`` (|w - w*|, unconstrained); ``sample_stats``: ``acceptance`` (the exact
        full-batch MALA acceptance of the SGLD step, averaged over the ``thinning`` steps of a
        draw; NUTS's mean acceptance for NUTS, and ``diverging``, its divergent transitions, which
        :func:`~bayes_attn.analysis.llc_exploration.llc_exploration` counts); ``constant_data``: ``init_loss`` (L_n(w*)),
        ``grad_norm`` (|∇L_n(w*)|), ``nbeta``, ``gamma``, ``step_size``, ``n``; the run's record in
        the attrs (sampler ``llc``, the LLC sampler as ``llc_sampler``).
    """
    if sampler not in LLC_SAMPLERS:
        raise ValueError(f"sampler must be one of {LLC_SAMPLERS}, got {sampler!r}")
    if checkpoint is not None and sampler != "nuts":
        raise ValueError(f"checkpoint: only NUTS runs keep one, not {sampler!r}")
    if sampler == "smc":  # tempered SMC over nβ: chains are its runs, draws its particles
        from bayes_attn.inference.llc_smc import run_llc_smc

        return run_llc_smc(
            model, w_star, model_args=model_args, model_kwargs=model_kwargs, nbeta=nbeta,
            gamma=gamma, include_prior=include_prior, n=n, num_particles=num_draws,
            num_runs=num_chains, seed=seed, key=key, progress_bar=progress_bar,
        )  # fmt: skip
    num_chains = check_int("num_chains", num_chains, 1)
    num_draws = check_int("num_draws", num_draws, 1)
    auto_burnin = isinstance(num_burnin, str) and num_burnin == "auto"
    if not auto_burnin:
        num_burnin = check_int("num_burnin", num_burnin, 0)
    thinning = check_int("thinning", thinning, 1)
    auto = isinstance(step_size, str) and step_size == "auto"
    if not auto:
        step_size = check_positive("step_size", step_size)
    alpha, delta = (float(a) for a in rmsprop)
    if not (0 <= alpha < 1 and delta > 0):
        raise ValueError(f"rmsprop must be (alpha in [0, 1), delta > 0), got {rmsprop!r}")
    if init_noise is not None:
        init_noise = float(init_noise)
        if not (math.isfinite(init_noise) and init_noise >= 0):
            raise ValueError(f"init_noise must be a finite number >= 0, got {init_noise!r}")
    rng, seed, key_attrs = resolve_key(key, seed)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    target = llc_target(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, nbeta=nbeta,
        gamma=gamma, include_prior=include_prior, n=n,
    )  # fmt: skip
    step_size, num_burnin = llc_schedule(target, sampler, step_size, num_burnin)
    init_noise = math.sqrt(2 * step_size) if init_noise is None else init_noise
    k_init, k_run = jax.random.split(rng)
    x0 = target.x_star + init_noise * jax.random.normal(
        k_init, (num_chains, target.x_star.size), target.x_star.dtype
    )
    if sampler == "nuts":
        loss, dist, acc, _ = _run_nuts(
            target, x0, k_run, num_burnin, num_draws, thinning, progress_bar, checkpoint
        )
    else:
        total = num_burnin + num_draws * thinning
        with make_bar(total, f"llc {sampler}", progress_bar) as bar:
            loss, dist, acc = _run_langevin(
                target, sampler, x0, jax.random.split(k_run, num_chains), step_size,
                (alpha, delta), num_burnin, num_draws, thinning, bar,
            )  # fmt: skip
    record = RunRecord(
        "llc", seed, num_chains, num_burnin, num_draws, thinning,
        settings={
            "llc_sampler": sampler, "step_size": step_size,
            **({"step_rule": "auto"} if auto and sampler != "nuts" else {}),
            **({"burnin_rule": "auto"} if auto_burnin else {}), "nbeta": target.nbeta,
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
            # NUTS gives {"acceptance", "diverging"}, the Langevin samplers the acceptance
            "sample_stats": acc if isinstance(acc, dict) else {"acceptance": acc},
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
    want = {"W_G": (d, d), "W_O": (V, d)}
    for name, shape in want.items():
        if not isinstance(w_star, dict) or name not in w_star:
            raise ValueError(f"w_star: a dict with the network's W_G {(d, d)} and W_O {(V, d)}")
        if tuple(np.shape(w_star[name])) != shape:
            raise ValueError(
                f"w_star: {name!r} must have shape {shape}, got {tuple(np.shape(w_star[name]))}"
            )
        if not np.all(np.isfinite(np.asarray(w_star[name], dtype=float))):
            raise ValueError(f"w_star: {name!r} has entries that are not finite (NaN or inf)")
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
    checkpoint=None,
):
    """The LLC of the frozen-embedding network by NUTS on :func:`frozen_llc_target` (M~, W_O
    integrated out): the ground truth for :func:`run_llc` on the explicit network at the same
    nβ and γ, at any width. The result has :func:`run_llc`'s form (``loss`` is E[L_n | M~],
    ``distance`` is the rms distance from w* in the embeddings' span given M~, the readout
    integrated: (|M~ - M~*|² + E[|W_O - W_O*|² | M~])^½; ``acceptance`` NUTS's), so
    :func:`bayes_attn.analysis.llc.llc_estimate` reads it; the record says ``llc_sampler``
    ``exact-nuts``. ``checkpoint`` (a path) keeps the state and the draws every 30 s of steps,
    so that a rerun with the same arguments resumes (as :func:`run_llc`'s)."""
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
    loss, dist, acc, order = _run_nuts(
        target, x0, k_run, num_burnin, num_draws, 1, progress_bar, checkpoint
    )
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
