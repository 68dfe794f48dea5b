"""The ``bayes-attn`` command line: theory, sampling, training, sweeps, figures and diagnostics.

Every subcommand defaults to the paper preset (L = 25, V = 5, chi = 30, g_W = g_O = 1,
sigma^2 = 30, the paper's Table 1, uniform tokens); ``--L``, ``--V``, ``--tokens``, ``--chi``,
``--g-w``, ``--g-o`` and ``--sigma2`` override it.
Results go to stdout, the log and progress bars to stderr. Bad arguments, including an ``--out``
that cannot be written, get one line on stderr and exit status 2 before any work starts; set
``BAYES_ATTN_DEBUG=1`` to see the traceback instead. ``-q`` and ``-v`` go before or after the
subcommand. Ctrl-C stops a long command within a second (``_interrupt``: its work runs in a worker
thread), with status 130, keeping what it finished.

This package only parses and reports: the work is the library's (:mod:`bayes_attn.analysis.report`,
:mod:`bayes_attn.experiments.runs`, :mod:`bayes_attn.experiments.sweep`,
:mod:`bayes_attn.plotting.figures`). Here are the group, :func:`main` and the entry point; the
commands are in ``_reports`` (``theory``, ``diagnose``), ``_runs`` (``sample``, ``train``),
``_llc``, ``_landscape`` and ``_sweeps`` (``sweep``, ``figures``); the options that several
commands share are declared once in ``_options``, the parameter types are in ``_types``, and every
default of a sampler, of the trainer or of an experiment is read from its one home in
``_defaults`` when it is first needed, so that building the command line stays light.
"""

from __future__ import annotations

import os
import sys

import click

from bayes_attn._validation import SamplerDiverged  # light: no models are loaded
from bayes_attn.cli._induction import map_command
from bayes_attn.cli._landscape import landscape
from bayes_attn.cli._llc import llc
from bayes_attn.cli._options import QUIET_HELP, VERBOSE_HELP, configure_logging
from bayes_attn.cli._reports import diagnose, theory
from bayes_attn.cli._runs import sample, train
from bayes_attn.cli._sweeps import figures, sweep

__all__ = ["cli", "main", "run"]


class _Root(click.Group):
    """The group, whose usage with no subcommand is its help (not an error)."""

    def parse_args(self, ctx, args):
        if not args and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)


@click.group(
    cls=_Root,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": 100,
        "show_default": True,
    },
)
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
@click.version_option(package_name="bayes-attn", prog_name="bayes-attn")
@click.pass_context
def cli(ctx, quiet, verbose):
    """bayes-attn: the Bayesian theory of how attention learns to copy.

    Theory of the order parameters (c1 for uniform pooling, cG for copying), NumPyro models at
    three levels, NUTS / SGLD / tempered-SMC sampling, Adam ensembles, resumable sweeps and the
    paper's figures. Start with `bayes-attn theory`. The options -q and -v also go after the
    subcommand; the preset's options (--L, --V, --tokens, --chi, --g-w, --g-o, --sigma2) default
    to the paper's Table 1 with uniform tokens.
    """
    ctx.obj = {"quiet": quiet, "verbose": verbose}
    configure_logging(ctx.obj)


for _command in (theory, sample, map_command, llc, train, sweep, figures, landscape, diagnose):
    cli.add_command(_command)


def main(argv=None) -> int:
    """Run the CLI; returns the exit status (2 for bad input, with one line on stderr; 1 for a
    sampler that diverged, one line too, or a verdict that fails)."""
    debug = os.environ.get("BAYES_ATTN_DEBUG")
    try:
        # click returns, rather than raises, a command's Exit(status) with standalone_mode=False
        status = cli.main(args=argv, prog_name="bayes-attn", standalone_mode=False)
        if isinstance(status, int) and status:
            return status
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("bayes-attn: aborted", err=True)
        return 130
    except click.UsageError as e:
        if debug:
            raise
        click.echo(f"bayes-attn: error: {e.format_message()}", err=True)
        return 2
    except SamplerDiverged as e:  # the run failed, not the input: one line, status 1
        if debug:
            raise
        click.echo(f"bayes-attn: error: {e}", err=True)
        return 1
    except (ValueError, FileNotFoundError, MemoryError) as e:
        if debug:
            raise
        click.echo(f"bayes-attn: error: {e}", err=True)
        return 2
    return 0


def run() -> None:
    """The installed ``bayes-attn`` entry point."""
    sys.exit(main())
