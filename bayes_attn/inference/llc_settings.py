"""The defaults of :func:`bayes_attn.inference.llc.run_llc`: :class:`LLCSettings`, the one place
they are set. Every LLC function reads its defaults here (γ of the target in
:func:`~bayes_attn.inference.llc_target.llc_target`,
:func:`~bayes_attn.inference.llc_frozen.frozen_llc_target`,
:func:`~bayes_attn.inference.llc_smc.run_llc_smc` and the ladders of
:mod:`bayes_attn.experiments.llc_ti`), and so do the CLI's ``llc`` and the ``llc`` sweep. It
imports nothing of the LLC's own, so that the target's module can read it
(:mod:`bayes_attn.inference.llc` re-exports it)."""

from __future__ import annotations

import dataclasses
import math

from bayes_attn._validation import check_int, check_positive
from bayes_attn.inference.llc_nuts import NUTS_METRICS

__all__ = ["LLC_SAMPLERS", "LLCSettings"]

LLC_SAMPLERS = ("sgld", "rmsprop", "mala", "nuts", "smc")


@dataclasses.dataclass(frozen=True)
class LLCSettings:
    """:func:`~bayes_attn.inference.llc.run_llc`'s sampler options and their defaults (the one
    place they are set; the CLI's ``llc`` and the ``llc`` sweep read them). The fields are
    :func:`~bayes_attn.inference.llc.run_llc`'s keyword arguments of the same names;
    :meth:`checked` checks them, each error naming its parameter. ``gamma`` is also the default
    of every LLC target and ladder (module docstring)."""

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
        return dataclasses.replace(self, rmsprop=(alpha, delta), **o)
