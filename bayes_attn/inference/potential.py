"""The NumPyro bridge: a model and its arguments as a flat potential, its sites, and its modes.

Every sampler and measurement of the package that works on a model's density, rather than through
NumPyro's ``MCMC``, goes through this module (as NumPyro's own kernels go through
``numpyro.infer.util``): tempered SMC (:mod:`bayes_attn.inference.smc`), the basin evidence
(:mod:`bayes_attn.inference.basins`), NUTS's constrained initial values
(:mod:`bayes_attn.inference.nuts`), the coexistence experiments, umbrella sampling and the local
learning coefficient.

The space is NumPyro's unconstrained space: every latent site (a sample site that is not observed)
pushed through ``biject_to(support)``, flattened into one vector in the order of
``jax.flatten_util.ravel_pytree`` (sites sorted by name). The potential is NumPyro's potential
energy, minus the log joint there (log-Jacobians included), so ``exp(-U)`` integrates to the
model's evidence in any parameterisation.

* :func:`flat_potential` -> :class:`Potential`: ``U(x)``, ``unravel``, ``ravel``, the
  unconstrained value of a constrained start (:meth:`Potential.unconstrain`), every latent and
  deterministic site at a point (:meth:`Potential.sites`) and one site, traceable
  (:meth:`Potential.site`; a collective variable for umbrella sampling, the phase variable of a
  basin).
* :func:`split_log_density`: the same log joint split into a normalised reference and the rest,
  the path tempered SMC runs along.
* :func:`find_mode`: a local minimum of ``U`` from a start inside its basin (trust-region Newton);
  :func:`find_modes` from several starts on one compiled potential.
* :func:`hessian`: ``U``'s Hessian at a point, dense, by Hessian-vector products in chunks.
* :func:`unconstrained_init`: constrained initial values in the form ``MCMC.run`` expects.
* :func:`uniform_init`: NumPyro's default initial point (uniform in [-2, 2], unconstrained).
* :func:`seconds_per_gradient`: the wall time of one gradient of a model's potential.

Every function here hides the model's sites from enclosing handlers (``handlers.block``), so a
potential can be evaluated inside another NumPyro model (the whitened basin model, an umbrella
window).

References
----------
NumPyro, ``numpyro/infer/util.py`` (``potential_energy``, ``transform_fn``, ``constrain_fn``),
the pattern followed here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import get_transforms, transform_fn
from numpyro.primitives import Messenger

from bayes_attn._validation import check_int, check_positive

__all__ = [
    "abstract_trace",
    "Mode",
    "Potential",
    "SplitDensity",
    "HVP_METHODS",
    "find_mode",
    "find_modes",
    "flat_potential",
    "full_plates",
    "hessian",
    "seconds_per_gradient",
    "split_log_density",
    "uniform_init",
    "unconstrained_init",
]


# --------------------------------------------------------------------------------------------------
# Site helpers


def _base(fn):
    """Strip ExpandedDistribution / Independent / MaskedDistribution wrappers."""
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    return fn


def _is_improper(fn) -> bool:
    return isinstance(_base(fn), dist.ImproperUniform)


def _site_log_prob(site):
    lp = site["fn"].log_prob(site["value"])
    if site["scale"] is not None:
        lp = site["scale"] * lp
    return jnp.sum(lp)


def _is_latent(site) -> bool:
    return site["type"] == "sample" and not site["is_observed"]


def _trace_at(model, model_args, model_kwargs, u: dict, rng_key=None):
    """The model's trace with the latents at unconstrained ``u``, hidden from enclosing handlers;
    with ``rng_key`` the model is seeded (a subsample plate draws its indices from it)."""

    def sub(site):
        if site["type"] == "sample" and site["name"] in u:
            return biject_to(site["fn"].support)(u[site["name"]])
        return None

    if rng_key is not None:
        model = handlers.seed(model, rng_key)
    with handlers.block():
        return handlers.trace(handlers.substitute(model, substitute_fn=sub)).get_trace(
            *model_args, **model_kwargs
        )


class full_plates(Messenger):  # noqa: N801 - a NumPyro handler, named as NumPyro names them
    """Run every subsample plate over its whole range, so sites see all the data at scale 1."""

    def process_message(self, msg) -> None:
        if msg["type"] == "plate":
            size = msg["args"][0]
            msg["value"] = jnp.arange(size)
            msg["args"] = (size, None)


# --------------------------------------------------------------------------------------------------
# The reference / target split (tempered SMC's path)


class SplitDensity(NamedTuple):
    """The reference / target split that tempered SMC runs along (:func:`split_log_density`).

    Attributes
    ----------
    log_parts : callable
        ``log_parts(u) -> (log_ref, log_joint)`` for a dict ``u`` of unconstrained values.
        ``log_joint`` is minus NumPyro's potential energy; ``log_ref`` is the normalised reference
        (proper priors in unconstrained space, ``Normal(reference_loc, reference_scale)`` for
        improper sites).
    draw_reference : callable
        ``draw_reference(key) -> u``: one draw from the reference (prior draws of proper sites,
        the Normal for improper ones), in unconstrained space.
    shapes : dict
        Latent site name -> shape of its unconstrained value.
    improper : tuple of str
        The latent sites with an improper base distribution.
    """

    log_parts: Callable
    draw_reference: Callable
    shapes: dict
    improper: tuple


def split_log_density(
    model, model_args=(), model_kwargs=None, *, reference_loc=0.0, reference_scale=10.0
) -> SplitDensity:
    """Split ``model``'s log joint (unconstrained space) into a normalised reference and the rest.

    Latent sites are the sample sites that are not observed; observed sites and ``numpyro.factor``
    sites are likelihood. A latent site with a proper prior keeps it as its reference (its log
    density at the constrained value plus the log-Jacobian of its transform); one with an improper
    base (``ImproperUniform``) gets ``Normal(reference_loc, reference_scale)`` in unconstrained
    space. The model is only traced abstractly here (``jax.eval_shape``), so this costs no model
    evaluation.
    """
    model_args = tuple(model_args)
    model_kwargs = dict(model_kwargs or {})
    ref = dist.Normal(reference_loc, reference_scale)
    found: dict = {}

    def draw_reference(key):
        u = {}

        def sub(site):
            if not _is_latent(site):
                return None
            name = site["name"]
            improper = _is_improper(site["fn"])
            found[name] = improper
            if not improper:  # sample the prior, unconstrain below
                return None
            t = biject_to(site["fn"].support)
            u[name] = ref.sample(site["kwargs"]["rng_key"], t.inverse_shape(site["fn"].shape()))
            return t(u[name])

        with handlers.block():
            tr = handlers.trace(
                handlers.substitute(handlers.seed(model, rng_seed=key), substitute_fn=sub)
            ).get_trace(*model_args, **model_kwargs)
        for name, site in tr.items():
            if name in found and name not in u:
                u[name] = biject_to(site["fn"].support).inv(site["value"])
        return u

    shapes = jax.tree.map(lambda a: a.shape, jax.eval_shape(draw_reference, jax.random.key(0)))
    improper = tuple(sorted(n for n, flag in found.items() if flag))

    def log_parts(u):
        jac = {}

        def sub(site):
            name = site["name"]
            if site["type"] == "sample" and name in u:
                t = biject_to(site["fn"].support)
                x = u[name]
                v = t(x)
                ld = jnp.sum(t.log_abs_det_jacobian(x, v))
                jac[name] = ld if site["scale"] is None else site["scale"] * ld
                return v
            return None

        with handlers.block():
            tr = handlers.trace(handlers.substitute(model, substitute_fn=sub)).get_trace(
                *model_args, **model_kwargs
            )
        log_ref = jnp.zeros(())
        log_joint = jnp.zeros(())
        for name, site in tr.items():
            if site["type"] != "sample":
                continue
            lp = _site_log_prob(site)
            if name in u:
                lp = lp + jac[name]
                log_ref = log_ref + (jnp.sum(ref.log_prob(u[name])) if name in improper else lp)
            log_joint = log_joint + lp
        return log_ref, log_joint

    return SplitDensity(log_parts, draw_reference, shapes, improper)


# --------------------------------------------------------------------------------------------------
# The flat potential


class Potential(NamedTuple):
    """A model's potential over its flat unconstrained space (:func:`flat_potential`).

    Attributes
    ----------
    U : callable
        ``U(x)``: NumPyro's potential energy (minus the log joint, log-Jacobians included) at the
        flat unconstrained ``x`` (traceable).
    unravel : callable
        Flat ``x`` -> dict of unconstrained values per latent site.
    shapes : dict
        Latent site name -> shape of its unconstrained value.
    dim : int
        The length of ``x``.
    model, model_args, model_kwargs
        What it was built from.
    improper : tuple of str
        Latent sites with an improper base distribution.
    """

    U: Callable
    unravel: Callable
    shapes: dict
    dim: int
    model: Callable
    model_args: tuple
    model_kwargs: dict
    improper: tuple

    def log_density(self, x):
        """``-U(x)``: the log joint at the flat unconstrained ``x``."""
        return -self.U(x)

    def ravel(self, u: dict):
        """A dict of unconstrained values -> the flat ``x`` (the order of :attr:`unravel`)."""
        return ravel_pytree({n: jnp.asarray(u[n]) for n in self.shapes})[0]

    def unconstrain(self, start: dict):
        """The flat unconstrained ``x`` of ``start``, constrained values of every latent site."""
        missing = sorted(set(self.shapes) - set(start))
        if missing:
            raise ValueError(f"start: no value for the latent site(s) {missing}")
        unknown = sorted(set(start) - set(self.shapes))
        if unknown:
            raise ValueError(f"start: no latent site {unknown} in the model")
        seeded = handlers.seed(self.model, rng_seed=0)
        with handlers.block():
            tr = handlers.trace(handlers.substitute(seeded, data=start)).get_trace(
                *self.model_args, **self.model_kwargs
            )
        u = {
            n: biject_to(tr[n]["fn"].support).inv(jnp.asarray(tr[n]["value"])) for n in self.shapes
        }
        return self.ravel(u)

    def trace(self, x):
        """The model's trace with its latents at the flat unconstrained ``x`` (traceable)."""
        return _trace_at(self.model, self.model_args, self.model_kwargs, self.unravel(x))

    def log_likelihood(self, x, rng_key=None):
        """The log likelihood at ``x``: the observed sample sites and ``numpyro.factor`` sites,
        with their plates' scales (traceable). With ``rng_key`` the model is seeded, so that a
        subsample plate draws a minibatch (the estimate is then unbiased, scaled by N / b)."""
        tr = _trace_at(self.model, self.model_args, self.model_kwargs, self.unravel(x), rng_key)
        out = jnp.zeros(())
        for site in tr.values():
            if site["type"] == "sample" and site["is_observed"]:
                out = out + _site_log_prob(site)
        return out

    def log_prior(self, x):
        """The rest of the log joint at ``x``: the latent sites' log prior with the log-Jacobians
        of their transforms, ``-U(x) - log_likelihood(x)`` (traceable)."""
        return -self.U(x) - self.log_likelihood(x)

    def num_examples(self) -> int | None:
        """The number of examples of the likelihood: the product of the full sizes of the plates
        around the observed sites (the largest over sites), or None when no observed site sits
        in a plate (a ``numpyro.factor`` alone, say). The model is only traced abstractly
        (``jax.eval_shape``): the plates' sizes are static."""
        sizes = [
            int(np.prod([frame.size for frame in site["cond_indep_stack"]]))
            for site in abstract_trace(self.model, self.model_args, self.model_kwargs).values()
            if site["type"] == "sample" and site["is_observed"] and site["cond_indep_stack"]
        ]
        return max(sizes) if sizes else None

    def sites(self, x) -> dict:
        """Every latent and deterministic site's constrained value at ``x``, as numpy arrays."""
        tr = self.trace(jnp.asarray(x))
        return {
            n: np.asarray(s["value"])
            for n, s in tr.items()
            if s["type"] == "deterministic" or _is_latent(s)
        }

    def site(self, x, name: str):
        """One latent or deterministic site's constrained value at ``x`` (traceable)."""
        tr = self.trace(x)
        if name not in tr or not (tr[name]["type"] == "deterministic" or _is_latent(tr[name])):
            raise ValueError(
                f"{name!r} is not a latent or deterministic site of the model; it has "
                f"{sorted(n for n, s in tr.items() if s['type'] == 'deterministic' or _is_latent(s))}"
            )
        return tr[name]["value"]

    def scalar_site(self, name: str) -> Callable:
        """``q(x)``: the scalar site ``name`` at ``x`` (traceable); checks that it is a scalar."""
        value = jax.eval_shape(lambda x: self.site(x, name), jnp.zeros(self.dim))
        if int(np.prod(value.shape)) != 1:
            raise ValueError(f"{name!r} is not a scalar site (its shape is {value.shape})")
        return lambda x: jnp.reshape(self.site(x, name), ())


def abstract_trace(model, model_args=(), model_kwargs=None) -> dict:
    """The model's trace (seed 0) with every sample and deterministic value a
    ``jax.ShapeDtypeStruct`` and the other sites' values None: an abstract trace
    (``jax.eval_shape``), so nothing is computed or compiled; the sites' static fields (type,
    plates' ``args``, ``cond_indep_stack``, ``is_observed``) are the real trace's."""
    box: dict = {}

    def values():
        with handlers.block():
            box["trace"] = handlers.trace(handlers.seed(model, 0)).get_trace(
                *model_args, **(model_kwargs or {})
            )
        return {k: s["value"] for k, s in box["trace"].items() if s["type"] in _VALUED}

    shapes = jax.eval_shape(values)
    return {k: {**site, "value": shapes.get(k)} for k, site in box["trace"].items()}


_VALUED = ("sample", "deterministic")


def flat_potential(model, model_args=(), model_kwargs=None) -> Potential:
    """``model(*model_args, **model_kwargs)``'s potential over its flat unconstrained space."""
    model_args = tuple(model_args)
    model_kwargs = dict(model_kwargs or {})
    split = split_log_density(model, model_args, model_kwargs)
    flat0, unravel = ravel_pytree({n: jnp.zeros(s) for n, s in split.shapes.items()})

    def U(x):
        return -split.log_parts(unravel(x))[1]

    return Potential(
        U, unravel, dict(split.shapes), int(flat0.size), model, model_args, model_kwargs,
        split.improper,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Modes and curvature


class Mode(NamedTuple):
    """A local minimum of a potential (:func:`find_mode`).

    Attributes
    ----------
    x : numpy.ndarray
        The flat unconstrained position.
    U : float
        The potential there.
    converged : bool
        Whether the optimiser met its gradient tolerance.
    potential : Potential
    """

    x: np.ndarray
    U: float
    converged: bool
    potential: Potential

    def sites(self) -> dict:
        """Every latent and deterministic site's constrained value at the mode."""
        return self.potential.sites(self.x)


def find_mode(
    model,
    *,
    start: dict,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    radius: float = 0.1,
    maxiter: int = 2000,
    hvp: str = "exact",
) -> Mode:
    """Local minimum of NumPyro's potential from ``start`` (constrained values of the latents).

    A trust-region Newton method (scipy ``trust-krylov``, float64) whose steps are at most
    ``radius`` at first and at most 10 ``radius`` later (unconstrained units), so that it descends
    into the basin that contains the start instead of leaping over a barrier, as a quasi-Newton
    line search can. ``hvp``: how the Hessian-vector products of the Krylov steps are made,
    ``"exact"`` (forward-over-reverse) or ``"difference"`` (a forward difference of two gradients,
    relative error ~1e-8: one gradient per product instead of 3-4 gradients' cost, for large
    models; the stopping rule uses the exact gradient either way). :func:`find_modes` runs several
    starts on one compiled potential.
    """
    return find_modes(model, starts=[start], model_args=model_args, model_kwargs=model_kwargs,
                      radius=radius, maxiter=maxiter, hvp=hvp)[0]  # fmt: skip


#: how :func:`find_mode` makes its Hessian-vector products
HVP_METHODS = ("exact", "difference")


def find_modes(
    model,
    *,
    starts,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    radius: float = 0.1,
    maxiter: int = 2000,
    hvp: str = "exact",
    value_and_grad: Callable | None = None,
) -> list[Mode]:
    """:func:`find_mode` from each of ``starts`` (a sequence of constrained starts), the potential,
    its gradient and its Hessian-vector product compiled once for all of them.

    ``value_and_grad``: ``x -> (U(x), grad U(x))`` of the same potential computed another way
    (a faster compiled form), used instead of differentiating the model's; ``hvp="difference"``
    only."""
    from scipy import optimize

    radius = check_positive("radius", radius)
    maxiter = check_int("maxiter", maxiter, 1)
    if hvp not in HVP_METHODS or (value_and_grad is not None and hvp != "difference"):
        raise ValueError(f"hvp: {hvp!r} is not one of {HVP_METHODS} or not with value_and_grad")
    pot = flat_potential(model, model_args, model_kwargs)
    fg = value_and_grad or jax.jit(jax.value_and_grad(pot.U))
    last: dict = {}

    def fun(x):
        v, g = fg(jnp.asarray(x))
        g = np.asarray(g, dtype=np.float64)
        last.update(x=np.array(x, dtype=np.float64), g=g)
        return float(v), g

    if hvp == "exact":
        hvp_fn = jax.jit(lambda x, v: jax.jvp(jax.grad(pot.U), (x,), (v,))[1])

        def hessp(x, v):
            return np.asarray(hvp_fn(jnp.asarray(x), jnp.asarray(v)), dtype=np.float64)

    else:

        def hessp(x, v):
            x = np.asarray(x, dtype=np.float64)
            if "x" not in last or not np.array_equal(x, last["x"]):
                fun(x)
            g0 = last["g"]
            norm = float(np.linalg.norm(v))
            if norm == 0.0:
                return np.zeros_like(x)
            h = np.sqrt(np.finfo(np.float64).eps) * (1.0 + float(np.linalg.norm(x))) / norm
            g1 = np.asarray(fg(jnp.asarray(x + h * np.asarray(v)))[1], dtype=np.float64)
            return (g1 - g0) / h

    modes = []
    for start in starts:
        x0 = np.asarray(pot.unconstrain(start), dtype=np.float64)
        if not np.isfinite(fun(x0)[0]):
            raise ValueError("start: the log density is not finite there")
        res = optimize.minimize(
            fun,
            x0,
            jac=True,
            hessp=hessp,
            method="trust-krylov",
            options={
                "maxiter": maxiter,
                "gtol": 1e-7,
                "initial_trust_radius": radius,
                "max_trust_radius": 10 * radius,
            },
        )
        modes.append(Mode(np.asarray(res.x), float(res.fun), bool(res.success), pot))
    return modes


def hessian(fn, x, args=(), *, chunk: int = 30) -> np.ndarray:
    """The dense Hessian of the scalar ``fn(x, *args)`` at the flat ``x`` (float64, symmetrised),
    by Hessian-vector products ``chunk`` at a time (memory ``chunk x dim`` instead of the
    ``dim x dim`` Jacobian of the gradient). Compiled once per ``fn`` and ``chunk``: calls with
    the same function at other points or ``args`` reuse the compiled program."""
    x = jnp.asarray(x)
    k = x.shape[0]
    chunk = max(1, min(check_int("chunk", chunk, 1), k))
    H = np.asarray(_dense_hessian(fn, chunk, x, tuple(args)), dtype=np.float64)
    return 0.5 * (H + H.T)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _dense_hessian(fn, chunk, x, args):
    k = x.shape[0]
    grad = jax.grad(lambda z: fn(z, *args))

    def hvp(v):
        return jax.jvp(grad, (x,), (v,))[1]

    eye = jnp.eye(-(-k // chunk) * chunk, k, dtype=x.dtype).reshape(-1, chunk, k)
    return jax.lax.map(jax.vmap(hvp), eye).reshape(-1, k)[:k]


# --------------------------------------------------------------------------------------------------
# Initial values for NumPyro's MCMC


def unconstrained_init(model, model_args, model_kwargs, init_params, num_chains):
    """Constrained initial values (leading chain axis when ``num_chains > 1``) in NumPyro's
    unconstrained space, as ``MCMC.run(init_params=...)`` expects them for NUTS."""
    if init_params is None:
        return None
    num_chains = check_int("num_chains", num_chains, 1)
    first = {k: (v[0] if num_chains > 1 else v) for k, v in init_params.items()}
    try:
        transforms = get_transforms(handlers.seed(model, 0), model_args, model_kwargs, first)
    except NotImplementedError:  # a site left out has an improper prior: nothing to draw it from
        raise ValueError(
            f"init_params: give a value for every site with an improper prior (got {sorted(first)})"
        ) from None
    unknown = set(init_params) - set(transforms)
    if unknown:
        raise ValueError(f"init_params: no sample site {sorted(unknown)} in the model")
    return transform_fn({k: transforms[k] for k in init_params}, dict(init_params), invert=True)


def uniform_init(pot: Potential, key, num: int | None = None, *, radius: float = 2.0):
    """NumPyro's default initial point (``init_to_uniform``): uniform in [-radius, radius] in the
    flat unconstrained space of ``pot``, redrawn (up to 100 times, from ``fold_in(key, try)``)
    where the potential is not finite. ``num`` points with a leading axis, or one (None)."""
    n = 1 if num is None else check_int("num", num, 1)
    x = np.zeros((n, pot.dim))
    todo = np.ones(n, bool)
    potentials = jax.jit(jax.vmap(pot.U))
    for attempt in range(100):
        shape = (n, pot.dim)
        cand = np.asarray(jax.random.uniform(jax.random.fold_in(key, attempt), shape,
                                             minval=-radius, maxval=radius))  # fmt: skip
        ok = todo & np.isfinite(np.asarray(potentials(jnp.asarray(cand))))
        x[ok], todo = cand[ok], todo & ~ok
        if not todo.any():
            return x[0] if num is None else x
    raise ValueError(
        f"model: no finite log density at 100 uniform draws in [-{radius}, {radius}] of the "
        "unconstrained space; give init_params"
    )


def seconds_per_gradient(model, model_args=(), model_kwargs=None) -> float:
    """Wall time of one gradient of ``model``'s potential at its :func:`uniform_init` point,
    after compiling it (:func:`bayes_attn.progress.seconds_per_call`)."""
    from bayes_attn.progress import seconds_per_call

    pot = flat_potential(model, model_args, model_kwargs)
    return seconds_per_call(jax.jit(jax.grad(pot.U)), uniform_init(pot, jax.random.key(0)))
