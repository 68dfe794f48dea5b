"""Argument checks that raise ``ValueError`` naming the offending parameter, and the two helpers
of the package's frozen dataclasses: :func:`with_changes` (settings plus keyword changes) and
:class:`Record` (``as_dict``)."""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from numbers import Integral, Real
from pathlib import Path

import jax
import jax.numpy as jnp
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


def check_bool(name: str, value) -> bool:
    """Return ``value``, or raise if it is not ``True`` or ``False`` (a TOML or JSON boolean)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
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


def check_nonnegative(name: str, value, zero: str = "") -> float:
    """Return ``value`` as a float, or raise if it is not finite and >= 0; ``zero`` says what 0
    means, in the message."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or x < 0:
        what = f" ({zero})" if zero else ""
        raise ValueError(f"{name} must be a finite number >= 0{what}, got {value!r}")
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
#: the CLI's names of the three levels (public home: :mod:`bayes_attn.models.levels`)
LEVELS = ("reduced", "kernel", "network")


def check_activation(activation: str) -> str:
    """Return the activation name, or raise listing the valid ones."""
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got {activation!r}"
        )
    return activation


def check_tokens(tokens, L: int | None, V: int, *, name: str = "tokens", batched: bool = True):
    """Validate integer tokens of shape (P, L) (``batched``; (..., L) otherwise) in [0, V).

    ``L`` None accepts any sequence length. Whole-number floats are cast to int32; other floats,
    NaNs, booleans and entries outside [0, V) raise a ``ValueError`` naming ``name``. Traced tokens
    (inside ``jit``, where values are unknown) are checked for rank, shape and dtype only.
    Returns a NumPy array (or the tracer).
    """
    where = f"(P, L) = (P, {L})" if L is not None else "(P, L)"
    shape = jnp.shape(tokens)
    if (batched and len(shape) != 2) or len(shape) < 1 or (L is not None and shape[-1] != L):
        raise ValueError(f"{name} must have shape {where}, got {shape}")
    if batched and shape[0] < 1:
        raise ValueError(f"{name} must hold at least one sequence (P >= 1), got shape {shape}")
    if isinstance(tokens, jax.core.Tracer):
        if not jnp.issubdtype(tokens.dtype, jnp.integer):
            raise ValueError(f"{name} must be integers in [0, V), got dtype {tokens.dtype}")
        return tokens
    arr = np.asarray(tokens)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise ValueError(f"{name} must be integers in [0, V), got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must be integers in [0, V); got non-integer or NaN entries")
        arr = arr.astype(np.int32)
    if arr.size and (arr.min() < 0 or arr.max() >= V):
        raise ValueError(
            f"{name} must lie in [0, V) = [0, {V}), got range [{arr.min()}, {arr.max()}]"
        )
    return arr


def check_attention(A, name: str = "A"):
    """Validate an attention tensor of shape (P, L, L) (a batch of sequences, L >= 2), finite.

    Traced tensors are checked for shape only. Returns the array (or the tracer).
    """
    shape = jnp.shape(A)
    if len(shape) < 3 or shape[-1] != shape[-2] or shape[-1] < 2:
        raise ValueError(
            f"{name} must be an attention tensor of shape (P, L, L) with L >= 2 (a batch of "
            f"sequences; a single (L, L) pattern: pass {name}[None]), got {shape}"
        )
    if not isinstance(A, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(A))):
        raise ValueError(f"{name} must be finite (got NaN or inf entries)")
    return A


def check_gram(gram, n: int, name: str = "gram"):
    """Validate the Gram W^T W / d of embeddings: (n, n), finite, symmetric, positive semidefinite.

    Traced Grams are checked for shape only. Returns the array (or the tracer).
    """
    shape = jnp.shape(gram)
    if shape != (n, n):
        raise ValueError(f"{name} must have shape (V + L, V + L) = ({n}, {n}), got {shape}")
    if isinstance(gram, jax.core.Tracer):
        return gram
    g = np.asarray(gram, dtype=float)
    if not np.all(np.isfinite(g)):
        raise ValueError(f"{name} must be finite (got NaN or inf entries)")
    scale = max(float(np.abs(g).max()), 1e-300)
    if np.abs(g - g.T).max() > 1e-8 * scale:
        raise ValueError(f"{name} must be symmetric (a Gram W^T W / d)")
    if np.linalg.eigvalsh(0.5 * (g + g.T))[0] < -1e-8 * scale:
        raise ValueError(f"{name} must be positive semidefinite (a Gram W^T W / d)")
    return gram


class SamplerDiverged(ValueError):
    """A sampler's state stopped being finite (or blew up) at a step: the step size is too large
    for the target's curvature. Raised by :func:`bayes_attn.inference.run_llc` (SGLD,
    RMSProp-SGLD, MALA) and :func:`bayes_attn.inference.run_sgld` between the chunks of their
    compiled loops; the message is one line (the sampler, the first step that went wrong, the
    step size, what to do), which ``bayes-attn`` prints as its error, with exit status 1.

    Attributes
    ----------
    sampler : str
    step : int
        The first step (counted from 1, burn-in included) whose state was not finite or had
        blown up, the earliest over the chains.
    step_size : float or str
        ε (a schedule's description for a schedule).
    chains : list of int
        The chains that diverged by the end of the chunk in which it was seen.
    """

    def __init__(self, sampler: str, step: int, step_size, chains=(), hint: str = ""):
        self.sampler, self.step, self.step_size = sampler, int(step), step_size
        self.chains = [int(c) for c in chains]
        eps = f"{step_size:.3g}" if isinstance(step_size, int | float) else str(step_size)
        s = "s" if len(self.chains) > 1 else ""
        which = f" (chain{s} {', '.join(map(str, self.chains))})" if self.chains else ""
        hint = hint or "halve the step size, or let it follow the curvature (step_size='auto')"
        super().__init__(
            f"{sampler} diverged at step {self.step}{which} with step size {eps}: the state is "
            f"no longer finite or has blown up; {hint}"
        )


def with_changes(settings, cls, changes: dict, *, where: str):
    """``settings`` (``cls()`` when None) with ``changes`` applied, each of which must name a field
    of the frozen dataclass ``cls``; the one way a function taking ``settings=`` and keyword
    ``**changes`` builds its settings. ``where`` names the caller in the error."""
    settings = cls() if settings is None else settings
    if not isinstance(settings, cls):
        raise TypeError(
            f"{where}: settings must be a {cls.__name__}, got {type(settings).__name__}"
        )
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise TypeError(
            f"{where}: unknown option(s) {unknown}; the options are the fields of "
            f"{cls.__name__}: {sorted(known)}"
        )
    return dataclasses.replace(settings, **changes) if changes else settings


class Record:
    """The base of the package's frozen record dataclasses that a result's attrs or a report
    reads as a dict (:class:`~bayes_attn.theory.boundaries.PhaseBoundaries`,
    :class:`~bayes_attn.theory.modes.WeightCrossing`): their one ``as_dict``."""

    def as_dict(self) -> dict:
        """The fields by name (:func:`dataclasses.asdict`: nested records, lists and tuples
        copied)."""
        return dataclasses.asdict(self)


def check_centres(name: str, value) -> np.ndarray:
    """Umbrella window centres: at least two distinct finite numbers, returned sorted (float64);
    a ``ValueError`` naming ``name`` otherwise."""
    try:
        c = np.sort(np.asarray(value, dtype=np.float64).ravel())
    except (TypeError, ValueError):
        c = np.array([])
    if c.size < 2 or not np.all(np.isfinite(c)) or np.any(np.diff(c) <= 0):
        raise ValueError(f"{name}: give at least two distinct finite window centres, got {value!r}")
    return c


def writable(path: Path, folder: bool) -> bool:
    """``os.access`` says yes, and so do the mode bits: root passes every access check, but a
    file or folder without any write bit was made read-only on purpose."""
    bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    return os.access(path, os.W_OK | (os.X_OK if folder else 0)) and bool(
        path.stat().st_mode & bits
    )


def check_output_folder(name: str, value) -> str:
    """``value`` a folder's path (a string; "" for none) that can be made and written: it is, or
    its nearest existing ancestor is, a writable folder. Nothing is made here."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a folder's path (a string), got {value!r}")
    if value:
        base = Path(value)
        while not base.exists() and base != base.parent:
            base = base.parent
        if not base.is_dir() or not writable(base, folder=True):
            raise ValueError(
                f"{name}: cannot write the folder {value} ({base} is not a writable folder)"
            )
    return value
