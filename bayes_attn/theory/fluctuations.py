"""The fluctuations of the reduced (Level-2) posterior exp(-chi s): the variance of the order
parameter by Laplace and by quadrature, at the global saddle and within its basin.

The order parameter is ``c1`` for linear attention and ``aG`` for softmax; the log-determinant is
left out, as in the saddle-point theory. :func:`posterior_variance` tabulates them against P;
:func:`bayes_attn.experiments.precursors.precursors` adds NUTS beside them (docs/theory.md §7,
docs/validation.md "Precursors").

* Laplace: ``(chi H)^-1`` at the global saddle; for softmax carried from the Gaussian coordinate cG
  to aG by the delta method, ``(daG/dcG)^2 / (chi s'')``. It diverges where an eigenvalue of H
  vanishes (the linear P*).
* Quadrature: the density on a grid (2-D for linear, 1-D in cG for softmax). It stays finite at P*
  at finite chi: there the action is quartic along the soft direction, so the variance scales like
  chi^(-1/2) instead of chi^(-1).

Linear above P* the variance is within one Z2 image (:func:`bayes_attn.algebra.z2_sign`); softmax
gives it over the whole posterior and within the global minimum's basin (the 1-D watershed between
consecutive minima).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_positive_array
from bayes_attn.theory.action import Scales, action_linear, action_softmax, scales
from bayes_attn.theory.boundaries import second_order_closed_form, softmax_grid_minima
from bayes_attn.theory.diagram import global_path

__all__ = ["global_minima", "laplace_variance", "posterior_variance"]

_N_LINEAR = 801  # grid points per axis (2-D)
_N_SOFTMAX = 20001


@jax.jit
def _logdens_linear(c1, cG, P, chi, sc: Scales):
    return -chi * action_linear(jnp.stack([c1, cG], -1), P, sc)


@jax.jit
def _logdens_softmax(cG, P, chi, sc: Scales):
    return -chi * action_softmax(cG, P, sc)


def _exact_linear(P, chi, sc, fold: bool, c0, R0) -> float:
    """Variance of c1 by 2-D trapezoid quadrature (within one Z2 image when ``fold``).

    The grid is centred on the posterior mean with half-widths of 10 posterior standard deviations
    per axis, iterated from the saddle ``c0`` and half-widths ``R0`` until both change by less than
    10%. Folded (one image, c1 + cG >= 0, :func:`bayes_attn.algebra.z2_sign`), the grid is cut at
    c1 + cG = 0: by the Z2 symmetry the folded density on the half plane is the posterior density
    there, renormalised.
    """
    centre = np.asarray(c0, dtype=float)
    R = np.asarray(R0, dtype=float)
    for _ in range(30):
        lo, hi = centre - R, centre + R
        axes = [np.linspace(a, b, _N_LINEAR) for a, b in zip(lo, hi, strict=True)]
        C1, CG = np.meshgrid(*axes, indexing="ij")
        ld = np.asarray(_logdens_linear(jnp.asarray(C1), jnp.asarray(CG), P, chi, sc))
        trap = [np.r_[0.5, np.ones(_N_LINEAR - 2), 0.5] for _ in axes]
        w = np.exp(ld - ld.max()) * np.outer(*trap)
        if fold:  # one Z2 image: the half plane of algebra.z2_sign
            w = w * (np.asarray(algebra.z2_sign(C1, CG)) > 0)
        w /= w.sum()
        mean = np.array([np.sum(w * C1), np.sum(w * CG)])
        sd = np.sqrt([np.sum(w * (C1 - mean[0]) ** 2), np.sum(w * (CG - mean[1]) ** 2)])
        R_new = 10.0 * sd
        done = np.all(np.abs(R_new / R - 1) < 0.1) and np.all(np.abs(mean - centre) < 0.1 * R)
        centre, R = mean, R_new
        if done:
            break
    return float(sd[0] ** 2)


def _exact_softmax(P, chi, sc, xs, x_global) -> tuple[float, float]:
    """Variance of aG over the whole posterior and within the global minimum's basin (1-D grid)."""
    B = 1.5 * math.sqrt(float(sc.g_w) * P * float(sc.L) / ((float(sc.L) - 1) * float(sc.sigma2)))
    cG = np.linspace(-B, B, _N_SOFTMAX)
    ld = np.asarray(_logdens_softmax(jnp.asarray(cG), P, chi, sc))
    p = np.exp(ld - ld.max())
    aG = np.asarray(algebra.softmax_order(jnp.asarray(cG), sc.L)[1])

    def var(mask):
        w = p * mask / np.sum(p * mask)
        mu = np.sum(w * aG)
        return float(np.sum(w * (aG - mu) ** 2))

    full = var(np.ones_like(p))
    if len(xs) < 2:
        return full, full
    # basins split at the lowest density between consecutive minima (the 1-D watershed)
    xs = np.sort(xs)
    cuts = []
    for a, b in zip(xs[:-1], xs[1:], strict=True):
        inside = (cG > a) & (cG < b)
        cuts.append(cG[inside][np.argmin(ld[inside])])
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    k = int(np.argmin(np.abs(xs - x_global)))
    return full, var((cG > edges[k]) & (cG <= edges[k + 1]))


@jax.jit
def _hessian_linear(c, P, sc: Scales):
    return jax.hessian(lambda x: action_linear(x, P, sc))(c)


@jax.jit
def _curvature_softmax(cG, P, sc: Scales):
    return jax.grad(jax.grad(lambda x: action_softmax(x, P, sc)))(cG)


def global_minima(activation, Ps, sc):
    """Global minimum, its Hessian, and (softmax) every local minimum at each P.

    Linear: :func:`bayes_attn.theory.diagram.global_path` (continuation plus fresh starts),
    folded onto the image of :func:`bayes_attn.algebra.z2_sign`. Softmax: the dense-grid finder of
    the phase boundaries.
    """
    rows = []
    if activation == "linear":
        c, _ = global_path("linear", jnp.asarray(Ps), sc)
        for P, ck in zip(Ps, np.asarray(c), strict=True):
            ck = ck * float(algebra.z2_sign(ck[0], ck[1]))
            H = np.asarray(_hessian_linear(jnp.asarray(ck), jnp.float64(P), sc))
            rows.append({"c": ck, "H": H, "minima": None})
        return rows
    for P in Ps:
        x, s, valid = (np.asarray(a) for a in softmax_grid_minima(jnp.float64(P), sc))
        x, s = x[valid], s[valid]
        g = float(x[np.argmin(s)])
        H = np.array([[float(_curvature_softmax(jnp.float64(g), jnp.float64(P), sc))]])
        rows.append({"c": np.array([g]), "H": H, "minima": x})
    return rows


def laplace_variance(activation, c, H, chi, L) -> float:
    """(chi H)^-1 for c1 (linear); the delta method carries s''(cG) to aG (softmax)."""
    if activation == "linear":
        if np.linalg.eigvalsh(H)[0] <= 0:
            return math.inf
        return float(np.linalg.inv(chi * H)[0, 0])
    aG = algebra.softmax_order(jnp.float64(c[0]), L)[1]
    daG = 1.0 / float(algebra.softmax_dlogit(aG, L))  # daG/dcG
    return daG**2 / (chi * float(H[0, 0]))


def posterior_variance(task, hyper, Ps, activation: str, *, exact: bool = True) -> xr.Dataset:
    """Laplace and (with ``exact``) quadrature variances of the order parameter against P.

    Returns
    -------
    xarray.Dataset
        dim ``P`` (sorted): ``q`` (the order parameter at the global saddle, folded), ``var_laplace``,
        ``folded`` (linear: the variance is within one Z2 image, P > P*), with ``exact``
        ``var_exact`` (and for softmax ``var_exact_global``, within the global basin); dims
        (``P``, ``coordinate``): ``saddle``, the global saddle in the action's coordinates ((c1, cG)
        for linear, the Gaussian cG for softmax). attrs: chi, L, V, the activation, the linear P*.
    """
    check_activation(activation)
    Ps = np.sort(check_positive_array("Ps", Ps))
    sc = scales(task, hyper)
    chi = float(hyper.chi)
    P_star = float(second_order_closed_form(sc))
    out: dict[str, list] = {}
    for P, g in zip(Ps, global_minima(activation, Ps, sc), strict=True):
        c, H = g["c"], g["H"]
        fold = activation == "linear" and P > P_star
        row = {
            "q": abs(c[0])
            if activation == "linear"
            else float(algebra.softmax_order(c[0], task.L)[1]),
            "var_laplace": laplace_variance(activation, c, H, chi, task.L),
            "folded": fold,
        }
        if exact:
            args = (jnp.float64(P), jnp.float64(chi), sc)
            if activation == "linear":
                lam = max(float(np.linalg.eigvalsh(H)[0]), 1e-3 * float(np.abs(H).max()))
                R0 = np.full(2, 10.0 / math.sqrt(chi * lam))
                row["var_exact"] = _exact_linear(*args, fold, c, R0)
            else:
                row["var_exact"], row["var_exact_global"] = _exact_softmax(*args, g["minima"], c[0])
        row["saddle"] = np.asarray(c, dtype=float)
        for k, v in row.items():
            out.setdefault(k, []).append(v)
    saddle = out.pop("saddle")
    data = {k: (("P",), np.asarray(v)) for k, v in out.items()}
    data["saddle"] = (("P", "coordinate"), np.stack(saddle))
    return xr.Dataset(
        data,
        coords={"P": Ps, "coordinate": ["c1", "cG"] if activation == "linear" else ["cG"]},
        attrs={
            "activation": activation,
            "order_parameter": "c1" if activation == "linear" else "aG",
            "chi": chi,
            "L": task.L,
            "V": task.V,
            "second_order": P_star,
            "log_determinant": "left out",
        },
    )
