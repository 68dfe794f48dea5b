"""``landscape``: a free-energy profile by umbrella sampling (the work is
:mod:`bayes_attn.experiments.landscape`'s; the defaults per level are
:meth:`bayes_attn.inference.umbrella.UmbrellaSettings.for_level`, which the landscape reads for
every option left out)."""

from __future__ import annotations

import logging
import math
import time

import click

from bayes_attn.cli import _defaults as homes
from bayes_attn.cli._interrupt import interruptibly
from bayes_attn.cli._options import (
    P_option,
    activation_option,
    distributed_options,
    level_option,
    out_option,
    preset_options,
    seed_option,
    stack,
    start_processes,
    untrusted_option,
    verbosity_options,
)

log = logging.getLogger("bayes_attn")

_PER_LEVEL = "per level, UmbrellaSettings.for_level"


def _umbrella(flag: str, low: int, help: str):
    """An option of ``UmbrellaSettings``: default None, the level's own value."""
    return click.option(flag, type=click.IntRange(min=low), default=None, show_default=_PER_LEVEL,
                        help=help)  # fmt: skip


#: --warmup, --samples, --chains, --windows, --centres, --refine
_window_options = stack(
    _umbrella("--warmup", 0, "warm-up steps per window"),
    _umbrella("--samples", 4, "draws per window"),
    _umbrella("--chains", 1, "chains per window"),
    _umbrella("--windows", 8, "the most windows the automatic placement may use"),
    click.option("--centres", default=None, metavar="LO:HI:N", show_default="from the modes",
                 help="N evenly spaced window centres from LO to HI"),
    _umbrella("--refine", 0, "refinement rounds"),
)  # fmt: skip


@click.command()
@preset_options
@level_option(homes.LANDSCAPE_LEVELS, "kernel",
              "order parameters (Level 2) or kernel limit (Level 1; with --gram-width, a network)")  # fmt: skip
@activation_option(("softmax", "linear"), "softmax",
                   "attention activation (the profile is of softmax's aG, of linear's cG)")  # fmt: skip
@P_option(float, 272.0)
@click.option("--gram-width", type=click.IntRange(min=1), default=None, show_default="g = I",
              help="kernel: the Gram of one prior draw of embeddings of this width")  # fmt: skip
@_window_options
@seed_option()
@untrusted_option("the profile's verdict is 'not to be trusted'")
@out_option("landscape.nc", help="InferenceData NetCDF file (its folder must exist)")
@distributed_options
@verbosity_options
@click.pass_context
def landscape(ctx, preset, level, activation, P, gram_width, warmup, samples, chains, windows,
              centres, refine, seed, allow_untrusted, out, process):  # fmt: skip
    """Free-energy profile F(aG) (linear: F(cG)) by umbrella sampling + MBAR, beside Level 2;
    write NetCDF. Prints what ``diagnose`` prints for the file, its verdict included, and exits
    1 where the verdict is 'not to be trusted' (unless --allow-untrusted). Ctrl-C keeps the
    finished windows in OUT.windows.nc; the same command again resumes them."""
    grid = _centres(centres)
    if gram_width is not None and level != "kernel":
        raise click.BadParameter("only with --level kernel", param_hint="--gram-width")
    from bayes_attn.experiments.landscape import check_landscape_P

    try:
        P = check_landscape_P(*preset, P, level)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--P") from None
    info = start_processes(process)
    from bayes_attn.analysis.report import read_report
    from bayes_attn.experiments.landscape import landscape_on_hosts

    given = dict(num_warmup=warmup, num_samples=samples, num_chains=chains, max_windows=windows,
                 refine=refine)  # fmt: skip
    t0 = time.perf_counter()
    log.info("umbrella sampling of %s at the %s level, P=%g",
             "aG" if activation == "softmax" else "cG", level, P)  # fmt: skip
    try:
        idata = interruptibly(
            landscape_on_hosts, *preset, P, level, activation, out, info, gram_width=gram_width, seed=seed,
            progress=ctx.obj["progress"], centres=grid,
            **{k: v for k, v in given.items() if v is not None},
        )  # fmt: skip
    except KeyboardInterrupt:
        _interrupted(out, info.num_processes)
        raise
    if idata is None:
        log.info("process %d wrote its share of the windows", info.process_id)
        return
    log.info("wrote %s in %.1f s", out, time.perf_counter() - t0)
    report = read_report(out)
    click.echo(report.text)
    if not report.trusted and not allow_untrusted:
        click.echo("bayes-attn: the profile is not to be trusted (verdict above); rerun with more "
                   "windows or draws, or pass --allow-untrusted", err=True)  # fmt: skip
        raise click.exceptions.Exit(1)


def _interrupted(out, num_processes: int) -> None:
    """The line after Ctrl-C: what was kept, and that the same command resumes it."""
    from bayes_attn.experiments.landscape import checkpoint_path

    kept = checkpoint_path(out)
    if num_processes > 1:
        click.echo("bayes-attn: interrupted; each process keeps its finished windows beside "
                   "its part file: the same command resumes them", err=True)  # fmt: skip
    elif kept.exists():
        click.echo(f"bayes-attn: interrupted; the relaxed windows and those finished are "
                   f"kept in {kept}: the same command resumes them", err=True)  # fmt: skip
    else:
        click.echo("bayes-attn: interrupted before any window had finished", err=True)


def _centres(text):
    """``LO:HI:N`` -> N evenly spaced centres (None stays None)."""
    if text is None:
        return None
    try:
        lo, hi, n = text.split(":")
        lo, hi, n = float(lo), float(hi), int(n)
    except ValueError:
        raise click.BadParameter(
            f"expected LO:HI:N, got {text!r}", param_hint="--centres"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise click.BadParameter(f"LO and HI must be finite, got {text!r}", param_hint="--centres")
    if not (n >= 2 and hi > lo):
        raise click.BadParameter(f"need N >= 2 and HI > LO, got {text!r}", param_hint="--centres")
    import numpy as np

    return np.linspace(lo, hi, n)
