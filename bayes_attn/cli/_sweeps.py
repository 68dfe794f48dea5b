"""``sweep`` and ``figures``: resumable sweeps, shared by processes, and the paper's figures (the
work is :mod:`bayes_attn.experiments.sweep`'s, :mod:`bayes_attn.distributed`'s and
:mod:`bayes_attn.plotting.figures`')."""

from __future__ import annotations

import json
import time

import click
from click.core import ParameterSource

from bayes_attn._validation import ACTIVATIONS
from bayes_attn.cli import _defaults as homes
from bayes_attn.cli._interrupt import interruptibly
from bayes_attn.cli._options import (
    activation_option,
    activations,
    distributed_options,
    out_option,
    stack,
    start_processes,
    tokens_option,
    verbosity_options,
)
from bayes_attn.cli._types import FLOATS, INTS, LazyChoice, RequiredUnlessConfig
from bayes_attn.task import CopyTask

_PAPER = CopyTask.paper()
_SWEEP_GRID = ("kind", "P", "L", "V", "activation", "seed", "tokens")

#: --kind, --P, --L, --V, --activation, --seed, --tokens: the grid
_grid_options = stack(
    click.option("--kind", cls=RequiredUnlessConfig, type=LazyChoice(homes.SWEEP_KINDS),
                 default=None, help="what to run at each point"),
    click.option("--P", "P", cls=RequiredUnlessConfig, type=FLOATS, default=None, help="grid of P"),
    click.option("--L", "L", type=INTS, default=str(_PAPER.L), help="grid of sequence lengths"),
    click.option("--V", "V", type=INTS, default=str(_PAPER.V), help="grid of vocabulary sizes"),
    activation_option(ACTIVATIONS + ("both",), "both", "attention activation (an axis of the grid)"),
    click.option("--seed", type=INTS, default="0", help="grid of seeds"),
    tokens_option(),
)  # fmt: skip


@click.command()
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="a JSON or TOML file with the sweep's settings ([sweep] table in "
              "TOML; an example: bayes_attn/configs/sweep_example.toml)")  # fmt: skip
@_grid_options
@click.option("--option", "options", multiple=True, metavar="NAME=VALUE",
              help="a setting of the kind, e.g. --option num_samples=200 (repeatable)")  # fmt: skip
@out_option(help="the NetCDF file (resumed if it exists; its folder must exist)")
@distributed_options
@verbosity_options
@click.pass_context
def sweep(ctx, config_file, kind, P, L, V, activation, seed, tokens, options, out, process):
    """Run a resumable sweep over (activation, L, V, P, seed), saving every finished point.

    The grid (comma-separated lists) and the settings come from --config FILE, from the options,
    or from both: an option given on the command line overrides the file's setting. Several
    processes started on the same OUT share its points (each claims a point before computing it).

    With --num-processes N each process runs every N-th point into OUT.part-I-of-N.nc; process 0
    then waits for the other parts (on a shared filesystem) and merges them into OUT.
    """
    table = _sweep_table(ctx, config_file, kind, P, L, V, activation, seed, tokens, options)
    info = start_processes(process)  # before JAX starts its backend
    from bayes_attn.experiments import sweep as sweeps

    cfg = sweeps.SweepConfig.from_dict(table)
    n, i, progress = info.num_processes, info.process_id, ctx.obj["progress"]
    if n == 1:
        ds = interruptibly(sweeps.run_sweep, cfg, out, progress=progress)
        click.echo(f"{int(ds['done'].sum())} of {ds['done'].size} points done: {out}")
        return
    ds = interruptibly(sweeps.run_sweep_parts, cfg, out, i, n, progress=progress)
    if ds is None:
        from bayes_attn.distributed import part_paths

        click.echo(f"process {i} of {n}: done, {part_paths(out, n)[i]}")
        return
    click.echo(
        f"{int(ds['done'].sum())} of {ds['done'].size} points done: {out} (merged {n} parts)"
    )


def _sweep_table(ctx, config_file, kind, P, L, V, activation, seed, tokens, options) -> dict:
    """The sweep's settings: the config file's, overridden by the options given on the command
    line; one line naming what is missing if --kind or --P is neither in the file nor given."""
    values = dict(
        kind=kind, P=P, L=L, V=V, activation=activations(activation), seed=seed, tokens=tokens
    )
    if config_file:
        from bayes_attn.experiments.sweep import read_sweep_table

        table = dict(read_sweep_table(config_file))
        given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
        table.update({k: values[k] for k in _SWEEP_GRID if ctx.get_parameter_source(k) in given})
    else:
        table = dict(values)
    if options:
        parsed = dict(_parse_option(o) for o in options)
        table["options"] = {**dict(table.get("options") or {}), **parsed}
    missing = [f"--{k}" for k in ("kind", "P") if table.get(k) is None]
    if missing and config_file:
        raise click.UsageError(
            f"{config_file} does not set {' or '.join(k[2:] for k in missing)}: "
            f"give {' and '.join(missing)}, or set it in the file"
        )
    if missing:
        raise click.UsageError(
            f"missing {' and '.join(missing)}: give --config FILE, or --kind and --P"
        )
    return table


def _parse_option(text: str):
    if "=" not in text:
        raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--option")
    name, value = text.split("=", 1)
    try:
        return name.strip(), json.loads(value)
    except json.JSONDecodeError:
        return name.strip(), value


@click.command()
@out_option("figures", folder=True,
            help="folder for the PNGs and their data (created; its parent must exist)")  # fmt: skip
@click.option("--quick", is_flag=True, help="small settings: a few minutes on a laptop CPU")
@click.option("--only", type=str, default=None, show_default="all",
              help="comma-separated figure names")  # fmt: skip
@click.option("--configs", type=click.Path(exists=True, dir_okay=False), default=None,
              show_default="the package's bayes_attn/configs/figures.py",
              help="figure-config file")  # fmt: skip
@verbosity_options
@click.pass_context
def figures(ctx, out, quick, only, configs):
    """Regenerate the paper's figures into a folder: Figs 1, 3 and 4, and two beyond the paper."""
    from bayes_attn.experiments.figures import load_configs
    from bayes_attn.plotting.figures import make_figures

    t0 = time.perf_counter()
    names = [n.strip() for n in only.split(",")] if only else None
    # in a worker thread, so that Ctrl-C stops it within a second (it took 11.6 s inside the
    # protocol sweep); the sweep keeps its finished points and the same command resumes them
    written = interruptibly(
        make_figures, load_configs(configs), out, quick=quick, only=names,
        progress=ctx.obj["progress"],
    )  # fmt: skip
    for name, path in written.items():
        click.echo(f"{name:14s} {path}")
    click.echo(f"{len(written)} figures in {out}/ ({time.perf_counter() - t0:.0f} s)")
