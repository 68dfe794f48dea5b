"""The options of every LLC function: :class:`LLCSettings`, the one place their defaults are set.

:func:`~bayes_attn.inference.llc.run_llc`, :func:`~bayes_attn.inference.llc.exact_frozen_llc`,
:func:`~bayes_attn.inference.llc_smc.run_llc_smc`, the targets
(:func:`~bayes_attn.inference.llc_target.llc_target`,
:func:`~bayes_attn.inference.llc_frozen.frozen_llc_target`) and the ladders of
:mod:`bayes_attn.experiments.llc_ti` all take ``settings: LLCSettings | None = None`` plus keyword
``**changes`` (its fields; :func:`bayes_attn._validation.with_changes`), and the CLI's ``llc`` and
the ``llc`` sweep read their defaults here. It imports nothing of the LLC's own, so that the
target's module can read it (:mod:`bayes_attn.inference.llc` re-exports it)."""

from __future__ import annotations

import dataclasses
import math

from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference.llc_nuts import NUTS_METRICS

__all__ = ["LLC_SAMPLERS", "TARGET_FIELDS", "LLCSettings"]

LLC_SAMPLERS = ("sgld", "rmsprop", "mala", "nuts", "smc")
#: the fields of :class:`LLCSettings` that define the target (the rest are its sampler's)
TARGET_FIELDS = ("nbeta", "gamma", "include_prior")


@dataclasses.dataclass(frozen=True)
class LLCSettings:
    """The LLC's options and their defaults (:func:`~bayes_attn.inference.llc.run_llc`'s).

    Every LLC function takes them as ``settings=`` plus keyword ``**changes`` (module
    docstring); :meth:`checked` checks them, each error naming its parameter. The targets read
    the :data:`TARGET_FIELDS` alone.

    Attributes
    ----------
    sampler : {"sgld", "rmsprop", "mala", "nuts", "smc"}
        Default ``"sgld"`` (:mod:`bayes_attn.inference.llc`). ``"smc"``: tempered SMC from the
        base up to nβ (:func:`bayes_attn.inference.llc_smc.run_llc_smc`, with ``num_chains``
        independent runs of ``num_draws`` particles; the burn-in, thinning, step and start
        options do not apply).
    num_chains, num_draws, thinning : int
        Chains (vectorised; default 4); draws kept (default 200), each ``thinning`` steps
        (default 1).
    num_burnin : int or "auto"
        Steps discarded first; default 0. ``"auto"``:
        :data:`~bayes_attn.inference.llc_target.BURNIN_RELAXATIONS` / (εγ) for the Langevin
        samplers, five relaxation times of the directions that γ alone holds (the chains start
        at w*, and those directions relax slowest: docs/validation.md, "λ̂ against P at Table
        1"); 0 without localization; 500 for NUTS (its window adaptation, as
        :func:`~bayes_attn.inference.llc.exact_frozen_llc`),
        :data:`~bayes_attn.inference.llc_nuts.LAPLACE_WARMUP` in the Laplace metric (the step
        alone to adapt).
    step_size : float or "auto"
        ε of the Langevin samplers. ``"auto"`` (default): 0.1 / h_max, h_max the largest
        curvature of the target at w* (:func:`~bayes_attn.inference.llc_target.llc_step_size`),
        so that the step follows the model's scale (the fixed 1e-4 of earlier versions diverges
        on the Table-1 network at d = 256). NUTS adapts its own step; for it ε only sets the
        default ``init_noise``, and ``"auto"`` stands for 1e-4 there. A chain whose state stops
        being finite or blows up raises :class:`~bayes_attn._validation.SamplerDiverged` (one
        line: the step, ε).
    nbeta : float, optional
        nβ of the target; default None, n / log n.
    gamma : float
        The localization strength γ >= 0; default 100 (0: none; then the loss or the prior must
        confine).
    include_prior : bool
        Multiply the target by the model's prior; default False (localization only, as
        devinterp).
    init_noise : float, optional
        Each chain starts at w* + init_noise ξ, ξ ~ N(0, I) (so that R-hat across chains means
        something); default None, √(2ε), one step's noise. 0 starts every chain at w*
        (devinterp).
    rmsprop : (alpha, delta)
        RMSProp's decay and its δ (``sampler="rmsprop"``); default (0.99, 1e-8).
    metric : {"adapt", "laplace"}
        NUTS's metric (``sampler="nuts"``): ``"adapt"`` (default), a diagonal one learnt in the
        window adaptation; ``"laplace"``, the dense inverse Hessian of the target at w* (for at
        most :data:`~bayes_attn.inference.llc_nuts.LAPLACE_MAX_DIM` dimensions), the warm-up
        then adapting the step alone. Where the target is stiff (the frozen-embedding network at
        Table 1) the Laplace metric mixes in far fewer gradients.
    """

    sampler: str = "sgld"
    num_chains: int = 4
    num_draws: int = 200
    num_burnin: int | str = 0
    thinning: int = 1
    step_size: float | str = "auto"
    nbeta: float | None = None
    gamma: float = 100.0
    include_prior: bool = False
    init_noise: float | None = None
    rmsprop: tuple[float, float] = (0.99, 1e-8)
    metric: str = "adapt"

    def checked(self) -> LLCSettings:
        """Every option checked before any work starts (``"auto"`` kept as it is)."""
        if self.sampler not in LLC_SAMPLERS:
            raise ValueError(f"sampler must be one of {LLC_SAMPLERS}, got {self.sampler!r}")
        if self.metric not in NUTS_METRICS:
            raise ValueError(f"metric must be one of {NUTS_METRICS}, got {self.metric!r}")
        o = {n: check_int(n, getattr(self, n), 1) for n in ("num_chains", "num_draws", "thinning")}
        if self.num_burnin != "auto":
            o["num_burnin"] = check_int("num_burnin", self.num_burnin, 0)
        if self.step_size != "auto":
            o["step_size"] = check_positive("step_size", self.step_size)
        alpha, delta = (float(a) for a in self.rmsprop)
        if not (0 <= alpha < 1 and delta > 0):
            raise ValueError(f"rmsprop must be (alpha in [0, 1), delta > 0), got {self.rmsprop!r}")
        if self.init_noise is not None:
            o["init_noise"] = float(self.init_noise)
            if not (math.isfinite(o["init_noise"]) and o["init_noise"] >= 0):
                raise ValueError(
                    f"init_noise must be a finite number >= 0, got {self.init_noise!r}"
                )
        return dataclasses.replace(self.target_checked(), rmsprop=(alpha, delta), **o)

    def target_checked(self) -> LLCSettings:
        """The :data:`TARGET_FIELDS` checked (all that a target reads), the others as they are."""
        gamma = float(self.gamma)
        if not (math.isfinite(gamma) and gamma >= 0):
            raise ValueError(f"gamma must be a finite number >= 0, got {self.gamma!r}")
        nbeta = None if self.nbeta is None else check_positive("nbeta", self.nbeta)
        return dataclasses.replace(self, nbeta=nbeta, gamma=gamma)
