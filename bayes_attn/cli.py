"""The ``bayes-attn`` command line: theory, sampling, training, sweeps, figures and diagnostics.

Every subcommand defaults to the paper preset (L = 25, V = 5, chi = 30, g_W = g_O = 1,
sigma^2 = 30, the paper's Table 1); ``--L``, ``--V``, ``--chi``, ``--g-w``, ``--g-o`` and ``--sigma2`` override it.
Results go to stdout, the log and progress bars to stderr. Bad arguments, including an ``--out``
that cannot be written, get one line on stderr and exit status 2 before any work starts; set
``BAYES_ATTN_DEBUG=1`` to see the traceback instead. ``-q`` and ``-v`` go before or after the
subcommand.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from bayes_attn._validation import ACTIVATIONS, LEVELS  # light: no models are loaded

log = logging.getLogger("bayes_attn")

_ORDER_PARAMETERS = ("c1", "cG", "a1", "aG")


class _Floats(click.ParamType):
    """A comma-separated list of numbers: ``--P 100,200,400``."""

    name = "numbers"

    def __init__(self, cast=float):
        self.cast = cast

    def convert(self, value, param, ctx):
        if isinstance(value, list | tuple):
            return tuple(value)
        try:
            return tuple(self.cast(v) for v in str(value).split(",") if v.strip())
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of numbers", param, ctx)


FLOATS, INTS = _Floats(float), _Floats(int)


class _OutPath(click.Path):
    """An output path, checked when the command line is parsed, before any work starts.

    A file (``folder=False``): its parent must be an existing, writable folder, and the path, if it
    exists, a writable file. A folder (``folder=True``): it may not exist yet, but then its parent
    must be an existing, writable folder; if it exists it must be a writable folder.
    """

    def __init__(self, folder: bool = False):
        super().__init__(file_okay=not folder, dir_okay=folder)
        self.folder = folder

    def convert(self, value, param, ctx):
        path = Path(os.fsdecode(value))
        what = "folder" if self.folder else "file"
        if path.exists():
            if path.is_dir() != self.folder:
                kind = "file" if self.folder else "folder"
                self.fail(f"{str(path)!r} is a {kind}, not a {what}", param, ctx)
            if not os.access(path, os.W_OK | (os.X_OK if self.folder else 0)):
                self.fail(f"{what} {str(path)!r} is not writable", param, ctx)
            return os.fsdecode(value)
        parent = path.parent
        if not parent.exists():
            self.fail(f"folder {str(parent)!r} does not exist (create it first)", param, ctx)
        if not parent.is_dir():
            self.fail(f"{str(parent)!r} is not a folder", param, ctx)
        if not os.access(parent, os.W_OK | os.X_OK):
            self.fail(f"cannot write into the folder {str(parent)!r}", param, ctx)
        return os.fsdecode(value)


def _out_option(default=None, *, folder=False, help):
    return click.option(
        "--out",
        type=_OutPath(folder=folder),
        default=default,
        required=default is None,
        help=help,
    )


class _RequiredUnlessConfig(click.Option):
    """Shown as ``[required unless --config sets it]`` in --help; the command checks it."""

    def get_help_extra(self, ctx):
        extra = super().get_help_extra(ctx)
        extra["required"] = "required unless --config sets it"
        return extra


def _configure_logging(obj: dict) -> None:
    """Log level and progress bars from ``obj["quiet"]`` and ``obj["verbose"]`` (quiet wins)."""
    quiet, verbose = obj.get("quiet", False), obj.get("verbose", False)
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
    obj["progress"] = not quiet


def _verbosity_callback(ctx, param, value):
    if value:
        obj = ctx.ensure_object(dict)
        obj[param.name] = True
        _configure_logging(obj)


_QUIET_HELP = "no progress bars; only warnings on stderr"
_VERBOSE_HELP = "debug messages on stderr"


_FOLD_HELP = (
    "linear attention: summarise the draws folded onto one Z2 image, c1 + cG >= 0 (the images "
    "(c1, cG) and (-c1, -cG) have equal mass); without it the raw table comes first and the "
    "folded one beside it when chains sit in both images"
)


def _fold_option(f):
    return click.option("--fold", is_flag=True, help=_FOLD_HELP)(f)


def _verbosity_options(f):
    """-q/--quiet and -v/--verbose after the subcommand, as before it."""
    for name, short, text in reversed(
        [("quiet", "-q", _QUIET_HELP), ("verbose", "-v", _VERBOSE_HELP)]
    ):
        f = click.option(
            short,
            f"--{name}",
            name,
            is_flag=True,
            expose_value=False,
            callback=_verbosity_callback,
            help=text,
        )(f)
    return f


def _preset_options(f):
    """--L, --V, --chi, --g-w, --g-o, --sigma2: overrides of the paper preset (Table 1)."""
    opts = [
        click.option("--L", "L", type=int, default=None, show_default="25", help="sequence length"),
        click.option("--V", "V", type=int, default=None, show_default="5", help="vocabulary size"),
        click.option(
            "--chi", type=float, default=None, show_default="30", help="concentration chi"
        ),
        click.option(
            "--g-w", type=float, default=None, show_default="1", help="attention-weight scale g_W"
        ),
        click.option("--g-o", type=float, default=None, show_default="1", help="readout scale g_O"),
        click.option(
            "--sigma2", type=float, default=None, show_default="30", help="noise scale sigma^2"
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _preset(L, V, chi, g_w, g_o, sigma2):
    from bayes_attn import CopyTask, Hyper

    task = CopyTask(L if L is not None else 25, V if V is not None else 5)
    changes = dict(chi=chi, g_w=g_w, g_o=g_o, sigma2=sigma2)
    return task, Hyper.paper().replace(**{k: v for k, v in changes.items() if v is not None})


def _activations(activation: str) -> tuple[str, ...]:
    return ACTIVATIONS if activation == "both" else (activation,)


def _distributed_options(f):
    """--coordinator, --num-processes, --process-id (or BAYES_ATTN_* environment variables)."""
    opts = [
        click.option(
            "--coordinator",
            envvar="BAYES_ATTN_COORDINATOR",
            show_envvar=True,
            default=None,
            help="multi-host: address host:port of process 0",
        ),
        click.option(
            "--num-processes",
            envvar="BAYES_ATTN_NUM_PROCESSES",
            show_envvar=True,
            type=click.IntRange(min=1),
            default=1,
            help="multi-host: number of processes",
        ),
        click.option(
            "--process-id",
            envvar="BAYES_ATTN_PROCESS_ID",
            show_envvar=True,
            type=click.IntRange(min=0),
            default=0,
            help="multi-host: this process's id",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


# --------------------------------------------------------------------------------------------------


@click.group(
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": 100,
        "show_default": True,
    }
)
@click.option("-q", "--quiet", is_flag=True, help=_QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=_VERBOSE_HELP)
@click.version_option(package_name="bayes-attn", prog_name="bayes-attn")
@click.pass_context
def cli(ctx, quiet, verbose):
    """bayes-attn: the Bayesian theory of how attention learns to copy.

    Theory of the order parameters (c1 for uniform pooling, cG for copying), NumPyro models at
    three levels, NUTS / SGLD / tempered-SMC sampling, Adam ensembles, resumable sweeps and the
    paper's figures. Start with `bayes-attn theory`. The options -q and -v also go after the
    subcommand; the preset's options (--L, --V, --chi, --g-w, --g-o, --sigma2) default to the
    paper's Table 1.
    """
    ctx.obj = {"quiet": quiet, "verbose": verbose}
    _configure_logging(ctx.obj)


_BOUNDARY_ACTIVATION = {  # which activation each field of PhaseBoundaries belongs to
    "second_order": "linear",
    "second_order_closed_form": "linear",
    "second_order_leading": "linear",
    "crossover": "linear",
    "crossover_markers": "linear",
    "first_order": "softmax",
    "spinodals": "softmax",
}


@cli.command()
@_preset_options
@click.option(
    "--P",
    "Ps",
    type=FLOATS,
    default="1,10,20,60,100,200,250,275,300,400,500,600,700,800,1250,2000",
    help="training-set sizes, comma-separated (the paper's 14, and two past the transitions)",
)
@click.option(
    "--activation",
    type=click.Choice(ACTIVATIONS + ("both",)),
    default="both",
    help="the attention whose phase boundaries and saddles are shown",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables")
@_verbosity_options
def theory(L, V, chi, g_w, g_o, sigma2, Ps, activation, as_json):
    """Saddle points and phase boundaries of the reduced theory (Level 2)."""
    from bayes_attn import theory as th
    from bayes_attn._validation import check_positive

    task, hyper = _preset(L, V, chi, g_w, g_o, sigma2)
    Ps = tuple(check_positive("P", P) for P in Ps)
    acts = _activations(activation)
    b = th.phase_boundaries(task, hyper)
    report = {
        "preset": {
            "L": task.L,
            "V": task.V,
            **{k: getattr(hyper, k) for k in ("chi", "g_w", "g_o", "sigma2")},
        },
        "boundaries": {
            k: v
            for k, v in b.as_dict().items()
            if not isinstance(v, dict) and _BOUNDARY_ACTIVATION.get(k, acts[0]) in acts
        },
        "saddles": [],
    }
    for act in acts:
        for P in Ps:
            found = th.saddles(task, hyper, P, act)
            entry = {"activation": act, "P": P, **found[0].order_parameters()}
            entry.update(loss=found[0].loss, action=found[0].action)
            entry["metastable"] = [m.order_parameters() for m in found[1:]]
            report["saddles"].append(entry)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=_json_default))
        return
    click.echo(
        f"preset: L={task.L}, V={task.V}, chi={hyper.chi:g}, g_W={hyper.g_w:g}, "
        f"g_O={hyper.g_o:g}, sigma^2={hyper.sigma2:g}\n"
    )
    rows = [
        ("linear", "second-order P* (numeric)", b.second_order),
        ("linear", "second-order P* (closed form)", b.second_order_closed_form),
        ("linear", "crossover (max d cG / d log P)", b.crossover),
        ("softmax", "first-order P* (equal action)", b.first_order),
        ("softmax", "lower spinodal", b.spinodals[0]),
        ("softmax", "upper spinodal", b.spinodals[1]),
    ]
    click.echo("phase boundaries (training sequences P)")
    for act, name, value in rows:
        if act in acts:
            click.echo(f"  {act + ', ' + name:42s} {value:10.3f}")
    from bayes_attn.models.levels import order_parameters

    for act in acts:
        q = order_parameters(act)
        click.echo(f"\n{act} attention: global saddle (metastable minima in brackets)")
        click.echo(f"  {'P':>8} {q[0]:>8} {q[1]:>8} {'loss':>8}")
        for e in report["saddles"]:
            if e["activation"] != act:
                continue
            extra = "".join(
                f" [{q[0]}={m[q[0]]:.3f}, {q[1]}={m[q[1]]:.3f}]" for m in e["metastable"]
            )
            click.echo(f"  {e['P']:8.6g} {e[q[0]]:8.4f} {e[q[1]]:8.4f} {e['loss']:8.4f}{extra}")


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return float(x)


@cli.command()
@_preset_options
@click.option(
    "--level",
    type=click.Choice(LEVELS),
    default="reduced",
    help="order parameters (Level 2), kernel limit (Level 1) or the finite network (Level 0)",
)
@click.option(
    "--sampler",
    type=click.Choice(("nuts", "sgld", "smc")),
    default="nuts",
    help="NUTS, stochastic-gradient Langevin dynamics or adaptive tempered SMC",
)
@click.option(
    "--activation", type=click.Choice(ACTIVATIONS), default="linear", help="attention activation"
)
@click.option(
    "--P", "P", type=float, default=400.0, help="training sequences (an integer below Level 2)"
)
@click.option(
    "--d-model", type=click.IntRange(min=1), default=16, help="network width (level network)"
)
@click.option("--chains", type=click.IntRange(min=1), default=4, help="chains (NUTS, SGLD)")
@click.option(
    "--warmup", type=click.IntRange(min=0), default=500, help="warm-up steps per chain (NUTS, SGLD)"
)
@click.option(
    "--samples", type=click.IntRange(min=1), default=500, help="draws per chain (NUTS, SGLD)"
)
@click.option("--step-size", type=float, default=1e-4, help="SGLD step size")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    show_default="P, the full batch",
    help="SGLD minibatch (sequences)",
)
@click.option(
    "--particles", type=click.IntRange(min=2), default=2000, show_default=True, help="SMC particles"
)
@click.option("--seed", type=click.IntRange(min=0), default=0, help="sampler and dataset seed")
@_out_option("posterior.nc", help="InferenceData NetCDF file (its folder must exist)")
@_fold_option
@_verbosity_options
@click.pass_context
def sample(
    ctx,
    L,
    V,
    chi,
    g_w,
    g_o,
    sigma2,
    level,
    sampler,
    activation,
    P,
    d_model,
    chains,
    warmup,
    samples,
    step_size,
    batch_size,
    particles,
    seed,
    out,
    fold,
):
    """Sample a posterior with NUTS, SGLD or tempered SMC; write NetCDF and print diagnostics."""
    from bayes_attn._validation import check_positive
    from bayes_attn.analysis import diagnose
    from bayes_attn.experiments.sweep import model_at_level
    from bayes_attn.inference import run_nuts, run_sgld, run_smc

    task, hyper = _preset(L, V, chi, g_w, g_o, sigma2)
    P = check_positive("P", P)  # every check before the log line and the sampling
    step_size = check_positive("step_size", step_size)
    opts = dict(
        level=level,
        d_model=d_model,
        include_logdet=False,
        batch_size=batch_size if sampler == "sgld" else None,
    )
    model, args, kw = model_at_level(
        opts, {"activation": activation, "P": P, "seed": seed}, task, hyper
    )
    progress = ctx.obj["progress"]
    t0 = time.perf_counter()
    log.info("%s on the %s model, %s attention, P=%g", sampler, level, activation, P)
    if sampler == "nuts":
        idata = run_nuts(
            model,
            model_args=args,
            model_kwargs=kw,
            num_chains=chains,
            num_warmup=warmup,
            num_samples=samples,
            seed=seed,
            progress_bar=progress,
        )
    elif sampler == "sgld":
        idata = run_sgld(
            model,
            model_args=args,
            model_kwargs=kw,
            num_chains=chains,
            num_warmup=warmup,
            num_samples=samples,
            step_size=step_size,
            seed=seed,
            progress_bar=progress,
        )
    else:
        idata = run_smc(
            model,
            model_args=args,
            model_kwargs=kw,
            num_particles=particles,
            seed=seed,
            progress_bar=progress,
        )
    from bayes_attn import _arviz as az

    az.to_netcdf(idata, out)
    log.info("wrote %s in %.1f s", out, time.perf_counter() - t0)
    names = [q for q in _ORDER_PARAMETERS if q in idata.posterior]
    click.echo(diagnose(idata, var_names=names or None, fold=fold))
    if "log_evidence" in idata.posterior.attrs:
        click.echo(f"log evidence: {idata.posterior.attrs['log_evidence']:.4f}")


@cli.command()
@_preset_options
@click.option(
    "--activation", type=click.Choice(ACTIVATIONS), default="linear", help="attention activation"
)
@click.option("--P", "P", type=click.IntRange(min=1), default=400, help="training sequences")
@click.option("--d-model", type=click.IntRange(min=1), default=64, help="network width")
@click.option("--members", type=click.IntRange(min=1), default=4, help="ensemble members")
@click.option("--lr", type=float, default=1e-2, help="Adam learning rate (after the warm-up)")
@click.option(
    "--max-steps", type=click.IntRange(min=1), default=300, help="full-batch steps at most"
)
@click.option(
    "--patience",
    type=click.IntRange(min=0),
    default=100,
    help="early stopping: steps without improvement of the objective",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, help="seed of the data and the initial weights"
)
@_out_option("adam.nc", help="ensemble NetCDF file (its folder must exist)")
@_verbosity_options
@_distributed_options
@click.pass_context
def train(
    ctx,
    L,
    V,
    chi,
    g_w,
    g_o,
    sigma2,
    activation,
    P,
    d_model,
    members,
    lr,
    max_steps,
    patience,
    seed,
    out,
    coordinator,
    num_processes,
    process_id,
):
    """Train an Adam ensemble to the MAP; write NetCDF and print the ensemble summary.

    With --num-processes N each process trains a contiguous share of the members (with the data,
    weights and keys they have in a one-process run) into OUT.part-I-of-N.nc; process 0 waits for
    the other parts (on a shared filesystem) and merges them into OUT.
    """
    from bayes_attn.distributed import initialize_distributed, process_share

    info = initialize_distributed(coordinator, num_processes, process_id)
    from bayes_attn.analysis import classify_minima, ensemble_summary
    from bayes_attn.inference import merge_ensembles, train_adam
    from bayes_attn.io import write_atomic
    from bayes_attn.theory import global_saddle

    task, hyper = _preset(L, V, chi, g_w, g_o, sigma2)
    n, i = info.num_processes, info.process_id
    if members < n:
        raise click.BadParameter(
            f"fewer members ({members}) than processes ({n})", param_hint="--members"
        )
    share = process_share(range(members), i, n)
    warm = int(0.1 * max_steps) if activation == "softmax" else 0
    ds = train_adam(
        task,
        hyper,
        activation,
        d_model,
        P,
        members=members,
        seed=seed,
        lr=lr,
        warmup_steps=warm,
        warmup_init=lr * 1e-4,
        max_steps=max_steps,
        patience=patience,
        progress_bar=ctx.obj["progress"],
        member_range=(share[0], share[-1] + 1),
    )
    if n > 1:
        parts = [Path(f"{out}.part-{k}-of-{n}.nc") for k in range(n)]
        write_atomic(ds, parts[i])
        if i != 0:
            click.echo(f"process {i} of {n}: members {share[0]}..{share[-1]} in {parts[i]}")
            return
        ds = merge_ensembles(_wait_for_files(parts))
    ds = classify_minima(ds, theory_loss=global_saddle(task, hyper, P, activation).loss)
    write_atomic(ds, Path(out))
    log.info("wrote %s", out)
    click.echo(ensemble_summary(ds).to_dataframe().T.to_string())


def _wait_until(ready, timeout: float = 7 * 24 * 3600.0) -> None:
    """Process 0: poll ``ready() -> (finished, status)`` every second until the other processes
    are finished (``status`` says how far they are, for the log and the timeout error)."""
    deadline = time.monotonic() + timeout
    while True:
        finished, status = ready()
        if finished:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for the other processes: {status}")
        log.info("waiting for the other processes: %s", status)
        time.sleep(1.0)


def _wait_for_files(paths):
    """Process 0: wait until the other processes' files exist (written atomically); load them."""
    import xarray as xr

    _wait_until(lambda: (all(p.exists() for p in paths), [str(p) for p in paths if not p.exists()]))
    out = []
    for p in paths:
        with xr.open_dataset(p, engine="h5netcdf") as f:
            out.append(f.load())
    return out


_SWEEP_GRID = ("kind", "P", "L", "V", "activation", "seed")


@cli.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="a JSON or TOML file with the sweep's settings ([sweep] table in TOML)",
)
@click.option(
    "--kind",
    cls=_RequiredUnlessConfig,
    type=click.Choice(("theory", "nuts", "sgld", "adam", "protocol")),
    default=None,
    help="what to run at each point",
)
@click.option("--P", "P", cls=_RequiredUnlessConfig, type=FLOATS, default=None, help="grid of P")
@click.option("--L", "L", type=INTS, default="25", help="grid of sequence lengths")
@click.option("--V", "V", type=INTS, default="5", help="grid of vocabulary sizes")
@click.option(
    "--activation",
    type=click.Choice(ACTIVATIONS + ("both",)),
    default="both",
    help="attention activation (an axis of the grid)",
)
@click.option("--seed", type=INTS, default="0", help="grid of seeds")
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="NAME=VALUE",
    help="a setting of the kind, e.g. --option num_samples=200 (repeatable)",
)
@_out_option(help="the NetCDF file (resumed if it exists; its folder must exist)")
@_distributed_options
@_verbosity_options
@click.pass_context
def sweep(
    ctx,
    config_file,
    kind,
    P,
    L,
    V,
    activation,
    seed,
    options,
    out,
    coordinator,
    num_processes,
    process_id,
):
    """Run a resumable sweep over (activation, L, V, P, seed), saving every finished point.

    The grid (comma-separated lists) and the settings come from --config FILE, from the options,
    or from both: an option given on the command line overrides the file's setting.

    With --num-processes N each process runs every N-th point into OUT.part-I-of-N.nc; process 0
    then waits for the other parts (on a shared filesystem) and merges them into OUT.
    """
    table = _sweep_table(ctx, config_file, kind, P, L, V, activation, seed, options)
    from bayes_attn.distributed import initialize_distributed  # before JAX starts its backend

    info = initialize_distributed(coordinator, num_processes, process_id)
    from bayes_attn.experiments.sweep import SweepConfig, run_sweep

    cfg = SweepConfig.from_dict(table)
    progress = ctx.obj["progress"]
    n, i = info.num_processes, info.process_id
    if n == 1:
        ds = run_sweep(cfg, out, progress=progress)
        click.echo(f"{int(ds['done'].sum())} of {ds['done'].size} points done: {out}")
        return
    parts = [Path(f"{out}.part-{k}-of-{n}.nc") for k in range(n)]
    run_sweep(cfg, parts[i], progress=progress, process_id=i, num_processes=n)
    if i != 0:
        click.echo(f"process {i} of {n}: done, {parts[i]}")
        return
    ds = _wait_and_merge(cfg, parts, out)
    click.echo(
        f"{int(ds['done'].sum())} of {ds['done'].size} points done: {out} (merged {n} parts)"
    )


def _wait_and_merge(cfg, parts, out):
    """Process 0: wait until every part holds its share of the points, then merge them."""
    from bayes_attn.experiments.sweep import SweepFileError, load_sweep, merge_sweeps

    n, total = len(parts), math.prod(cfg.shape)
    share = [len(range(k, total, n)) for k in range(n)]

    def ready():
        done = []
        for path in parts:
            try:
                done.append(int(load_sweep(path)["done"].sum()) if path.exists() else 0)
            except SweepFileError:  # being replaced at this instant; look again
                done.append(-1)
        return done == share, f"{done} of {share} points"

    _wait_until(ready)
    return merge_sweeps(parts, out)


def _sweep_table(ctx, config_file, kind, P, L, V, activation, seed, options) -> dict:
    """The sweep's settings: the config file's, overridden by the options given on the command
    line; one line naming what is missing if --kind or --P is neither in the file nor given."""
    values = dict(kind=kind, P=P, L=L, V=V, activation=_activations(activation), seed=seed)
    if config_file:
        table = dict(_read_table(config_file, "sweep"))
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


def _read_table(path, table: str) -> dict:
    text = Path(path).read_text()
    if str(path).endswith(".toml"):
        import tomllib

        data = tomllib.loads(text)
        return data.get(table, data)
    return json.loads(text)


@cli.command()
@_out_option(
    "figures",
    folder=True,
    help="folder for the PNGs and their data (created; its parent must exist)",
)
@click.option("--quick", is_flag=True, help="small settings: a few minutes on a laptop CPU")
@click.option(
    "--only", type=str, default=None, show_default="all", help="comma-separated figure names"
)
@click.option(
    "--configs",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    show_default="the package's bayes_attn/configs/figures.py",
    help="figure-config file",
)
@_verbosity_options
@click.pass_context
def figures(ctx, out, quick, only, configs):
    """Regenerate the paper's figures into a folder: Figs 1, 3 and 4, and two beyond the paper."""
    from bayes_attn.plotting.figures import load_configs, make_figures

    t0 = time.perf_counter()
    names = [n.strip() for n in only.split(",")] if only else None
    written = make_figures(
        load_configs(configs), out, quick=quick, only=names, progress=ctx.obj["progress"]
    )
    for name, path in written.items():
        click.echo(f"{name:14s} {path}")
    click.echo(f"{len(written)} figures in {out}/ ({time.perf_counter() - t0:.0f} s)")


@cli.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--plots",
    type=click.Path(file_okay=False),
    default=None,
    show_default="beside the file",
    help="folder for trace and posterior plots",
)
@click.option(
    "--var",
    "var_names",
    multiple=True,
    show_default="the order parameters in the file",
    help="a posterior variable to diagnose (repeatable)",
)
@_fold_option
@_verbosity_options
def diagnose(path, plots, var_names, fold):
    """Read a NetCDF result (posterior, Adam ensemble or sweep); print its table and plot it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr

    from bayes_attn import _arviz as az
    from bayes_attn.analysis import diagnose as diag
    from bayes_attn.analysis import fold_posterior
    from bayes_attn.inference.record import header
    from bayes_attn.plotting import plots as plot

    path = Path(path)
    folder = Path(plots) if plots else path.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        idata = az.from_netcdf(path)
    except Exception as err:
        raise click.UsageError(f"cannot read {path}: {err}") from err
    if "posterior" in az.groups(idata):
        valid = list(idata.posterior.data_vars)
        unknown = [v for v in var_names if v.removeprefix("~") not in valid]
        if unknown:
            raise click.BadParameter(
                f"no variable {', '.join(map(repr, unknown))} in {path}; "
                f"valid: {', '.join(map(str, valid))}",
                param_hint="--var",
            )
        names = list(var_names) or [q for q in _ORDER_PARAMETERS if q in idata.posterior] or None
        d = diag(idata, var_names=names, fold=fold)
        click.echo(d)
        names = names or list(d.table.index)
        shown = fold_posterior(idata) if fold else idata
        fig = plot.trace(shown, names)
        trace = folder / f"{path.stem}_trace.png"
        fig.savefig(trace, dpi=90)
        axes = az.plot_posterior(shown, var_names=names)
        post = folder / f"{path.stem}_posterior.png"
        fig = axes.ravel()[0].figure
        fig.suptitle(plot.run_title(idata.posterior.attrs))
        fig.tight_layout()
        fig.savefig(post, dpi=90)
        plt.close("all")
        click.echo(f"plots: {trace}, {post}")
        return
    with xr.open_dataset(path, engine="h5netcdf") as f:
        ds = f.load()
    if "done" in ds:
        from bayes_attn.experiments.sweep import load_sweep

        ds = load_sweep(path)
        click.echo(header(ds.attrs))
        click.echo(
            f"{ds.attrs.get('kind', '?')} sweep: {int(ds['done'].sum())} of {ds['done'].size} points done"
        )
        scalars = [
            v for v in ds.data_vars if v != "done" and ds[v].ndim <= 6 and "query" not in ds[v].dims
        ]
        table = ds[scalars].where(ds["done"])
        if "member" in table.dims:
            table = table.mean("member")
        click.echo(
            table.to_dataframe().dropna(how="all").to_string(float_format=lambda x: f"{x:.4g}")
        )
        if ds["done"].any():
            fig = plot.sweep_curves(ds)
            out = folder / f"{path.stem}_curves.png"
            fig.savefig(out, dpi=90)
            plt.close(fig)
            click.echo(f"plot: {out}")
        return
    if ds.attrs.get("trainer") == "adam":
        from bayes_attn.analysis import ensemble_summary

        click.echo(header(ds.attrs))
        click.echo(ensemble_summary(ds).to_dataframe().T.to_string())
        fig = plot.adam_loss(ds)
        out = folder / f"{path.stem}_loss.png"
        fig.savefig(out, dpi=90)
        plt.close(fig)
        click.echo(f"plot: {out}")
        return
    raise click.UsageError(f"{path} is not a posterior, an Adam ensemble or a sweep file")


# --------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    """Run the CLI; returns the exit status (2 for bad input, with one line on stderr)."""
    debug = os.environ.get("BAYES_ATTN_DEBUG")
    try:
        cli.main(args=argv, prog_name="bayes-attn", standalone_mode=False)
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
    except (ValueError, FileNotFoundError, MemoryError) as e:
        if debug:
            raise
        click.echo(f"bayes-attn: error: {e}", err=True)
        return 2
    return 0


def run() -> None:
    """The installed ``bayes-attn`` entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
