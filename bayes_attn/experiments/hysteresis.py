"""Hysteresis at the softmax first-order transition: sweep P up, then down, with warm-started Adam.

Every member keeps one pool of sequences and trains on its first P of them, so the datasets are
nested and each P starts from the previous P's solution. Going up, a network in the weak-copy phase
stays there until that phase stops being a minimum (the upper spinodal); going down, the strong-copy
phase survives to the lower spinodal. The two jump points should bracket the theory's first-order
P*, between its spinodals (metastability; docs/theory.md §7, "First order"). Measured at the paper
preset, Table 1 (docs/validation.md, "Hysteresis loop"): networks of width 32 with their embeddings
frozen at an orthonormal basis (:func:`orthonormal_start`, ``train_embeddings=False``: the objective
is then the Level-1 action on the data), 300 Adam steps per P, jump up between P = 285 and 300 and
down between 270 and 255, against the Level-2 spinodals 296.76 and 264.97 (P* = 275.97); with
embeddings at a prior draw (d = 256) the random Gram closes the loop to within one grid step of 10.

With ``sgld_steps`` the sweep also runs SGLD (temperature 1) from each Adam solution at every P;
in the setting above (300 steps per chain) its loop jumps in the same grid cells as Adam's: no chain
leaves the phase it starts in, so the SGLD loop is Adam's with thermal noise (docs/validation.md).

:func:`bayes_attn.theory.hysteresis.theory_sweep` (re-exported here) is the same protocol on the
reduced (Level-2) action: warm-started damped
Newton descent in the Gaussian coordinate, swept up and down in P. It is deterministic and exact:
a branch is followed until it stops being a minimum, so its jumps lie at the spinodals to within
the grid step, which makes it both the theory's hysteresis loop and a check of :func:`jump_points`.

References
----------
Paper Sec. 4 and App. A.7 (first-order transitions); docs/theory.md §7 ("First order": the
spinodals).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn._validation import check_activation, check_int
from bayes_attn.inference.adam import adam_keys, train_adam
from bayes_attn.inference.members import chain_means, sgld_program
from bayes_attn.models.levels import order_parameters
from bayes_attn.models.network import init_params
from bayes_attn.progress import bar as make_bar
from bayes_attn.theory.hysteresis import theory_sweep

__all__ = ["hysteresis_sweep", "jump_points", "orthonormal_start", "theory_sweep"]

_WEIGHTS = ("W_emb", "p", "W_G", "W_O", "W_Q", "W_K")


def _datasets(task, P_max: int, members: int, seed: int, adam_kwargs: dict):
    """Each member's pool of ``P_max`` sequences (every P trains on its first P), from ``seed``;
    puts train_adam's own held-out draw into ``adam_kwargs["test_tokens"]`` when none is given,
    made explicit for SGLD."""
    pool = jax.vmap(lambda k: task.sample(k, P_max))(
        jax.random.split(jax.random.key(seed), members)
    )
    if "test_tokens" not in adam_kwargs:
        k_test = adam_keys(seed=seed).test
        adam_kwargs["test_tokens"] = task.sample(k_test, adam_kwargs.pop("num_test", 100))
    return pool


def _sgld_chains(task, hyper, activation, d_model, adam_kwargs: dict, **options):
    """The SGLD program of :func:`hysteresis_sweep` (:func:`sgld_program`), on the network Adam
    trains (embeddings frozen or not, factorized or not) and the held-out set it measures on."""
    return sgld_program(
        task,
        hyper,
        activation,
        d_model,
        jnp.asarray(adam_kwargs["test_tokens"]),
        train_embeddings=bool(adam_kwargs.get("train_embeddings", True)),
        factorized=bool(adam_kwargs.get("factorized", False)),
        **options,
    )


def hysteresis_sweep(
    task,
    hyper,
    Ps,
    activation: str = "softmax",
    d_model: int = 32,
    *,
    members: int = 4,
    seed: int = 0,
    init: dict | None = None,
    progress: bool = True,
    sgld_steps: int = 0,
    sgld_warmup: int = 100,
    sgld_step: float | None = None,
    sgld_temperature: float = 1.0,
    sgld_batch_size: int | None = None,
    **adam_kwargs,
) -> xr.Dataset:
    """Train up the increasing ``Ps`` and back down, each P warm-started from its neighbour.

    Returns a Dataset over (direction = "up"/"down", P, member) with the final order parameters
    (``q1``, ``qG``: (a1, aG) for softmax, (c1, cG) for linear) and the train loss per token.
    ``init`` is the start at the smallest P (weights with a leading member axis, e.g.
    :func:`orthonormal_start`; default a prior draw). ``adam_kwargs`` go to
    :func:`bayes_attn.inference.train_adam` (lr, max_steps, patience, train_embeddings, ...); with
    ``train_embeddings=False`` the embeddings of ``init`` (or of the prior draw) stay fixed all along.

    With ``sgld_steps`` > 0, at every P (both ways) each member's Adam solution also starts an SGLD
    chain (:class:`~bayes_attn.inference.SGLD` on :func:`~bayes_attn.models.network_model`, the
    network and sampler of the protocol): ``sgld_warmup`` discarded steps, then ``sgld_steps``
    draws, step ``sgld_step`` (default: the protocol's curvature rule, ``sgld_step_size``), temperature
    ``sgld_temperature``, full-batch (ULA) unless ``sgld_batch_size``. With
    ``train_embeddings=False`` the chain holds the same frozen embeddings as Adam and samples
    (W_G, W_O); otherwise it samples the embeddings too. Recorded: ``sgld_q1``, ``sgld_qG`` (means
    over the draws), ``sgld_qG_sd`` (their standard deviation) and ``sgld_train_loss``, on the
    held-out sequences Adam measures on. The next P warm-starts from Adam's solution, not from the
    chain's last state: the Adam loop is the same with or without SGLD, and the SGLD loop asks, P by
    P, whether the phase that warm-started Adam carries there survives Langevin noise at the
    posterior's temperature (a chain crosses a barrier the MAP descent cannot), which moves its
    jumps inward from Adam's, towards P*, if the barriers are low enough to cross in that many steps.
    """
    check_activation(activation)
    Ps = sorted(check_int("P", P, 1) for P in Ps)
    members = check_int("members", members, 1)
    sgld_steps = check_int("sgld_steps", sgld_steps, 0)
    sgld_warmup = check_int("sgld_warmup", sgld_warmup, 0)
    pool = _datasets(task, Ps[-1], members, seed, adam_kwargs)
    sgld = None
    if sgld_steps:
        sgld = _sgld_chains(
            task, hyper, activation, d_model, adam_kwargs, warmup=sgld_warmup, steps=sgld_steps,
            step_size=sgld_step, temperature=sgld_temperature, batch_size=sgld_batch_size,
        )  # fmt: skip
    keys = ("q1", "qG", "train_loss") + (_SGLD_KEYS if sgld_steps else ())
    out = {k: np.full((2, len(Ps), members), np.nan) for k in keys}
    start = "prior" if init is None else "given"
    order = [(0, j) for j in range(len(Ps))] + [(1, j) for j in reversed(range(len(Ps)))]
    for direction, j in make_bar(order, f"hysteresis {activation}", progress):
        tokens = pool[:, : Ps[j]]
        ds = train_adam(
            task, hyper, activation, d_model, Ps[j], members=members, seed=seed, tokens=tokens,
            init=init, return_params=True, progress=False, **adam_kwargs,
        )  # fmt: skip
        init = {n: ds[n].values for n in _WEIGHTS if n in ds}
        row = _adam_row(ds, activation)
        if sgld is not None:
            key = jax.random.fold_in(jax.random.key(seed), 1 + direction * len(Ps) + j)
            row.update(_sgld_row(sgld(jax.random.split(key, members), tokens, init), activation))
        for k, v in row.items():
            out[k][direction, j] = v
    return xr.Dataset(
        {k: (("direction", "P", "member"), v) for k, v in out.items()},
        coords={"direction": ["up", "down"], "P": Ps, "member": np.arange(members)},
        attrs={
            "activation": activation,
            "d_model": d_model,
            **task.as_dict(),  # L, V, tokens
            "order_parameter": order_parameters(activation)[1],
            "start": start,
            "train_embeddings": int(bool(adam_kwargs.get("train_embeddings", True))),
            **_sgld_attrs(sgld_steps, sgld_warmup, sgld_step, sgld_temperature, sgld_batch_size),
        },
    )


def _sgld_attrs(steps, warmup, step, temperature, batch_size) -> dict:
    """The SGLD settings of :func:`hysteresis_sweep`'s attrs (zeros without SGLD)."""
    return {
        "sgld_steps": steps,
        "sgld_warmup": warmup if steps else 0,
        "sgld_step": (step or 0.0) if steps else 0.0,  # 0: per P, sgld_step_size
        "sgld_temperature": temperature if steps else 0.0,
        "sgld_batch_size": batch_size or 0,
    }


_SGLD_KEYS = ("sgld_q1", "sgld_qG", "sgld_qG_sd", "sgld_train_loss", "sgld_step_size")


def _adam_row(ds: xr.Dataset, activation: str) -> dict:
    """The final order parameters and train loss of one Adam ensemble, per member."""
    final = ds.isel(step=-1)
    q1, qG = order_parameters(activation)
    return {"q1": final[q1].values, "qG": final[qG].values, "train_loss": final.train_loss.values}


def _sgld_row(obs: dict, activation: str) -> dict:
    """Per member: the SGLD means, the sd of qG, the train loss, the step (:func:`chain_means`)."""
    m = chain_means(obs, activation)
    return {"sgld_" + k: m[k] for k in ("q1", "qG", "qG_sd", "train_loss", "step_size")}


def orthonormal_start(task, hyper, d_model: int, members: int, seed: int = 0) -> dict:
    """The prior draw :func:`~bayes_attn.inference.train_adam` starts from (same keys), with the
    embeddings W = [W_emb | p] (d x (V + L)) replaced by sqrt(d) times the orthonormal basis of their
    span (QR), so that their Gram W^T W / d is exactly the identity.

    Held fixed (``train_embeddings=False``), such embeddings make the network's objective the Level-1
    action on its dataset at any width d >= V + L, without the finite-width shift of a random Gram
    (E g^-1 = d / (d - V - L - 1) for a prior draw; docs/validation.md, "Hysteresis loop").
    Returns the weights with a leading member axis, for ``init``.
    """
    n = task.V + task.L
    d_model = check_int("d_model", d_model, n)
    members = check_int("members", members, 1)
    k_init = adam_keys(seed=seed).init  # train_adam's key of the initial draw
    keys = jax.random.split(k_init, members)
    draw = jax.vmap(lambda k: init_params(k, task, hyper, d_model))(keys)
    W = jnp.concatenate([draw["W_emb"], draw["p"]], axis=-1)  # (members, d, n)
    Q, R = jnp.linalg.qr(W)
    Q = Q * jnp.sign(jnp.diagonal(R, axis1=-2, axis2=-1))[:, None, :]  # unique: diag(R) > 0
    W = d_model**0.5 * Q
    draw = {**draw, "W_emb": W[..., : task.V], "p": W[..., task.V :]}
    return {k: np.asarray(v) for k, v in draw.items()}


def jump_points(
    ds: xr.Dataset, threshold: float | None = None, min_jump: float = 0.0, var: str = "qG"
) -> dict[str, float]:
    """Where the ensemble-median ``qG`` crosses ``threshold`` on the way up and on the way down.

    ``var`` names another variable of the same layout to read instead, e.g. ``"sgld_qG"``, the
    SGLD means of :func:`hysteresis_sweep`; the default threshold is then that variable's own.

    The default threshold is halfway between the smallest and the largest median ``qG`` of the
    sweep. The crossing is interpolated linearly in log P between grid points; NaN if none.
    With ``min_jump`` > 0 a sweep whose median ``qG`` spans less than ``min_jump`` has no jump
    (NaN both ways): without it the midpoint threshold also "finds" a crossing in a smooth creep.
    """
    med = ds[var].median("member")
    if float(med.max()) - float(med.min()) < min_jump:
        return {"up": float("nan"), "down": float("nan"), "threshold": float("nan")}
    if threshold is None:
        threshold = 0.5 * (float(med.min()) + float(med.max()))
    logP = np.log(ds.P.values.astype(float))
    out = {}
    for direction in ("up", "down"):
        q = med.sel(direction=direction).values
        above = q > threshold
        k = np.nonzero(above[1:] != above[:-1])[0]
        if k.size == 0:
            out[direction] = float("nan")
            continue
        # the first crossing met along the sweep: the lowest one going up, the highest going down
        i = k[0] if direction == "up" else k[-1]
        t = (threshold - q[i]) / (q[i + 1] - q[i])
        out[direction] = float(np.exp(logP[i] + t * (logP[i + 1] - logP[i])))
    out["threshold"] = threshold
    return out
