"""Level 2 as a NumPyro model: the reduced posterior over the order parameters.

References
----------
Paper Sec. 3.3; docs/theory.md §3-5 (Level 2).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_positive
from bayes_attn.theory.action import action_linear, action_softmax, logdet_ek, scales


def softmax_support(L: int):
    """The support (-L/(L-1), L) of aG."""
    return constraints.open_interval(-L / (L - 1.0), float(L))


def order_param_model(task, hyper, P, activation: str, include_logdet: bool = False):
    """Density exp(-chi s) over the order parameters, at the physical chi.

    Linear: sites ``c1`` and ``cG`` on the real line. Softmax: a site ``aG`` on its support
    (-L/(L-1), L); the density of the logit gap cG is carried over by the Jacobian dcG/daG, and ``cG``
    and ``a1`` are deterministic sites. The log-determinant, O(1) against O(chi), is left out as in the
    paper unless ``include_logdet`` (its equivalent-kernel form, :func:`theory.logdet_ek`).
    """
    check_activation(activation)
    P = check_positive("P", P)
    sc = scales(task, hyper)
    flat = dist.ImproperUniform
    if activation == "linear":
        c1 = numpyro.sample("c1", flat(constraints.real, (), ()))
        cG = numpyro.sample("cG", flat(constraints.real, (), ()))
        log_density = -hyper.chi * action_linear(jnp.stack([c1, cG], -1), P, sc)
        a1, aG = c1, cG
    else:
        L = task.L
        aG = numpyro.sample("aG", flat(softmax_support(L), (), ()))
        cG = numpyro.deterministic("cG", algebra.softmax_logit(aG, L))
        a1 = numpyro.deterministic("a1", 1.0 - aG / L)
        log_density = -hyper.chi * action_softmax(cG, P, sc)
        log_density = log_density + jnp.log(algebra.softmax_dlogit(aG, L))
    if include_logdet:
        log_density = log_density - logdet_ek(a1, aG, P, sc)
    numpyro.factor("action", log_density)
