"""SGLD over an ensemble of networks, one chain per member on its own dataset, in one program.

:func:`sgld_program` drives the NumPyro kernel :class:`~bayes_attn.inference.sgld.SGLD` directly, in
one jitted program per (activation, P) that scans the steps and maps over the members (``MCMC``
would compile once per member, since each member has its own dataset); with several local devices
the members are split over them (:func:`~bayes_attn.inference.sharding.sharded_map`).
:func:`sgld_step_size` is the default step, from the potential's curvature. The protocol's SGLD
stage (:mod:`bayes_attn.experiments.protocol`) and the hysteresis sweep both run it.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer.util import potential_energy

from bayes_attn import algebra
from bayes_attn.inference.sgld import SGLD
from bayes_attn.inference.sharding import sharded_map
from bayes_attn.models.network import forward, loss_per_token, network_model

__all__ = [
    "STEP_CAP",
    "STEP_SAFETY",
    "chain_means",
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

    def split(params):
        emb = None if train_embeddings else (params["W_emb"], params["p"])
        latent = {n: w for n, w in params.items() if train_embeddings or n not in ("W_emb", "p")}
        return latent, emb

    def default_step(tokens, params):
        latent, emb = split(params)
        flat = jax.vmap(lambda t: ravel_pytree(t)[0])(latent)
        unravel = ravel_pytree(jax.tree.map(lambda w: w[0], latent))[1]

        def potential(m, z):
            e = None if emb is None else (emb[0][m], emb[1][m])
            return potential_energy(partial(model, full=True), (tokens[m], e), {}, unravel(z))

        return sgld_step_size(potential, flat, d_model)

    def run(keys, tokens, params):
        """Per member and draw the observables; ``step_size`` (member,) the step used."""
        params = {n: jnp.asarray(w) for n, w in params.items()}
        tokens = jnp.asarray(tokens)
        step = step_size if step_size is not None else default_step(tokens, params)
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
