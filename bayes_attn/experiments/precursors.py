"""Precursors of emergence: the posterior variance of the order parameter against P.

At a second-order transition (linear attention at P*) the curvature of the action along the order
parameter vanishes, so the posterior fluctuations grow as P approaches P* from below: the transition
announces itself. At a first-order transition (softmax) the global phase keeps a finite curvature
up to P*, where the posterior mass moves to the other phase; nothing grows beforehand.

For each P the Dataset holds three estimates of the variance of the order parameter
(``c1`` for linear attention, ``aG`` for softmax), all for the reduced (Level-2) posterior
``exp(-chi s)`` at the hyperparameters' chi (log-determinant left out, as in the saddle-point theory):

* ``var_laplace``: the inverse Hessian at the global saddle, ``(chi H)^-1``; for softmax carried from
  the Gaussian coordinate cG to aG by the delta method, ``(daG/dcG)^2 / (chi s'')``. It is the
  mean-field answer and diverges where an eigenvalue of H vanishes (the linear P*).
* ``var_exact``: quadrature of the density on a grid (2-D for linear, 1-D in cG for softmax). It stays
  finite at P* at finite chi: there the action is quartic along the soft direction, so the variance
  scales like chi^(-1/2) instead of chi^(-1).
* ``var_nuts`` with ``mcse_nuts`` (optional): NUTS draws of :func:`bayes_attn.models.order_param_model`,
  chains started at the global saddle, and the Monte Carlo standard error of the variance (ArviZ's
  MCSE of the mean of the squared deviations).

Which variance
--------------
Linear: for P <= P* the posterior is Z2-symmetric about the origin and the variance is that of c1
over the whole posterior. Above P* it is the variance within one Z2 image (draws and quadrature folded
by the sign of c1), because chains do not cross between the images and the spread between them is
the order, not a fluctuation. Softmax: ``var_exact`` is over the whole posterior (both phases; near P*
it is dominated by the mixture term w (1 - w) (Delta aG)^2, which is the jump itself, over a window
of width ~1/chi), and ``var_exact_global`` is within the basin of the global minimum, the quantity
the Laplace value approximates.

References
----------
Paper Sec. 5 (predictability of emergence) and App. A.6-A.7; docs/theory.md §7 (saddles and their
Hessians); docs/validation.md "Precursors".
"""

from __future__ import annotations

import math

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int, check_positive_array
from bayes_attn.theory.action import Scales, action_linear, action_softmax, scales
from bayes_attn.theory.boundaries import (
    global_path,
    second_order_closed_form,
    softmax_grid_minima,
)

__all__ = ["precursors"]

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
    10%. Folded (one image, c1 >= 0), the grid is cut at c1 = 0: by the Z2 symmetry the folded
    density on the half plane is the posterior density there, renormalised.
    """
    centre = np.asarray(c0, dtype=float)
    R = np.asarray(R0, dtype=float)
    for _ in range(30):
        lo, hi = centre - R, centre + R
        if fold:
            lo[0] = max(lo[0], 0.0)
        axes = [np.linspace(a, b, _N_LINEAR) for a, b in zip(lo, hi, strict=True)]
        C1, CG = np.meshgrid(*axes, indexing="ij")
        ld = np.asarray(_logdens_linear(jnp.asarray(C1), jnp.asarray(CG), P, chi, sc))
        trap = [np.r_[0.5, np.ones(_N_LINEAR - 2), 0.5] for _ in axes]
        w = np.exp(ld - ld.max()) * np.outer(*trap)
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


def _global_minima(activation, Ps, sc):
    """Global minimum, its Hessian, and (softmax) every local minimum at each P.

    Linear: :func:`bayes_attn.theory.boundaries.global_path` (continuation plus fresh starts),
    folded onto c1 >= 0. Softmax: the dense-grid finder of the phase boundaries.
    """
    rows = []
    if activation == "linear":
        c, _ = global_path("linear", jnp.asarray(Ps), sc)
        for P, ck in zip(Ps, np.asarray(c), strict=True):
            ck = ck * (np.sign(ck[0]) if abs(ck[0]) > 1e-12 else 1.0)
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


def _laplace(activation, c, H, chi, L) -> float:
    """(chi H)^-1 for c1 (linear); the delta method carries s''(cG) to aG (softmax)."""
    if activation == "linear":
        if np.linalg.eigvalsh(H)[0] <= 0:
            return math.inf
        return float(np.linalg.inv(chi * H)[0, 0])
    aG = algebra.softmax_order(jnp.float64(c[0]), L)[1]
    daG = 1.0 / float(algebra.softmax_dlogit(aG, L))  # daG/dcG
    return daG**2 / (chi * float(H[0, 0]))


def _nuts_variance(task, hyper, P, activation, c, fold, num_chains, num_warmup, num_samples, seed):
    """Variance of the order parameter from NUTS draws and its MCSE; chains start at the saddle."""
    from bayes_attn.inference import run_nuts
    from bayes_attn.models import order_param_model

    if activation == "linear":
        init = {"c1": jnp.full(num_chains, c[0]), "cG": jnp.full(num_chains, c[1])}
        name = "c1"
    else:
        aG = algebra.softmax_order(jnp.float64(c[0]), task.L)[1]
        init = {"aG": jnp.full(num_chains, aG)}
        name = "aG"
    idata = run_nuts(
        order_param_model,
        model_args=(task, hyper, float(P), activation),
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        seed=seed,
        progress_bar=False,
        init_params=init,
    )
    x = idata.posterior[name].values
    if fold:
        x = np.abs(x)
    dev2 = (x - x.mean()) ** 2
    mcse = float(az.mcse(dev2, method="mean"))
    return float(dev2.mean()), mcse, int(idata.sample_stats.diverging.values.sum())


def precursors(
    task,
    hyper,
    Ps,
    activation: str,
    *,
    exact: bool = True,
    nuts: bool = False,
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 2000,
    seed: int = 0,
) -> xr.Dataset:
    """The posterior variance of the order parameter against P: Laplace, quadrature and NUTS.

    Parameters
    ----------
    task, hyper : CopyTask, Hyper
    Ps : array of float
        Training-set sizes (sorted on return).
    activation : {"linear", "softmax"}
        The order parameter is ``c1`` (linear) or ``aG`` (softmax).
    exact : bool
        Also compute ``var_exact`` (and, for softmax, ``var_exact_global``) by quadrature.
    nuts : bool
        Also run NUTS at each P (``num_chains`` chains started at the global saddle, ``seed``) and
        store ``var_nuts``, ``mcse_nuts`` and the number of divergences ``divergences``.

    Returns
    -------
    xarray.Dataset
        dim ``P``: ``q`` (the order parameter at the global saddle), ``var_laplace``, optionally
        ``var_exact``, ``var_exact_global``, ``var_nuts``, ``mcse_nuts``, ``divergences``; and
        ``folded`` (linear: whether the variance is within one Z2 image, P > P*). attrs: chi, L, V,
        the activation, the linear P*.

    References
    ----------
    Paper Sec. 5; docs/theory.md §7; docs/validation.md "Precursors".
    """
    check_activation(activation)
    Ps = np.sort(check_positive_array("Ps", Ps))
    num_chains = check_int("num_chains", num_chains, 1)
    sc = scales(task, hyper)
    chi = float(hyper.chi)
    P_star = float(second_order_closed_form(sc))
    out: dict[str, list] = {}
    for P, g in zip(Ps, _global_minima(activation, Ps, sc), strict=True):
        c, H = g["c"], g["H"]
        fold = activation == "linear" and P > P_star
        row = {
            "q": abs(c[0])
            if activation == "linear"
            else float(algebra.softmax_order(c[0], task.L)[1]),
            "var_laplace": _laplace(activation, c, H, chi, task.L),
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
        if nuts:
            v, m, div = _nuts_variance(
                task, hyper, P, activation, c, fold, num_chains, num_warmup, num_samples, seed
            )
            row.update(var_nuts=v, mcse_nuts=m, divergences=div)
        for k, v in row.items():
            out.setdefault(k, []).append(v)
    return xr.Dataset(
        {k: (("P",), np.asarray(v)) for k, v in out.items()},
        coords={"P": Ps},
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
