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
onto c1 + cG >= 0, :func:`bayes_attn.algebra.z2_sign`), because chains do not cross between the images and the spread between them is
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

import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_int
from bayes_attn.theory.fluctuations import posterior_variance

__all__ = ["precursors"]


def _nuts_variance(task, hyper, P, activation, c, fold, run: dict):
    """Variance of the order parameter from NUTS draws and its MCSE; chains start at the saddle.
    ``run``: :func:`~bayes_attn.inference.run_nuts`'s chains, warm-up, draws and seed."""
    from bayes_attn.inference import run_nuts
    from bayes_attn.models import order_param_model

    if activation == "linear":
        init = {"c1": jnp.full(run["num_chains"], c[0]), "cG": jnp.full(run["num_chains"], c[1])}
        name = "c1"
    else:
        aG = algebra.softmax_order(jnp.float64(c[0]), task.L)[1]
        init = {"aG": jnp.full(run["num_chains"], aG)}
        name = "aG"
    idata = run_nuts(
        order_param_model,
        model_args=(task, hyper, float(P), activation),
        progress=False,
        init_params=init,
        **run,
    )
    post = idata.posterior
    x = post[name].values
    if fold:  # one Z2 image, as the quadrature (algebra.z2_sign)
        x = np.asarray(algebra.fold_sign(x, post["cG"].values)[0])
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
        Training-set sizes (sorted on return). The Laplace and quadrature columns are
        :func:`bayes_attn.theory.fluctuations.posterior_variance`.
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
    num_chains = check_int("num_chains", num_chains, 1)
    ds = posterior_variance(task, hyper, Ps, activation, exact=exact)
    if nuts:
        run = dict(num_chains=num_chains, num_warmup=num_warmup, num_samples=num_samples, seed=seed)
        saddle, folded = ds.saddle.values, ds.folded.values
        rows = [
            _nuts_variance(task, hyper, float(P), activation, saddle[k], bool(folded[k]), run)
            for k, P in enumerate(ds.P.values)
        ]
        v, m, div = (np.asarray(a) for a in zip(*rows, strict=True))
        ds = ds.assign(var_nuts=("P", v), mcse_nuts=("P", m), divergences=("P", div))
    return ds.drop_vars(["saddle", "coordinate"])
