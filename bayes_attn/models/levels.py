"""The three levels of the copy-task posterior and their names (docs/theory.md §1-5).

One table owns them: the CLI's name of each level, its NumPyro model, and the order parameters
each activation reports. Everything that needs "which level is this model" or "which order
parameters does this activation have" asks here. It is also the one model factory:
:func:`model_at` for a model on given data, :func:`model_with_data` for one on a dataset drawn
from a key (the CLI's ``sample``, the sweeps and the coexistence experiments call these).

========== ======================================= =========================================
name       model                                   what it samples
========== ======================================= =========================================
reduced    :func:`order_param_model` (Level 2)     the two order parameters
kernel     :func:`kernel_limit_model` (Level 1)    the (V+L)^2 matrix M of the d -> inf limit
network    :func:`network_model` (Level 0)         the weights of a finite network
========== ======================================= =========================================

For an :class:`~bayes_attn.induction.InductionTask` the same names give the two causal layers
(:mod:`bayes_attn.models.two_layer`): ``kernel`` is :func:`two_layer_kernel_model`, ``network``
:func:`two_layer_network_model`; there is no ``reduced`` level (yet).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import (
    ACTIVATIONS,
    LEVELS,
    check_activation,
    check_int,
    check_positive,
    check_tokens,
)
from bayes_attn.induction import InductionTask
from bayes_attn.keys import DATASET_FOLD, EMBEDDINGS_FOLD, dataset_key, run_key  # noqa: F401
from bayes_attn.models._sites import BOUNDARY_ACTIVATION, ORDER_PARAMETERS, order_parameters
from bayes_attn.models.kernel_limit import kernel_limit_model
from bayes_attn.models.network import network_model
from bayes_attn.models.order_params import order_param_model
from bayes_attn.models.two_layer import two_layer_kernel_model, two_layer_network_model

__all__ = [
    "ACTIVATIONS",
    "BOUNDARY_ACTIVATION",
    "LEVELS",
    "MODELS",
    "ORDER_PARAMETERS",
    "level_name",
    "level_of",
    "model_at",
    "model_with_data",
    "order_parameters",
    "seed_embeddings",
]


MODELS = {
    "reduced": order_param_model,
    "kernel": kernel_limit_model,
    "network": network_model,
}

#: names that files written before the CLI's names were used carry in ``attrs["level"]``
_OLD_NAMES = {"order_parameters": "reduced", "kernel_limit": "kernel", "network": "network"}


#: the induction task's models by level (two causal layers)
TWO_LAYER_MODELS = {"kernel": two_layer_kernel_model, "network": two_layer_network_model}


def level_of(model) -> str | None:
    """The CLI name of ``model``'s level, or None for a model that is not one of the package's."""
    both = list(MODELS.items()) + list(TWO_LAYER_MODELS.items())
    return next((name for name, m in both if m is model), None)


def level_name(value: str) -> str:
    """The CLI name for a level recorded in a file's attrs, old names included."""
    return _OLD_NAMES.get(value, value)


def model_at(
    level: str,
    task,
    hyper,
    data,
    activation: str,
    *,
    d_model: int | None = None,
    include_logdet: bool = False,
    batch_size: int | None = None,
    embeddings=None,
):
    """The one model factory: ``(model, model_args, model_kwargs)`` of ``level``.

    Parameters
    ----------
    data : float or (P, L) ints
        P for ``reduced``; the token sequences for ``kernel`` and ``network``.
    d_model : int
        The network's width (``network``); with ``embeddings`` it must match their width, and
        may be left out.
    include_logdet : bool
        ``reduced`` only: the equivalent-kernel log-determinant in the density.
    batch_size : int, optional
        ``network`` only: the minibatch of sequences (for SGLD); None or >= P is the full batch.
    embeddings : (W_emb, p), optional
        ``network`` only: the embeddings, held fixed.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    check_activation(activation)
    # the induction task's models are the two causal layers (models.two_layer), whose network
    # has no train_embeddings switch (frozen embeddings are given, or trained) and no minibatch
    two_layer = isinstance(task, InductionTask)
    if level == "reduced" and two_layer:
        raise ValueError(
            "level: the induction task has no reduced (Level-2) theory; use kernel or network"
        )
    if level == "reduced":
        return (
            order_param_model,
            (task, hyper, float(data), activation),
            ({"include_logdet": True} if include_logdet else {}),
        )
    model = (TWO_LAYER_MODELS if two_layer else MODELS)[level]
    tokens = jnp.asarray(check_tokens(data, task.L, task.V))
    if level == "kernel":
        return model, (task, hyper, tokens, activation), {}
    kw = {}
    if embeddings is not None:
        d_model = _embeddings_width(embeddings, d_model)
        kw = {"embeddings": tuple(embeddings)}
        if not two_layer:
            kw = {"train_embeddings": False, **kw}
    if d_model is None:
        raise ValueError("d_model: the network level needs a width (or the embeddings)")
    if batch_size and batch_size < np.shape(tokens)[0] and not two_layer:
        kw["batch_size"] = int(batch_size)
    return model, (task, hyper, tokens, activation, int(d_model)), kw


def _embeddings_width(embeddings, d_model) -> int:
    """The width of frozen embeddings, which ``d_model`` (when given) must equal."""
    d = int(np.shape(embeddings[0])[0])
    if d_model is not None and d_model != d:
        raise ValueError(f"d_model {d_model} does not match the embeddings' width {d}")
    return d


def seed_embeddings(task, hyper, d_model: int, *, seed: int | None = None, key=None):
    """The frozen embeddings ``(W_emb, p)`` of one prior draw of width ``d_model`` from the run's
    seed or key (``fold_in(key, EMBEDDINGS_FOLD)``, seed 0 when neither is given): the network
    whose exact posterior Level 1 with their Gram is, shared by the landscape and the LLC so that
    both see the same network at the same seed."""
    from bayes_attn.models.network import init_embeddings

    key = run_key(key, seed)
    d = check_int("d_model", d_model, 1)
    return init_embeddings(jax.random.fold_in(key, EMBEDDINGS_FOLD), task, hyper, d)


def model_with_data(
    level: str,
    task,
    hyper,
    P,
    activation: str,
    *,
    seed: int | None = None,
    key=None,
    d_model: int | None = None,
    include_logdet: bool = False,
    batch_size: int | None = None,
    embeddings=None,
):
    """:func:`model_at` on a dataset of ``P`` sequences drawn from a key: ``(model, args, kwargs)``.

    The dataset's key is :func:`bayes_attn.keys.dataset_key` (``jax.random.fold_in(key,
    DATASET_FOLD)``, with ``key = jax.random.key(seed)`` when a seed is given, seed 0 when neither
    is), so that a sampler run with the same seed or key draws independently of the data. ``reduced`` draws nothing: its
    data is P itself.

    Parameters
    ----------
    P : float (``reduced``) or int (``kernel``, ``network``)
    seed, key
        The run's seed or PRNG key (not both).
    d_model, include_logdet, batch_size, embeddings
        As in :func:`model_at`.
    """
    if level == "reduced":
        P = check_positive("P", P)
        return model_at(level, task, hyper, P, activation, include_logdet=include_logdet)
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    P = check_int("P", P, 1)
    tokens = task.sample(dataset_key(key, seed), P)
    return model_at(
        level, task, hyper, tokens, activation, d_model=d_model, include_logdet=include_logdet,
        batch_size=batch_size, embeddings=embeddings,
    )  # fmt: skip
