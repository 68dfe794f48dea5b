"""The options that several commands share, each declared once: the preset (``--L``, ``--V``,
``--tokens``, ``--chi``, ``--g-w``, ``--g-o``, ``--sigma2``), the processes, ``--out``, ``--seed``,
``--allow-untrusted``, ``-q``/``-v``, the sampler's run and Adam's settings. An option group
reaches the command as one value (:func:`grouped`); the defaults come from
:mod:`bayes_attn.cli._defaults`."""

from __future__ import annotations

import functools
import logging
import sys

import click

from bayes_attn._validation import ACTIVATIONS
from bayes_attn.cli import _defaults as homes
from bayes_attn.cli._types import LazyChoice, OutPath
from bayes_attn.task import CopyTask, Hyper

log = logging.getLogger("bayes_attn")


def stack(*options):
    """The decorators ``options`` applied as if written one above the other, the first on top."""

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def grouped(name: str, options: list, build=dict):
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


# ---- -q and -v, and where the log goes ------------------------------------------------------------

QUIET_HELP = "no progress bars; only warnings on stderr"
VERBOSE_HELP = "debug messages on stderr"


def configure_logging(obj: dict) -> None:
    """Log level and progress bars from ``obj["quiet"]`` and ``obj["verbose"]`` (quiet wins):
    ``obj["progress"]`` is what every command passes on as the library's ``progress=``."""
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
        configure_logging(obj)


def _verbosity(name: str, short: str, text: str):
    return click.option(short, f"--{name}", name, is_flag=True, expose_value=False,
                        callback=_verbosity_callback, help=text)  # fmt: skip


#: -q/--quiet and -v/--verbose after the subcommand, as before it
verbosity_options = stack(_verbosity("quiet", "-q", QUIET_HELP),
                          _verbosity("verbose", "-v", VERBOSE_HELP))  # fmt: skip


# ---- the preset -----------------------------------------------------------------------------------


_TASK, _HYPER = CopyTask.paper(), Hyper.paper()  # the preset, which --help shows as the defaults


def _preset(L, V, tokens, chi, g_w, g_o, sigma2):
    task = CopyTask(_TASK.L if L is None else L, _TASK.V if V is None else V, tokens)
    changes = dict(chi=chi, g_w=g_w, g_o=g_o, sigma2=sigma2)
    return task, _HYPER.replace(**{k: v for k, v in changes.items() if v is not None})


TOKENS_HELP = (
    "the law of the token sequences: uniform (i.i.d., the paper's), zipf:s=S (i.i.d., p_k ~ "
    "(k+1)^-S), markov:alpha=A,seed=N (one chain, rows ~ Dirichlet(A), drawn from the seed), "
    "markov:transition=[[...],...] (a given V x V chain), icl-markov:alpha=A[,doubly_stochastic="
    "true] (a chain per sequence); chains start from their stationary law; the reduced level "
    "(Level 2) needs uniform tokens"
)


def tokens_option():
    return click.option("--tokens", default="uniform", metavar="SOURCE", help=TOKENS_HELP)


def _override(flag: str, type, help: str):
    """An override of the paper preset: default None (the preset), shown as the preset's value."""
    name = flag[2:].replace("-", "_")
    preset = getattr(_TASK, name) if flag in ("--L", "--V") else getattr(_HYPER, name)
    decls = (flag, name) if flag in ("--L", "--V") else (flag,)
    return click.option(*decls, type=type, default=None, show_default=f"{preset:g}", help=help)


#: --L, --V, --tokens, --chi, --g-w, --g-o, --sigma2: overrides of the paper preset (Table 1),
#: reaching the command as ``preset`` = ``(task, hyper)``
preset_options = grouped(
    "preset",
    [
        _override("--L", int, "sequence length"),
        _override("--V", int, "vocabulary size"),
        tokens_option(),
        _override("--chi", float, "concentration chi"),
        _override("--g-w", float, "attention-weight scale g_W"),
        _override("--g-o", float, "readout scale g_O"),
        _override("--sigma2", float, "noise scale sigma^2"),
    ],
    build=_preset,
)


# ---- processes ------------------------------------------------------------------------------------


def _process_option(flag: str, type, default, help: str):
    var = "BAYES_ATTN_" + flag[2:].upper().replace("-", "_")
    return click.option(flag, envvar=var, show_envvar=True, type=type, default=default, help=help)


#: --coordinator, --num-processes, --process-id (or BAYES_ATTN_* variables), as ``process``
distributed_options = grouped(
    "process",
    [
        _process_option("--coordinator", None, None, "multi-host: address host:port of process 0"),
        _process_option(
            "--num-processes", click.IntRange(min=1), 1, "multi-host: number of processes"
        ),
        _process_option("--process-id", click.IntRange(min=0), 0, "multi-host: this process's id"),
    ],
)


def start_processes(process: dict):
    """Register this process with ``jax.distributed`` (before JAX starts its backend)."""
    from bayes_attn.distributed import initialize_distributed

    return initialize_distributed(
        process["coordinator"], process["num_processes"], process["process_id"]
    )


# ---- options of one value -------------------------------------------------------------------------


def out_option(default=None, *, folder=False, help):
    """``--out``, checked when the line is parsed (:class:`~bayes_attn.cli._types.OutPath`)."""
    return click.option("--out", type=OutPath(folder=folder), default=default,
                        required=default is None, help=help)  # fmt: skip


def seed_option(help: str = "sampler and dataset seed"):
    return click.option("--seed", type=click.IntRange(min=0), default=0, help=help)


def untrusted_option(what: str):
    return click.option("--allow-untrusted", is_flag=True, help=f"exit 0 even when {what}")


def level_option(choices, default, help: str):
    """``--level`` among ``choices``: the names, or a function that reads them from their home."""
    kind = LazyChoice(choices) if callable(choices) else click.Choice(choices)
    return click.option("--level", type=kind, default=default, help=help)


def activation_option(choices=ACTIVATIONS, default="linear", help="attention activation"):
    return click.option("--activation", type=click.Choice(choices), default=default, help=help)


def P_option(type=float, default=None, help="training sequences", **attrs):
    return click.option("--P", "P", type=type, default=default, help=help, **attrs)


def d_model_option(default, help="network width", **attrs):
    return click.option("--d-model", type=click.IntRange(min=1), default=default, help=help,
                        **attrs)  # fmt: skip


def batch_size_option(help: str):
    return click.option("--batch-size", type=click.IntRange(min=1), default=None,
                        show_default="P, the full batch", help=help)  # fmt: skip


FOLD_HELP = (
    "linear attention: summarise the draws folded onto one Z2 image, c1 + cG >= 0 (the images "
    "(c1, cG) and (-c1, -cG) have equal mass); without it the raw table comes first and the "
    "folded one beside it when chains sit in both images"
)
fold_option = click.option("--fold", is_flag=True, help=FOLD_HELP)


def activations(activation: str) -> tuple[str, ...]:
    """``both`` is every activation."""
    return ACTIVATIONS if activation == "both" else (activation,)


# ---- the sampler's run and Adam's settings -----------------------------------------------------


def _sampler_run(sampler, chains, warmup, samples, step_size, particles) -> dict:
    """The keywords of the sampler's run function, from its options."""
    if sampler == "smc":
        return dict(num_particles=particles)
    run = dict(num_chains=chains, num_warmup=warmup, num_samples=samples)
    return {**run, "step_size": step_size} if sampler == "sgld" else run


#: --sampler, --chains, --warmup, --samples, --step-size, --particles, as ``run`` =
#: ``(sampler, its run function's keywords)``
sampler_options = grouped(
    "run",
    [
        click.option("--sampler", type=click.Choice(("nuts", "sgld", "smc")), default="nuts",
                     help="NUTS, stochastic-gradient Langevin dynamics or adaptive tempered SMC"),
        click.option("--chains", type=click.IntRange(min=1), default=homes.nuts("num_chains"),
                     help="chains (NUTS, SGLD)"),
        click.option("--warmup", type=click.IntRange(min=0), default=homes.nuts("num_warmup"),
                     help="warm-up steps per chain (NUTS, SGLD)"),
        click.option("--samples", type=click.IntRange(min=1), default=homes.nuts("num_samples"),
                     help="draws per chain (NUTS, SGLD)"),
        click.option("--step-size", type=float, default=homes.sgld("step_size"),
                     help="SGLD step size"),
        click.option("--particles", type=click.IntRange(min=2),
                     default=homes.smc("num_particles"), help="SMC particles per run"),
    ],
    build=lambda sampler, **options: (sampler, _sampler_run(sampler, **options)),
)  # fmt: skip


def _adam_settings(train_embeddings: bool, **changes):
    """The protocol's Adam (:data:`~bayes_attn.experiments.protocol.PROTOCOL_ADAM`: a cosine
    decay, the embeddings held at their prior draw) with the options' ``changes``."""
    import dataclasses

    from bayes_attn.experiments.protocol import PROTOCOL_ADAM

    return dataclasses.replace(PROTOCOL_ADAM, train_embeddings=train_embeddings, **changes)


TRAIN_EMBEDDINGS_HELP = (
    "train W_emb and p too: the joint MAP, whose copy component collapses (cG = 0, above the "
    "theory's loss; docs/validation.md, 'Trained embeddings'); without it they are held at "
    "their prior draw, as in the paper's protocol"
)

#: --lr, --max-steps, --patience, --train-embeddings, as ``adam`` = an ``AdamSettings``: the
#: protocol's Adam (PROTOCOL_ADAM) with the options given
adam_options = grouped(
    "adam",
    [
        click.option("--lr", type=float, default=homes.protocol_adam("lr"),
                     help="Adam learning rate (after the warm-up; cosine decay to 1% of it)"),
        click.option("--max-steps", type=click.IntRange(min=1),
                     default=homes.protocol_adam("max_steps"), help="full-batch steps at most"),
        click.option("--patience", type=click.IntRange(min=0),
                     default=homes.protocol_adam("patience"),
                     help="early stopping: steps without improvement of the objective"),
        click.option("--train-embeddings", is_flag=True, help=TRAIN_EMBEDDINGS_HELP),
    ],
    build=_adam_settings,
)  # fmt: skip
