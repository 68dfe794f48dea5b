"""Which softmax phase each draw is in, how much time each chain spends there, and whether the chains
agree.

At the first-order softmax transition the posterior of ``aG`` has two modes, weak copy (``aG`` well
below 1) and strong copy (``aG`` of several), separated by a barrier that local samplers (NUTS, SGLD)
essentially never cross at chi = 30. A chain then reports the phase it started in, and R-hat on
``aG`` only says that something is wrong. :func:`phase_occupancy` says what: the fraction of each
chain's draws in the strong phase, and a verdict.

Assignment
----------
A draw is *strong* when ``aG`` (or ``cG``) exceeds a boundary. By default the boundary is the point
of lowest density between the two modes of the reduced (Level-2) posterior at the run's task,
hyperparameters and P: :func:`bayes_attn.theory.modes.phase_boundary`, which owns the Level-2 phase
split and splits exactly where :func:`~bayes_attn.theory.modes` and
:func:`~bayes_attn.theory.phase_weights` split their basins (the minima of the action, then the
density minimum between them polished by Newton's method). This module only counts draws
against it. The fraction of the exact posterior
mass above it is therefore ``phase_weights(...).strong_weight``, so an unbiased sampler's strong
fraction converges to that number. Outside the coexistence region (one mode) the boundary is taken
at the nearest P inside it. For Level-1/0 runs (``kernel_limit``, ``network``) the same Level-2
boundary is used, with P the number of sequences in ``observed_data``.

The mixing rule
---------------
Let chain c have n_c draws of which a fraction f_c is strong, and let p be the pooled fraction.

1. SMC particles (``attrs["sampler"] == "smc"``; one chain per independent run of
   :func:`~bayes_attn.inference.run_smc`): the particles of a run are equally weighted, and the
   verdict is ``"independent draws"``. The standard error of run c's fraction is the larger of the
   binomial ``sqrt(p (1 - p) / min(N, ess_final_c))`` (``ess_final_c``: the ESS of the run's last
   reweighting) and the Chan-Lai genealogy estimate
   ``sqrt(sum_e (sum_{i in e} (I_i - f_c))^2) / N`` over the groups ``e`` of particles that
   descend from the same lambda = 0 draw (``sample_stats["eve"]`` of
   :func:`~bayes_attn.inference.run_smc`; Chan & Lai 2013, Lee & Whiteley 2018). The second one
   carries the variance that the mode proportions pick up from resampling along the path:
   measured over 8 seeds it is 0.034 against an observed spread 0.025 for the Z2 images of the
   linear model at P = 2500 (binomial: 0.011), and 0.0084 against 0.0069 for the softmax strong
   fraction at P = 1211 (binomial: 0.0081) (both at sigma^2 = 131.8). The pooled fraction is the
   mean over runs, its standard error ``sqrt(sum_c se_c^2) / C``. With two or more runs, the runs
   must also agree: ``X2 = sum_c (f_c - p)^2 / se_c^2`` on ``C - 1`` degrees of freedom;
   ``p_value < alpha`` gives ``"not mixing"`` (the runs weigh the phases differently, beyond
   their own errors). The table's ``ess`` is ``p (1 - p) / se_c^2``.
2. p = 0 or 1: ``"single phase"``; no chain visited the other phase, so mixing between phases is
   untested (compare with :func:`~bayes_attn.theory.modes` whether a second phase exists).
3. Stuck chains: some chain has no draw in a phase in which another chain spends at least half of
   its draws: ``"not mixing"``. (If the chains mixed, a chain with an effective sample size of
   ``m`` indicator draws would miss a phase of weight ``q`` with probability ~ (1 - q)^m.)
4. Otherwise a chi-square test of homogeneity that allows for autocorrelation:
   ``X2 = sum_c ESS_c (f_c - p)^2 / (p (1 - p))`` on ``C - 1`` degrees of freedom, with
   ``ESS_c = n_c / tau`` and ``tau`` the integrated autocorrelation time of the phase indicator. tau
   is the larger of two estimates pooled over chains: the two-state Markov value
   ``(2 - a - b) / (a + b)`` from the switching rates ``a`` (weak -> strong per draw in weak) and
   ``b`` (strong -> weak per draw in strong), and ``sum n_c / sum ESS_c`` from ArviZ's
   autocorrelation ESS over the chains that switch. Taking the larger (fewer effective draws) keeps
   the test conservative when fast re-crossings near the boundary inflate the switching rate.
   ``p_value < alpha`` (default 1e-3): ``"not mixing"``; else ``"mixing"``.

The pooled standard error ``sqrt(p (1 - p) tau / sum n_c)`` is reported when the chains mix and is
nan when they do not (the pooled fraction then reflects the initialisation, not the posterior).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import numpy as np
import pandas as pd
from scipy import stats

from bayes_attn import _arviz as az
from bayes_attn import _deprecation
from bayes_attn.task import preset_from_attrs
from bayes_attn.theory.modes import phase_boundary as level2_boundary

__all__ = ["PhaseOccupancy", "phase_occupancy", "MIXING_RULE", "VERDICTS"]

#: the verdicts of :func:`phase_occupancy`, in the order a result file codes them (by index)
VERDICTS = ("independent draws", "mixing", "not mixing", "single phase")

__getattr__ = _deprecation.moved(__name__, {"phase_boundary": "bayes_attn.theory.modes"})

MIXING_RULE = (
    "not mixing if some chain has no draw in a phase where another chain spends >= 1/2 of its draws, "
    "or if the chi-square homogeneity test of the per-chain strong fractions, with ESS_c = n_c / tau "
    "(tau: integrated autocorrelation time of the phase indicator, the larger of the pooled two-state "
    "Markov and ArviZ estimates), has p < alpha"
)


@dataclasses.dataclass
class PhaseOccupancy:
    """The result of :func:`phase_occupancy`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per chain: ``n_draws``, ``n_strong``, ``strong_fraction``, ``n_switches`` (phase
        changes between consecutive draws; left out for SMC particles, which have no order) and ``ess`` (effective
        draws of the phase indicator: ``n_draws / tau``, or ``p (1 - p) / se^2`` for SMC).
    fraction : float
        Pooled fraction of draws in the strong phase.
    se : float
        Its standard error (binomial with the effective sample size for MCMC, module docstring
        rule 1 for SMC); nan unless the verdict is ``"mixing"`` or ``"independent draws"``.
    boundary : float
        The value of ``var`` that separates weak (below) from strong (above).
    var : str
    verdict : str
        ``"independent draws"`` (SMC), ``"mixing"``, ``"not mixing"`` or ``"single phase"``.
    reason : str
        The verdict in plain words.
    tau : float
        Integrated autocorrelation time of the phase indicator used for ESS (for SMC, the variance
        inflation ``n_draws / ess`` over independent draws; inf when no MCMC chain ever switched).
    chi2, dof, p_value : float
        The homogeneity test (nan where it was not needed or not possible).
    rule : str
    """

    table: pd.DataFrame
    fraction: float
    se: float
    boundary: float
    var: str
    verdict: str
    reason: str
    tau: float
    chi2: float = math.nan
    dof: int = 0
    p_value: float = math.nan
    rule: str = MIXING_RULE

    @property
    def ok(self) -> bool:
        """False only for ``"not mixing"``."""
        return self.verdict != "not mixing"

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["table"] = self.table.to_dict(orient="index")
        return out

    def __str__(self) -> str:
        with pd.option_context("display.width", 160):
            text = self.table.round(4).to_string()
        se = f" +- {self.se:.4f}" if math.isfinite(self.se) else ""
        return (
            f"{text}\n\nstrong phase ({self.var} > {self.boundary:.4g}): {self.fraction:.4f}{se}\n"
            f"verdict: {self.verdict} ({self.reason})"
        )


# --------------------------------------------------------------------------------------------------
# The boundary


def _rebuild(idata, P=None, task=None, hyper=None):
    """(task, hyper, P, include_logdet) from the attrs that run_nuts / run_smc write."""
    attrs = dict(idata.posterior.attrs)
    if task is None or hyper is None:
        read_task, read_hyper = preset_from_attrs(attrs)
        task = read_task if task is None else task
        hyper = read_hyper if hyper is None else hyper
    if P is None:
        if "P" in attrs:
            P = float(attrs["P"])
        elif "observed_data" in az.groups(idata) and "tokens" in idata.observed_data:
            P = float(idata.observed_data["tokens"].shape[0])
        else:
            raise ValueError("P: not in idata.attrs and no observed tokens; pass P")
    if "include_logdet" in attrs:
        include_logdet = bool(int(attrs["include_logdet"]))
    else:  # files written before the run record kept the model options as repr-JSON
        include_logdet = json.loads(attrs.get("model_kwargs", "{}")).get("include_logdet") == "True"
    return task, hyper, float(P), include_logdet


# --------------------------------------------------------------------------------------------------
# Occupancy and the verdict


def _tau(ind: np.ndarray) -> float:
    """Integrated autocorrelation time of the phase indicator (chains x draws); inf without switches."""
    prev, nxt = ind[:, :-1], ind[:, 1:]
    n0, n1 = np.sum(prev == 0), np.sum(prev == 1)
    a = np.sum((prev == 0) & (nxt == 1)) / n0 if n0 else 0.0
    b = np.sum((prev == 1) & (nxt == 0)) / n1 if n1 else 0.0
    if a + b == 0:
        return math.inf
    tau_markov = (2.0 - a - b) / (a + b)
    switching = [c for c in ind if 0 < c.mean() < 1 and c.size >= 4]
    tau_acf = 0.0
    if switching:
        ess = np.array([float(az.ess(c[None, :].astype(float), method="mean")) for c in switching])
        ok = np.isfinite(ess)
        if ok.any() and ess[ok].sum() > 0:
            switching = [c for c, good in zip(switching, ok, strict=True) if good]
            ess = float(ess[ok].sum())
            tau_acf = sum(c.size for c in switching) / ess
    return max(tau_markov, tau_acf, 1e-12)


def _smc_error(eve, ind, p, f, ess_final):
    """(se, n_eff, description) of one SMC run's strong fraction ``f`` (module docstring, rule 1).

    ``p`` is the pooled fraction (for the binomial term), ``eve`` the run's lambda = 0 ancestors
    (None when absent).
    """
    n = ind.size
    n_binom = float(min(n, ess_final))
    se_binom = math.sqrt(p * (1 - p) / n_binom)
    se_eve = 0.0
    if eve is not None:
        _, lineage = np.unique(eve, return_inverse=True)
        sums = np.bincount(lineage, weights=ind - f)
        se_eve = math.sqrt(float(np.sum(sums**2))) / n
    se = max(se_binom, se_eve)
    n_eff = p * (1 - p) / se**2 if se > 0 else n_binom
    return se, n_eff, se_binom, se_eve


def _smc_occupancy(idata, ind, frac, attrs, table, alpha, common):
    """The SMC branch of :func:`phase_occupancy` (module docstring, rule 1)."""
    n_chains, n_draws = ind.shape
    p = float(np.mean(frac))
    ess_final = np.broadcast_to(np.asarray(attrs.get("ess_final", n_draws), float), (n_chains,))
    eve = None
    if "sample_stats" in az.groups(idata) and "eve" in idata.sample_stats:
        eve = np.asarray(idata.sample_stats["eve"].transpose("chain", "draw"))
    rows = [
        _smc_error(None if eve is None else eve[c], ind[c], p, frac[c], ess_final[c])
        for c in range(n_chains)
    ]
    se_c = np.array([r[0] for r in rows])
    n_eff = np.array([r[1] for r in rows])
    se = float(math.sqrt(np.sum(se_c**2)) / n_chains)
    how = (
        f"standard error per run max(binomial with n_eff = min(N, ess_final): "
        f"{', '.join(f'{r[2]:.3g}' for r in rows)}; Chan-Lai over the lambda = 0 ancestors: "
        f"{', '.join(f'{r[3]:.3g}' for r in rows)})"
    )
    runs = (
        f"{n_chains} SMC run{'s' if n_chains > 1 else ''} of {n_draws} equally weighted particles"
    )
    result = functools.partial(PhaseOccupancy, table=table(n_eff), **common)
    test = {}
    if n_chains > 1 and p not in (0.0, 1.0) and np.all(se_c > 0):
        chi2 = float(np.sum((frac - p) ** 2 / se_c**2))
        dof = n_chains - 1
        p_value = float(stats.chi2.sf(chi2, dof))
        test = {"chi2": chi2, "dof": dof, "p_value": p_value}
        how += f"; runs' agreement chi2 = {chi2:.3g} on {dof} dof, p = {p_value:.3g}"
        if p_value < alpha:
            return result(
                se=math.nan,
                verdict="not mixing",
                reason=(
                    f"{runs}: the runs' strong fractions "
                    f"({', '.join(f'{f:.3f}' for f in frac)}) disagree beyond their errors; {how}"
                ),
                tau=math.nan,
                **test,
            )
    return result(
        se=se,
        verdict="independent draws",
        reason=f"{runs}; {how}",
        tau=float(n_draws * n_chains / np.sum(n_eff)) if np.sum(n_eff) > 0 else math.inf,
        **test,
    )


def _mcmc_occupancy(ind, frac, p, switches, table, alpha, common) -> PhaseOccupancy:
    """The verdict for MCMC chains (module docstring, MIXING_RULE): one phase, a chain that never
    visits a phase others mostly sit in, or the homogeneity test with ESS from tau."""
    n_chains, n_draws = ind.shape
    tau = _tau(ind)
    ess = n_draws / tau * np.ones(n_chains)
    result = functools.partial(PhaseOccupancy, table=table(ess), tau=tau, **common)
    if p in (0.0, 1.0):
        phase = "strong" if p == 1.0 else "weak"
        return result(
            se=math.nan,
            verdict="single phase",
            reason=f"every draw of every chain is in the {phase} phase; mixing between phases untested",
        )
    for k, name in ((1, "strong"), (0, "weak")):
        share = frac if k == 1 else 1.0 - frac
        never = np.flatnonzero(share == 0.0)
        mostly = np.flatnonzero(share >= 0.5)
        if never.size and mostly.size:
            return result(
                se=math.nan,
                verdict="not mixing",
                reason=(
                    f"chain(s) {', '.join(map(str, never))} never visit the {name} phase, where "
                    f"chain(s) {', '.join(map(str, mostly))} spend most of their draws"
                ),
            )
    if n_chains == 1:
        se = math.sqrt(p * (1 - p) / ess.sum())
        return result(
            se=se,
            verdict="mixing",
            reason=f"one chain with {int(switches[0])} phase switches (tau = {tau:.3g})",
        )
    chi2 = float(np.sum(ess * (frac - p) ** 2) / (p * (1 - p)))
    dof = n_chains - 1
    p_value = float(stats.chi2.sf(chi2, dof))
    mixing = p_value >= alpha
    return result(
        se=math.sqrt(p * (1 - p) / ess.sum()) if mixing else math.nan,
        verdict="mixing" if mixing else "not mixing",
        reason=(
            f"chi2 = {chi2:.3g} on {dof} dof, p = {p_value:.3g} "
            f"{'>=' if mixing else '<'} {alpha:g} (tau = {tau:.3g})"
        ),
        chi2=chi2,
        dof=dof,
        p_value=p_value,
    )


def phase_occupancy(
    idata,
    var: str = "aG",
    boundary: float | None = None,
    *,
    alpha: float = 1e-3,
    P: float | None = None,
    task=None,
    hyper=None,
) -> PhaseOccupancy:
    """Per-chain occupancy of the strong-copy phase and a mixing verdict (module docstring).

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`~bayes_attn.inference.run_nuts`, :func:`~bayes_attn.inference.run_smc`, or any
        posterior with ``var`` over (chain, draw).
    var : str
        The variable to split, ``"aG"`` (default) or ``"cG"``; any other with an explicit boundary.
    boundary : float, optional
        Draws with ``var > boundary`` are strong. Default: the Level-2 boundary
        (:func:`bayes_attn.theory.modes.phase_boundary`) at the run's
        task, hyperparameters, P and ``include_logdet`` (rebuilt from ``idata.posterior.attrs``,
        or passed as ``P``, ``task``, ``hyper``).
    alpha : float
        Level of the homogeneity test.

    Returns
    -------
    PhaseOccupancy
    """
    if var not in idata.posterior:
        raise ValueError(f"var: {var!r} is not in the posterior")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if boundary is None:
        task, hyper, P, include_logdet = _rebuild(idata, P, task, hyper)
        try:
            boundary = level2_boundary(task, hyper, P, include_logdet=include_logdet, var=var)
        except ValueError as err:
            raise ValueError(f"{err} (pass boundary explicitly)") from err
    boundary = float(boundary)
    x = np.asarray(idata.posterior[var].transpose("chain", "draw"))
    ind = (x > boundary).astype(np.int8)
    n_chains, n_draws = ind.shape
    n_strong = ind.sum(axis=1)
    frac = n_strong / n_draws
    switches = np.sum(ind[:, 1:] != ind[:, :-1], axis=1)
    p = float(n_strong.sum() / ind.size)
    attrs = dict(idata.posterior.attrs)

    def table(ess):
        cols = {"n_draws": n_draws, "n_strong": n_strong, "strong_fraction": frac}
        if attrs.get("sampler") != "smc":  # independent particles have no order to switch in
            cols["n_switches"] = switches
        cols["ess"] = ess
        return pd.DataFrame(cols, index=pd.Index(range(n_chains), name="chain"))

    common = {"fraction": p, "boundary": boundary, "var": var}
    if attrs.get("sampler") == "smc":
        return _smc_occupancy(idata, ind, frac, attrs, table, alpha, common)
    return _mcmc_occupancy(ind, frac, p, switches, table, alpha, common)
