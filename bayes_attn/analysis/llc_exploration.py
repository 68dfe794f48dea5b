"""Has an LLC run explored its target? The check that R-hat and ESS of λ̂ alone miss.

Why the LLC's own diagnostics are not enough (docs/theory.md, "Exploration: what R-hat of λ̂
misses"): on a singular target the posterior mass lies along valleys (the arms of a normal
crossing) whose far ends narrow as nβ grows. The per-draw nβ (L_n − L_n(w*)) is, across a valley,
about ½χ² whatever the position along it, so its autocorrelation is that of the fast transverse
motion, and its R-hat and ESS look healthy while the chains creep along the valleys. The distance
|w − w*| is the coordinate that moves along them. :func:`llc_exploration` measures R-hat and the
bulk and tail ESS of the distance (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-
normalization, folding, and localization: an improved R-hat for assessing convergence of MCMC":
R-hat at most 1.01 and an ESS of at least 100 per chain), counts NUTS's divergent transitions
where the run kept them (``sample_stats.diverging``), and for a tempered SMC run
(``llc_sampler`` "smc") reads the run's own checks instead (its lineages and the runs' agreement
test, :func:`bayes_attn.inference.llc_smc.llc_smc_problems`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from bayes_attn import _arviz as az

__all__ = [
    "LIMITS",
    "MAX_RHAT",
    "MIN_ESS_PER_CHAIN",
    "Exploration",
    "LLCLimits",
    "llc_exploration",
]


@dataclasses.dataclass(frozen=True)
class LLCLimits:
    """The limits an LLC run is judged by, their one home (:data:`LIMITS`): the step's and the
    chains' checks of :func:`bayes_attn.analysis.llc.llc_verdict` and the exploration check of
    :func:`llc_exploration`.

    Attributes
    ----------
    min_acceptance : float
        The exact MALA acceptance an SGLD step needs (default 0.9; ``llc_verdict``, and
        ``calibration_verdict``'s default).
    rhat_llc : float
        The R-hat of the per-draw λ̂ across chains at or above which ``llc_verdict`` says they
        disagree (default 1.05).
    rhat_distance : float
        The R-hat of |w − w*| across chains above which :func:`llc_exploration` says they have
        not explored the target (default 1.01, Vehtari et al. 2021).
    min_ess_per_chain : int
        The bulk and tail ESS of |w − w*| per chain below which :func:`llc_exploration` says the
        walk is too slow (default 100, Vehtari et al. 2021).
    """

    min_acceptance: float = 0.9
    rhat_llc: float = 1.05
    rhat_distance: float = 1.01
    min_ess_per_chain: int = 100


#: the limits :func:`llc_exploration` and :func:`bayes_attn.analysis.llc.llc_verdict` apply
LIMITS = LLCLimits()
#: the limits' old names (``MIN_ACCEPTANCE`` and ``RHAT_MAX`` re-exported by
#: :mod:`bayes_attn.analysis.llc`, where they were)
MAX_RHAT, MIN_ESS_PER_CHAIN = LIMITS.rhat_distance, LIMITS.min_ess_per_chain
MIN_ACCEPTANCE, RHAT_MAX = LIMITS.min_acceptance, LIMITS.rhat_llc


@dataclasses.dataclass(frozen=True)
class Exploration:
    """What :func:`llc_exploration` found.

    Attributes
    ----------
    rhat_distance : float
        Rank-normalised R-hat of |w − w*| across chains (NaN for one chain, and for SMC).
    ess_distance, ess_tail_distance : float
        Bulk and tail ESS of |w − w*| (NaN for SMC).
    problems : tuple of str
        One sentence per failed check; empty when the run passes.
    """

    rhat_distance: float
    ess_distance: float
    ess_tail_distance: float
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def llc_exploration(idata, burnin: int = 0) -> Exploration:
    """The exploration check of a :func:`~bayes_attn.inference.llc.run_llc` result (module
    docstring); ``burnin`` kept draws are left out of every chain first (not for SMC)."""
    attrs = az.dataset(idata).attrs
    if attrs.get("llc_sampler") == "smc":
        from bayes_attn.inference.llc_smc import llc_smc_problems

        return Exploration(math.nan, math.nan, math.nan, tuple(llc_smc_problems(attrs)))
    dist = np.asarray(az.dataset(idata)["distance"], dtype=float)[:, burnin:]
    chains = dist.shape[0]
    if not np.all(np.isfinite(dist)):
        return Exploration(math.nan, math.nan, math.nan, ("the distance is not finite",))
    rhat = az.rhat(dist) if chains > 1 else math.nan
    ess, ess_tail = az.ess(dist), az.ess(dist, method="tail")
    problems, lim = [], LIMITS
    if rhat > lim.rhat_distance:
        problems.append(
            f"R-hat of |w − w*| is {rhat:.3f} (> {lim.rhat_distance}): the chains sit at different "
            "distances from w*, so they have not explored the target's valleys; λ̂ and its MCSE "
            "are not to be trusted (R-hat of λ̂ does not see this); run longer, or use "
            "sampler='smc'"
        )
    stats = az.dataset(idata, "sample_stats") if "sample_stats" in az.groups(idata) else {}
    if "diverging" in stats:
        div = int(np.sum(np.asarray(stats["diverging"])[:, burnin:]))
        if div:
            problems.append(
                f"{div} divergent NUTS transitions: the trajectories break where the target "
                "narrows (the far ends of its valleys), so those regions are under-sampled and "
                "λ̂ leans low; use sampler='smc'"
            )
    low = min(ess, ess_tail)
    if not low >= lim.min_ess_per_chain * chains:
        problems.append(
            f"the ESS of |w − w*| is {ess:.0f} (bulk) and {ess_tail:.0f} (tail), below "
            f"{lim.min_ess_per_chain} per chain: the walk along the target's valleys is slow and its "
            "far ends are rarely visited, so λ̂ and its MCSE are not to be trusted; run longer, "
            "or use sampler='smc'"
        )
    return Exploration(float(rhat), float(ess), float(ess_tail), tuple(problems))
