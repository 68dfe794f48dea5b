"""Honest convergence diagnostics: R-hat, ESS and MCSE from ArviZ, plus plain-words chain checks.

A stuck chain is the normal state of affairs at a first-order transition (and for the two Z2 images
of the linear ordered phase): :func:`diagnose` says which chains disagree and where each one sits.
For tempered SMC (:func:`~bayes_attn.inference.run_smc`, one chain per independent run) it also
reports the log evidence with its standard error across runs, and per run the particle ESS, the
surviving initial lineages and the tempering steps, with the sampler's own warnings
(:func:`~bayes_attn.inference.smc.smc_problems`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings as _warnings

import numpy as np
import pandas as pd

from bayes_attn import _arviz as az
from bayes_attn.algebra import fold_sign, z2_sign
from bayes_attn.analysis.phases import PhaseOccupancy, phase_occupancy
from bayes_attn.inference.record import header
from bayes_attn.inference.smc import smc_problems
from bayes_attn.task import preset_from_attrs
from bayes_attn.theory.action import scales
from bayes_attn.theory.boundaries import second_order_closed_form


@dataclasses.dataclass
class Diagnosis:
    """The result of :func:`diagnose`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per scalar variable: mean, sd, mcse_mean, mcse_sd, ess_bulk, ess_tail, r_hat, and
        the per-chain means ``chain_0 ... chain_{n-1}``.
    divergences : int
        Divergent transitions after warm-up, all chains together.
    groups : dict
        For each variable whose chains disagree: a list of chain groups, each (chains, mean).
    warnings : list of str
        Plain-words problems; empty when nothing was found.
    phases : PhaseOccupancy or None
        For softmax posteriors of ``aG`` with two phases: the phase of every draw, the occupancy per
        chain and a mixing verdict (:func:`bayes_attn.analysis.phases.phase_occupancy`).
    smc : dict or None
        For SMC results (:func:`smc_summary`): ``log_evidence``, ``log_evidence_se`` and ``runs``,
        a table with one row per run (``log_evidence``, ``genealogy_se``, ``tempering_steps``,
        ``eve_lineages``, ``particle_ess``, ``moves_per_step``). SMC tables have no ``r_hat``:
        the runs are independent, and their agreement is judged from the evidence instead.
    header : str
        The run's provenance in one line (:func:`bayes_attn.inference.record.header`).
    folded : pandas.DataFrame or None
        Linear posteriors with ``c1`` and ``cG``: the same table for the draws folded onto one Z2
        image (:func:`fold_posterior`). With ``fold=True`` it is also ``table``.
    z2 : str or None
        When chains sit in the two Z2 images (c1, cG) -> (-c1, -cG) and agree once folded: which
        chains are in which image. This is expected above the linear P*, not a problem.
    """

    table: pd.DataFrame
    divergences: int
    groups: dict
    warnings: list
    phases: PhaseOccupancy | None = None
    smc: dict | None = None
    header: str = ""
    folded: pd.DataFrame | None = None
    z2: str | None = None
    fold: bool = False

    @property
    def ok(self) -> bool:
        return not self.warnings

    def __str__(self) -> str:
        text = f"{self.header}\n" if self.header else ""
        with pd.option_context("display.width", 160, "display.max_columns", 30):
            if self.fold and self.folded is not None:
                text += "folded onto one Z2 image, c1 + cG >= 0:\n"
            text += self.table.round(4).to_string()
            if self.z2 is not None and self.fold:
                text += f"\n\n{self.z2}"
            elif self.z2 is not None:
                text += f"\n\n{self.z2}; folded summary:\n{self.folded.round(4).to_string()}"
        text += f"\n\ndivergences: {self.divergences}\n"
        if self.smc is not None:
            text += _smc_text(self.smc)
        if self.phases is not None:
            text += f"{self.phases}\n"
        if self.warnings:
            text += "\n".join(f"WARNING: {w}" for w in self.warnings)
        elif self.smc is not None:
            text += "no problems found (enough surviving lineages, runs agree within their errors)"
        elif self.z2 is not None or (self.fold and self.folded is not None):
            text += "no problems found (folded: R-hat <= 1.01, chains agree; no divergences)"
        else:
            text += "no problems found (R-hat <= 1.01, chains agree, no divergences)"
        return text


def smc_summary(attrs) -> dict:
    """The evidence and per-run health of an SMC result, from its attrs (:func:`run_smc`).

    Works for results written before ``num_runs`` existed (one run, scalar attrs).
    """
    runs = np.atleast_1d(np.asarray(attrs.get("log_evidence_runs", attrs["log_evidence"]), float))
    k = runs.size

    def per_run(name, default=np.nan):
        v = np.atleast_1d(np.asarray(attrs.get(name, default), float))
        return np.broadcast_to(v, (k,)) if v.size in (1, k) else np.full(k, np.nan)

    steps = per_run("num_tempering_steps")
    moves = np.atleast_1d(np.asarray(attrs.get("num_moves", np.nan), float))
    if moves.size == int(np.nansum(steps)) and np.isfinite(steps).all():
        mean_moves = [float(m.mean()) for m in np.split(moves, np.cumsum(steps.astype(int))[:-1])]
    else:
        mean_moves = [float(attrs.get("num_mcmc_steps", np.nan))] * k
    table = pd.DataFrame(
        {
            "log_evidence": runs,
            "genealogy_se": per_run("log_evidence_run_se"),
            "tempering_steps": steps,
            "eve_lineages": per_run("num_eve_lineages"),
            "particle_ess": per_run("ess_final"),
            "moves_per_step": mean_moves,
        },
        index=pd.Index(range(k), name="run"),
    )
    return {
        "log_evidence": float(attrs["log_evidence"]),
        "log_evidence_se": float(attrs.get("log_evidence_se", np.nan)),
        "num_particles": int(attrs.get("num_particles", 0)),
        "runs": table,
    }


def _smc_text(smc: dict) -> str:
    se = smc["log_evidence_se"]
    pm = f" +- {se:.4f}" if np.isfinite(se) else " (one run: no standard error)"
    k = len(smc["runs"])
    with pd.option_context("display.width", 160):
        table = smc["runs"].round(4).to_string()
    return (
        f"SMC: log evidence {smc['log_evidence']:.4f}{pm} (log of the mean Z over {k} run"
        f"{'s' if k > 1 else ''}; standard error from their spread), {smc['num_particles']} "
        f"particles per run\n{table}\n(particle_ess: ESS of each run's last reweighting; "
        "eve_lineages: initial particles with descendants at the end. ess_bulk and ess_tail above "
        "treat the particles as independent draws.)\n"
    )


def _chain_groups(means: np.ndarray, ses: np.ndarray, z: float) -> list[list[int]]:
    """Group chains whose means agree within z combined standard errors (single linkage on sorted means)."""
    order = np.argsort(means)
    groups = [[int(order[0])]]
    for prev, cur in zip(order[:-1], order[1:], strict=True):
        if abs(means[cur] - means[prev]) > z * np.hypot(ses[cur], ses[prev]):
            groups.append([])
        groups[-1].append(int(cur))
    return groups


def fold_posterior(idata):
    """A copy of ``idata`` whose linear order parameters ``c1``, ``cG`` are folded, draw by draw,
    onto the Z2 branch c1 + cG >= 0 (:func:`bayes_attn.algebra.fold_sign`); the two images of the
    ordered phase then count as one. Posteriors without both variables come back unchanged."""
    post = idata.posterior
    if "c1" not in post or "cG" not in post:
        return idata
    out = idata.copy()
    c1, cG = fold_sign(post["c1"].values, post["cG"].values)
    az.set_variable(out, "posterior", "c1", post["c1"].dims, c1)
    az.set_variable(out, "posterior", "cG", post["cG"].dims, cG)
    return out


def _chain_table(idata, var_names, z, smc):
    """(summary table with per-chain means, {var: chain groups}) of the scalar ``var_names``."""
    post = idata.posterior
    cols = ["mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail"] + (
        [] if smc else ["r_hat"]
    )
    with _warnings.catch_warnings():
        if smc:  # one run is one chain: ArviZ's shape check does not apply to particles
            _warnings.filterwarnings("ignore", message="Shape validation failed")
        summary = az.summary(idata, var_names=var_names)
        table = summary[cols].copy()
        groups = {}
        n_chains = post.sizes["chain"]
        for v in var_names:
            x = np.asarray(post[v].transpose("chain", "draw"))
            means = x.mean(axis=1)
            ses = np.array([float(az.mcse(x[c][None, :])) for c in range(n_chains)])
            for c in range(n_chains):
                table.loc[v, f"chain_{c}"] = means[c]
            if n_chains > 1:
                g = _chain_groups(means, np.maximum(ses, 1e-300), z)
                if len(g) > 1:
                    groups[v] = [(sorted(grp), float(means[grp].mean())) for grp in g]
    return table, groups


def _disagree_text(v, groups, label):
    where = "; ".join(
        f"chain{'s' if len(c) > 1 else ''} {', '.join(map(str, c))} at {v} ~ {m:.4g}"
        for c, m in groups
    )
    return f"{v}: {label} ({len(groups)} groups): {where}"


def ordered_phase(attrs) -> tuple[bool, float] | None:
    """(whether the run is in the ordered linear phase, the Level-2 second-order P*) from a result's
    attrs: P above P* at the run's task and hyperparameters
    (:func:`bayes_attn.theory.second_order_closed_form`; P the model's P, or its number of
    sequences). None when the attrs do not say (no task, hyperparameters or P), or when the
    run's tokens are not uniform (the Level-2 P* is derived for uniform tokens only).

    References
    ----------
    docs/theory.md §7 (the second-order transition: above P* the origin is unstable and the
    posterior has the two Z2 images of one ordered state).
    """
    a = dict(attrs)
    need = ("L", "V", "chi", "g_w", "g_o", "sigma2", "P")
    if not all(k in a for k in need):
        return None
    task, hyper = preset_from_attrs(a)
    if not task.tokens.uniform_law:  # the Level-2 P* is the uniform theory's
        return None
    p_star = float(second_order_closed_form(scales(task, hyper)))
    return float(np.asarray(a["P"]).item()) > p_star, p_star


def fold_ordered(idata):
    """``idata`` folded onto the Z2 image c1 + cG >= 0 (:func:`fold_posterior`) when the run is in
    the ordered linear phase (:func:`ordered_phase`: P above the Level-2 second-order P*), else
    unchanged: below P* the posterior is one state, symmetric about the origin, and folding it
    would move its mean off zero. The figures' and the summaries' side of :func:`diagnose`'s fold
    rule (which also folds, whatever P, chains that agree only once folded)."""
    ordered = ordered_phase(idata.posterior.attrs)
    return fold_posterior(idata) if ordered is not None and ordered[0] else idata


def _image_fractions(idata) -> np.ndarray:
    """Per chain (per SMC run), the fraction of draws on the image c1 + cG >= 0."""
    post = idata.posterior
    c1 = np.asarray(post["c1"].transpose("chain", "draw"))
    cG = np.asarray(post["cG"].transpose("chain", "draw"))
    return np.mean(np.asarray(z2_sign(c1, cG)) > 0, axis=1)


def _z2_images(idata, fractions, p_star=None) -> str:
    """Which chains (runs) sit in which Z2 image, in words."""
    smc = idata.posterior.attrs.get("sampler") == "smc"
    where = "" if p_star is None else f" = {p_star:.4g}"
    tail = f"(expected for linear attention above P*{where}: the two images have equal mass)"
    if not smc and np.all((fractions == 0) | (fractions == 1)):
        plus = [int(c) for c in np.flatnonzero(fractions == 1)]
        minus = [int(c) for c in np.flatnonzero(fractions == 0)]
        return (
            "the two Z2 images (c1, cG) -> (-c1, -cG): chains "
            f"{', '.join(map(str, plus))} at c1 + cG > 0, chains {', '.join(map(str, minus))} at "
            f"c1 + cG < 0 {tail}"
        )
    what = "runs hold" if smc else "chains spend"
    of = "of their particles" if smc else "of their draws"
    share = ", ".join(f"{100 * f:.0f}%" for f in fractions)
    return (
        f"the two Z2 images (c1, cG) -> (-c1, -cG): the {what} {share} {of} at c1 + cG > 0 {tail}"
    )


def _z2_rule(idata, groups, folded_groups, linear):
    """The one fold rule, for every sampler (:func:`diagnose`): the words for the two images, or
    None when the draws are not summarised folded."""
    fractions = _image_fractions(idata)
    both = bool(np.any(fractions > 0)) and bool(np.any(fractions < 1))
    if not both:
        return None
    ordered = ordered_phase(idata.posterior.attrs)
    if ordered is not None and ordered[0]:
        return _z2_images(idata, fractions, ordered[1])
    # whatever P: chains that disagree only by the symmetry sit in two distinct images
    if any(v in groups for v in linear) and not any(v in folded_groups for v in linear):
        return _z2_images(idata, fractions, None if ordered is None else ordered[1])
    return None


def hdi(draws, prob: float = 0.94) -> tuple[float, float]:
    """The narrowest interval that holds a fraction ``prob`` of the 1-D ``draws`` (highest density
    interval of the sample)."""
    x = np.sort(np.ravel(np.asarray(draws, float)))
    if x.size == 0:
        return math.nan, math.nan
    k = min(x.size, max(1, math.ceil(prob * x.size)))
    widths = x[k - 1 :] - x[: x.size - k + 1]
    i = int(np.argmin(widths))
    return float(x[i]), float(x[i + k - 1])


def phase_summary(idata, var: str, boundary="level2", *, hdi_prob: float = 0.94) -> pd.DataFrame:
    """One row per phase of the posterior of ``var``: ``weight`` (the fraction of draws) with its
    standard error ``weight_se``, ``mean``, ``sd``, ``hdi_low``, ``hdi_high`` (the ``hdi_prob``
    highest density interval, :func:`hdi`) and ``n_draws``, so that a bimodal posterior is
    reported phase by phase instead of by one mean and one interval across both modes.

    Parameters
    ----------
    idata : arviz.InferenceData
    var : str
    boundary : "level2", float or None
        ``"level2"`` (default): for a softmax ``aG`` or ``cG`` with two phases at the run's P, the
        Level-2 density minimum between them (:func:`bayes_attn.analysis.phase_occupancy`, which
        also gives the weight's error, for MCMC chains and SMC runs alike); otherwise one phase.
        A number: draws above it are ``strong``, below ``weak``. None: one phase, ``posterior``.

    Returns
    -------
    pandas.DataFrame
        Index ``phase`` (``weak``, ``strong``, or ``posterior``); ``attrs["boundary"]`` the split
        (nan for one phase).
    """
    x = np.asarray(idata.posterior[var].transpose("chain", "draw"), float)
    occ = None
    if boundary == "level2":
        soft = idata.posterior.attrs.get("activation") == "softmax" and var in ("aG", "cG")
        if soft:
            try:
                occ = phase_occupancy(idata, var)
            except (ValueError, KeyError):  # one phase at this P, or no P in the attrs
                occ = None
    elif boundary is not None:
        occ = phase_occupancy(idata, var, boundary=float(boundary))
    rows = {}
    if occ is None:
        lo, hi = hdi(x, hdi_prob)
        rows["posterior"] = (1.0, 0.0, x.mean(), x.std(), lo, hi, x.size)
    else:
        for phase, mask, w in (
            ("weak", x <= occ.boundary, 1.0 - occ.fraction),
            ("strong", x > occ.boundary, occ.fraction),
        ):
            y = x[mask]
            lo, hi = hdi(y, hdi_prob)
            mean, sd = (float(y.mean()), float(y.std())) if y.size else (math.nan, math.nan)
            rows[phase] = (w, occ.se, mean, sd, lo, hi, y.size)
    cols = ["weight", "weight_se", "mean", "sd", "hdi_low", "hdi_high", "n_draws"]
    table = pd.DataFrame.from_dict(rows, orient="index", columns=cols)
    table.index.name = "phase"
    table.attrs["boundary"] = math.nan if occ is None else float(occ.boundary)
    table.attrs["hdi_prob"] = float(hdi_prob)
    return table


def diagnose(
    idata, var_names=None, *, rhat_max: float = 1.01, z: float = 5.0, fold: bool = False
) -> Diagnosis:
    """A compact diagnostic table for the scalar variables of ``idata.posterior``.

    Chains are flagged when R-hat exceeds ``rhat_max`` or when their means split into groups that differ
    by more than ``z`` combined per-chain Monte Carlo standard errors; each group is reported with its
    chains and where it sits.

    Linear posteriors (``c1`` and ``cG``) are also summarised folded onto one Z2 image
    (:func:`fold_posterior`). One rule for every sampler (NUTS and SGLD chains, SMC runs, which are
    chains of equally weighted particles): when the draws lie in both images and either the run
    is in the ordered phase (P above the Level-2 second-order P* at its task and
    hyperparameters, :func:`ordered_phase`) or, whatever P, chains that disagree agree once
    folded, the images are reported in words (``Diagnosis.z2``), not as a problem, the folded
    table is printed beside the raw one, and the chains are checked on the folded draws (chains
    that still disagree are flagged). Below P* the posterior is one state, symmetric about the
    origin, and is summarised as it is. ``fold=True`` makes the folded table the main one.

    SMC results (``attrs["sampler"] == "smc"``; one chain per independent run) get no R-hat: the
    evidence with its error, the particle ESS, the lineages and the tempering steps per run come
    instead (:func:`smc_summary`), with the phase fractions for softmax.
    """
    post = idata.posterior
    if var_names is None:
        var_names = [v for v in post.data_vars if set(post[v].dims) == {"chain", "draw"}]
    if not var_names:
        raise ValueError("no scalar variables to diagnose; pass var_names")
    is_smc = post.attrs.get("sampler") == "smc"
    table, groups = _chain_table(idata, var_names, z, is_smc)
    folded, folded_groups, z2 = None, {}, None
    if "c1" in post and "cG" in post and {"c1", "cG"} & set(var_names):
        folded, folded_groups = _chain_table(fold_posterior(idata), var_names, z, is_smc)
        linear = [v for v in ("c1", "cG") if v in var_names]
        z2 = _z2_rule(idata, groups, folded_groups, linear)
    warnings = []
    folded_check = folded is not None and (z2 is not None or fold)
    checked, checked_groups = (folded, folded_groups) if folded_check else (table, groups)
    if folded_check and fold:
        table = folded
    for v in var_names:
        if v in checked_groups:
            beyond = folded is not None and v in folded_groups and v in ("c1", "cG")
            label = "chains disagree beyond the Z2 symmetry" if beyond else "chains disagree"
            warnings.append(_disagree_text(v, checked_groups[v], label))
        elif not is_smc and post.sizes["chain"] > 1:
            rhat = float(checked.loc[v, "r_hat"])
            if rhat > rhat_max:
                warnings.append(f"{v}: R-hat {rhat:.3f} > {rhat_max} (chains have not mixed)")
    div = 0
    if "sample_stats" in az.groups(idata) and "diverging" in idata.sample_stats:
        div = int(np.asarray(idata.sample_stats["diverging"]).sum())
    if div:
        warnings.append(f"{div} divergent transitions: the sampler may be biased")
    phases = None
    if "aG" in post.data_vars and post.attrs.get("activation") == "softmax":
        try:
            phases = phase_occupancy(idata)
        except (ValueError, KeyError):  # one phase only at these scales, or no P in the attrs
            phases = None
        if phases is not None and not phases.ok:
            warnings.append(f"phases: {phases.reason}")
    smc = None
    if is_smc and "log_evidence" in post.attrs:
        smc = smc_summary(post.attrs)
        warnings.extend(f"smc: {p}" for p in smc_problems(post.attrs))
    return Diagnosis(
        table=table,
        divergences=div,
        groups=checked_groups,
        warnings=warnings,
        phases=phases,
        smc=smc,
        header=header(post.attrs),
        folded=folded,
        z2=z2,
        fold=fold,
    )
