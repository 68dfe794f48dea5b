"""Exact mode census of the reduced (Level-2) posterior: every mode, its basin mass, and the
finite-chi weights of the two softmax phases.

The reduced posterior is the density ``p(c) ∝ exp(-chi s(c))`` (times ``exp(-logdet)`` with
``include_logdet``) over the Gaussian coordinates ``c``: ``(c1, cG)`` for linear attention, the logit
gap ``cG`` for softmax (:mod:`bayes_attn.models.order_params`; docs/theory.md §3-5, Level 2).

Modes and basins
----------------
A *mode* is a local minimum of the O(chi) action ``s`` (a :class:`~bayes_attn.theory.Saddle`). Its
*basin* is the set of points that steepest ascent of the density carries to it (the watershed), and
its *weight* is the posterior mass of the basin, ``w_k = Z_k / sum_j Z_j`` with
``Z_k = int_basin exp(-chi s - [logdet]) dc``.

* Softmax (1-D): consecutive modes are separated by the point of lowest density between them (the
  maximum of the action, located on a 2049-point grid and polished by Newton's method on the
  log-density), which is exactly the 1-D watershed. With ``include_logdet`` the split is the
  minimum of the full density; the modes stay those of ``s``.
* Linear (2-D): discrete steepest ascent on a grid symmetric about the origin. Each grid point
  points to the highest of its 8 neighbours (or to itself); following the pointers ends at a grid
  maximum, which is assigned to the nearest mode in the Mahalanobis metric of that mode's Hessian.
  The census is made exactly Z2-equivariant, ``(c1, cG) -> (-c1, -cG)``: the labels of the half
  plane c1 > 0 (with the half line c1 = 0, cG > 0) are kept and mirrored onto the other half, and
  the origin's cell, when the origin is no mode, is split evenly between the two images (without
  this, the tie at the origin would send every path through it to one image). The basin boundary
  is located to within one grid spacing; it runs through low density, and between the two images
  of a Z2 pair the symmetry makes the weights exactly 1/2 each.

Quadrature
----------
Everything is done in log-densities with the maximum subtracted. The grid spacing is
``min_k sigma_k / points_per_sd`` per coordinate, with ``sigma_k = 1/sqrt(chi H_kk)`` the
conditional width of mode ``k`` (the width of ``exp(-chi s)`` along each axis). The grid reaches past
the outer modes until the log-density has fallen by at least 60 below the maximum (mass left
outside < e^-60 relative). On such a grid the trapezoid rule for a smooth, decaying integrand
converges faster than any power of the spacing (its error is the Fourier transform of the density
at 2 pi / h, ~exp(-2 pi^2 points_per_sd^2)); at the softmax barrier, where a basin ends inside
the density, the first derivative vanishes and the end correction is O(h^4) times the (tiny)
barrier density. The tests check this by halving the spacing.

Change of variables
-------------------
The NumPyro model samples softmax in ``aG`` with the Jacobian ``dcG/daG``. The mass of a region is
the same in either variable, ``int_{cG in B} exp(-chi s) dcG = int_{aG in aG(B)} exp(-chi s) |dcG/daG|
daG``, so the weights here are the weights of the corresponding aG-intervals of the sampled density.
(The aG-density has its own watershed, shifted by O(1/chi) because of the Jacobian; the shift moves
mass only in proportion to the barrier density, which is exponentially small in chi.)

Laplace approximation
---------------------
``log Z_k ≈ -chi s_k - 1/2 log det(chi H_k / 2 pi)`` (:attr:`Saddle.log_weight`, minus the log-det
``logdet_ek`` at the saddle with ``include_logdet``), with a relative error O(1/chi) from the
cubic and quartic terms of ``s``. Each linear Z2 image is its own mode here, so the Saddle's
multiplicity 2 is split between the two images.

Free-energy difference
----------------------
Softmax modes are labelled ``weak`` (the smallest aG) and ``strong`` (the largest aG); a lone
mode is weak below the equal-action P* and strong above it (the spinodals bound the coexistence
region). ``delta_F = F_strong - F_weak = -log(w_strong / w_weak)`` with ``F = -log Z``: positive
where the weak-copy phase holds more mass. At large chi, ``delta_F ≈ chi (s_strong - s_weak) +
1/2 log(H_strong / H_weak)``, so the weight crossing ``delta_F = 0`` sits at
``P* - (1/2) log(H_s/H_w) / (chi d(s_s - s_w)/dP)``, O(1/chi) from the equal-action P*, and the
strong weight rises from 10% to 90% over ``2 log 9 / (chi |d(s_s - s_w)/dP|)`` (the slope is
the difference of the two phases' losses, ~L, so the width falls like 1/(chi L)).

The phase split
---------------
This module owns the Level-2 split of the softmax phases: the coexistence window
(:func:`inside_window`, between the spinodals of
:func:`~bayes_attn.theory.boundaries.softmax_transition`), the labels weak/strong of the modes, and
the boundary between them (:func:`phase_boundary`, the density minimum at which the quadrature
splits the basins). :func:`bayes_attn.analysis.phase_occupancy` counts draws against that boundary;
the coexistence experiments start from its minima.

References
----------
Paper Sec. 3.3 and App. A.7; docs/theory.md §7 ("The first-order transition at finite χ");
:mod:`bayes_attn.theory.saddles`.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import xarray as xr
from scipy import optimize

from bayes_attn import _deprecation
from bayes_attn._validation import (
    Record,
    check_activation,
    check_int,
    check_positive,
    check_positive_array,
)
from bayes_attn.theory.action import (
    logdet_ek,
    scales,
)
from bayes_attn.theory.boundaries import softmax_transition
from bayes_attn.theory.phase_split import inside_window, phase_boundary, phase_starts
from bayes_attn.theory.quadrature import (
    _delta_F,
    _labels,
    _linear_quadrature,
    _logdet_softmax,
    _softmax_fast,
    _softmax_quadrature,
    barrier,
    linear_log_density,
    softmax_log_density,
    softmax_minima,
)
from bayes_attn.theory.saddles import saddles

_LOG9 = math.log(9.0)

__all__ = [
    "WeightCrossing",
    "barrier",
    "inside_window",
    "modes",
    "phase_boundary",
    "phase_starts",
    "phase_weights",
    "linear_log_density",
    "softmax_log_density",
    "softmax_minima",
    "weight_crossing",
]

__getattr__ = _deprecation.moved(
    __name__, {"transition_window": "bayes_attn.theory.boundaries:softmax_transition"}
)


# --------------------------------------------------------------------------------------------------
# Public face


def _check_common(P, activation, points_per_sd):
    check_activation(activation)
    return check_positive("P", P), check_positive("points_per_sd", points_per_sd)


def _normalise(log_Z: np.ndarray) -> np.ndarray:
    finite = np.isfinite(log_Z)
    if not finite.any():
        return np.full_like(log_Z, np.nan)
    w = np.exp(log_Z - log_Z[finite].max())
    return w / w.sum()


def _softmax_census(found, P, chi, sc, include_logdet, points_per_sd, _max_points):
    """Data variables and grid attributes of :func:`modes` for softmax."""
    found = sorted(found, key=lambda sd: sd.cG)
    x = np.array([sd.cG for sd in found])
    hess = np.array([float(sd.hessian.ravel()[0]) for sd in found])
    log_Z, info = _softmax_quadrature(x, hess, P, chi, sc, include_logdet, points_per_sd)
    lap = np.array([sd.log_weight for sd in found])
    if include_logdet:
        lap = lap - _logdet_softmax(x, P, sc)
    aG = np.array([sd.aG for sd in found])
    labels = _labels(aG, P, sc)
    data = {
        "cG": ("mode", x),
        "aG": ("mode", aG),
        "a1": ("mode", np.array([sd.a1 for sd in found])),
        "action": ("mode", np.array([sd.action for sd in found])),
        **_weights(log_Z, lap, labels),
        "delta_F": ((), _delta_F(log_Z, labels)),
        "delta_F_laplace": ((), _delta_F(lap, labels)),
    }
    return data, {"spacing": info["spacing"], "n_points": info["n_points"]}


def _linear_census(found, P, chi, sc, include_logdet, points_per_sd, max_points):
    """Data variables and grid attributes of :func:`modes` for linear attention."""
    cs, hs, acts, lap, image = [], [], [], [], []
    for sd in found:
        c = np.array([sd.c1, sd.cG])
        for sign in (1, -1) if sd.multiplicity == 2 else (0,):
            cs.append(c * (sign or 1))
            hs.append(sd.hessian)
            acts.append(sd.action)
            lap.append(sd.log_weight - math.log(sd.multiplicity))  # the pair's weight, split
            image.append(sign)
    cs, hs, lap = np.array(cs), np.array(hs), np.array(lap)
    if include_logdet:
        lap = lap - np.asarray(logdet_ek(cs[:, 0], cs[:, 1], jnp.float64(P), sc))
    log_Z, info = _linear_quadrature(cs, hs, P, chi, sc, include_logdet, points_per_sd, max_points)
    labels = ["symmetric" if i == 0 else "ordered" for i in image]
    data = {
        "c1": ("mode", cs[:, 0]),
        "cG": ("mode", cs[:, 1]),
        "action": ("mode", np.array(acts)),
        **_weights(log_Z, lap, labels),
        "delta_F": ((), math.nan),
        "delta_F_laplace": ((), math.nan),
        "image": ("mode", np.array(image)),
    }
    grid = {
        "spacing": tuple(float(v) for v in info["spacing"]),
        "n_points": info["n_points"],
        "half_width": tuple(float(v) for v in info["half_width"]),
    }
    return data, grid


def _weights(log_Z, lap, labels) -> dict:
    return {
        "phase": ("mode", np.array(labels)),
        "log_weight": ("mode", log_Z),
        "laplace_log_weight": ("mode", lap),
        "weight": ("mode", _normalise(log_Z)),
        "laplace_weight": ("mode", _normalise(lap)),
    }


def modes(
    task,
    hyper,
    P,
    activation: str,
    *,
    include_logdet: bool = False,
    points_per_sd: float = 4.0,
    max_points: int = 4_000_000,
) -> xr.Dataset:
    """Every mode of the reduced posterior at training-set size P, with its exact basin mass.

    Parameters
    ----------
    task : CopyTask
    hyper : Hyper
        ``hyper.chi`` is the physical chi at which the weights are computed.
    P : float
        Training-set size, > 0.
    activation : {"linear", "softmax"}
    include_logdet : bool
        Multiply the density by exp(-logdet_ek) (the O(1) log-determinant), as
        :func:`bayes_attn.models.order_params.order_param_model` does. The modes stay the minima of
        the O(chi) action ``s``; the basins and the masses use the full density.
    points_per_sd : float
        Grid points per conditional standard deviation of the narrowest mode (> 0). Halving the
        spacing (doubling this) is the convergence check.
    max_points : int
        Largest 2-D grid allowed (linear); a larger one raises ``ValueError``.

    Returns
    -------
    xarray.Dataset
        Dimension ``mode``, ordered by cG (softmax) or by action then image (linear; each Z2 image is
        its own mode, ``image`` = +1 for c1 + cG > 0 (``algebra.z2_sign``), -1 for its mirror, 0 at
        the origin). Variables:
        ``cG``; ``c1`` (linear) or ``aG``, ``a1`` (softmax); ``action`` (per unit chi), ``phase``
        (softmax: weak/strong/other, or single where the transition is not first order; linear:
        symmetric/ordered), ``log_weight`` (exact log of the basin mass, unnormalised),
        ``laplace_log_weight``, ``weight`` and ``laplace_weight`` (normalised over modes), and
        scalars ``delta_F`` = -log(w_strong / w_weak) (exact) and ``delta_F_laplace`` (softmax;
        nan for linear, whose modes are Z2 images of one phase). Attributes record P, chi, the
        scales and the grid.

    Raises
    ------
    ValueError
        For P <= 0, an unknown activation, points_per_sd <= 0, max_points < 1 or a grid above
        ``max_points``.
    """
    P, points_per_sd = _check_common(P, activation, points_per_sd)
    max_points = check_int("max_points", max_points, 1)
    sc = scales(task, hyper)
    chi = float(hyper.chi)
    found = saddles(task, hyper, P, activation)
    census = _softmax_census if activation == "softmax" else _linear_census
    data, grid = census(found, P, chi, sc, include_logdet, points_per_sd, max_points)
    labels = data["phase"][1]
    ds = xr.Dataset(data, coords={"mode": np.arange(len(labels))})
    ds.attrs.update(
        activation=activation,
        P=P,
        chi=chi,
        L=task.L,
        V=task.V,
        g_w=hyper.g_w,
        g_o=hyper.g_o,
        sigma2=hyper.sigma2,
        include_logdet=int(include_logdet),
        points_per_sd=points_per_sd,
        **{f"grid_{k}": v for k, v in grid.items()},
    )
    ds["weight"].attrs["description"] = "exact posterior mass of the basin (quadrature)"
    ds["laplace_weight"].attrs["description"] = "Laplace approximation of the basin mass"
    ds["delta_F"].attrs["description"] = "F_strong - F_weak = -log(w_strong / w_weak)"
    return ds


def _phase_row(P, chi, sc, include_logdet, points_per_sd) -> dict:
    r = _softmax_fast(P, chi, sc, include_logdet, points_per_sd)
    lab = r["labels"]

    def share(log_Z):
        w = _normalise(log_Z)
        return float(sum(wi for wi, li in zip(w, lab, strict=True) if li == "strong"))

    pick = lambda name: next(  # noqa: E731
        (a for a, li in zip(r["aG"], lab, strict=True) if li == name), math.nan
    )
    single = "single" in lab
    return {
        "strong_weight": math.nan if single else share(r["log_Z"]),
        "strong_weight_laplace": math.nan if single else share(r["laplace"]),
        "delta_F": _delta_F(r["log_Z"], lab),
        "delta_F_laplace": _delta_F(r["laplace"], lab),
        "aG_weak": pick("weak"),
        "aG_strong": pick("strong"),
        "n_modes": len(lab),
    }


def phase_weights(
    task,
    hyper,
    Ps,
    activation: str = "softmax",
    *,
    include_logdet: bool = False,
    points_per_sd: float = 4.0,
) -> xr.Dataset:
    """Weight of the strong-copy softmax phase against P, exact (quadrature) and Laplace.

    Minima come from the dense-grid finder that also gives the spinodals (fast enough for scans);
    :func:`modes` gives the same weights from :func:`~bayes_attn.theory.saddles`.

    Parameters
    ----------
    task, hyper : CopyTask, Hyper
    Ps : array_like
        Training-set sizes, all > 0.
    activation : {"softmax"}
        Only softmax has two phases; ``"linear"`` raises ``ValueError``.
    include_logdet, points_per_sd
        As in :func:`modes`.

    Returns
    -------
    xarray.Dataset
        Over ``P`` (sorted): ``strong_weight`` and ``strong_weight_laplace`` (share of all modes'
        mass in the strong mode: 0 below the lower spinodal, 1 above the upper; nan where the
        transition is not first order), ``delta_F`` and ``delta_F_laplace`` (-log(w_strong/w_weak),
        +-inf where one phase is absent), ``aG_weak``, ``aG_strong`` and ``n_modes``.
    """
    check_activation(activation)
    if activation != "softmax":
        raise ValueError(f"activation must be 'softmax' for phase weights, got {activation!r}")
    Ps = np.sort(check_positive_array("Ps", Ps).ravel())
    points_per_sd = check_positive("points_per_sd", points_per_sd)
    sc = scales(task, hyper)
    rows = [_phase_row(float(P), float(hyper.chi), sc, include_logdet, points_per_sd) for P in Ps]
    ds = xr.Dataset({k: ("P", np.array([r[k] for r in rows])) for k in rows[0]}, coords={"P": Ps})
    ds.attrs.update(
        activation=activation,
        chi=float(hyper.chi),
        L=task.L,
        V=task.V,
        include_logdet=int(include_logdet),
        points_per_sd=points_per_sd,
    )
    return ds


@dataclasses.dataclass(frozen=True)
class WeightCrossing(Record):
    """Where the two softmax phases carry equal posterior mass, at finite chi.

    Attributes
    ----------
    chi : float
    P_cross : float
        Root of delta_F(P) = -log(w_strong / w_weak) = 0 (exact basin masses), between the spinodals.
    P_cross_laplace : float
        The same root with Laplace weights.
    P_10, P_90 : float
        Where the strong phase holds 10% and 90% of the two phases' mass (delta_F = +-log 9); nan if
        outside the coexistence region.
    width : float
        P_90 - P_10.
    slope : float
        d delta_F / dP at P_cross (central difference); ``2 log 9 / |slope|`` is the linearised width.
    first_order : float
        The equal-action P* (the chi -> infinity limit of P_cross).
    spinodals : tuple of float
    """

    chi: float
    P_cross: float
    P_cross_laplace: float
    P_10: float
    P_90: float
    width: float
    slope: float
    first_order: float
    spinodals: tuple[float, float]


def weight_crossing(
    task,
    hyper,
    *,
    include_logdet: bool = False,
    points_per_sd: float = 4.0,
    xtol: float = 1e-9,
) -> WeightCrossing:
    """The finite-chi P at which the weak- and strong-copy softmax phases have equal weight.

    Brent's method on delta_F(P) inside the spinodals (delta_F falls through zero there: +inf at the
    lower spinodal, -inf at the upper). Use ``include_logdet=False`` to compare with the
    equal-action P*, which also leaves the O(1) log-determinant out.

    Raises
    ------
    ValueError
        If the softmax transition is not first order for these scales (no spinodals), or for
        points_per_sd <= 0 or xtol <= 0.
    """
    points_per_sd = check_positive("points_per_sd", points_per_sd)
    xtol = check_positive("xtol", xtol)
    sc = scales(task, hyper)
    chi = float(hyper.chi)
    first, lo, hi = softmax_transition(sc)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(
            f"task: the softmax transition is not first order at L={task.L}, V={task.V} "
            "(no coexistence region, so no weight crossing)"
        )

    def dF(P, key="delta_F"):
        return _phase_row(P, chi, sc, include_logdet, points_per_sd)[key]

    def root(key, target, a, b):
        fa, fb = dF(a, key) - target, dF(b, key) - target
        if not (np.isfinite(fa) and np.isfinite(fb)) or fa * fb > 0:
            return math.nan
        return optimize.brentq(lambda P: dF(P, key) - target, a, b, xtol=xtol, rtol=1e-15)

    span = hi - lo
    a, b = next(
        ((lo + e * span, hi - e * span) for e in (1e-2, 1e-3, 1e-4) if dF(lo + e * span) > 0),
        (lo + 1e-4 * span, hi - 1e-4 * span),
    )
    P_c = root("delta_F", 0.0, a, b)
    P_lap = root("delta_F_laplace", 0.0, a, b)
    P_10 = root("delta_F", _LOG9, a, P_c) if math.isfinite(P_c) else math.nan
    P_90 = root("delta_F", -_LOG9, P_c, b) if math.isfinite(P_c) else math.nan
    width = P_90 - P_10
    if math.isfinite(P_c):
        d = width / 50 if math.isfinite(width) else 1e-4 * P_c
        slope = float((dF(P_c + d) - dF(P_c - d)) / (2 * d))
    else:
        slope = math.nan
    return WeightCrossing(
        chi=chi,
        P_cross=P_c,
        P_cross_laplace=P_lap,
        P_10=P_10,
        P_90=P_90,
        width=width,
        slope=slope,
        first_order=first,
        spinodals=(lo, hi),
    )
