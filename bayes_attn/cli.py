"""The ``bayes-attn`` command line: theory, sampling, training, sweeps, figures and diagnostics.

Every subcommand defaults to the paper preset (L = 25, V = 5, chi = 30, g_W = g_O = 1,
sigma^2 = 30, the paper's Table 1, uniform tokens); ``--L``, ``--V``, ``--tokens``, ``--chi``,
``--g-w``, ``--g-o`` and ``--sigma2`` override it.
Results go to stdout, the log and progress bars to stderr. Bad arguments, including an ``--out``
that cannot be written, get one line on stderr and exit status 2 before any work starts; set
``BAYES_ATTN_DEBUG=1`` to see the traceback instead. ``-q`` and ``-v`` go before or after the
subcommand.

This module only parses and reports: the work is the library's (:mod:`bayes_attn.analysis.report`,
:mod:`bayes_attn.experiments.runs`, :mod:`bayes_attn.experiments.sweep`,
:mod:`bayes_attn.plotting.figures`), and every default of a sampler or of the trainer is read from
its one home (the samplers' signatures, :class:`bayes_attn.inference.adam.AdamSettings`, the
sweep's ``DEFAULTS``) when it is first needed, so that building the command line stays light.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import logging
import math
import os
import stat
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from bayes_attn._validation import (  # light: no models are loaded
    ACTIVATIONS,
    LEVELS,
    SamplerDiverged,
)

log = logging.getLogger("bayes_attn")


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


class _StepSize(click.ParamType):
    """A positive step size, or ``auto`` (the sampler's rule)."""

    name = "step|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number nor 'auto'", param, ctx)
        if not (math.isfinite(x) and x > 0):
            self.fail(f"step_size must be a positive finite number or 'auto', got {value!r}",
                      param, ctx)  # fmt: skip
        return x


_STEP = _StepSize()


class _Steps(click.ParamType):
    """A number of steps >= 0, or ``auto`` (the sampler's rule)."""

    name = "n|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            n = int(str(value))
        except ValueError:
            self.fail(f"{value!r} is neither a whole number nor 'auto'", param, ctx)
        if n < 0:
            self.fail(f"must be >= 0 or 'auto', got {n}", param, ctx)
        return n


_BURNIN = _Steps()


def _writable(path: Path, folder: bool) -> bool:
    """``os.access`` says yes, and so do the mode bits: root passes every access check, but a
    file or folder without any write bit was made read-only on purpose."""
    bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    return os.access(path, os.W_OK | (os.X_OK if folder else 0)) and bool(
        path.stat().st_mode & bits
    )


def _package_result(path: Path) -> bool:
    """Whether ``path`` is a NetCDF (HDF5) file that this package wrote: one of its groups
    carries ``bayes_attn_version`` (every result's record, :mod:`bayes_attn.inference.record`,
    and every sweep file)."""
    with open(path, "rb") as fh:
        if fh.read(8) != b"\x89HDF\r\n\x1a\n":
            return False
    import h5py

    try:
        with h5py.File(path, "r") as f:
            if "bayes_attn_version" in f.attrs:
                return True
            return bool(f.visititems(lambda _, obj: "bayes_attn_version" in obj.attrs or None))
    except OSError:
        return False


class _OutPath(click.Path):
    """An output path, checked when the command line is parsed, before any work starts.

    A file (``folder=False``): its parent must be an existing, writable folder, and the path, if it
    exists, a writable NetCDF file that this package wrote (a text file, or another program's
    data, is refused, not overwritten). A folder (``folder=True``): it may not exist yet, but then its parent
    must be an existing, writable folder; if it exists it must be a writable folder. Writable means
    by ``os.access`` and by the mode bits (a read-only file is refused, root or not).
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
            if not _writable(path, self.folder):
                mode = stat.filemode(path.stat().st_mode)
                self.fail(f"{what} {str(path)!r} is not writable ({mode})", param, ctx)
            if not self.folder and not _package_result(path):
                self.fail(
                    f"{str(path)!r} exists and is not a NetCDF result of bayes-attn; refusing to "
                    "overwrite it (remove it, or name another file)", param, ctx,
                )  # fmt: skip
            return os.fsdecode(value)
        parent = path.parent
        if not parent.exists():
            self.fail(f"folder {str(parent)!r} does not exist (create it first)", param, ctx)
        if not parent.is_dir():
            self.fail(f"{str(parent)!r} is not a folder", param, ctx)
        if not _writable(parent, folder=True):
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


class _Default:
    """A default that lives in its one home, read when first needed (so that building the command
    line imports nothing heavy): ``_Default("module", "name", "key", ...)`` is
    ``module.name[key]...``, where a function's parameter is read from its signature. ``--help``
    shows the value."""

    def __init__(self, module: str, *path: str):
        self.module, self.path = module, path

    def __call__(self):
        obj = importlib.import_module(self.module)
        for name in self.path:
            if isinstance(obj, dict):
                obj = obj[name]
            elif inspect.isfunction(obj):
                obj = inspect.signature(obj).parameters[name].default
            else:
                obj = getattr(obj, name)
        return obj

    def __str__(self):
        return str(self())


def _sweep_default(kind: str, name: str) -> _Default:
    """The default of ``name`` in a ``kind`` sweep (its value's home: the sampler's signature or
    :class:`~bayes_attn.inference.adam.AdamSettings`, which the sweep's ``DEFAULTS`` read)."""
    return _Default("bayes_attn.experiments.sweep", "DEFAULTS", kind, name)


def _grouped(name: str, options: list, build=dict):
    """Options that reach the command as one parameter, ``name`` = ``build(**their values)``."""

    def decorate(f):
        @functools.wraps(f)
        def command(*args, **kwargs):
            values = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            return f(*args, **kwargs, **{name: build(**values)})

        names = set()
        for opt in reversed(options):
            before = len(getattr(command, "__click_params__", []))
            command = opt(command)
            names.update(p.name for p in command.__click_params__[before:])
        return command

    return decorate


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


def _preset(L, V, tokens, chi, g_w, g_o, sigma2):
    from bayes_attn import CopyTask, Hyper

    task = CopyTask(L if L is not None else 25, V if V is not None else 5, tokens)
    changes = dict(chi=chi, g_w=g_w, g_o=g_o, sigma2=sigma2)
    return task, Hyper.paper().replace(**{k: v for k, v in changes.items() if v is not None})


_TOKENS_HELP = (
    "the law of the token sequences: uniform (i.i.d., the paper's), zipf:s=S (i.i.d., p_k ~ "
    "(k+1)^-S), markov:alpha=A,seed=N (one chain, rows ~ Dirichlet(A), drawn from the seed), "
    "markov:transition=[[...],...] (a given V x V chain), icl-markov:alpha=A[,doubly_stochastic="
    "true] (a chain per sequence); chains start from their stationary law; the reduced level "
    "(Level 2) needs uniform tokens"
)

# --L, --V, --tokens, --chi, --g-w, --g-o, --sigma2: overrides of the paper preset (Table 1), as
# ``preset``
_preset_options = _grouped(
    "preset",
    [
        click.option("--L", "L", type=int, default=None, show_default="25", help="sequence length"),
        click.option("--V", "V", type=int, default=None, show_default="5", help="vocabulary size"),
        click.option("--tokens", default="uniform", metavar="SOURCE", help=_TOKENS_HELP),
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
    ],
    build=_preset,
)


# --coordinator, --num-processes, --process-id (or BAYES_ATTN_* variables), as ``process``
_distributed_options = _grouped(
    "process",
    [
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
    ],
)


def _start_processes(process: dict):
    """Register this process with ``jax.distributed`` (before JAX starts its backend)."""
    from bayes_attn.distributed import initialize_distributed

    return initialize_distributed(
        process["coordinator"], process["num_processes"], process["process_id"]
    )


def _activations(activation: str) -> tuple[str, ...]:
    return ACTIVATIONS if activation == "both" else (activation,)


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return float(x)


# --------------------------------------------------------------------------------------------------


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
@click.option("-q", "--quiet", is_flag=True, help=_QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=_VERBOSE_HELP)
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
    _configure_logging(ctx.obj)


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
def theory(preset, Ps, activation, as_json):
    """Saddle points and phase boundaries of the reduced theory (Level 2)."""
    from bayes_attn._validation import check_positive
    from bayes_attn.analysis.report import theory_report, theory_text

    task, hyper = preset
    if not Ps:
        raise click.BadParameter("list at least one value", param_hint="--P")
    Ps = tuple(check_positive("P", P) for P in Ps)
    report = theory_report(task, hyper, Ps, _activations(activation))
    if as_json:
        click.echo(json.dumps(report, indent=2, default=_json_default))
    else:
        click.echo(theory_text(report))


def _sampler_run(sampler, chains, warmup, samples, step_size, particles) -> dict:
    """The keywords of the sampler's run function, from its options."""
    if sampler == "smc":
        return dict(num_particles=particles)
    run = dict(num_chains=chains, num_warmup=warmup, num_samples=samples)
    return {**run, "step_size": step_size} if sampler == "sgld" else run


_sampler_options = _grouped(
    "run",
    [
        click.option(
            "--sampler",
            type=click.Choice(("nuts", "sgld", "smc")),
            default="nuts",
            help="NUTS, stochastic-gradient Langevin dynamics or adaptive tempered SMC",
        ),
        click.option(
            "--chains",
            type=click.IntRange(min=1),
            default=_sweep_default("nuts", "num_chains"),
            help="chains (NUTS, SGLD)",
        ),
        click.option(
            "--warmup",
            type=click.IntRange(min=0),
            default=_sweep_default("nuts", "num_warmup"),
            help="warm-up steps per chain (NUTS, SGLD)",
        ),
        click.option(
            "--samples",
            type=click.IntRange(min=1),
            default=_sweep_default("nuts", "num_samples"),
            help="draws per chain (NUTS, SGLD)",
        ),
        click.option(
            "--step-size",
            type=float,
            default=_sweep_default("sgld", "step_size"),
            help="SGLD step size",
        ),
        click.option(
            "--particles",
            type=click.IntRange(min=2),
            default=_Default("bayes_attn.inference.smc", "run_smc", "num_particles"),
            help="SMC particles per run",
        ),
    ],
    build=lambda sampler, **options: (sampler, _sampler_run(sampler, **options)),
)


@cli.command()
@_preset_options
@click.option(
    "--level",
    type=click.Choice(LEVELS),
    default="reduced",
    help="order parameters (Level 2), kernel limit (Level 1) or the finite network (Level 0)",
)
@click.option(
    "--activation", type=click.Choice(ACTIVATIONS), default="linear", help="attention activation"
)
@click.option(
    "--P", "P", type=float, default=400.0, help="training sequences (an integer below Level 2)"
)
@click.option(
    "--d-model",
    type=click.IntRange(min=1),
    default=_sweep_default("nuts", "d_model"),
    help="network width (level network)",
)
@_sampler_options
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    show_default="P, the full batch",
    help="SGLD minibatch (sequences)",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, help="sampler and dataset seed")
@_out_option("posterior.nc", help="InferenceData NetCDF file (its folder must exist)")
@_fold_option
@_verbosity_options
@click.pass_context
def sample(ctx, preset, level, activation, P, d_model, run, batch_size, seed, out, fold):
    """Sample a posterior with NUTS, SGLD or tempered SMC; write NetCDF and print diagnostics."""
    from bayes_attn._validation import check_positive

    sampler, options = run
    P = check_positive("P", P)  # every check before the log line and the sampling
    if level == "reduced":
        from bayes_attn.tokens import check_uniform

        check_uniform(preset[0].tokens)
    if "step_size" in options:
        options["step_size"] = check_positive("step_size", options["step_size"])
    from bayes_attn import _arviz as az
    from bayes_attn.analysis import diagnose
    from bayes_attn.experiments.runs import sample_posterior, smc_checkpoint_path
    from bayes_attn.models.levels import ORDER_PARAMETERS

    if sampler == "smc":  # beside the output: a rerun with the same arguments resumes from it
        options["checkpoint"] = smc_checkpoint_path(out)
        log.info("SMC checkpoint: %s (removed when the run completes)", options["checkpoint"])
    t0 = time.perf_counter()
    log.info("%s on the %s model, %s attention, P=%g", sampler, level, activation, P)
    idata = sample_posterior(
        sampler, level, activation, P, *preset, seed=seed, d_model=d_model,
        batch_size=batch_size, progress=ctx.obj["progress"], **options,
    )  # fmt: skip
    az.to_netcdf(idata, out)
    log.info("wrote %s in %.1f s", out, time.perf_counter() - t0)
    names = [q for q in ORDER_PARAMETERS if q in idata.posterior]
    click.echo(diagnose(idata, var_names=names or None, fold=fold))
    if "log_evidence" in idata.posterior.attrs:
        click.echo(f"log evidence: {idata.posterior.attrs['log_evidence']:.4f}")


@cli.command()
@_preset_options
@click.option(
    "--level",
    type=click.Choice(("network", "kernel")),
    default=_sweep_default("llc", "level"),
    help="the network with frozen embeddings (Level 0) or the kernel limit (Level 1)",
)
@click.option(
    "--activation", type=click.Choice(ACTIVATIONS), default="softmax", help="attention activation"
)
@click.option("--P", "P", type=click.IntRange(min=2), default=300, help="training sequences")
@click.option(
    "--d-model",
    type=click.IntRange(min=1),
    default=_sweep_default("llc", "d_model"),
    show_default="V + L",
    help="network width, at least V + L (level network)",
)
@click.option(
    "--sampler",
    type=click.Choice(("sgld", "rmsprop", "mala", "nuts", "smc")),
    default=_sweep_default("llc", "sampler"),
    help="SGLD, RMSProp-preconditioned SGLD, MALA, NUTS, or tempered SMC over nβ (chains are "
    "its independent runs, draws its particles per run)",
)
@click.option(
    "--chains",
    type=click.IntRange(min=1),
    default=None,
    show_default="the llc sweep's num_chains; llc_smc.DEFAULT_RUNS (16) runs for smc",
    help="chains, started around w* (smc: its independent runs, whose spread is the error)",
)
@click.option(
    "--draws",
    type=click.IntRange(min=1),
    default=_sweep_default("llc", "num_draws"),
    help="draws kept per chain",
)
@click.option(
    "--burnin",
    type=_BURNIN,
    default=_sweep_default("llc", "num_burnin"),
    help="steps discarded first, or auto: 5 / (ε γ), five relaxation times of what γ holds",
)
@click.option(
    "--step-size",
    type=_STEP,
    default=_sweep_default("llc", "step_size"),
    help="ε, or auto: 0.1 / the largest curvature of the target at w* (llc_step_size)",
)
@click.option("--nbeta", type=float, default=None, show_default="P / log P", help="nβ")
@click.option("--gamma", type=float, default=_sweep_default("llc", "gamma"), help="localization γ")
@click.option("--include-prior", is_flag=True, help="multiply the target by the model's prior")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    show_default="P, the full batch",
    help="SGLD minibatch (sequences; level network)",
)
@click.option(
    "--exact",
    is_flag=True,
    help="also the exact LLC (W_O integrated out, NUTS), written to OUT_exact.nc (level network)",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, help="sampler and dataset seed")
@click.option("--allow-untrusted", is_flag=True,
              help="exit 0 even when the run's verdict says it is not to be trusted")  # fmt: skip
@_out_option("llc.nc", help="InferenceData NetCDF file (its folder must exist)")
@_verbosity_options
@click.pass_context
def llc(ctx, preset, level, activation, P, d_model, sampler, chains, draws, burnin, step_size,
        nbeta, gamma, include_prior, batch_size, exact, seed, allow_untrusted, out):  # fmt: skip
    """The local learning coefficient at the exact MAP; write NetCDF and print the estimate.

    Prints what ``diagnose`` prints for the file, the verdict included, and exits 1 where the
    verdict fails (unless --allow-untrusted) or the sampler diverged. A finished run is kept in
    OUT and the exact run's state in OUT_exact.ckpt.npz: after Ctrl-C the same command resumes."""
    from bayes_attn._validation import check_positive

    if nbeta is not None:
        check_positive("nbeta", nbeta)
    if not gamma >= 0:
        raise click.BadParameter(f"must be >= 0, got {gamma}", param_hint="--gamma")
    if exact and level != "network":
        raise click.BadParameter("the exact LLC is the network's", param_hint="--exact")
    if chains is None:  # SMC's error is the spread of its runs: llc_smc.DEFAULT_RUNS of them
        from bayes_attn.inference.llc_smc import DEFAULT_RUNS

        chains = DEFAULT_RUNS if sampler == "smc" else _sweep_default("llc", "num_chains")()
    if batch_size is not None and batch_size > P:
        raise ValueError(f"batch_size must be at most P = {P} (the full batch), got {batch_size}")
    exact_out = Path(out).with_name(Path(out).stem + "_exact.nc")
    if exact and exact_out.exists():
        if not _writable(exact_out, folder=False):
            raise click.BadParameter(f"cannot write {str(exact_out)!r}", param_hint="--exact")
        if not _package_result(exact_out):
            raise click.BadParameter(
                f"{str(exact_out)!r} exists and is not a NetCDF result of bayes-attn",
                param_hint="--exact",
            )  # fmt: skip
    from bayes_attn.analysis.llc import llc_estimate, llc_verdict
    from bayes_attn.experiments.llc import llc_point
    from bayes_attn.io import write_atomic

    t0 = time.perf_counter()
    log.info("llc by %s on the %s model, %s attention, P=%d", sampler, level, activation, P)
    try:
        idata, ex = llc_point(
            level, *preset, P, activation, d_model=d_model, seed=seed, batch_size=batch_size,
            exact=exact, progress=ctx.obj["progress"], keep=out, sampler=sampler,
            num_chains=chains, num_draws=draws, num_burnin=burnin, step_size=step_size,
            nbeta=nbeta, gamma=gamma, include_prior=include_prior,
        )  # fmt: skip
    except KeyboardInterrupt:
        ckpt = exact_out.with_name(exact_out.stem + ".ckpt.npz")
        kept = f"{out} once its run finished" + (f", and {ckpt} the exact run's" if exact else "")
        click.echo(f"bayes-attn: interrupted; kept {kept}: the same command resumes", err=True)
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


def _adam_settings(**changes):
    from bayes_attn.inference.adam import AdamSettings

    return AdamSettings(**changes)


_adam_options = _grouped(
    "adam",
    [
        click.option(
            "--lr",
            type=float,
            default=_sweep_default("adam", "lr"),
            help="Adam learning rate (after the warm-up)",
        ),
        click.option(
            "--max-steps",
            type=click.IntRange(min=1),
            default=_sweep_default("adam", "max_steps"),
            help="full-batch steps at most",
        ),
        click.option(
            "--patience",
            type=click.IntRange(min=0),
            default=_sweep_default("adam", "patience"),
            help="early stopping: steps without improvement of the objective",
        ),
    ],
    build=_adam_settings,
)


@cli.command()
@_preset_options
@click.option(
    "--activation", type=click.Choice(ACTIVATIONS), default="linear", help="attention activation"
)
@click.option("--P", "P", type=click.IntRange(min=1), default=400, help="training sequences")
@click.option(
    "--d-model",
    type=click.IntRange(min=1),
    default=_sweep_default("adam", "d_model"),
    help="network width",
)
@click.option(
    "--members",
    type=click.IntRange(min=1),
    default=_sweep_default("adam", "members"),
    help="ensemble members",
)
@_adam_options
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, help="seed of the data and the initial weights"
)
@_out_option("adam.nc", help="ensemble NetCDF file (its folder must exist)")
@_verbosity_options
@_distributed_options
@click.pass_context
def train(ctx, preset, activation, P, d_model, members, adam, seed, out, process):
    """Train an Adam ensemble to the MAP; write NetCDF and print the ensemble summary.

    With --num-processes N each process trains a contiguous share of the members (with the data,
    weights and keys they have in a one-process run) into OUT.part-I-of-N.nc; process 0 waits for
    the other parts (on a shared filesystem) and merges them into OUT.
    """
    n = process["num_processes"]
    if members < n:
        raise click.BadParameter(
            f"fewer members ({members}) than processes ({n})", param_hint="--members"
        )
    info = _start_processes(process)
    from bayes_attn.analysis import ensemble_summary
    from bayes_attn.distributed import part_paths, process_share
    from bayes_attn.experiments.runs import train_ensemble
    from bayes_attn.io import write_atomic

    task, hyper = preset
    ds = train_ensemble(
        task, hyper, activation, d_model, P, members=members, seed=seed, settings=adam,
        out=out, process=info, progress=ctx.obj["progress"],
    )  # fmt: skip
    if ds is None:  # one of several processes: its share is in its part file
        i = info.process_id
        share = process_share(range(members), i, n)
        part = part_paths(out, n)[i]
        click.echo(f"process {i} of {n}: members {share[0]}..{share[-1]} in {part}")
        return
    write_atomic(ds, Path(out))
    log.info("wrote %s", out)
    click.echo(ensemble_summary(ds).to_dataframe().T.to_string())


_SWEEP_GRID = ("kind", "P", "L", "V", "activation", "seed", "tokens")


@cli.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="a JSON or TOML file with the sweep's settings ([sweep] table in TOML; an example: "
    "bayes_attn/configs/sweep_example.toml)",
)
@click.option(
    "--kind",
    cls=_RequiredUnlessConfig,
    type=click.Choice(("theory", "nuts", "sgld", "adam", "protocol", "llc", "landscape")),
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
@click.option("--tokens", default="uniform", metavar="SOURCE", help=_TOKENS_HELP)
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
def sweep(ctx, config_file, kind, P, L, V, activation, seed, tokens, options, out, process):
    """Run a resumable sweep over (activation, L, V, P, seed), saving every finished point.

    The grid (comma-separated lists) and the settings come from --config FILE, from the options,
    or from both: an option given on the command line overrides the file's setting. Several
    processes started on the same OUT share its points (each claims a point before computing it).

    With --num-processes N each process runs every N-th point into OUT.part-I-of-N.nc; process 0
    then waits for the other parts (on a shared filesystem) and merges them into OUT.
    """
    table = _sweep_table(ctx, config_file, kind, P, L, V, activation, seed, tokens, options)
    info = _start_processes(process)  # before JAX starts its backend
    from bayes_attn.experiments import sweep as sweeps

    cfg = sweeps.SweepConfig.from_dict(table)
    n, i, progress = info.num_processes, info.process_id, ctx.obj["progress"]
    if n == 1:
        ds = sweeps.run_sweep(cfg, out, progress=progress)
        click.echo(f"{int(ds['done'].sum())} of {ds['done'].size} points done: {out}")
        return
    ds = sweeps.run_sweep_parts(cfg, out, i, n, progress=progress)
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
        kind=kind, P=P, L=L, V=V, activation=_activations(activation), seed=seed, tokens=tokens
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
    from bayes_attn.experiments.figures import load_configs
    from bayes_attn.plotting.figures import make_figures

    t0 = time.perf_counter()
    names = [n.strip() for n in only.split(",")] if only else None
    written = make_figures(
        load_configs(configs), out, quick=quick, only=names, progress=ctx.obj["progress"]
    )
    for name, path in written.items():
        click.echo(f"{name:14s} {path}")
    click.echo(f"{len(written)} figures in {out}/ ({time.perf_counter() - t0:.0f} s)")


_LEVEL_DEFAULT = "per level, UmbrellaSettings.for_level"


@cli.command()
@_preset_options
@click.option(
    "--level",
    type=click.Choice(("reduced", "kernel")),
    default="kernel",
    help="order parameters (Level 2) or kernel limit (Level 1; with --gram-width, a network)",
)
@click.option("--activation", type=click.Choice(("softmax", "linear")), default="softmax",
              help="attention activation (the profile is of softmax's aG, of linear's cG)")  # fmt: skip
@click.option("--P", "P", type=float, default=272.0, help="training sequences")
@click.option("--gram-width", type=click.IntRange(min=1), default=None, show_default="g = I",
              help="kernel: the Gram of one prior draw of embeddings of this width")  # fmt: skip
@click.option("--warmup", type=click.IntRange(min=0), default=None, show_default=_LEVEL_DEFAULT,
              help="warm-up steps per window")  # fmt: skip
@click.option("--samples", type=click.IntRange(min=4), default=None, show_default=_LEVEL_DEFAULT,
              help="draws per window")  # fmt: skip
@click.option("--chains", type=click.IntRange(min=1), default=None, show_default=_LEVEL_DEFAULT,
              help="chains per window")  # fmt: skip
@click.option(
    "--windows",
    type=click.IntRange(min=8),
    default=None,
    show_default=_LEVEL_DEFAULT,
    help="the most windows the automatic placement may use",
)
@click.option("--centres", default=None, metavar="LO:HI:N", show_default="from the modes",
              help="N evenly spaced window centres from LO to HI")  # fmt: skip
@click.option("--refine", type=click.IntRange(min=0), default=None, show_default=_LEVEL_DEFAULT,
              help="refinement rounds")  # fmt: skip
@click.option("--seed", type=click.IntRange(min=0), default=0, help="sampler and dataset seed")
@click.option("--allow-untrusted", is_flag=True,
              help="exit 0 even when the profile's verdict is 'not to be trusted'")  # fmt: skip
@_out_option("landscape.nc", help="InferenceData NetCDF file (its folder must exist)")
@_distributed_options
@_verbosity_options
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
    from bayes_attn.experiments.landscape import check_landscape_P, checkpoint_path

    try:
        P = check_landscape_P(*preset, P, level)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--P") from None
    info = _start_processes(process)
    from bayes_attn.analysis.report import read_report
    from bayes_attn.experiments.landscape import landscape_on_hosts

    given = dict(num_warmup=warmup, num_samples=samples, num_chains=chains, max_windows=windows,
                 refine=refine)  # fmt: skip
    t0 = time.perf_counter()
    log.info("umbrella sampling of %s at the %s level, P=%g",
             "aG" if activation == "softmax" else "cG", level, P)  # fmt: skip
    try:
        idata = landscape_on_hosts(
            *preset, P, level, activation, out, info, gram_width=gram_width, seed=seed,
            progress=ctx.obj["progress"], centres=grid,
            **{k: v for k, v in given.items() if v is not None},
        )  # fmt: skip
    except KeyboardInterrupt:
        kept = checkpoint_path(out)
        if info.num_processes > 1:
            click.echo("bayes-attn: interrupted; each process keeps its finished windows beside "
                       "its part file: the same command resumes them", err=True)  # fmt: skip
        elif kept.exists():
            click.echo(f"bayes-attn: interrupted; the relaxed windows and those finished are "
                       f"kept in {kept}: the same command resumes them", err=True)  # fmt: skip
        else:
            click.echo("bayes-attn: interrupted before any window had finished", err=True)
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


# --------------------------------------------------------------------------------------------------


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


if __name__ == "__main__":
    run()
