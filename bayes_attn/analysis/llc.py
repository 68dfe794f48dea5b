"""The local learning coefficient from a run of :func:`bayes_attn.inference.llc.run_llc`.

:func:`llc_estimate` gives devinterp's fields (``llc_mean``, ``llc_std``, ``llc_per_chain``,
``loss_trace``, ``init_loss``; devinterp's ``llc/std`` is the spread of the chains' means, kept
here) and what devinterp does not: the Monte Carlo standard error of ``llc_mean`` from the
effective sample size (autocorrelation included, ArviZ), the ESS, R-hat across chains started
from noise around w*, the first ``burnin`` draws left out, and the run's exact MALA acceptance.
:func:`calibration_verdict` picks the step size of a calibration table
(:func:`bayes_attn.experiments.llc.calibrate_llc`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int

__all__ = ["LLCEstimate", "calibration_verdict", "llc_estimate"]


@dataclasses.dataclass(frozen=True)
class LLCEstimate:
    """An LLC estimate (:func:`llc_estimate`).

    Attributes
    ----------
    llc_mean : float
        nβ (mean L_n over the chains' kept draws - L_n(w*)).
    llc_std : float
        The standard deviation of the chains' estimates (devinterp's ``llc/std``).
    llc_per_chain : numpy.ndarray
        Each chain's estimate.
    loss_trace : numpy.ndarray
        L_n at the kept draws, (chain, draw).
    init_loss : float
        L_n(w*).
    mcse, ess, rhat : float
        Of ``llc_mean`` (from the per-draw nβ (L_n - L_n(w*)), autocorrelation included).
    acceptance : float
        The mean exact MALA acceptance of the kept steps.
    nbeta, gamma, step_size, grad_norm : float
        The run's nβ, γ, ε and |∇L_n(w*)|.
    burnin : int
        Draws left out at the start of every chain.
    """

    llc_mean: float
    llc_std: float
    llc_per_chain: np.ndarray
    loss_trace: np.ndarray
    init_loss: float
    mcse: float
    ess: float
    rhat: float
    acceptance: float
    nbeta: float
    gamma: float
    step_size: float
    grad_norm: float
    burnin: int

    def summary(self) -> str:
        """One line: the estimate, its MCSE, ESS, R-hat, acceptance and the settings."""
        return (
            f"llc {self.llc_mean:.4g} ± {self.mcse:.2g} (MCSE; chains' sd {self.llc_std:.2g}), "
            f"ESS {self.ess:.0f}, R-hat {self.rhat:.3f}, MALA acceptance {self.acceptance:.3f}, "
            f"nβ {self.nbeta:.4g}, γ {self.gamma:g}, ε {self.step_size:.3g}, "
            f"L_n(w*) {self.init_loss:.6g}, |∇L_n(w*)| {self.grad_norm:.3g}"
        )


def _const(idata, name) -> float:
    return float(np.asarray(az.dataset(idata, "constant_data")[name]))


def llc_estimate(idata, burnin: int = 0) -> LLCEstimate:
    """The LLC estimate of a :func:`~bayes_attn.inference.llc.run_llc` result.

    Parameters
    ----------
    idata : InferenceData or DataTree
    burnin : int
        Kept draws to leave out at the start of every chain (on top of the run's own burn-in).
    """
    if "constant_data" not in az.groups(idata) or "loss" not in az.dataset(idata):
        raise ValueError("idata: not a run_llc result (no posterior loss or constant_data)")
    burnin = check_int("burnin", burnin, 0)
    loss = np.asarray(az.dataset(idata)["loss"], dtype=float)
    if burnin >= loss.shape[1]:
        raise ValueError(f"burnin must be below the {loss.shape[1]} draws, got {burnin}")
    loss = loss[:, burnin:]
    nbeta, init = _const(idata, "nbeta"), _const(idata, "init_loss")
    per_draw = nbeta * (loss - init)
    per_chain = per_draw.mean(axis=1)
    acc = np.asarray(az.dataset(idata, "sample_stats")["acceptance"], dtype=float)[:, burnin:]
    multi = per_draw.shape[0] > 1
    return LLCEstimate(
        llc_mean=float(per_draw.mean()),
        llc_std=float(per_chain.std()),
        llc_per_chain=per_chain,
        loss_trace=loss,
        init_loss=init,
        mcse=az.mcse(per_draw),
        ess=az.ess(per_draw),
        rhat=az.rhat(per_draw) if multi else math.nan,
        acceptance=float(acc.mean()),
        nbeta=nbeta,
        gamma=_const(idata, "gamma"),
        step_size=_const(idata, "step_size"),
        grad_norm=_const(idata, "grad_norm"),
        burnin=burnin,
    )


def calibration_verdict(table: xr.Dataset, *, min_acceptance: float = 0.9, z: float = 2.0):
    """The largest step size of a calibration table that passes, per nβ, as a Dataset.

    ``table`` has ``llc``, ``mcse`` and ``acceptance`` over (``nbeta``, ``step_size``), the step
    sizes a halving ladder (each the half of the next). A step ε passes when its exact MALA
    acceptance is at least ``min_acceptance`` and its llc agrees with that at ε/2 within ``z``
    combined MCSE; the smallest step has no half and cannot pass. Returns ``chosen`` (the step,
    NaN where none passes) and ``passes`` (nbeta, step_size).
    """
    steps = np.asarray(table["step_size"], dtype=float)
    order = np.argsort(steps)
    steps = steps[order]
    if not np.allclose(steps[1:] / steps[:-1], 2.0, rtol=1e-6):
        raise ValueError(f"table: the step sizes must be a halving ladder, got {steps.tolist()}")
    t = table.isel(step_size=order)
    llc, se, acc = (np.asarray(t[k], dtype=float) for k in ("llc", "mcse", "acceptance"))
    agree = np.zeros_like(llc, dtype=bool)
    agree[:, 1:] = np.abs(llc[:, 1:] - llc[:, :-1]) <= z * np.hypot(se[:, 1:], se[:, :-1])
    passes = agree & (acc >= min_acceptance)
    chosen = np.array([steps[np.flatnonzero(p)[-1]] if p.any() else np.nan for p in passes])
    return xr.Dataset(
        {
            "chosen": (("nbeta",), chosen),
            "passes": (("nbeta", "step_size"), passes),
        },
        coords={"nbeta": t["nbeta"].values, "step_size": steps},
        attrs={"min_acceptance": min_acceptance, "z": z},
    )
