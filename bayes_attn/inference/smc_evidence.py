"""The evidence of tempered SMC runs, their error bars, their warnings and the tempering table.

:func:`bayes_attn.inference.run_smc` and :func:`bayes_attn.inference.basin_evidence` both combine
independent runs' log evidences here; ``diagnose`` reports the warnings of :func:`smc_problems`.

Runs, error bars and warnings
-----------------------------
Each run's estimate of Z is unbiased, so their mean is too: :func:`log_evidence` is the log of the
mean of the runs' Z (a Jensen bias about ``num_runs`` times smaller than the mean of the runs'
log Z) with the standard deviation of the runs' log Z over ``sqrt(num_runs)`` as its standard
error (the delta-method error of that log; nan for one run). Per run, :func:`lineage_variance` is
the run's own genealogy estimate of the relative variance of its Z (Lee & Whiteley 2018,
``1 - (N / (N - 1))^(n + 1) (1 - sum_e W_e^2)`` with ``W_e`` the final weight carried by the
descendants of initial particle ``e`` after ``n`` resamplings; derived for multinomial
resampling, it is often 0 (negative, clipped) for healthy runs with systematic resampling and
approaches 1 when the lineages collapse).

:func:`smc_problems` (the warnings of ``run_smc``, :class:`SMCWarning`) reports

* any run whose draws descend from fewer than ``min_lineages`` of its initial particles (default
  :func:`default_min_lineages`, ``min(20, ceil(num_particles / 100))``: 1% of the particles, at
  most 20): the genealogy has collapsed, the regime in which the evidence comes out low;
* runs that disagree (:func:`runs_agreement`): ``X2 = sum_r (log Z_r - mean)^2 / (mean_r v_r +
  evidence_tolerance^2)`` on ``num_runs - 1`` degrees of freedom has ``p < 1e-3`` (``v_r``: the
  runs' own variance estimates above; ``evidence_tolerance`` = 0.1 nats, the spread below which
  disagreement does not matter).

Neither can see a bias that every run shares (a mode no run finds, a tail no run samples); the
tests check the defaults against exact evidences (tests/test_smc.py, docs/validation.md).

References
----------
Lee & Whiteley (2018), "Variance estimation in the particle filter"; Chan & Lai (2013).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from bayes_attn.inference.smc_kernel import StepRecord

__all__ = [
    "PER_STEP",
    "SMCWarning",
    "default_min_lineages",
    "evidence_summary",
    "lineage_variance",
    "log_evidence",
    "run_log_evidences",
    "runs_agreement",
    "smc_problems",
    "step_attrs",
    "tempering_steps",
]

_RUNS_ALPHA = 1e-3  # level of the runs' agreement test

#: The attrs of a result that hold :class:`~bayes_attn.inference.smc_kernel.StepRecord`'s fields,
#: all runs concatenated in run order.
PER_STEP = {
    "tempering_param": "tempering_schedule",
    "log_increment": "log_evidence_increments",
    "acceptance_rate": "acceptance_rate",
    "num_moves": "num_moves",
    "correlation": "mixing_correlation",
    "ess": "ess",
    "move_scale": "move_scale",
    "mean_log_likelihood": "mean_log_likelihood",
}


def lineage_variance(eve, weights, num_resamplings: int) -> float:
    """Lee & Whiteley (2018) estimate of Var(Z_hat / Z) from one run's genealogy.

    ``1 - (N / (N - 1))^(n + 1) (1 - sum_e W_e^2)``, with ``W_e`` the total final weight of the
    particles descending from initial particle ``e`` and ``n`` resamplings. Derived for
    multinomial resampling; may come out negative (then 0).
    """
    n = weights.size
    w_e = np.bincount(eve, weights=weights, minlength=n)
    v = 1.0 - (n / (n - 1.0)) ** (num_resamplings + 1) * (1.0 - float(np.sum(w_e**2)))
    return max(v, 0.0)


def default_min_lineages(num_particles: int) -> int:
    """The lineage count below which ``run_smc`` warns: 1% of the particles, at most 20."""
    return int(min(20, math.ceil(0.01 * num_particles)))


def log_evidence(log_z) -> tuple[float, float]:
    """``(log mean Z, its standard error)`` over independent runs' log evidences ``log_z``.

    The log of the mean of the runs' Z (unbiased in Z) and the standard deviation of the runs'
    log Z over ``sqrt(runs)`` (nan for one run).
    """
    log_z = np.atleast_1d(np.asarray(log_z, dtype=np.float64))
    k = log_z.size
    mean = float(np.logaddexp.reduce(log_z) - math.log(k))
    se = float(np.std(log_z, ddof=1) / math.sqrt(k)) if k > 1 else math.nan
    return mean, se


def runs_agreement(log_z, run_var, tolerance: float) -> tuple[float, float]:
    """``(chi2, p)`` of the runs' agreement test (module docstring); nan for one run."""
    log_z = np.atleast_1d(np.asarray(log_z, dtype=np.float64))
    k = log_z.size
    if k < 2:
        return math.nan, math.nan
    scale2 = float(np.mean(run_var)) + tolerance**2
    chi2 = float(np.sum((log_z - log_z.mean()) ** 2) / scale2)
    return chi2, float(stats.chi2.sf(chi2, k - 1))


def evidence_summary(log_z, run_var, tolerance: float) -> dict:
    """The evidence attrs of an SMC result: ``log_evidence``, ``log_evidence_se``,
    ``log_evidence_runs``, ``log_evidence_run_se`` (sqrt of the runs' lineage variances),
    ``runs_chi2`` and ``runs_p_value``."""
    mean, se = log_evidence(log_z)
    chi2, p_value = runs_agreement(log_z, run_var, tolerance)
    return {
        "log_evidence": mean,
        "log_evidence_se": se,
        "log_evidence_runs": log_z,
        "log_evidence_run_se": np.sqrt(run_var),
        "runs_chi2": chi2,
        "runs_p_value": p_value,
    }


def step_attrs(records: Sequence[Sequence[StepRecord]]) -> dict:
    """The per-step attrs (:data:`PER_STEP`, run after run), ``num_tempering_steps`` and
    ``ess_final`` from each run's list of :class:`~bayes_attn.inference.smc_kernel.StepRecord`."""
    columns = [
        {f: np.array([getattr(s, f) for s in run], dtype=np.float64) for f in StepRecord._fields}
        for run in records
    ]
    attrs = {"num_tempering_steps": np.array([len(run) for run in records])}
    for field, name in PER_STEP.items():
        attrs[name] = np.concatenate([c[field] for c in columns])
    attrs["num_moves"] = attrs["num_moves"].astype(np.int64)
    attrs["ess_final"] = np.array([c["ess"][-1] for c in columns])
    return attrs


def run_log_evidences(records: Sequence[Sequence[StepRecord]]) -> np.ndarray:
    """Each run's log Z: the sum of its steps' log increments."""
    return np.array(
        [
            float(np.sum(np.array([s.log_increment for s in run], dtype=np.float64)))
            for run in records
        ]
    )


class SMCWarning(UserWarning):
    """``run_smc`` found a sign that its log evidence or error bar cannot be trusted."""


def smc_problems(attrs) -> list[str]:
    """The warnings of ``run_smc`` for a result's attrs (module docstring).

    A run whose draws descend from fewer than ``min_lineages`` of its initial particles, and runs
    whose log evidences disagree (``runs_p_value < 1e-3``), are reported; the list is empty
    otherwise.
    """
    out = []
    lineages = np.atleast_1d(np.asarray(attrs["num_eve_lineages"]))
    n = int(attrs["num_particles"])
    thr = int(attrs.get("min_lineages", default_min_lineages(n)))
    low = np.flatnonzero(lineages < thr)
    if low.size:
        which = ", ".join(f"run {r}: {int(lineages[r])}" for r in low)
        out.append(
            f"the draws descend from fewer than {thr} of the {n} initial particles ({which}): "
            "the particles collapsed onto a few lineages, so the log evidence is likely biased "
            "low and its standard error too small; lower mixing_target or raise max_mcmc_steps "
            "(more decorrelating moves per tempering step), or raise num_particles"
        )
    p = float(attrs.get("runs_p_value", math.nan))
    if math.isfinite(p) and p < _RUNS_ALPHA:
        runs = np.atleast_1d(np.asarray(attrs["log_evidence_runs"]))
        se = np.atleast_1d(np.asarray(attrs["log_evidence_run_se"]))
        out.append(
            f"the {runs.size} runs disagree on log Z ({', '.join(f'{v:.3f}' for v in runs)}; "
            f"chi2 = {float(attrs['runs_chi2']):.3g} on {runs.size - 1} dof, p = {p:.2g}, against "
            f"the runs' own genealogy errors (median {float(np.median(se)):.3g}) plus "
            f"{float(attrs.get('evidence_tolerance', 0.1)):g} nats): the moves do not mix enough "
            "for the evidence; lower mixing_target or raise max_mcmc_steps, or raise num_particles"
        )
    return out


def tempering_steps(idata):
    """The per-step record of an SMC result as a table, one row per (run, tempering step).

    Columns: ``run``, ``step``, ``lambda``, ``log_evidence_increment``, ``acceptance_rate``,
    ``num_moves``, ``mixing_correlation``, ``ess`` (of the incremental weights), ``move_scale``
    (the RWM scale or HMC step of the step's moves; absent in files written before it was
    recorded), ``mean_log_likelihood`` (the weighted mean of the tempered part after the step, its
    expectation at that lambda; absent in older files).
    """
    import pandas as pd

    a = idata.posterior.attrs
    counts = np.atleast_1d(np.asarray(a["num_tempering_steps"]))
    run = np.repeat(np.arange(counts.size), counts)
    step = np.concatenate([np.arange(c) for c in counts])
    cols = {
        "lambda": "tempering_schedule",
        "log_evidence_increment": "log_evidence_increments",
        "acceptance_rate": "acceptance_rate",
        "num_moves": "num_moves",
        "mixing_correlation": "mixing_correlation",
        "ess": "ess",
        "move_scale": "move_scale",
        "mean_log_likelihood": "mean_log_likelihood",
    }
    data = {"run": run, "step": step}
    data.update({k: np.asarray(a[v]) for k, v in cols.items() if v in a})
    return pd.DataFrame(data)
