"""The local learning coefficient from a run of :func:`bayes_attn.inference.llc.run_llc`.

:func:`llc_estimate` gives devinterp's fields (``llc_mean``, ``llc_std``, ``llc_per_chain``,
``loss_trace``, ``init_loss``; ``llc_std`` is devinterp's ``llc/std``, the sample standard
deviation of the chains' means, ddof = 1 as torch's ``.std()``; :meth:`LLCEstimate.as_devinterp`
is the same under devinterp's own keys) and what devinterp does not: the Monte Carlo standard
error of ``llc_mean`` from the effective sample size (autocorrelation included, ArviZ), the ESS,
R-hat across chains started from noise around w*, the first ``burnin`` draws left out, and the
run's exact MALA acceptance. :func:`llc_verdict` judges one run (what ``bayes-attn llc`` and
``bayes-attn diagnose`` print); :func:`calibration_verdict` picks the step size of a calibration
table (:func:`bayes_attn.experiments.llc.calibrate_llc`), and :func:`calibration_markdown`
prints such a table with the exact value beside each nβ.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int
from bayes_attn.analysis.llc_exploration import (
    LIMITS,
    MIN_ACCEPTANCE,  # noqa: F401  (the old names of two limits, re-exported)
    RHAT_MAX,  # noqa: F401
    llc_exploration,
)

__all__ = [
    "LLCEstimate",
    "LLCVerdict",
    "calibration_markdown",
    "calibration_verdict",
    "llc_estimate",
    "llc_verdict",
]


@dataclasses.dataclass(frozen=True)
class LLCEstimate:
    """An LLC estimate (:func:`llc_estimate`).

    Attributes
    ----------
    llc_mean : float
        nβ (mean L_n over the chains' kept draws - L_n(w*)).
    llc_std : float
        The sample standard deviation of the chains' estimates (ddof = 1, as devinterp's
        ``llc/std``, torch's ``.std()``; NaN for one chain).
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
    exploration : Exploration or None
        :func:`bayes_attn.analysis.llc_exploration.llc_exploration` of the run: R-hat and ESS of
        |w − w*| (or an SMC run's own checks) and the problems found; ``summary`` prints them.
    se_method : str
        ``"mcse"`` (from the ESS) or ``"runs"`` (tempered SMC: the sd of the runs' λ̂ over
        sqrt(runs); ``ess`` is then the variance of the draws over ``mcse²``).
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
    exploration: object = None
    se_method: str = "mcse"

    def as_devinterp(self) -> dict:
        """The estimate under devinterp's keys: ``llc/mean``, ``llc/std`` (ddof = 1),
        ``llc-chain/i`` (chain i's estimate) and ``loss/trace`` (L_n at the kept draws, chain by
        draw), so that code written for devinterp's results reads this one."""
        out = {"llc/mean": self.llc_mean, "llc/std": self.llc_std}
        out.update({f"llc-chain/{i}": float(v) for i, v in enumerate(self.llc_per_chain)})
        out["loss/trace"] = self.loss_trace
        return out

    def summary(self) -> str:
        """One line: the estimate, its MCSE, ESS, R-hat, acceptance and the settings; then the
        exploration check's verdict (and its problems, one a line)."""
        se = "MCSE" if self.se_method == "mcse" else "se of the SMC runs"
        line = (
            f"llc {self.llc_mean:.4g} ± {self.mcse:.2g} ({se}; chains' sd {self.llc_std:.2g}), "
            f"ESS {self.ess:.0f}, R-hat {self.rhat:.3f}, MALA acceptance {self.acceptance:.3f}, "
            f"nβ {self.nbeta:.4g}, γ {self.gamma:g}, ε {self.step_size:.3g}, "
            f"L_n(w*) {self.init_loss:.6g}, |∇L_n(w*)| {self.grad_norm:.3g}"
        )
        x = self.exploration
        if x is None:
            return line
        if self.se_method == "mcse":
            line += (
                f"\nexploration: R-hat of |w − w*| {x.rhat_distance:.3f}, ESS {x.ess_distance:.0f}"
                f" (tail {x.ess_tail_distance:.0f})"
            )
        else:
            line += "\nexploration: the SMC runs' lineages and agreement"
        line += " — ok" if x.ok else "".join(f"\nWARNING: {p}" for p in x.problems)
        return line


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
    smc = az.dataset(idata).attrs.get("llc_sampler") == "smc"
    if smc:  # independent runs: the error from their spread (inference.llc_smc)
        se = float(per_chain.std(ddof=1) / math.sqrt(per_chain.size)) if multi else math.nan
        ess = float(per_draw.var() / se**2) if se > 0 else math.nan
    else:
        se, ess = az.mcse(per_draw), az.ess(per_draw)
    return LLCEstimate(
        llc_mean=float(per_draw.mean()),
        llc_std=float(per_chain.std(ddof=1)) if multi else math.nan,
        llc_per_chain=per_chain,
        loss_trace=loss,
        init_loss=init,
        mcse=se,
        ess=ess,
        rhat=az.rhat(per_draw) if multi else math.nan,
        acceptance=float(acc.mean()),
        nbeta=nbeta,
        gamma=_const(idata, "gamma"),
        step_size=_const(idata, "step_size"),
        grad_norm=_const(idata, "grad_norm"),
        burnin=burnin,
        exploration=llc_exploration(idata, burnin),
        se_method="runs" if smc else "mcse",
    )


@dataclasses.dataclass(frozen=True)
class LLCVerdict:
    """Whether one LLC run can be trusted (:func:`llc_verdict`).

    Attributes
    ----------
    trusted : bool
        No check failed.
    lines : tuple of str
        One line per check, in words (what failed, and what to do).
    """

    trusted: bool
    lines: tuple

    def __str__(self) -> str:
        return "\n".join(self.lines)


def llc_verdict(idata, burnin: int = 0) -> LLCVerdict:
    """The verdict one run gives on itself: what ``bayes-attn llc`` prints under its estimate
    (exiting non-zero when it fails) and ``bayes-attn diagnose`` prints for an LLC file.

    * Draws that are not finite: the run diverged (one line; nothing else is judged).
    * SGLD and RMSProp-SGLD: the exact MALA acceptance of the step must reach
      ``min_acceptance`` of :data:`~bayes_attn.analysis.llc_exploration.LIMITS` (that λ̂ is stable under halving the step needs
      :func:`~bayes_attn.experiments.llc.calibrate_llc`).
    * Several chains: R-hat of the per-draw λ̂ must be below its ``rhat_llc`` (one chain has
      no R-hat, which is said, not failed).
    * The exploration check of :func:`~bayes_attn.analysis.llc_exploration.llc_exploration`
      (its problems are the WARNING lines of :meth:`LLCEstimate.summary`) must pass.
    """
    post = az.dataset(idata)
    loss = np.asarray(post["loss"], dtype=float)
    sampler = post.attrs.get("llc_sampler", "?")
    bad = int(np.sum(~np.isfinite(loss)))
    if bad:
        step = _const(idata, "step_size")
        at = f" at step size {step:.3g}" if math.isfinite(step) else ""
        return LLCVerdict(False, (
            f"DIVERGED: {bad} of {loss.size} draws are not finite (NaN or inf): the {sampler} "
            f"chains left the finite numbers{at}; halve the step (or leave it to the curvature, "
            "step size 'auto')",
        ))  # fmt: skip
    est = llc_estimate(idata, burnin=burnin)
    lines, ok, low, rhat = [], True, LIMITS.min_acceptance, LIMITS.rhat_llc
    if sampler in ("sgld", "rmsprop"):
        passed = est.acceptance >= low
        ok &= passed
        lines.append(
            f"step: exact MALA acceptance {est.acceptance:.3f} "
            + (f"passes (>= {low})" if passed else f"FAILS (< {low}): halve the step")
            + "; that λ̂ is stable under halving the step needs experiments.llc.calibrate_llc"
        )  # fmt: skip
    if sampler == "smc":
        pass  # independent runs: their agreement is the exploration check's
    elif loss.shape[0] < 2:
        lines.append("one chain: no R-hat (run several chains to check that they agree)")
    elif not est.rhat < rhat:
        ok = False
        lines.append(f"R-hat {est.rhat:.3f} >= {rhat}: the chains disagree; run longer")
    else:
        lines.append(f"R-hat {est.rhat:.3f} < {rhat}: the chains agree")
    x = est.exploration
    if x is not None and not x.ok:
        ok = False
        lines.append(f"exploration: FAILS ({len(x.problems)} problem(s), the WARNING lines)")
    return LLCVerdict(bool(ok), tuple(lines))


def calibration_verdict(table: xr.Dataset, *, min_acceptance: float = LIMITS.min_acceptance,
                        z: float = 2.0):  # fmt: skip
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


def calibration_markdown(table: xr.Dataset) -> str:
    """A calibration table with the exact LLC beside, as markdown (docs/validation.md,
    "``calibrate_llc`` on the network"): per nβ the exact λ ± MCSE, then per step ε λ̂ ± MCSE,
    its distance from exact in combined MCSE, the acceptance and whether it passes, then the
    chosen step.

    ``table``: ``llc``, ``mcse``, ``acceptance`` and ``passes`` over (``nbeta``, ``step_size``),
    ``chosen``, ``exact_llc`` and ``exact_mcse`` over ``nbeta``
    (:func:`bayes_attn.experiments.llc_studies.calibration_tables`)."""
    rows = ["| nβ | ε | λ̂ ± MCSE | from exact (combined MCSE) | acceptance | passes |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for i, nb in enumerate(table.nbeta.values):
        ex, se_ex = float(table.exact_llc[i]), float(table.exact_mcse[i])
        rows.append(f"| {nb:.4g} | exact | {ex:.4f} ± {se_ex:.4f} | | | |")
        for j, eps in enumerate(table.step_size.values):
            c = table.isel(nbeta=i, step_size=j)
            z = (float(c.llc) - ex) / math.hypot(float(c.mcse), se_ex)
            rows.append(f"| {nb:.4g} | {eps:g} | {float(c.llc):.4f} ± {float(c.mcse):.4f} | "
                        f"{z:+.1f} | {float(c.acceptance):.3f} | {bool(c.passes)} |")  # fmt: skip
        rows.append(f"| {nb:.4g} | chosen: {float(table.chosen[i]):g} | | | | |")
    return "\n".join(rows)
