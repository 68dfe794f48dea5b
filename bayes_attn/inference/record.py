"""What a run was: the record every sampler and trainer writes into its results' attrs.

Every file that a run writes (NUTS, SGLD, SMC, Adam, sweeps) carries, in the attrs of every group:

- ``sampler`` (``nuts``, ``sgld``, ``smc`` or ``adam``) and its settings: ``seed``, ``chains``,
  ``warmup``, ``draws`` and ``thinning``, plus the sampler's own (step size, particles, ...);
- ``level``, under the CLI's names (``reduced``, ``kernel``, ``network``; :mod:`bayes_attn.models.levels`),
  and ``model``, the model function's name;
- the model's arguments, read by binding them to the model's signature (nothing is guessed from
  positions): the task (``L``, ``V``, ``tokens``: the token source's spec,
  :mod:`bayes_attn.tokens`), the hyperparameters (``chi``, ``g_w``, ``g_o``, ``sigma2``),
  ``activation``, ``P`` (given, or the number of token sequences), ``d_model``, and every other
  option with its real type. NetCDF has no booleans, so a flag is stored as the integer 0 or 1;
  an array option is recorded by its shape (``<name>_shape``; a tuple of arrays, such as
  ``embeddings``, as ``embeddings_shapes``); ``None`` is left out;
- ``bayes_attn_version`` and the versions of jax, numpyro, arviz and blackjax, and ``created``
  (UTC, ISO 8601).

:func:`header` turns these attrs back into the one line that ``diagnose`` prints. An Adam ensemble
(:func:`~bayes_attn.inference.train_adam`) records its members as ``chains``, its learning-rate
warm-up as ``warmup``, its records as ``draws`` and the steps between records as ``thinning``; the
line says so in an ensemble's words (members, warm-up steps, steps, recorded every k steps).
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import numbers
from importlib import metadata

import numpy as np

import bayes_attn
from bayes_attn.models.levels import level_name, level_of

__all__ = ["RunRecord", "header", "model_attrs", "tokens_of", "versions"]

_LIBRARIES = ("jax", "numpyro", "arviz", "blackjax")


def versions() -> dict[str, str]:
    """The package's version and those of the libraries a result depends on."""
    out = {"bayes_attn_version": bayes_attn.__version__}
    for lib in _LIBRARIES:
        try:
            out[f"{lib}_version"] = metadata.version(lib)
        except metadata.PackageNotFoundError:  # pragma: no cover - all are dependencies
            out[f"{lib}_version"] = "not installed"
    return out


def _attr_value(value):
    """``value`` as a NetCDF attribute of its own type, or None when it has no such form."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        return value
    return None


def _bind(model, model_args, model_kwargs) -> inspect.BoundArguments:
    """The call's arguments bound to ``model``'s signature, defaults applied (TypeError if they
    do not fit)."""
    bound = inspect.signature(model).bind(*model_args, **dict(model_kwargs or {}))
    bound.apply_defaults()
    return bound


def model_attrs(model, model_args=(), model_kwargs=None) -> dict:
    """The attrs that describe ``model(*model_args, **model_kwargs)``: level, task, hyperparameters,
    activation, P and the typed options (module docstring).

    The arguments are bound to the model's signature, so each value is recorded under the name of
    the parameter it was passed for.
    """
    attrs = {"model": getattr(model, "__name__", type(model).__name__)}
    level = level_of(model)
    if level is not None:
        attrs["level"] = level
    try:
        bound = _bind(model, model_args, model_kwargs)
    except TypeError as err:
        raise TypeError(f"model_args / model_kwargs do not fit {attrs['model']}: {err}") from None
    for name, value in bound.arguments.items():
        if isinstance(value, bayes_attn.CopyTask):
            attrs.update(value.as_dict())  # L, V and the token source's spec
        elif isinstance(value, bayes_attn.Hyper):
            attrs.update(value.as_dict())
        elif name == "tokens" and np.ndim(value) == 2:
            attrs["P"] = int(np.shape(value)[0])
        elif value is None:
            continue
        elif isinstance(value, tuple | list):
            attrs[f"{name}_shapes"] = ", ".join(str(tuple(np.shape(v))) for v in value)
        elif np.ndim(value) > 0:
            attrs[f"{name}_shape"] = np.asarray(np.shape(value), dtype=np.int64)
        else:
            v = _attr_value(value)
            if v is not None:
                attrs[name] = v
    return attrs


def tokens_of(model, model_args=(), model_kwargs=None):
    """The ``tokens`` argument of the call, or None for a model without one."""
    try:
        tokens = _bind(model, model_args, model_kwargs).arguments.get("tokens")
    except TypeError:
        return None
    return tokens if tokens is not None and np.ndim(tokens) == 2 else None


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The settings of one run; :meth:`attrs` is what its results carry.

    ``settings`` holds the sampler's own options (step size, particles, ...), with real types.
    """

    sampler: str
    seed: int
    chains: int
    warmup: int
    draws: int
    thinning: int = 1
    settings: dict = dataclasses.field(default_factory=dict)

    def attrs(self, model=None, model_args=(), model_kwargs=None) -> dict:
        out = {
            "sampler": self.sampler,
            "seed": int(self.seed),
            "chains": int(self.chains),
            "warmup": int(self.warmup),
            "draws": int(self.draws),
            "thinning": int(self.thinning),
        }
        for k, v in self.settings.items():
            v = _attr_value(v)
            if v is not None:
                out[k] = v
        if model is not None:
            out.update(model_attrs(model, model_args, model_kwargs))
        out.update(versions())
        out["created"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        return out


def _ensemble_words(a: dict) -> list[str]:
    """An Adam ensemble's record in its own words: members, the learning-rate warm-up, the steps
    and how often they were recorded (its ``chains``, ``warmup``, ``draws`` and ``thinning``)."""

    def get(key):
        return int(np.asarray(a[key]).item()) if key in a else None

    seed, members, warm = get("seed"), get("chains"), get("warmup")
    records, every, most = get("draws"), get("thinning"), get("max_steps")
    out = [] if seed is None else [f"seed {seed}"]
    if members is not None:
        out.append(f"members {members}")
    if warm:
        out.append(f"learning-rate warm-up {warm} steps")
    if records is not None and every is not None:
        steps = records * every
        limit = f" (of at most {most})" if most is not None and most != steps else ""
        out.append(f"{steps} steps{limit}, recorded every {every} steps")
    return out


def header(attrs) -> str:
    """One line of provenance from a result's attrs, for ``diagnose``."""
    a = dict(attrs)
    parts = []
    what = a.get("sampler", a.get("trainer"))
    if what:
        parts.append(str(what))
    if "level" in a:
        parts.append(f"level {level_name(str(a['level']))}")
    if "activation" in a:
        parts.append(str(a["activation"]))
    for key in ("P", "L", "V", "d_model", "chi", "sigma2"):
        if key in a:
            parts.append(f"{key}={np.asarray(a[key]).item():g}")
    if str(a.get("tokens", "uniform")) != "uniform":
        parts.append(f"tokens {a['tokens']}")
    if what == "adam" or a.get("trainer") == "adam":
        parts.extend(_ensemble_words(a))
    else:
        for key, label in (
            ("seed", "seed"),
            ("chains", "chains"),
            ("warmup", "warm-up"),
            ("draws", "draws"),
            ("thinning", "thinning"),
        ):
            if key in a:
                parts.append(f"{label} {np.asarray(a[key]).item()}")
    libs = [f"{lib} {a[f'{lib}_version']}" for lib in _LIBRARIES if f"{lib}_version" in a]
    if "bayes_attn_version" in a:
        libs.insert(0, f"bayes-attn {a['bayes_attn_version']}")
    line = ", ".join(parts) if parts else "no provenance recorded"
    if libs:
        line += f" | {', '.join(libs)}"
    if "created" in a:
        line += f" | {a['created']}"
    return line
