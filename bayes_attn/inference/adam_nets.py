"""The networks :func:`~bayes_attn.inference.adam.train_adam` trains, as plain functions of weights.

:func:`adam_network` picks one by the task: the one-layer network of a
:class:`~bayes_attn.task.CopyTask` (:mod:`bayes_attn.models.network`) or the two causal layers of
an :class:`~bayes_attn.induction.InductionTask` (:mod:`bayes_attn.models.two_layer`). Each is an
:class:`AdamNetwork`: its prior draw, its objective (the chi-scaled negative log-posterior, whose
minimum is the MAP) and what is recorded after every chunk of steps. The trainer has one loop and
one loss owner per model; this module only says which.

For the induction task the record holds both layers' order parameters
(:func:`~bayes_attn.models.two_layer.induction_scores`) and, on the held-out set, the KL from each
reference strategy to the network's output (:func:`~bayes_attn.theory.induction_refs.kl_to_strategies`,
the metric of Edelman et al.); the references' own held-out losses are constants of the held-out set
and go to the result's attrs.

References
----------
docs/theory.md §1 (Level 0), §12-13 (the induction task and its two-layer network).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp

from bayes_attn import algebra
from bayes_attn.induction import SCORES
from bayes_attn.models import network, two_layer
from bayes_attn.models.levels import order_parameters
from bayes_attn.theory import induction_refs

__all__ = ["AdamNetwork", "adam_network", "is_induction"]


class AdamNetwork(NamedTuple):
    """One network as the trainer sees it.

    ``init(key, d_model, factorized)`` draws the weights; ``objective(params, tokens, frozen=,
    scale=)`` is the negative log-posterior; ``observables(params, frozen, tokens, test_tokens)``
    the record of one member (scalars, and the mean patterns named in ``patterns``); ``series``
    maps the result's (member, step) variables to the record's names; ``dims`` gives a weight's
    dims; ``model`` names the NumPyro model whose MAP this is; ``attrs`` go to the result."""

    init: Callable
    objective: Callable
    observables: Callable
    series: dict
    patterns: tuple
    dims: Callable
    model: str
    attrs: dict


def is_induction(task) -> bool:
    """The task is causal next-token prediction (an InductionTask): two layers train."""
    return hasattr(task, "target_mask")


def adam_network(task, hyper, activation: str, test_tokens) -> AdamNetwork:
    """The :class:`AdamNetwork` of ``task``: one layer for the copy task, two causal layers for
    the induction task (``test_tokens`` fixes the references the KLs are measured against)."""
    if is_induction(task):
        return _two_layers(task, hyper, activation, test_tokens)
    return _one_layer(task, hyper, activation)


# --------------------------------------------------------------------------------------------------
# One layer: bayes_attn.models.network


def _one_layer(task, hyper, activation: str) -> AdamNetwork:
    names = order_parameters(activation)
    return AdamNetwork(
        init=lambda key, d, factorized: network.init_params(key, task, hyper, d, factorized),
        objective=functools.partial(_one_layer_objective, hyper=hyper, activation=activation),
        observables=functools.partial(_one_layer_observables, hyper=hyper, activation=activation),
        series={
            "train_loss": "train_loss",
            "test_loss": "test_loss",
            "objective": "objective",
            names[0]: "c1",
            names[1]: "cG",
            "token_residual": "token_residual",
        },
        patterns=("A_bar",),
        dims=_ONE_LAYER_DIMS.__getitem__,
        model="network_model",
        attrs={},
    )


def _one_layer_objective(params, tokens, *, frozen, scale, hyper, activation):
    return network.neg_log_posterior(params, tokens, hyper, activation, frozen=frozen, scale=scale)


def _one_layer_observables(params, frozen, tokens, test_tokens, *, hyper, activation):
    """Train and test loss per token (1/2 sum |y - f|^2 / (P L)), objective per token, and the
    order parameters of the mean attention over the test sequences."""
    full = {**frozen, **params}
    f_test, A = network.forward(full, test_tokens, activation)  # one forward: loss and attention
    pr = algebra.project(A)
    n_tok = tokens.shape[0] * tokens.shape[1]
    obj = network.neg_log_posterior(params, tokens, hyper, activation, frozen=frozen) / n_tok
    return {
        "train_loss": network.loss_per_token(network.forward(full, tokens, activation)[0], tokens),
        "test_loss": network.loss_per_token(f_test, test_tokens),
        "objective": obj,
        "c1": pr["c1"],
        "cG": pr["cG"],
        "token_residual": pr["token_residual"],
        "A_bar": pr["A_bar"],
    }


#: the dims of the embeddings, which both networks share (a weight's dims: ``AdamNetwork.dims``)
_EMBEDDING_DIMS = {"W_emb": ("hidden", "token"), "p": ("hidden", "position")}
_ONE_LAYER_DIMS = {
    **_EMBEDDING_DIMS,
    "W_O": ("token", "hidden"),
    "W_G": ("hidden", "hidden_k"),
    "W_Q": ("hidden_q", "hidden"),
    "W_K": ("hidden_q", "hidden_k"),
}


# --------------------------------------------------------------------------------------------------
# Two causal layers: bayes_attn.models.two_layer

#: the two-layer record's scalar series, in the result's order
TWO_LAYER_SERIES = (
    "train_loss",
    "test_loss",
    "objective",
    *SCORES,
    "kl_bigram",
    "kl_unigram",
    "kl_uniform",
)


def _two_layers(task, hyper, activation: str, test_tokens) -> AdamNetwork:
    refs = {
        f"loss_{k}": float(induction_refs.loss_per_token(p, test_tokens, task.V))
        for k, p in induction_refs.strategies(task, test_tokens).items()
    }
    return AdamNetwork(
        init=lambda key, d, factorized: _two_layer_init(key, task, hyper, d, factorized),
        objective=functools.partial(
            _two_layer_objective, task=task, hyper=hyper, activation=activation
        ),
        observables=functools.partial(
            _two_layer_observables, task=task, hyper=hyper, activation=activation
        ),
        series={k: k for k in TWO_LAYER_SERIES},
        patterns=("A1_bar", "A2_bar"),
        dims=_TWO_LAYER_DIMS.__getitem__,
        model="two_layer_network_model",
        attrs={**refs, "layers": 2},
    )


def _two_layer_init(key, task, hyper, d, factorized):
    if factorized:
        raise ValueError("factorized: the two-layer network trains full W_G1 and W_G2 only")
    return two_layer.init_network_params(key, task, hyper, d)


def _two_layer_objective(params, tokens, *, frozen, scale, task, hyper, activation):
    return two_layer.network_neg_log_posterior(
        params, tokens, task, hyper, activation, frozen=frozen, scale=scale
    )


def _two_layer_observables(params, frozen, tokens, test_tokens, *, task, hyper, activation):
    """Train and held-out loss per target position (1/2 |y - f|^2), the objective per target,
    both layers' scores on the held-out set, the KL from each reference to the output there, and
    the mean patterns of both layers."""
    full = {**frozen, **params}
    f_test, A1, A2 = two_layer.network_outputs(full, test_tokens, task, activation)
    f_train = two_layer.network_outputs(full, tokens, task, activation)[0]
    n_tok = tokens.shape[0] * (tokens.shape[1] - 1)
    obj = two_layer.network_neg_log_posterior(params, tokens, task, hyper, activation,
                                              frozen=frozen)  # fmt: skip
    out = {
        "train_loss": task.loss_per_token(f_train, tokens),
        "test_loss": task.loss_per_token(f_test, test_tokens),
        "objective": obj / n_tok,
        **two_layer.induction_scores(A1, A2, test_tokens, task.V),
        "A1_bar": jnp.mean(A1, axis=0),
        "A2_bar": jnp.mean(A2, axis=0),
    }
    kl = induction_refs.kl_to_strategies(task, test_tokens, f_test)
    out.update({f"kl_{k}": v for k, v in kl.items()})
    return out


_TWO_LAYER_DIMS = {
    **_EMBEDDING_DIMS,
    "W_G1": ("hidden", "hidden_k"),
    "W_G2": ("stream", "stream_k"),
    "W_O": ("token", "readout"),
}
