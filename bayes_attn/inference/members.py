"""Samplers over an ensemble, one chain per member on its own posterior, in one program.

:func:`sgld_program` drives the NumPyro kernel :class:`~bayes_attn.inference.sgld.SGLD` directly, in
one jitted program per (activation, P) that scans the steps and maps over the members (``MCMC``
would compile once per member, since each member has its own dataset); with several local devices
the members are split over them (:func:`~bayes_attn.inference.sharding.sharded_map`).
:func:`sgld_step_size` is the default step, from the potential's curvature. The protocol's SGLD
stage (:mod:`bayes_attn.experiments.protocol`) and the hysteresis sweep both run it.

:func:`member_nuts` is NUTS (BlackJAX) for an ensemble of posteriors that differ only in their data:
the first member's Laplace covariance is the (dense) metric and a short dual averaging on it sets the
step, and every member's chain then runs with them, the members mapped (and split over the local
devices) in one jitted program. The exact frozen-embedding protocol
(:mod:`bayes_attn.experiments.frozen`) runs it.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import algebra
from bayes_attn._validation import check_int
from bayes_attn.inference.hmc import LAPLACE_GRADIENTS, adapt_nuts_step, laplace_metric, nuts_scan
from bayes_attn.inference.potential import flat_potential
from bayes_attn.inference.sgld import SGLD
from bayes_attn.inference.sharding import sharded_map
from bayes_attn.models.network import forward, loss_per_token, network_model
from bayes_attn.progress import announce, seconds_per_call

__all__ = [
    "LAPLACE_GRADIENTS",
    "STEP_CAP",
    "STEP_SAFETY",
    "chain_means",
    "laplace_metric",
    "member_nuts",
    "member_observables",
    "sgld_program",
    "sgld_step_size",
]


STEP_CAP = 5e-4  # SGLD step at most STEP_CAP / d_model
STEP_SAFETY = 0.1  # and at most STEP_SAFETY / lambda_max


def sgld_step_size(potential, positions, d_model: int, *, iters: int = 40) -> float:
    """The default SGLD step: ``min(STEP_CAP / d_model, STEP_SAFETY / lambda_max)``.

    ``lambda_max`` is the largest eigenvalue of the potential's Hessian at the start of any member
    (``potential(member, z)``; ``positions`` flat, with a leading member axis), by ``iters`` power
    iterations with Hessian-vector products. The unadjusted Langevin step is stable only for
    eps lambda_max < 2, and inflates the stationary variance along the stiffest direction by
    1 / (1 - eps lambda_max / 2); the rule keeps that below 5%. The stiffness grows like P / sigma^2:
    at Table 1 (sigma^2 = 30), P = 800, d = 256, softmax, lambda_max = 5.7e5, so 5e-4 / d alone
    (eps lambda_max = 1.1) let SGLD diverge (docs/validation.md, "SGLD step").
    """
    members = positions.shape[0]

    def top(m, z):
        g = jax.grad(lambda x: potential(m, x))
        v = jax.random.normal(jax.random.key(0), z.shape, z.dtype)

        def body(v, _):
            w = jax.jvp(g, (z,), (v / jnp.linalg.norm(v),))[1]
            return w, None

        v = jax.lax.scan(body, v, None, length=iters)[0]
        u = v / jnp.linalg.norm(v)
        return u @ jax.jvp(g, (z,), (u,))[1]

    lam = jax.jit(jax.vmap(top))(jnp.arange(members), positions)
    lam_max = float(jnp.max(lam))
    return min(STEP_CAP / d_model, STEP_SAFETY / lam_max) if lam_max > 0 else STEP_CAP / d_model


def _split(params, train_embeddings):
    """A member's weights as (the latent sites, the frozen embeddings or None)."""
    emb = None if train_embeddings else (params["W_emb"], params["p"])
    latent = {n: w for n, w in params.items() if train_embeddings or n not in ("W_emb", "p")}
    return latent, emb


def _default_step(model, tokens, latent, emb, d_model):
    """:func:`sgld_step_size` at the members' weights, each member's density ``model(tokens[m],
    embeddings[m])`` through :func:`~bayes_attn.inference.potential.flat_potential`."""

    def potential(m, z):
        e = None if emb is None else (emb[0][m], emb[1][m])
        return flat_potential(model, (tokens[m], e)).U(z)

    first = None if emb is None else (emb[0][0], emb[1][0])
    ravel = flat_potential(model, (tokens[0], first)).ravel
    return sgld_step_size(potential, jax.vmap(ravel)(latent), d_model)


def sgld_program(
    task,
    hyper,
    activation,
    d_model,
    test,
    *,
    train_embeddings,
    factorized,
    warmup,
    steps,
    thinning=1,
    step_size,
    temperature,
    batch_size,
):
    """``run(keys, tokens, params)``: one SGLD chain per member from its weights ``params`` (leading
    member axis) on its dataset ``tokens``; per draw the order parameters on ``test`` and the train
    loss (:func:`member_observables`, computed inside the scan after every ``thinning`` steps, so memory
    does not grow with the number of draws). The kernel is driven directly in one jitted program
    (one compilation per P) that scans the steps and maps over the members; the embeddings, when
    frozen, enter the model as data, so each member keeps its own. The protocol's SGLD stage and
    :func:`~bayes_attn.experiments.hysteresis.hysteresis_sweep` both run it."""

    def model(tok, emb, full=False):
        network_model(
            task,
            hyper,
            tok,
            activation,
            d_model,
            factorized=factorized,
            train_embeddings=train_embeddings,
            batch_size=None if full else batch_size,
            embeddings=emb,
        )

    def build(step):
        kernel = SGLD(model, step_size=step, temperature=temperature)
        return jax.jit(lambda a: sharded_map(partial(one_member, kernel), a))

    def one_member(kernel, args):
        k, tok, params = args
        latent, emb = split(params)
        fixed = {} if emb is None else {"W_emb": emb[0], "p": emb[1]}
        state = kernel.init(k, warmup, latent, (tok, emb), {})

        def step(state, _):
            return kernel.sample(state, (tok, emb), {}), None

        def draw(state, _):  # observables inside the scan: no stack of draws, no vmap over them
            state = jax.lax.scan(step, state, None, length=thinning)[0]
            return state, member_observables({**fixed, **state.z}, tok, test, activation)

        state = jax.lax.scan(step, state, None, length=warmup)[0]
        return jax.lax.scan(draw, state, None, length=steps)[1]

    programs = {}
    split = partial(_split, train_embeddings=train_embeddings)

    def run(keys, tokens, params):
        """Per member and draw the observables; ``step_size`` (member,) the step used."""
        params = {n: jnp.asarray(w) for n, w in params.items()}
        tokens = jnp.asarray(tokens)
        if step_size is None:
            step = _default_step(partial(model, full=True), tokens, *split(params), d_model)
        else:
            step = step_size
        if step not in programs:
            programs[step] = build(step)
        obs = dict(programs[step]((keys, tokens, params)))
        obs["step_size"] = np.full(tokens.shape[0], step)
        return obs

    return run


def member_observables(params, tokens, test, activation):
    """Order parameters of the mean attention on the held-out tokens, and the train loss."""
    pr = algebra.project(forward(params, test, activation)[1])
    f, _ = forward(params, tokens, activation)
    loss = loss_per_token(f, tokens)
    return {"c1": pr["c1"], "cG": pr["cG"], "train_loss": loss}


def chain_means(obs: dict, activation: str) -> dict:
    """Per member, from the draws of a :func:`sgld_program` run: the means and sds of the order
    parameters (folded onto :func:`bayes_attn.algebra.z2_sign` for linear attention), the mean train
    loss and the step used. Keys ``q1``, ``qG``, ``q1_sd``, ``qG_sd``, ``train_loss``,
    ``step_size``; the order parameters are the projection's (c1, cG) for either activation."""
    q1, qG = np.asarray(obs["c1"]), np.asarray(obs["cG"])  # (member, draw)
    if activation == "linear":
        q1, qG = (np.asarray(x) for x in algebra.fold_sign(q1, qG))
    return {
        "q1": q1.mean(1),
        "qG": qG.mean(1),
        "q1_sd": q1.std(1),
        "qG_sd": qG.std(1),
        "train_loss": np.asarray(obs["train_loss"]).mean(1),
        "step_size": np.asarray(obs["step_size"]),
    }


def _announce_members(logdensity_fn, positions, first, num_adapt, steps):
    """The cost of :func:`member_nuts`: the Hessian, the adaptation and every member's chain, at
    :data:`LAPLACE_GRADIENTS` gradients per NUTS transition."""
    members, k = positions.shape
    seconds = seconds_per_call(jax.jit(jax.grad(lambda x: logdensity_fn(x, *first))), positions[0])
    lo, hi = LAPLACE_GRADIENTS
    transitions = num_adapt + members * steps
    announce(
        f"member_nuts: {members} members x {steps} draws in {k} dimensions, after a {k} x {k} "
        f"Hessian and {num_adapt} adaptation steps, {lo} to {hi} gradients per draw",
        (4 * k + lo * transitions, 4 * k + hi * transitions),
        seconds,
    )


def member_nuts(
    logdensity_fn,
    observe_fn,
    positions,
    member_args,
    *,
    key,
    num_adapt: int = 30,
    num_burn: int = 10,
    num_draws: int = 40,
    target_accept: float = 0.8,
    mesh=None,
    progress: bool = False,
) -> dict:
    """NUTS (BlackJAX) on every member's posterior, the members in one jitted program.

    The members' posteriors differ only in their data (their dataset, their embedding draw), so
    they share one metric and one step: the dense inverse mass matrix is the Laplace covariance at
    the first member's start (:func:`laplace_metric`), and the step size comes from ``num_adapt``
    steps of dual averaging (Hoffman & Gelman 2014, BlackJAX's ``dual_averaging_adaptation``) on
    the first member. Any fixed metric and step leave each member's posterior invariant, so sharing
    them costs only efficiency. Each member's chain then starts at its own position shifted by
    the way the first member's adaptation went (its end minus its start: a mode can lie many
    posterior sds from the bulk, and the members are alike), drops ``num_burn`` steps and keeps
    ``num_draws``.

    Parameters
    ----------
    logdensity_fn : callable
        ``logdensity_fn(x, *args)``: member ``m``'s log posterior at the flat position ``x``, with
        ``args`` its slice of ``member_args`` (traceable).
    observe_fn : callable
        ``observe_fn(x, *args)``: the quantities recorded at each draw (an array).
    positions : array (members, k)
        Every member's start, for example its MAP (where the Laplace metric is taken).
    member_args : tuple of arrays
        Each with a leading member axis.
    key : jax.random key
    num_adapt, num_burn, num_draws : int
    target_accept : float
        The dual averaging's target acceptance.
    mesh : jax.sharding.Mesh, optional
        Members are split over it (:func:`~bayes_attn.inference.sharding.sharded_map`; default
        the local devices).
    progress : bool
        Say what the run will cost before it starts (:func:`bayes_attn.progress.announce`).

    Returns
    -------
    dict
        ``draws`` (members, num_draws, ...) of ``observe_fn``; ``leapfrogs`` (members, num_burn +
        num_draws), the integration steps of every transition; ``step_size``;
        ``inverse_mass_matrix`` (k, k).
    """
    import blackjax

    num_adapt = check_int("num_adapt", num_adapt, 1)
    num_burn = check_int("num_burn", num_burn, 0)
    num_draws = check_int("num_draws", num_draws, 1)
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
    positions = jnp.asarray(positions)
    if positions.ndim != 2:
        raise ValueError(f"positions must have shape (members, k), got {positions.shape}")
    member_args = tuple(jnp.asarray(a) for a in member_args)
    first = tuple(a[0] for a in member_args)
    if progress:
        _announce_members(logdensity_fn, positions, first, num_adapt, num_burn + num_draws)
    inv_mass = jnp.asarray(laplace_metric(logdensity_fn, positions[0], first))
    k_adapt, k_run = jax.random.split(key)

    @jax.jit
    def adapt(key, x0, args, inv_mass):
        logdensity = lambda x: logdensity_fn(x, *args)  # noqa: E731
        state, step_size = adapt_nuts_step(key, x0, logdensity, inv_mass, num_adapt, target_accept)
        return step_size, state.position

    @jax.jit
    def run(keys, positions, member_args, step_size, inv_mass):
        def one(x, step_size, inv_mass):
            key, position, args = x
            logdensity = lambda z: logdensity_fn(z, *args)  # noqa: E731
            state = blackjax.nuts.init(position, logdensity)
            observe = lambda z: observe_fn(z, *args)  # noqa: E731
            n = num_burn + num_draws
            draws, _, leapfrogs, _ = nuts_scan(key, state, logdensity, step_size, inv_mass, n,
                                               observe)[1]  # fmt: skip
            return draws, leapfrogs

        return sharded_map(one, (keys, positions, member_args), step_size, inv_mass, mesh=mesh)

    step_size, end = adapt(k_adapt, positions[0], first, inv_mass)
    # every chain starts where the first member's adaptation ended, relative to its own start: a
    # mode can lie many posterior sds from the bulk (the linear crossover), and members are alike
    starts = positions + (end - positions[0])[None, :]
    n = positions.shape[0]
    draws, leapfrogs = run(jax.random.split(k_run, n), starts, member_args, step_size, inv_mass)
    return {
        "draws": np.asarray(draws)[:, num_burn:],
        "leapfrogs": np.asarray(leapfrogs),
        "step_size": float(step_size),
        "inverse_mass_matrix": np.asarray(inv_mass),
    }
