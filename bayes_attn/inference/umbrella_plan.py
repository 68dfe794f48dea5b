"""Where the umbrella windows sit: the modes, the path through them, the centres and biases.

The default placement of :func:`bayes_attn.inference.run_umbrella` (module docstring of
:mod:`bayes_attn.inference.umbrella`): the modes are found from ``starts`` (default: a start in
each phase of the package's softmax models, :func:`bayes_attn.theory.modes.phase_starts`; for any
other model NumPyro's initial values from :data:`GENERIC_STARTS` keys), the windows run from
``past`` Laplace standard deviations of q below the lowest mode to ``past`` above the highest, and
each window starts on the path through the modes. Where the windows cover one basin only, a
:class:`CoverageWarning` says so (:func:`coverage`).

References
----------
Kästner (2011), "Umbrella sampling", WIREs Comput. Mol. Sci. 1, 932. docs/theory.md, "The
free-energy landscape".
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import check_centres, check_int, check_positive
from bayes_attn.inference import potential

__all__ = ["GENERIC_STARTS", "CoverageWarning", "UmbrellaPlan", "coverage", "plan_windows"]


class UmbrellaPlan(NamedTuple):
    """Where the windows sit (:func:`plan_windows`).

    Attributes
    ----------
    centres, kappa : numpy.ndarray (windows,)
        Each window's centre in q and its bias strength.
    starts : numpy.ndarray (windows, dim)
        Each window's start in the flat unconstrained space (before relaxation).
    mode_q, mode_sd : numpy.ndarray (modes,)
        q at each mode and its Laplace standard deviation there, sorted by q.
    mode_hessian : numpy.ndarray (modes, dim, dim)
        The potential's Hessian at each mode (eigenvalues by magnitude, floored).
    """

    centres: np.ndarray
    kappa: np.ndarray
    starts: np.ndarray
    mode_q: np.ndarray
    mode_sd: np.ndarray
    mode_hessian: np.ndarray


#: NumPyro initial values tried for a model the default placement does not know
GENERIC_STARTS = 4


def _default_starts(model, pot, key) -> list[dict]:
    """The starts of the default placement: one inside each phase of the package's softmax
    models (:func:`bayes_attn.theory.modes.phase_starts`: the Level-2 minima, realised at
    Level 1 and in a network with frozen embeddings), so that the windows span both phases;
    for any other model, NumPyro's own initial values (uniform in [-2, 2] unconstrained) from
    :data:`GENERIC_STARTS` keys, the first being ``key``'s."""
    known = _phase_starts(model, pot.model_args, pot.model_kwargs)
    if known is not None:
        return known
    from numpyro.infer.util import initialize_model

    out = []
    for k in [key, *jax.random.split(key, GENERIC_STARTS - 1)]:
        info = initialize_model(
            k, pot.model, model_args=pot.model_args, model_kwargs=pot.model_kwargs
        )
        sites = pot.sites(pot.ravel(info.param_info.z))
        out.append({n: sites[n] for n in pot.shapes})
    return out


def _phase_starts(model, args, kwargs) -> list[dict] | None:
    """A start in each softmax phase for the package's models, None for any other model and
    where the softmax transition is not first order (one phase: NumPyro's starts)."""
    from bayes_attn.theory.phase_split import OnePhaseError

    try:
        return _known_phase_starts(model, args, kwargs)
    except OnePhaseError:
        return None


def _known_phase_starts(model, args, kwargs) -> list[dict] | None:
    from bayes_attn.models.kernel_limit import kernel_limit_model
    from bayes_attn.models.network import network_model
    from bayes_attn.models.order_params import order_param_model
    from bayes_attn.theory.modes import phase_starts

    if len(args) < 4 or args[3] != "softmax":
        return None
    task, hyper, data = args[0], args[1], args[2]
    if model is order_param_model:
        st = phase_starts(task, hyper, float(data), "reduced")
    elif model is kernel_limit_model:
        st = phase_starts(task, hyper, float(np.shape(data)[0]), "kernel")
    elif (model is network_model and kwargs.get("embeddings") is not None
          and not kwargs.get("factorized", False)
          and np.shape(kwargs["embeddings"][0])[0] >= task.n_features):  # fmt: skip
        # (a narrower network cannot realise the strong phase's M exactly: NumPyro's starts)
        st = phase_starts(task, hyper, float(np.shape(data)[0]), "network",
                          embeddings=kwargs["embeddings"])  # fmt: skip
    else:
        return None
    return [st["weak"], st["strong"]]


def _modes(model, pot, q, starts):
    """Flat modes (sorted by q, duplicates dropped), their q, the Laplace sd of q and the
    conditional-mean direction dx/dq at each (compiled); the modes are found on one compiled
    potential (:func:`~bayes_attn.inference.potential.find_modes`)."""
    found = [
        np.asarray(m.x)
        for m in potential.find_modes(
            model, starts=starts, model_args=pot.model_args, model_kwargs=pot.model_kwargs
        )
    ]
    grad_q = jax.jit(jax.grad(q))
    qs = np.array([float(q(jnp.asarray(x))) for x in found])
    order = np.argsort(qs)
    xs, qs, sds, dirs, hs = [], [], [], [], []
    for i in order:
        x = found[i]
        if qs and abs(float(q(jnp.asarray(x))) - qs[-1]) < 1e-6 * (1 + abs(qs[-1])):
            continue
        H = potential.hessian(pot.U, x)
        g = np.asarray(grad_q(jnp.asarray(x)), dtype=np.float64)
        lam, Q = np.linalg.eigh(H)
        lam = np.maximum(np.abs(lam), 1e-8 * max(float(np.abs(lam).max()), 1e-300))
        v = (Q / lam) @ (Q.T @ g)  # Sigma g
        var = float(g @ v)
        if not var > 0:
            raise ValueError("cv: its gradient vanishes at a mode; it does not move with the model")
        xs.append(x)
        qs.append(float(q(jnp.asarray(x))))
        sds.append(math.sqrt(var))
        dirs.append(v / var)  # E[x | q] = x* + (q - q*) Sigma g / (g' Sigma g)
        hs.append((Q * lam) @ Q.T)
    return np.array(xs), np.array(qs), np.array(sds), np.array(dirs), np.array(hs)


def _path_point(q_many, xs, qs, dirs, centre) -> np.ndarray:
    """A point whose q is near ``centre``: on the straight segments between the modes, or on the
    Laplace conditional mean beyond the outer modes. ``q_many``: q of a stack of points."""
    if centre <= qs[0] or len(xs) == 1 and centre >= qs[0]:
        i = 0 if centre <= qs[0] else -1
        return xs[i] + (centre - qs[i]) * dirs[i]
    if centre >= qs[-1]:
        return xs[-1] + (centre - qs[-1]) * dirs[-1]
    j = int(np.searchsorted(qs, centre)) - 1
    t = np.linspace(0.0, 1.0, 101)
    seg = xs[j][None] + t[:, None] * (xs[j + 1] - xs[j])[None]
    qt = np.asarray(q_many(jnp.asarray(seg)))
    return seg[int(np.argmin(np.abs(qt - centre)))]


def plan_windows(
    model,
    cv: str,
    *,
    model_args=(),
    model_kwargs=None,
    starts=None,
    centres=None,
    kappa=None,
    past: float | None = None,
    max_windows: int | None = None,
    key=None,
) -> UmbrellaPlan:
    """The windows of :func:`run_umbrella`: centres, bias strengths and starting points.

    Parameters
    ----------
    starts : sequence of dict, optional
        Constrained values of every latent site, one per phase (each inside a basin); the modes
        found from them bound the windows. Default: a start in each phase of the package's
        softmax models, else NumPyro's initial values from :data:`GENERIC_STARTS` keys.
    centres : array_like, optional
        The windows' centres; default from the modes (module docstring).
    kappa : float or array_like, optional
        The bias strength (one, or one per window); default ``1 / spacing^2``.
    past : float, optional
        How many Laplace standard deviations of q the windows reach past the outer modes
        (default :class:`~bayes_attn.inference.umbrella.UmbrellaSettings`' ``past``).
    max_windows : int, optional
        The most windows the default placement makes (at least 8 are made; default
        :class:`~bayes_attn.inference.umbrella.UmbrellaSettings`' ``max_windows``).
    """
    from bayes_attn.inference.umbrella import UmbrellaSettings  # the one home of the defaults

    past = check_positive("past", UmbrellaSettings.past if past is None else past)
    max_windows = UmbrellaSettings.max_windows if max_windows is None else max_windows
    max_windows = check_int("max_windows", max_windows, 8)
    pot = potential.flat_potential(model, model_args, model_kwargs)
    q = pot.scalar_site(cv)  # eager: its values place the centres (a compiled q differs in bits)
    if starts is None:
        starts = _default_starts(model, pot, jax.random.key(0) if key is None else key)
    xs, qs, sds, dirs, hs = _modes(model, pot, q, list(starts))
    if centres is None:
        lo, hi = qs[0] - past * sds[0], qs[-1] + past * sds[-1]
        n = int(np.clip(math.ceil((hi - lo) / sds.min()) + 1, 8, max_windows))
        centres = np.linspace(lo, hi, n)
    centres = check_centres("centres", centres)
    if kappa is None:
        kappa = 1.0 / float(np.median(np.diff(centres))) ** 2
    kappa = np.broadcast_to(np.asarray(kappa, dtype=np.float64), centres.shape).copy()
    if not np.all(kappa > 0):
        raise ValueError(f"kappa must be > 0, got {kappa.min()}")
    q_many = jax.jit(jax.vmap(q))
    path = np.stack([_path_point(q_many, xs, qs, dirs, c) for c in centres])
    return UmbrellaPlan(centres, kappa, path, qs, sds, hs)


class CoverageWarning(UserWarning):
    """The umbrella windows cover one basin only (:func:`run_umbrella`)."""


def _basins(q, sd) -> np.ndarray:
    """The modes (sorted by q) grouped into basins: modes closer than the larger of their two
    Laplace standard deviations of q are one basin. Returns each basin's mean q."""
    groups = [[0]] if len(q) else []
    for i in range(1, len(q)):
        if q[i] - q[groups[-1][-1]] < max(sd[i], sd[groups[-1][-1]]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return np.array([float(np.mean(q[g])) for g in groups])


def coverage(plan, centres, cv) -> dict:
    """How many basins the modes found make and how many the windows span (attrs), with a
    :class:`CoverageWarning` where the windows cover one basin only."""
    basins = _basins(plan.mode_q, plan.mode_sd)
    lo, hi = float(np.min(centres)), float(np.max(centres))
    covered = int(np.sum((basins >= lo) & (basins <= hi)))
    text = ""
    where = ", ".join(f"{b:.4g}" for b in basins)
    if basins.size == 1:
        text = (f"the windows cover one basin only: the starts reach one mode ({cv} = {where}); a "
                "phase elsewhere is missing from F (give starts= one inside each phase, or "
                "centres= that reach it)")  # fmt: skip
    elif covered < 2:
        text = (f"the windows ({cv} {lo:.4g} to {hi:.4g}) cover one of the {basins.size} basins "
                f"the starts reach ({cv} = {where}); F misses the others' mass (widen centres=)")  # fmt: skip
    if text:
        warnings.warn(f"run_umbrella: {text}", CoverageWarning, stacklevel=3)
    return {"basins_found": int(basins.size), "basins_covered": covered, "coverage": text}
