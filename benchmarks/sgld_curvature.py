"""Numbers in docs/validation.md "SGLD step": the largest Hessian eigenvalue of the network's
potential at Adam's solution, and eps * lambda_max for the old fixed step 5e-4 / d.

Two members of width 256, P sequences (key 0), Adam as in the protocol (300 steps, lr 1e-2, cosine
to 1e-4, embeddings frozen at their prior draw; softmax warm-up over the first 10%), then 40 power
iterations with Hessian-vector products of the potential in (W_G, W_O).

Run: ``.venv/bin/python benchmarks/sgld_curvature.py SIGMA2 P ACTIVATION`` (e.g. ``30 800
softmax``; about a minute).
"""

import sys

import jax
import jax.numpy as jnp

import bayes_attn as ba
from bayes_attn.inference.adam import train_adam
from bayes_attn.inference.members import sgld_step_size
from bayes_attn.inference.potential import flat_potential
from bayes_attn.models.network import network_model

sigma2, P, act = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
task, hyper, d = ba.CopyTask.paper(), ba.Hyper.paper().replace(sigma2=sigma2), 256
tokens = jax.vmap(lambda k: task.sample(k, P))(jax.random.split(jax.random.key(0), 2))
ds = train_adam(
    task,
    hyper,
    act,
    d,
    P,
    members=2,
    tokens=tokens,
    lr=1e-2,
    decay="cosine",
    end_fraction=1e-2,
    warmup_steps=30 if act == "softmax" else 0,
    warmup_init=1e-6,
    max_steps=300,
    return_params=True,
    progress=False,
)
for m in range(2):
    par = {n: jnp.asarray(ds[n].values[m]) for n in ("W_G", "W_O")}
    emb = (jnp.asarray(ds["W_emb"].values[m]), jnp.asarray(ds["p"].values[m]))
    pot = flat_potential(network_model, (task, hyper, tokens[m], act, d),
                         {"train_embeddings": False, "embeddings": emb})  # fmt: skip
    step = sgld_step_size(lambda _, z, pot=pot: pot.U(z), pot.ravel(par)[None], d)
    lam = 0.1 / step if step < 5e-4 / d else float("nan")  # the rule's inverse, when it binds
    print(
        f"sigma2 = {sigma2}, P = {P}, {act}, member {m}: lambda_max = {lam:.4g}, "
        f"5e-4/d * lambda_max = {5e-4 / d * lam:.3f}, rule step = {step:.3g}"
    )
