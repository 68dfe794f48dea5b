"""``llc``: the local learning coefficient at the exact MAP (the work is
:func:`bayes_attn.experiments.llc.llc_point`'s, the verdict :func:`bayes_attn.analysis.llc.llc_verdict`'s)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click

from bayes_attn.cli import _defaults as homes
from bayes_attn.cli._interrupt import interruptibly
from bayes_attn.cli._options import (
    P_option,
    activation_option,
    batch_size_option,
    d_model_option,
    level_option,
    out_option,
    preset_options,
    seed_option,
    stack,
    untrusted_option,
    verbosity_options,
)
from bayes_attn.cli._types import BURNIN, STEP, LazyChoice, package_result, writable

log = logging.getLogger("bayes_attn")

#: --sampler, --metric, --chains, --draws, --burnin, --step-size, --nbeta, --gamma,
#: --include-prior; the defaults are the command's own (inference.llc.COMMAND_SETTINGS: NUTS,
#: which passes its verdict on the default problem where SGLD does not), the burn-in rule the
#: llc sweep's
_run_options = stack(
    click.option("--sampler", type=LazyChoice(homes.LLC_SAMPLERS),
                 default=homes.llc_command("sampler"),
                 help="SGLD, RMSProp-preconditioned SGLD, MALA, NUTS, or tempered SMC over nβ "
                 "(chains are its independent runs, draws its particles per run)"),
    click.option("--metric", type=LazyChoice(homes.LLC_METRICS),
                 default=homes.llc_command("metric"),
                 help="NUTS's metric: a diagonal one learnt in warm-up (adapt) or the dense "
                 "inverse Hessian of the target at w* (laplace; for at most a few thousand "
                 "weights)"),
    click.option("--chains", type=click.IntRange(min=1), default=None,
                 show_default="the llc sweep's num_chains; llc_smc.DEFAULT_RUNS (16) runs for smc",
                 help="chains, started around w* (smc: its independent runs, whose spread is the "
                 "error)"),
    click.option("--draws", type=click.IntRange(min=1), default=homes.llc_command("num_draws"),
                 help="draws kept per chain (smc: particles per run, --chains x --draws particles "
                 "in all); given, also the exact run's draws per chain (else 1000), smc apart"),
    click.option("--burnin", type=BURNIN, default=homes.sweep("llc", "num_burnin"),
                 help="steps discarded first, or auto: 5 / (ε γ), five relaxation times of what γ "
                 "holds (SGLD, MALA); NUTS's warm-up: 500, or 200 with --metric laplace; a "
                 "number given is also the exact run's warm-up (else 500), smc apart"),
    click.option("--step-size", type=STEP, default=homes.llc_command("step_size"),
                 help="ε, or auto: 0.1 / the largest curvature of the target at w* (llc_step_size)"),
    click.option("--nbeta", type=float, default=None, show_default="P / log P", help="nβ"),
    click.option("--gamma", type=float, default=homes.llc_command("gamma"),
                 help="localization γ"),
    click.option("--include-prior", is_flag=True, help="multiply the target by the model's prior"),
)  # fmt: skip


@click.command()
@preset_options
@level_option(("network", "kernel"), homes.sweep("llc", "level"),
              "the network with frozen embeddings (Level 0) or the kernel limit (Level 1)")  # fmt: skip
@activation_option(default="softmax")
@P_option(click.IntRange(min=2), 300)
@d_model_option(homes.sweep("llc", "d_model"), "network width, at least V + L (level network)",
                show_default="V + L")  # fmt: skip
@_run_options
@batch_size_option("SGLD minibatch (sequences; level network)")
@click.option("--exact", is_flag=True, help="also the exact LLC (W_O integrated out, NUTS), "
              "written to OUT_exact.nc (level network)")  # fmt: skip
@seed_option()
@untrusted_option("the run's verdict says it is not to be trusted")
@out_option("llc.nc", help="InferenceData NetCDF file (its folder must exist)")
@verbosity_options
@click.pass_context
def llc(ctx, preset, level, activation, P, d_model, sampler, metric, chains, draws, burnin,
        step_size, nbeta, gamma, include_prior, batch_size, exact, seed, allow_untrusted,
        out):  # fmt: skip
    """The local learning coefficient at the exact MAP; write NetCDF and print the estimate.

    Prints what ``diagnose`` prints for the file, the verdict included, and exits 1 where the
    verdict fails (unless --allow-untrusted) or the sampler diverged. A finished run is kept in
    OUT, a run's state in OUT_SAMPLER.ckpt.npz (SMC apart) and the exact run's in
    OUT_exact.ckpt.npz: after Ctrl-C the same command resumes. With --exact, --draws and a
    number of --burnin steps, where given, set the exact run's too (its NUTS chains; an SMC
    run's --draws are its particles, so there the exact run keeps its own 1000 and 500)."""
    from bayes_attn.cli._checks import check_run_P

    check_run_P(*preset, P, level, d_model)
    chains = _check(level, P, sampler, chains, nbeta, gamma, batch_size, exact)
    exact_run = _exact_run_options(ctx, sampler, draws, burnin) if exact else {}
    exact_out = Path(out).with_name(Path(out).stem + "_exact.nc")
    # NUTS's metric is passed only to NUTS, so that another sampler's run (and its digest, which
    # lets a rerun find it) is what it was before the option existed
    by_metric = {"metric": metric} if sampler == "nuts" else {}
    if exact:
        _check_exact_out(exact_out)
    from bayes_attn.analysis.llc import llc_estimate, llc_verdict
    from bayes_attn.experiments.llc import llc_point
    from bayes_attn.io import write_atomic

    t0, t0_wall = time.perf_counter(), time.time()
    log.info("llc by %s on the %s model, %s attention, P=%d", sampler, level, activation, P)
    for path in _checkpoints(out, sampler, exact):
        if path.exists():  # made by an interrupted run; refused if made with other arguments
            log.info("llc: resuming from %s", path)
    try:
        idata, ex = interruptibly(
            llc_point, level, *preset, P, activation, d_model=d_model, seed=seed, batch_size=batch_size,
            exact=exact, progress=ctx.obj["progress"], keep=out, sampler=sampler,
            num_chains=chains, num_draws=draws, num_burnin=burnin, step_size=step_size,
            nbeta=nbeta, gamma=gamma, include_prior=include_prior, **by_metric, **exact_run,
        )  # fmt: skip
    except KeyboardInterrupt:
        click.echo(f"bayes-attn: interrupted; {_kept(out, sampler, exact, since=t0_wall)}",
                   err=True)  # fmt: skip
        raise
    if ex is not None:
        write_atomic(ex, exact_out)
    trusted = True
    for result, label in ((idata, ""), (ex, "exact: ")):
        if result is not None:  # what diagnose prints for the file, but its provenance line
            verdict = llc_verdict(result)
            click.echo(f"{label}{llc_estimate(result).summary()}\n{verdict}")
            trusted &= verdict.trusted
    log.info("wrote %s in %.1f s", out, time.perf_counter() - t0)
    if not trusted and not allow_untrusted:
        click.echo("bayes-attn: the LLC is not to be trusted (verdict above); run longer, halve "
                   "the step, or pass --allow-untrusted", err=True)  # fmt: skip
        raise click.exceptions.Exit(1)


def _kept(out, sampler: str, exact: bool, since: float | None = None) -> str:
    """What an interrupted run kept (:func:`~bayes_attn.experiments.llc.llc_point`'s ``keep``),
    as the end of the line that says so: the run in OUT where it finished (written at or after
    ``since``, a :func:`time.time`), and the checkpoints that exist: the sampler's state (SMC
    keeps none) and, with --exact, the exact run's. A checkpoint is first written after 30 s of
    steps: before that the line says none was written, rather than name a file that is not there
    (before: it named the checkpoint path whether or not it existed)."""
    kept = []
    out = Path(out)
    if out.exists() and (since is None or out.stat().st_mtime >= since - 1.0):
        kept.append(f"{out} (its run finished)")
    for path in _checkpoints(out, sampler, exact):
        if path.exists():
            what = (
                "the exact run's" if path.stem.endswith("_exact.ckpt") else f"the {sampler} run's"
            )
            kept.append(f"{path} ({what} state)")
    if not kept:
        return "no checkpoint written yet (the first is written after 30 s of steps)"
    return "kept " + ", ".join(kept) + ": the same command resumes"


def _checkpoints(out, sampler: str, exact: bool) -> list[Path]:
    """The checkpoints a run keeps beside OUT: the sampler's (SMC keeps none) and the exact
    run's (with --exact)."""
    out = Path(out)
    names = ([sampler] if sampler != "smc" else []) + (["exact"] if exact else [])
    return [out.with_name(f"{out.stem}_{name}.ckpt.npz") for name in names]


def _check(level, P, sampler, chains, nbeta, gamma, batch_size, exact) -> int:
    """Every check of the options before any work; returns the number of chains."""
    from bayes_attn._validation import check_positive

    if nbeta is not None:
        check_positive("nbeta", nbeta)
    if not gamma >= 0:
        raise click.BadParameter(f"must be >= 0, got {gamma}", param_hint="--gamma")
    if exact and level != "network":
        raise click.BadParameter("the exact LLC is the network's", param_hint="--exact")
    if chains is None:  # SMC's error is the spread of its runs: llc_smc.DEFAULT_RUNS of them
        from bayes_attn.inference.llc_smc import DEFAULT_RUNS

        chains = DEFAULT_RUNS if sampler == "smc" else homes.llc_command("num_chains")()
    if batch_size is not None and batch_size > P:
        raise ValueError(f"batch_size must be at most P = {P} (the full batch), got {batch_size}")
    return chains


def _exact_run_options(ctx, sampler: str, draws: int, burnin) -> dict:
    """The exact run's draws and warm-up from --draws and --burnin where they were given (before,
    the exact run ignored them silently): its chains are NUTS's, so a number of draws or of
    burn-in steps means the same there. An SMC run's --draws are particles, and --burnin auto is
    a rule of SGLD's and MALA's step: the exact run keeps its own defaults for those."""
    from click.core import ParameterSource

    def given(name):
        return ctx.get_parameter_source(name) is not ParameterSource.DEFAULT

    run = {}
    if sampler != "smc" and given("draws"):
        run["exact_draws"] = draws
    if sampler != "smc" and given("burnin") and isinstance(burnin, int):
        run["exact_burnin"] = burnin
    return run


def _check_exact_out(path: Path) -> None:
    """OUT_exact.nc, where it exists, must be a writable result of this package."""
    if not path.exists():
        return
    if not writable(path, folder=False):
        raise click.BadParameter(f"cannot write {str(path)!r}", param_hint="--exact")
    if not package_result(path):
        raise click.BadParameter(f"{str(path)!r} exists and is not a NetCDF result of bayes-attn",
                                 param_hint="--exact")  # fmt: skip
