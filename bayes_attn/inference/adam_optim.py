"""Adam's optimiser as an optax chain: a learning-rate schedule (a linear warm-up, then constant,
cosine or exponential decay), Adam, then :func:`early_stopping`, which freezes a member once its
objective stops improving. :func:`bayes_attn.inference.adam.train_adam` builds it from its
:class:`~bayes_attn.inference.adam.AdamSettings` (:func:`optimizer_for`).

References
----------
Paper Sec. 4 and Table 1 (Adam warm-up, early stopping).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from bayes_attn._validation import check_int, check_positive

__all__ = [
    "DECAYS",
    "EarlyStoppingState",
    "adam_optimizer",
    "early_stopping",
    "lr_schedule",
    "optimizer_for",
]

# --------------------------------------------------------------------------------------------------
# Early stopping as an optax transformation


class EarlyStoppingState(NamedTuple):
    best: jax.Array  # best objective seen
    wait: jax.Array  # steps since the last improvement
    step: jax.Array
    stopped_at: jax.Array  # step at which training stopped, -1 while it runs


def early_stopping(patience: int, min_delta: float = 0.0) -> optax.GradientTransformationExtraArgs:
    """Zero every update once ``value`` has not improved by more than ``min_delta`` for
    ``patience`` steps. Chain it after the optimiser; pass the objective as ``value=``."""

    def init(params):
        # best in the parameters' float dtype, and strongly typed: a weak-typed inf turns strong
        # after one update, and the changed input type would compile the training chunk twice
        floats = [
            w for w in jax.tree.leaves(params) if jnp.issubdtype(jnp.result_type(w), jnp.floating)
        ]
        dtype = jnp.result_type(*floats) if floats else jnp.result_type(float)
        return EarlyStoppingState(
            jnp.asarray(jnp.inf, dtype=dtype),
            jnp.asarray(0),
            jnp.asarray(0),
            jnp.asarray(-1),
        )

    def update(updates, state, params=None, *, value, **extra):
        del params, extra
        improved = value < state.best - min_delta
        best = jnp.where(improved, value, state.best)
        wait = jnp.where(improved, 0, state.wait + 1)
        newly = (state.stopped_at < 0) & (wait > patience)
        stopped_at = jnp.where(newly, state.step, state.stopped_at)
        frozen = stopped_at >= 0
        updates = jax.tree.map(lambda u: jnp.where(frozen, jnp.zeros_like(u), u), updates)
        return updates, EarlyStoppingState(best, wait, state.step + 1, stopped_at)

    return optax.GradientTransformationExtraArgs(init, update)


DECAYS = ("constant", "cosine", "exponential")


def lr_schedule(
    lr: float,
    warmup_steps: int = 0,
    warmup_init: float = 0.0,
    decay: str = "constant",
    decay_steps: int = 0,
    end_fraction: float = 1e-2,
):
    """The learning rate against the step: a linear warm-up from ``warmup_init`` to ``lr`` over
    ``warmup_steps``, then ``decay``:

    * ``"constant"``: ``lr`` for ever;
    * ``"cosine"``: cosine decay from ``lr`` to ``end_fraction * lr`` over ``decay_steps``;
    * ``"exponential"``: geometric decay from ``lr`` to ``end_fraction * lr`` over ``decay_steps``.

    Both decays hold ``end_fraction * lr`` after ``warmup_steps + decay_steps``. Returns a float
    (constant, no warm-up) or an optax schedule.
    """
    if decay not in DECAYS:
        raise ValueError(f"decay must be one of {DECAYS}, got {decay!r}")
    if decay == "constant":
        if not warmup_steps:
            return lr
        return optax.warmup_constant_schedule(warmup_init, lr, warmup_steps)
    decay_steps = check_int("decay_steps", decay_steps, 1)
    check_positive("end_fraction", end_fraction)
    end = lr * end_fraction
    if decay == "cosine":
        return optax.warmup_cosine_decay_schedule(
            warmup_init, lr, warmup_steps, warmup_steps + decay_steps, end_value=end
        )
    return optax.warmup_exponential_decay_schedule(
        warmup_init, lr, warmup_steps, decay_steps, end_fraction, end_value=end
    )


def adam_optimizer(
    lr: float,
    warmup_steps: int = 0,
    warmup_init: float = 0.0,
    *,
    patience: int,
    min_delta: float = 0.0,
    decay: str = "constant",
    decay_steps: int = 0,
    end_fraction: float = 1e-2,
) -> optax.GradientTransformationExtraArgs:
    """Adam on the schedule of :func:`lr_schedule` (by default a linear warm-up from
    ``warmup_init`` to ``lr`` over ``warmup_steps``, then constant), then :func:`early_stopping`."""
    schedule = lr_schedule(lr, warmup_steps, warmup_init, decay, decay_steps, end_fraction)
    return optax.chain(optax.adam(schedule), early_stopping(patience, min_delta))


def optimizer_for(s) -> optax.GradientTransformationExtraArgs:
    """:func:`adam_optimizer` of resolved settings ``s`` (an
    :class:`~bayes_attn.inference.adam.AdamSettings` whose ``decay_steps`` is filled in)."""
    return adam_optimizer(
        s.lr,
        s.warmup_steps,
        s.warmup_init,
        patience=s.patience,
        min_delta=s.min_delta,
        decay=s.decay,
        decay_steps=s.decay_steps,
        end_fraction=s.end_fraction,
    )
