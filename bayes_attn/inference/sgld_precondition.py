"""A fixed diagonal preconditioner for SGLD (:class:`~bayes_attn.inference.sgld.SGLD`'s
``preconditioner=``) and the per-site curvature rule that builds one.

With a fixed diagonal G the SGLD step is

    z <- z - eps_t G grad U_batch(z) + sqrt(2 eps_t T G) xi,

the Euler step of dz = -G grad U dt + sqrt(2 T G) dW, whose stationary law is exp(-U / T) for every
constant positive G (the Fokker-Planck flux G (grad U p + T grad p) vanishes at p ∝ exp(-U / T)).
Because G does not depend on z, the term Gamma(z) = sum_j dG_ij / dz_j of Li et al. (2016), which
an adaptive (RMSProp) G needs and which their pSGLD drops at a bias, is zero here: the chain is the
plain unadjusted Langevin algorithm in the coordinates G^(-1/2) z, exact as eps -> 0, with its
O(eps) bias set by eps times the largest eigenvalue of G^(1/2) H G^(1/2) instead of H's (on a
Gaussian of precision h, the stationary variance of a coordinate is 1 / (h (1 - eps G h / 2))). A
G that evens out the curvatures allows a step many times larger, and the soft directions relax in
proportionally fewer steps.

:func:`site_preconditioner` sets G to one scalar per site, 1 / the largest curvature of the site's
diagonal block of the Hessian at a point, and the step to 0.1 / the largest curvature of
G^(1/2) H G^(1/2) there (the protocol's rule, :func:`~bayes_attn.inference.members.sgld_step_size`,
in the whitened coordinates). On the induction network at d = 256, P = 1000 (docs/validation.md,
"The induction head: posterior, profiles and LLC") the stiffness sits in the readout W_O alone
(3.9e6, against 65 and 125 for W_G1 and W_G2), and the step eps G on the attention weights grows
from 2.6e-8 to 2.8e-4 and 5.4e-4.

References
----------
C. Li, C. Chen, D. Carlson and L. Carin, "Preconditioned stochastic gradient Langevin dynamics",
AAAI 2016.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

__all__ = ["check_preconditioner", "check_sites", "preconditioned_move", "site_preconditioner"]


def check_preconditioner(preconditioner) -> dict | None:
    """``preconditioner`` as ``{site: float array}`` (None stays None), or a ``ValueError``
    naming it unless it is a dict whose scales are all finite and > 0."""
    if preconditioner is None:
        return None
    if not isinstance(preconditioner, dict):
        raise ValueError(
            f"preconditioner must be a dict {{site: scale > 0}} or None, got {preconditioner!r}"
        )
    out = {str(k): np.asarray(v, float) for k, v in preconditioner.items()}
    for k, v in out.items():
        if not (np.all(np.isfinite(v)) and np.all(v > 0)):
            raise ValueError(f"preconditioner[{k!r}] must be finite and > 0 everywhere")
    return out


def check_sites(G: dict | None, z: dict) -> None:
    """A ``ValueError`` naming ``preconditioner`` when G names a site that ``z`` lacks."""
    unknown = sorted(set(G or {}) - set(z))
    if unknown:
        raise ValueError(f"preconditioner has no latent site(s) {unknown} in the model")


def preconditioned_move(z: dict, z_grad: dict, noise, G: dict, eps, scale):
    """The flat z - eps G grad U + scale sqrt(G) xi (``scale`` = sqrt(2 eps T)), G broadcast
    site by site over ``z`` (a site left out of G at 1), ``noise`` the flat xi."""
    flat = ravel_pytree(z)[0]
    g = {n: jnp.broadcast_to(jnp.asarray(G.get(n, 1.0), flat.dtype), jnp.shape(v))
         for n, v in z.items()}  # fmt: skip
    g = ravel_pytree(g)[0]
    return flat - eps * g * ravel_pytree(z_grad)[0] + scale * jnp.sqrt(g) * noise


def _top(hvp, v, iters: int) -> float:
    """The largest eigenvalue of the symmetric operator ``hvp`` by ``iters`` power iterations."""
    for _ in range(iters):
        v = hvp(v / jnp.linalg.norm(v))
    u = v / jnp.linalg.norm(v)
    return float(u @ hvp(u))


def site_preconditioner(potential, position, *, iters: int = 30,
                        safety: float = 0.1) -> tuple[dict, float]:  # fmt: skip
    """``(G, step)``: G ``{site: 1 / h_s}``, h_s the largest eigenvalue of the site's diagonal
    block of the Hessian of ``potential.U`` (a :class:`~bayes_attn.inference.potential.Potential`)
    at the flat ``position``, and ``step`` = ``safety`` / the largest eigenvalue of
    G^(1/2) H G^(1/2) there (each by ``iters`` power iterations with Hessian-vector products).
    Module docstring."""
    z = jnp.asarray(position)
    grad = jax.grad(potential.U)
    at = jax.jit(lambda z, v: jax.jvp(grad, (z,), (v,))[1])  # z an argument: no constant folding

    def hvp(v):
        return at(z, v)

    start = jax.random.normal(jax.random.key(0), z.shape, z.dtype)
    G, edges, o = {}, {}, 0
    for name, shape in potential.shapes.items():  # the flat order of potential.unravel
        k = int(np.prod(shape))
        m = jnp.zeros_like(z).at[o : o + k].set(1.0)
        edges[name], o = (o, o + k), o + k
        h = _top(lambda v, m=m: m * hvp(m * v), m * start, iters)
        G[name] = 1.0 / h if h > 0 else 1.0
    root = jnp.concatenate([jnp.full(b - a, G[n] ** 0.5) for n, (a, b) in edges.items()])
    lam = _top(lambda v: root * hvp(root * v), start, iters)
    return G, safety / lam
