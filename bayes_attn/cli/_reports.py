"""``theory`` and ``diagnose``: the reduced theory's tables, and what a result file holds (the
work is :mod:`bayes_attn.analysis.report`'s and :mod:`bayes_attn.plotting.report`'s)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from bayes_attn._validation import ACTIVATIONS
from bayes_attn.cli._options import (
    activation_option,
    activations,
    fold_option,
    preset_options,
    verbosity_options,
)
from bayes_attn.cli._types import FLOATS

#: the paper's 14 values of P, and two past the transitions
PAPER_P = "1,10,20,60,100,200,250,275,300,400,500,600,700,800,1250,2000"


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return float(x)


@click.command()
@preset_options
@click.option("--P", "Ps", type=FLOATS, default=PAPER_P,
              help="training-set sizes, comma-separated (the paper's 14, and two past the transitions)")  # fmt: skip
@activation_option(ACTIVATIONS + ("both",), "both",
                   "the attention whose phase boundaries and saddles are shown")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables")
@verbosity_options
def theory(preset, Ps, activation, as_json):
    """Saddle points and phase boundaries of the reduced theory (Level 2)."""
    from bayes_attn._validation import check_positive
    from bayes_attn.analysis.report import theory_report, theory_text

    task, hyper = preset
    if not Ps:
        raise click.BadParameter("list at least one value", param_hint="--P")
    Ps = tuple(check_positive("P", P) for P in Ps)
    report = theory_report(task, hyper, Ps, activations(activation))
    if as_json:
        click.echo(json.dumps(report, indent=2, default=_json_default))
    else:
        click.echo(theory_text(report))


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              show_default="beside the file", help="folder for trace and posterior plots")  # fmt: skip
@click.option("--var", "var_names", multiple=True, show_default="the order parameters in the file",
              help="a posterior variable to diagnose (repeatable)")  # fmt: skip
@fold_option
@verbosity_options
def diagnose(path, plots, var_names, fold):
    """Read a NetCDF result (posterior, Adam ensemble, sweep or landscape); print and plot it."""
    import matplotlib

    matplotlib.use("Agg")
    from bayes_attn.analysis.report import UnknownVariables, read_report
    from bayes_attn.plotting.report import plot_report

    path = Path(path)
    try:
        report = read_report(path, var_names, fold)
    except UnknownVariables as err:
        raise click.BadParameter(str(err), param_hint="--var") from None
    click.echo(report.text)
    written = plot_report(report, Path(plots) if plots else path.parent, path.stem)
    if written:
        click.echo(("plots: " if len(written) > 1 else "plot: ") + ", ".join(map(str, written)))
