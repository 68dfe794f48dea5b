"""The one home of NUTS: BlackJAX's kernel, its step-size adaptation, the dense Laplace metric,
the scan of transitions and the cost per draw.

Every NUTS in the package is built from these parts: ``run_nuts``, the member ensembles
(:func:`~bayes_attn.inference.members.member_nuts`), the umbrella windows
(:mod:`bayes_attn.inference.umbrella`) and the LLC's NUTS (:mod:`bayes_attn.inference.llc`).
Each keeps its own loop over what it maps (chains, members, windows); the transition, the warm-up
and the metric come from here.

- :func:`laplace_metric`: the inverse of the Hessian of ``-log p`` at a point (a mode), its
  eigenvalues clipped, the dense metric of every Laplace-metric NUTS.
- :func:`adapt_nuts_step`: NUTS at a fixed metric, its step adapted by dual averaging (Hoffman &
  Gelman 2014) from 0.5 towards the target acceptance.
- :func:`nuts_scan`: ``num_steps`` NUTS transitions at a fixed step and metric, recording
  ``observe(position)``, the acceptance, the leapfrog count and the divergence of each.
- :func:`nuts_transitions`: NUTS transitions over given keys, recording the position, the log
  density and the scalar fields of ``NUTSInfo`` (the energy included): the draws of
  ``run_nuts``, in chunks.
- :func:`window_adaptation`: Stan's windowed warm-up (a fast window, slow windows that learn a
  diagonal or dense metric, a last fast window) as ``(init, update, final)`` one step at a time,
  so that a caller can run it in chunks (the LLC's NUTS: Ctrl-C and checkpoints between chunks);
  :func:`window_schedule` gives the stage of each step.
- :func:`step_adaptation`: the same one step at a time, at a fixed metric (a Laplace metric): the
  dual averaging of the step alone, chunkable as :func:`window_adaptation` is.
- :data:`GRADIENTS_PER_DRAW`: gradients per transition assumed by the cost announcements.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn.inference.potential import hessian

__all__ = [
    "GRADIENTS_PER_DRAW",
    "LAPLACE_GRADIENTS",
    "NUTS_STATS",
    "adapt_nuts_step",
    "laplace_metric",
    "nuts_scan",
    "nuts_transitions",
    "step_adaptation",
    "window_adaptation",
    "window_schedule",
]

#: gradients per NUTS transition in the Laplace metric, for the cost estimates: trees of depth 2
#: to 5. Measured: 15 (depth 4 at every draw) in the 900 dimensions of the README's d = 10^4
#: network, ~5 for a 5-dimensional Gaussian; a posterior far from Gaussian can take more.
LAPLACE_GRADIENTS = (3, 31)

#: gradients per NUTS transition assumed by the cost announcements, (low, high) by metric:
#: ``"adapt"`` (a metric learnt in warm-up), trees of depth 3 to 10; ``"laplace"``
#: (:data:`LAPLACE_GRADIENTS`); ``"window"`` (an umbrella window's Laplace metric, a biased
#: potential far from Gaussian near a barrier), depth 2 to 8.
GRADIENTS_PER_DRAW = {"adapt": (7, 1023), "laplace": LAPLACE_GRADIENTS, "window": (3, 255)}

#: the scalar fields of BlackJAX's ``NUTSInfo`` that :func:`nuts_transitions` records
NUTS_STATS = (
    "energy", "acceptance_rate", "num_integration_steps", "num_trajectory_expansions",
    "is_divergent",
)  # fmt: skip


def laplace_metric(
    logdensity_fn, position, args=(), *, chunk: int = 30, floor: float = 0.0
) -> np.ndarray:
    """The Laplace covariance at ``position`` (1-D): the inverse of the Hessian of
    ``-logdensity_fn(position, *args)`` (:func:`bayes_attn.inference.potential.hessian`, by
    Hessian-vector products ``chunk`` at a time), its eigenvalues taken by magnitude (a
    direction that curves down counts by its curvature) and clipped to at least ``floor`` and
    1e-8 of the largest, so that it is a valid HMC metric. The one Laplace metric of the
    package. ``floor``: a curvature the density is known to have everywhere (an LLC target's
    localization strength γ), for a ``position`` that is not a mode, where the Hessian may have
    eigenvalues near zero or below it."""
    H = hessian(
        lambda x, *a: -logdensity_fn(x, *a), jnp.asarray(position), tuple(args), chunk=chunk
    )
    if not np.all(np.isfinite(H)):
        raise ValueError("position: the Hessian of the log density there is not finite")
    lam, Q = np.linalg.eigh(H)
    lam = np.abs(lam)
    lam = np.maximum(lam, max(float(floor), 1e-8 * max(float(lam.max()), 1e-300)))
    return (Q / lam) @ Q.T


def _told(on_step, t, info) -> None:
    """``on_step(t, leapfrogs)`` after transition ``t``, traced (nothing when None)."""
    if on_step is not None:
        on_step(t, info.num_integration_steps)


def adapt_nuts_step(key, x0, logdensity, inv_mass, num_steps, target_accept, on_step=None):
    """BlackJAX NUTS from ``x0`` at a fixed inverse mass matrix, its step adapted by dual averaging
    (from 0.5, towards ``target_accept``) over ``num_steps`` steps: the last NUTS state and the
    adapted step. ``on_step(t, leapfrogs)``, if given, is traced after each transition ``t``
    with its leapfrog count, for progress (a ``jax.debug.callback``; it must not change the
    draws). Traceable (vmap it over chains, members or windows)."""
    import blackjax
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    init, update, final = dual_averaging_adaptation(target_accept)
    kernel = blackjax.nuts.build_kernel()

    def step(carry, xs):
        state, da = carry
        state, info = kernel(xs[0], state, logdensity, jnp.exp(da.log_step_size), inv_mass)
        _told(on_step, xs[1], info)
        return (state, update(da, info.acceptance_rate)), None

    start = (blackjax.nuts.init(x0, logdensity), init(jnp.asarray(0.5, x0.dtype)))
    xs = (jax.random.split(key, num_steps), jnp.arange(num_steps))
    (state, da), _ = jax.lax.scan(step, start, xs)
    return state, final(da)


def nuts_scan(key, state, logdensity, step_size, inv_mass, num_steps, observe=None,
              on_step=None):  # fmt: skip
    """``num_steps`` BlackJAX NUTS transitions from ``state`` (a ``blackjax.nuts.init`` state, or
    the one :func:`adapt_nuts_step` returns) at a fixed step and inverse mass matrix, the keys split
    from ``key``. Returns the last state and, per transition, ``(observe(position), acceptance,
    num_integration_steps, is_divergent)``; ``observe`` defaults to the position itself.
    ``on_step`` as for :func:`adapt_nuts_step`. Traceable."""
    import blackjax

    kernel = blackjax.nuts.build_kernel()
    observe = (lambda x: x) if observe is None else observe

    def draw(state, xs):
        state, info = kernel(xs[0], state, logdensity, step_size, inv_mass)
        _told(on_step, xs[1], info)
        return state, (observe(state.position), info.acceptance_rate,
                       info.num_integration_steps, info.is_divergent)  # fmt: skip

    xs = (jax.random.split(key, num_steps), jnp.arange(num_steps))
    return jax.lax.scan(draw, state, xs)


def nuts_transitions(keys, state, logdensity, step_size, inv_mass):
    """One BlackJAX NUTS transition per key of ``keys`` from ``state``, at a fixed step and
    inverse mass matrix. Returns the last state and, per transition, ``(position, logdensity,
    info)`` with ``info`` the scalar fields of BlackJAX's ``NUTSInfo`` (:data:`NUTS_STATS`: the
    energy, the acceptance, the integration steps, the doublings, the divergence; not the
    trajectory's states, which would cost memory per dimension). The draws are those of the keys
    alone: scanning the keys in chunks gives the same draws. Traceable."""
    import blackjax

    kernel = blackjax.nuts.build_kernel()

    def draw(state, k):
        state, info = kernel(k, state, logdensity, step_size, inv_mass)
        stats = {name: getattr(info, name) for name in NUTS_STATS}
        return state, (state.position, state.logdensity, stats)

    return jax.lax.scan(draw, state, keys)


class WindowState(NamedTuple):
    """One chain's warm-up (:func:`window_adaptation`)."""

    dual: Any  # the dual averaging of log ε (blackjax DualAveragingAdaptationState)
    welford: Any  # the metric's estimate in the current slow window (MassMatrixAdaptationState)
    step_size: jax.Array  # shape=(): the step in use
    inverse_mass_matrix: jax.Array  # shape=(D,) or (D, D): the metric in use


def window_schedule(num_steps: int) -> np.ndarray:
    """The stage of each of ``num_steps`` warm-up steps, shape ``(num_steps, 2)`` int: slow (1)
    or fast (0), and whether the step ends a slow window (Stan's 75 / 25, 50, ... / 50 steps,
    scaled down below 150; BlackJAX's ``build_schedule``)."""
    from blackjax.adaptation.staged_adaptation import build_schedule

    out = np.asarray(build_schedule(int(num_steps)), dtype=np.int32).reshape(-1, 2)
    return out if len(out) else np.zeros((0, 2), np.int32)


def window_adaptation(target_accept: float = 0.8, dense: bool = False):
    """Stan's window adaptation, one NUTS step at a time: ``(init, update, final)``.

    * ``init(key, position, logdensity) -> (nuts_state, WindowState)``: the NUTS state at
      ``position``, the identity metric and a first step found by doubling or halving from 1
      until the acceptance crosses ``target_accept`` (BlackJAX's ``find_reasonable_step_size``).
    * ``update(key, nuts_state, window, logdensity, stage) -> (nuts_state, window, info)``: one
      NUTS transition at the window's step and metric, then the dual averaging of the step (every
      stage) and the Welford estimate of the metric (slow stages); at the end of a slow window the
      metric becomes the window's (regularised) estimate and the dual averaging restarts from its
      average. ``stage`` is a row of :func:`window_schedule`.
    * ``final(window) -> (step_size, inverse_mass_matrix)``: the averaged step and the metric.

    ``dense``: a dense metric (else diagonal). Traceable (vmap it over chains); the keys are the
    caller's, so chunks of steps give the draws of one run.
    """
    import blackjax
    from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
    from blackjax.adaptation.step_size import (
        dual_averaging_adaptation,
        find_reasonable_step_size,
    )

    mm_init, mm_update, mm_final = mass_matrix_adaptation(not dense)
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    kernel = blackjax.nuts.build_kernel()
    hmc_kernel = blackjax.hmc.build_kernel()

    def init(key, position, logdensity):
        state = blackjax.nuts.init(position, logdensity)
        welford = mm_init(position.size)
        inv = welford.inverse_mass_matrix

        def trial(eps):
            return lambda k, s: hmc_kernel(k, s, logdensity, eps, inv, 1)

        one = jnp.asarray(1.0, position.dtype)
        eps = find_reasonable_step_size(key, trial, state, one, target_accept)
        return state, WindowState(da_init(eps), welford, eps, inv)

    def update(key, state, window, logdensity, stage):
        state, info = kernel(key, state, logdensity, window.step_size, window.inverse_mass_matrix)
        dual = da_update(window.dual, info.acceptance_rate)
        welford = jax.lax.cond(
            stage[0] == 1, lambda w: mm_update(w, state.position), lambda w: w, window.welford
        )
        window = WindowState(dual, welford, jnp.exp(dual.log_step_size), window.inverse_mass_matrix)

        def end(w):
            closed = mm_final(w.welford)
            dual = da_init(da_final(w.dual))
            return WindowState(dual, closed, jnp.exp(dual.log_step_size),
                               closed.inverse_mass_matrix)  # fmt: skip

        window = jax.lax.cond(stage[1] == 1, end, lambda w: w, window)
        return state, window, info

    def final(window):
        return jnp.exp(window.dual.log_step_size_avg), window.inverse_mass_matrix

    return init, update, final


class StepState(NamedTuple):
    """One chain's warm-up at a fixed metric (:func:`step_adaptation`)."""

    dual: Any  # the dual averaging of log ε (blackjax DualAveragingAdaptationState)
    step_size: jax.Array  # shape=(): the step in use


def step_adaptation(target_accept: float = 0.8):
    """NUTS's step adapted by dual averaging at a fixed inverse mass matrix (a Laplace metric,
    :func:`laplace_metric`), one step at a time: ``(init, update, final)``, as
    :func:`window_adaptation` but with no metric to learn.

    * ``init(key, position, logdensity, inverse_mass_matrix) -> (nuts_state, StepState)``: the
      NUTS state at ``position`` and a first step found by doubling or halving from 1 (the step
      of a whitened Gaussian) until the acceptance crosses ``target_accept``.
    * ``update(key, nuts_state, adapt, logdensity, inverse_mass_matrix) -> (nuts_state, adapt,
      info)``: one NUTS transition at the current step, then the dual averaging of the step.
    * ``final(adapt) -> step_size``: the averaged step.

    Traceable (vmap it over chains); the keys are the caller's, so chunks of steps give the draws
    of one run. The metric is an argument, not part of the state, so that chains share one copy.
    """
    import blackjax
    from blackjax.adaptation.step_size import (
        dual_averaging_adaptation,
        find_reasonable_step_size,
    )

    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    kernel = blackjax.nuts.build_kernel()
    hmc_kernel = blackjax.hmc.build_kernel()

    def init(key, position, logdensity, inverse_mass_matrix):
        state = blackjax.nuts.init(position, logdensity)

        def trial(eps):
            return lambda k, s: hmc_kernel(k, s, logdensity, eps, inverse_mass_matrix, 1)

        one = jnp.asarray(1.0, position.dtype)
        eps = find_reasonable_step_size(key, trial, state, one, target_accept)
        return state, StepState(da_init(eps), eps)

    def update(key, state, adapt, logdensity, inverse_mass_matrix):
        state, info = kernel(key, state, logdensity, adapt.step_size, inverse_mass_matrix)
        dual = da_update(adapt.dual, info.acceptance_rate)
        return state, StepState(dual, jnp.exp(dual.log_step_size)), info

    def final(adapt):
        return jnp.exp(adapt.dual.log_step_size_avg)

    return init, update, final
