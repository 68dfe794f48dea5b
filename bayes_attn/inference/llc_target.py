"""The LLC's target: the localized, tempered posterior of any NumPyro model around w*, and the
step and burn-in that follow its curvature (:mod:`bayes_attn.inference.llc` samples it).

    p(w) ∝ exp(-nβ L_n(w) - γ/2 |w - w*|²)      [times the prior, with ``include_prior=True``],

over the model's flat unconstrained space (:mod:`bayes_attn.inference.potential`), with L_n the
mean per-example negative log likelihood of the model's observed sites (``numpyro.factor`` sites
included), n the number of examples (the plates around the observed sites) and nβ = n / log n by
default (docs/theory.md, "The local learning coefficient").

References
----------
E. Lau, Z. Furman, G. Wang, D. Murfet and S. Wei, "The local learning coefficient: a
singularity-aware complexity measure", AISTATS 2025.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import check_int, check_positive, with_changes
from bayes_attn.inference.llc_settings import LLCSettings
from bayes_attn.inference.potential import Potential, abstract_trace, flat_potential, full_plates

__all__ = [
    "BURNIN_RELAXATIONS",
    "STEP_FRACTION",
    "LLCTarget",
    "default_nbeta",
    "llc_schedule",
    "llc_step_size",
    "llc_target",
]


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


def _abstract(model, model_args, model_kwargs, names=()) -> tuple[dict, list]:
    """The shapes of the sites ``names``' values and the plates' (size, subsample_size), from
    :func:`~bayes_attn.inference.potential.abstract_trace` (nothing computed or compiled, so that
    the arguments are checked before any work)."""
    tr = abstract_trace(model, model_args, model_kwargs)
    plates = [tuple(s["args"][:2]) for s in tr.values() if s["type"] == "plate"]
    return {name: tuple(tr[name]["value"].shape) for name in names}, plates


def _subsampled(model, model_args, model_kwargs) -> bool:
    """Whether a plate of the model draws a minibatch (subsample_size < size)."""
    plates = _abstract(model, model_args, model_kwargs)[1]
    return any(sub is not None and sub < size for size, sub in plates)


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
        shapes = _abstract(pot.model, pot.model_args, pot.model_kwargs, list(pot.shapes))[0]
        for name in pot.shapes:
            want, got = shapes[name], tuple(np.shape(w_star[name]))
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
    model, w_star, *, model_args: tuple = (), model_kwargs: dict | None = None,
    n: int | None = None, settings: LLCSettings | None = None, **changes,
) -> LLCTarget:  # fmt: skip
    """The localized tempered target around ``w_star`` (module docstring).

    Parameters
    ----------
    w_star : dict or array
        Constrained values of every latent site (a trained network, a MAP, a draw), or the flat
        unconstrained vector.
    n : int, optional
        The number of examples; default the plates around the observed sites (P for the
        network). A model whose likelihood is a plate-less ``numpyro.factor`` needs it.
    settings, **changes
        The fields of :class:`~bayes_attn.inference.llc_settings.LLCSettings` (its docstring
        lists them with their defaults); the target reads ``nbeta`` (nβ, default n / log n),
        ``gamma`` (the localization strength γ >= 0; 0: none, then the loss or the prior must
        confine) and ``include_prior`` (multiply by the model's prior; default localization
        only, as devinterp).
    """
    s = with_changes(settings, LLCSettings, changes, where="llc_target").target_checked()
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    gamma, include_prior = s.gamma, s.include_prior
    full = flat_potential(full_plates(model), model_args, model_kwargs)
    x_star = _x_star(full, w_star)  # checked before the model is run
    if n is None:
        n = full.num_examples()
        if n is None:
            raise ValueError(
                "n: the model's likelihood is in no plate; give the number of examples"
            )
    n = check_int("n", n, 1)
    nbeta = default_nbeta(n) if s.nbeta is None else s.nbeta
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
"""The ``num_burnin="auto"`` rule's steps, in units of 1/(εγ) (:func:`~bayes_attn.inference.llc.run_llc`)."""


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


def llc_schedule(target: LLCTarget, sampler: str, step_size, num_burnin) -> tuple[float, int]:
    """(ε, burn-in steps) of :func:`~bayes_attn.inference.llc.run_llc` on ``target``, ``"auto"`` resolved (its docstring):
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
