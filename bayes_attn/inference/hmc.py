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
- :data:`GRADIENTS_PER_DRAW`: gradients per transition assumed by the cost announcements.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn.inference.potential import hessian

__all__ = [
    "GRADIENTS_PER_DRAW",
    "LAPLACE_GRADIENTS",
    "adapt_nuts_step",
    "laplace_metric",
    "nuts_scan",
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


def laplace_metric(logdensity_fn, position, args=(), *, chunk: int = 30) -> np.ndarray:
    """The Laplace covariance at ``position`` (1-D): the inverse of the Hessian of
    ``-logdensity_fn(position, *args)`` (:func:`bayes_attn.inference.potential.hessian`, by
    Hessian-vector products ``chunk`` at a time), its eigenvalues clipped to at least 1e-8 of the
    largest so that it is a valid HMC metric. The one Laplace metric of the package."""
    H = hessian(
        lambda x, *a: -logdensity_fn(x, *a), jnp.asarray(position), tuple(args), chunk=chunk
    )
    if not np.all(np.isfinite(H)):
        raise ValueError("position: the Hessian of the log density there is not finite")
    lam, Q = np.linalg.eigh(H)
    lam = np.maximum(lam, 1e-8 * max(float(lam[-1]), 1e-300))
    return (Q / lam) @ Q.T


def adapt_nuts_step(key, x0, logdensity, inv_mass, num_steps, target_accept):
    """BlackJAX NUTS from ``x0`` at a fixed inverse mass matrix, its step adapted by dual averaging
    (from 0.5, towards ``target_accept``) over ``num_steps`` steps: the last NUTS state and the
    adapted step. Traceable (vmap it over chains, members or windows)."""
    import blackjax
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    init, update, final = dual_averaging_adaptation(target_accept)
    kernel = blackjax.nuts.build_kernel()

    def step(carry, k):
        state, da = carry
        state, info = kernel(k, state, logdensity, jnp.exp(da.log_step_size), inv_mass)
        return (state, update(da, info.acceptance_rate)), None

    start = (blackjax.nuts.init(x0, logdensity), init(jnp.asarray(0.5, x0.dtype)))
    (state, da), _ = jax.lax.scan(step, start, jax.random.split(key, num_steps))
    return state, final(da)


def nuts_scan(key, state, logdensity, step_size, inv_mass, num_steps, observe=None):
    """``num_steps`` BlackJAX NUTS transitions from ``state`` (a ``blackjax.nuts.init`` state, or
    the one :func:`adapt_nuts_step` returns) at a fixed step and inverse mass matrix, the keys split
    from ``key``. Returns the last state and, per transition, ``(observe(position), acceptance,
    num_integration_steps, is_divergent)``; ``observe`` defaults to the position itself.
    Traceable."""
    import blackjax

    kernel = blackjax.nuts.build_kernel()
    observe = (lambda x: x) if observe is None else observe

    def draw(state, k):
        state, info = kernel(k, state, logdensity, step_size, inv_mass)
        return state, (observe(state.position), info.acceptance_rate,
                       info.num_integration_steps, info.is_divergent)  # fmt: skip

    return jax.lax.scan(draw, state, jax.random.split(key, num_steps))
