"""Adam training curves of the two-layer induction network: the plateau and the jump.

At a fixed P, :func:`training_point` trains the two-layer network
(:func:`~bayes_attn.inference.adam.train_adam` on an
:class:`~bayes_attn.induction.InductionTask`) on the sweep's in-context Markov source and on the
same source with doubly-stochastic chains, and records along training both layers' order
parameters, the held-out loss and the KL to each reference strategy. :func:`plateau` reads the
plateau off a held-out loss curve, against the references measured on the same held-out set:

- ``entry_step``, the first recorded step at which the loss is below the midpoint of the uniform
  and in-context-unigram losses (the unigram stage is reached);
- ``jump_step``, the first recorded step below the midpoint of the unigram and bigram losses (the
  induction head has formed);
- ``plateau_steps = jump_step - entry_step`` (NaN where the loss never jumps).

Edelman et al. report that the plateau shortens with doubly-stochastic chains, whose unigram
statistics are uninformative (the stationary law is uniform), so the unigram stage is no lure.

References
----------
docs/theory.md §12-13; Edelman et al., "The evolution of statistical induction heads" (NeurIPS
2024), Sec. 4; docs/validation.md, "The induction head: networks and training".
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bayes_attn._validation import check_int
from bayes_attn.induction import SCORES  # the order parameters sgld_check summarises
from bayes_attn.inference.adam_nets import TWO_LAYER_SERIES

__all__ = [
    "DESCRIPTIONS",
    "TRAINING_DEFAULTS",
    "check_training",
    "plateau",
    "sgld_check",
    "training_point",
]

#: the options of the ``induction_training`` sweep kind, with their defaults
TRAINING_DEFAULTS = {
    "d_model": 64,
    "lr": 1e-2,
    "max_steps": 1200,
    "chunk": 50,
    "batch_size": 64,  # sequences per Adam step (0: the full batch)
    "num_test": 300,
    "train_embeddings": True,
    "doubly_stochastic": [0, 1],  # 1: doubly-stochastic chains (the file's dim of that name)
}

#: the two-layer record's series this kind writes (all but the objective)
_SERIES = tuple(name for name in TWO_LAYER_SERIES if name != "objective")
_REFS = ("loss_bigram", "loss_unigram", "loss_uniform")

#: the variables an ``induction_training`` sweep writes whose meaning here differs from the one
#: table, :data:`bayes_attn.experiments.kinds.DESCRIPTIONS` (which describes the rest)
DESCRIPTIONS = {
    "train_loss": ("1", "training loss per target position along training"),
    "test_loss": ("1", "held-out loss per target position along training"),
    "uniform1": ("1", "layer 1: L x mean attention off the previous-token line (held-out)"),
    **{
        f"kl_{ref}": ("nats", f"held-out mean KL({ref} || network's clipped output)")
        for ref in ("bigram", "unigram", "uniform")
    },
    "loss_bigram": ("1", "held-out loss of the Dirichlet bigram on the same held-out set"),
}


def plateau(steps, loss, loss_uniform: float, loss_unigram: float, loss_bigram: float) -> dict:
    """The plateau of one held-out loss curve (``loss`` at ``steps``): ``{"entry_step",
    "jump_step", "plateau_steps"}``, the first steps below the uniform-unigram and the
    unigram-bigram midpoints and their difference (NaN where a crossing never happens)."""
    steps, loss = np.asarray(steps, dtype=float), np.asarray(loss, dtype=float)

    def first_below(level: float) -> float:
        hit = np.flatnonzero(loss <= level)
        return float(steps[hit[0]]) if hit.size else float("nan")

    entry = first_below(0.5 * (loss_uniform + loss_unigram))
    jump = first_below(0.5 * (loss_unigram + loss_bigram))
    return {"entry_step": entry, "jump_step": jump, "plateau_steps": jump - entry}


def check_training(cfg, options: dict) -> dict:
    """The kind needs an in-context Markov source; ``doubly_stochastic`` is a list of 0/1 flags."""
    from bayes_attn.tokens import InContextMarkov, parse_tokens

    if not isinstance(parse_tokens(cfg.tokens), InContextMarkov):
        raise ValueError(
            f"tokens: the induction_training kind needs an icl-markov source, got {cfg.tokens}"
        )
    flags = options["doubly_stochastic"]
    if not isinstance(flags, list | tuple) or not flags or any(f not in (0, 1) for f in flags):
        raise ValueError(f"doubly_stochastic must be a list of 0 and 1 flags, got {flags!r}")
    options["doubly_stochastic"] = [int(f) for f in flags]
    for name in ("d_model", "max_steps", "chunk", "num_test"):
        check_int(name, options[name], 1)
    check_int("batch_size", options["batch_size"], 0)
    return options


def training_point(cfg, pt, task, hyper) -> dict:
    """One grid point: Adam on the two-layer network at the point's (activation, L, V, P), seed
    ``pt["seed"]``, once per entry of ``doubly_stochastic``; the curves have dims
    (doubly_stochastic, chunk)."""
    from bayes_attn.induction import InductionTask
    from bayes_attn.inference.adam import AdamSettings, train_adam
    from bayes_attn.tokens import parse_tokens

    o = cfg.options
    settings = AdamSettings(
        lr=o["lr"],
        max_steps=o["max_steps"],
        patience=o["max_steps"],  # never stops early: every curve has every record
        chunk=o["chunk"],
        batch_size=o["batch_size"] or None,
        num_test=o["num_test"],
        train_embeddings=o["train_embeddings"],
    )
    src = parse_tokens(cfg.tokens)
    curves = []
    for flag in o["doubly_stochastic"]:
        t = InductionTask(task.L, task.V, dataclasses.replace(src, doubly_stochastic=bool(flag)))
        r = train_adam(t, hyper, pt["activation"], o["d_model"], int(pt["P"]), members=1,
                       seed=int(pt["seed"]), settings=settings, progress=False)  # fmt: skip
        curves.append(r.isel(member=0))
    out = {"train_step": (("chunk",), curves[0].step.values.astype(float))}
    for name in _SERIES:
        out[name] = (("doubly_stochastic", "chunk"), np.stack([c[name].values for c in curves]))
    for name in _REFS:
        out[name] = (("doubly_stochastic",), np.array([c.attrs[name] for c in curves]))
    marks = [
        plateau(c.step.values, c.test_loss.values, *(c.attrs[k] for k in _REFS[::-1]))
        for c in curves
    ]
    for name in ("entry_step", "jump_step", "plateau_steps"):
        out[name] = (("doubly_stochastic",), np.array([m[name] for m in marks]))
    return out


# --------------------------------------------------------------------------------------------------
# SGLD on the two-layer network, started from Adam (issue 43: "SGLD of the network at d = 256")


def sgld_check(
    task,
    hyper,
    P: int,
    activation: str = "softmax",
    *,
    seed: int = 0,
    d_model: int = 256,
    adam_steps: int = 1000,
    num_chains: int = 2,
    num_warmup: int = 500,
    num_samples: int = 1000,
    thinning: int = 10,
    step_size: float | None = None,
) -> dict:
    """SGLD (:func:`~bayes_attn.inference.sgld.run_sgld`, full batch) on
    :func:`~bayes_attn.models.two_layer.two_layer_network_model` at width ``d_model``, on the
    dataset :func:`~bayes_attn.experiments.induction.induction_map` draws for ``seed`` (so its
    kernel-limit MAP is the comparison), every chain started at an Adam solution of that dataset
    (``adam_steps`` steps, minibatches of 128). ``step_size`` defaults to the protocol's curvature
    rule at that start (:func:`~bayes_attn.inference.members.sgld_step_size`:
    min(5e-4 / d, 0.1 / the Hessian's largest eigenvalue)). Returns ``{name: float}``: each score's posterior mean, its spread
    over the draws, R-hat and bulk ESS (ArviZ), the Adam start's scores, and the sampler's
    mean |grad U|."""
    import arviz as az

    from bayes_attn.inference.adam import train_adam
    from bayes_attn.inference.members import sgld_step_size
    from bayes_attn.inference.potential import flat_potential
    from bayes_attn.inference.sgld import run_sgld
    from bayes_attn.keys import dataset_key, run_key
    from bayes_attn.models.two_layer import two_layer_network_model

    P = check_int("P", P, 1)
    tokens = task.sample(dataset_key(run_key(None, seed)), P)
    fit = train_adam(task, hyper, activation, d_model, P, members=1, seed=seed,
                     tokens=np.asarray(tokens)[None], max_steps=adam_steps, patience=adam_steps,
                     batch_size=128, return_params=True, progress=False)  # fmt: skip
    last = fit.isel(member=0, step=-1)
    names = ("W_emb", "p", "W_G1", "W_G2", "W_O")
    init = {n: np.repeat(fit[n].values, num_chains, axis=0) for n in names}
    args = (task, hyper, tokens, activation, d_model)
    if step_size is None:  # the curvature rule at the Adam solution (the protocol's)
        pot = flat_potential(two_layer_network_model, args)
        start = pot.ravel({n: init[n][0] for n in names})[None]
        step_size = sgld_step_size(lambda m, z: pot.U(z), start, d_model)
    eps = float(step_size)
    idata = run_sgld(two_layer_network_model, model_args=args,
                     num_chains=num_chains, num_warmup=num_warmup, num_samples=num_samples,
                     thinning=thinning, step_size=eps, seed=seed, init_params=init,
                     progress=False)  # fmt: skip
    post = idata.posterior
    rhat, ess = az.rhat(post[list(SCORES)]), az.ess(post[list(SCORES)])
    out = {"step_size": eps, "grad_norm": float(idata.sample_stats.grad_norm.mean())}
    for name in SCORES:
        out[name] = float(post[name].mean())
        out[f"{name}_sd"] = float(post[name].std())
        out[f"{name}_rhat"] = float(rhat[name])
        out[f"{name}_ess"] = float(ess[name])
        out[f"{name}_adam"] = float(last[name])
    out["adam_test_loss"] = float(last.test_loss)
    return out
