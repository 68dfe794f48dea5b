"""What :func:`bayes_attn.inference.smc.run_smc` says while it runs (its ``progress``): the cost
announced before the first tempering step (one timed gradient times the gradients a step takes),
one bar over lambda (the smallest over the runs), each step's line at DEBUG, and the
rejuvenation at lambda = 1 announced with its cost and reported when it ends. Everything goes
through :mod:`bayes_attn.progress`.
"""

from __future__ import annotations

import logging

import jax
import numpy as np

from bayes_attn.inference.smc_checkpoint import REJUVENATED, Saved
from bayes_attn.inference.smc_kernel import StepRecord
from bayes_attn.progress import announce, duration, say, seconds_per_call
from bayes_attn.progress import bar as make_bar

__all__ = ["Progress", "announce_cost", "gradients_per_move"]

log = logging.getLogger("bayes_attn")


def announce_cost(log_parts, unravel, flat0, s) -> float:
    """Say what the run will do and what a tempering step costs; the seconds per gradient."""
    seconds = seconds_per_call(jax.jit(jax.grad(lambda x: log_parts(unravel(x))[1])), flat0)
    lo, hi = s.num_mcmc_steps, s.max_mcmc_steps
    announce(
        f"run_smc: {s.num_runs} runs x {s.num_particles} particles in {flat0.size} dimensions, "
        f"{s.kernel} moves; each tempering step ({lo}-{hi} moves; a run takes typically 5-40 "
        "steps)",
        (gradients_per_move(s) * lo, gradients_per_move(s) * hi),
        seconds,
    )
    return seconds


def gradients_per_move(s) -> int:
    leapfrog = (s.num_integration_steps + 1) if s.kernel == "hmc" else 1
    return s.num_runs * s.num_particles * leapfrog


class Progress:
    """One tqdm bar over lambda and the announcements at INFO, each step's line at DEBUG; silent
    unless ``enabled``. ``s`` is the run's resolved
    :class:`~bayes_attn.inference.smc.SMCSettings` (module docstring of
    :mod:`bayes_attn.inference.smc`, "Progress and checkpoints")."""

    def __init__(self, enabled: bool, s, seconds: float):
        self.enabled, self.settings, self.seconds = enabled, s, seconds
        self.bar = make_bar(
            1.0,
            "run_smc",
            enabled,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| lambda {n:.4f} [{elapsed}{postfix}]",
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.bar.close()

    def resumed(self, path, saved: Saved) -> None:
        lam = np.asarray(saved.state.smc.sampler_state.tempering_param)
        say("run_smc: resuming from checkpoint %s after tempering step %d (lambda = %s)%s",
            path, max(len(r) for r in saved.records), np.array2string(lam, precision=4),
            ", rejuvenated" if saved.stage == REJUVENATED else "", enabled=self.enabled)  # fmt: skip
        self.bar.update(float(lam.min()) - self.bar.n)

    def step(self, k: int, lam, rec: StepRecord) -> None:
        if not self.enabled:
            return
        log.debug(
            "smc step %d: lambda = %s, moves = %s, acceptance = %s, %s = %s",
            k,
            np.array2string(lam, precision=4),
            np.array2string(rec.num_moves),
            np.array2string(rec.acceptance_rate, precision=3),
            "step" if self.settings.kernel == "hmc" else "scale",
            np.array2string(rec.move_scale, precision=3),
        )
        self.bar.update(float(np.min(lam)) - self.bar.n)
        self.bar.set_postfix_str(f"step {k}, moves {int(np.max(rec.num_moves))}")

    def rejuvenation_starts(self, records) -> None:
        if not self.enabled:
            return
        s = self.settings
        last = int(max(run[-1].num_moves for run in records))
        self.bar.close()  # lambda = 1: the bar is full; the rejuvenation gets its own lines
        announce(
            f"run_smc: the rejuvenation at lambda = 1 (one more resample and "
            f"{s.num_mcmc_steps}-{s.max_mcmc_steps} moves; the last tempering step took {last})",
            (gradients_per_move(s) * last, gradients_per_move(s) * s.max_mcmc_steps),
            self.seconds,
        )

    def rejuvenation_done(self, last: StepRecord, seconds: float) -> None:
        say("run_smc: the rejuvenation at lambda = 1 took %s: moves = %s, acceptance = %s",
            duration(seconds), np.array2string(last.num_moves),
            np.array2string(last.acceptance_rate, precision=3), enabled=self.enabled)  # fmt: skip
