"""Argument checks that raise ``ValueError`` naming the offending parameter."""

from __future__ import annotations

import math
from numbers import Integral, Real

import jax
import numpy as np


def check_int(name: str, value, minimum: int) -> int:
    """Return ``value`` as an int, or raise if it is not an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral | np.integer):
        if isinstance(value, Real) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_positive(name: str, value) -> float:
    """Return ``value`` as a float, or raise if it is not finite and > 0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return x


def check_positive_array(name: str, value) -> np.ndarray:
    """Array version of :func:`check_positive` (for grids of P, say)."""
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite everywhere, got {value!r}")
    return arr


ACTIVATIONS = ("linear", "softmax")


def check_activation(activation: str) -> str:
    """Return the activation name, or raise listing the valid ones."""
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got {activation!r}"
        )
    return activation


def check_tokens(tokens, L: int, V: int) -> np.ndarray:
    """Validate an integer token array of shape (P, L) with entries in [0, V).

    Traced tokens (a model compiled with its data as an argument) are checked for shape only.
    """
    if isinstance(tokens, jax.core.Tracer):
        if tokens.ndim != 2 or tokens.shape[1] != L:
            raise ValueError(f"tokens must have shape (P, L) = (P, {L}), got {tokens.shape}")
        return tokens
    arr = np.asarray(tokens)
    if arr.ndim != 2 or arr.shape[1] != L or arr.shape[0] < 1:
        raise ValueError(f"tokens must have shape (P, L) = (P, {L}) with P >= 1, got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError("tokens must be integers in [0, V); got non-integer or NaN entries")
        arr = arr.astype(np.int32)
    if arr.min() < 0 or arr.max() >= V:
        raise ValueError(
            f"tokens must lie in [0, V) = [0, {V}), got range [{arr.min()}, {arr.max()}]"
        )
    return arr
