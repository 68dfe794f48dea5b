"""``map``: the induction head's MAP from the command line (the work is
:func:`bayes_attn.experiments.induction.induction_map`'s, run as a one-config sweep).

``bayes-attn map --task induction --model kernel --P 400,1000 --activation softmax`` finds the
two-layer kernel limit's MAP from three starts at each (activation, P, seed) and writes a sweep file
(the ``induction`` kind; ``--model network``: the ``induction_frozen`` kind, the two-layer
network's exact posterior with frozen embeddings of width ``--d-model``). The file carries the
run's provenance (config, versions, time), is resumed by the same line, and ``bayes-attn diagnose
FILE`` reads it (its progress and the table of its points). Defaults: the study's preset
(``bayes_attn/configs/induction_study.toml``: L = 16, V = 3, Table-1 scales, in-context Markov
chains with Dirichlet(1) rows and a uniform first token).
"""

from __future__ import annotations

import click

from bayes_attn._validation import ACTIVATIONS
from bayes_attn.cli._options import activation_option, activations, out_option, verbosity_options
from bayes_attn.cli._types import INTS

#: the tasks ``map`` knows (the one-layer copy task's modes are ``theory``'s and ``sample``'s)
TASKS = ("induction",)
#: --model -> the sweep kind that runs it
MODEL_KINDS = {"kernel": "induction", "network": "induction_frozen"}
#: the study's preset (bayes_attn/configs/induction_study.toml)
PRESET = {"L": 16, "V": 3, "tokens": "icl-markov:alpha=1,start=uniform"}


@click.command("map")
@click.option("--task", type=click.Choice(TASKS), default="induction",
              help="the task (two causal layers, next-token targets)")  # fmt: skip
@click.option("--model", type=click.Choice(tuple(MODEL_KINDS)), default="kernel",
              help="kernel: the kernel limit (M1, M2 with the readout integrated out); network: "
              "the network with frozen embeddings of width --d-model, exactly")  # fmt: skip
@click.option("--d-model", type=click.IntRange(min=1), default=10_000,
              help="embedding width (--model network)")  # fmt: skip
@click.option("--L", "L", type=click.IntRange(min=2), default=PRESET["L"], help="sequence length")
@click.option("--V", "V", type=click.IntRange(min=2), default=PRESET["V"], help="vocabulary size")
@click.option("--tokens", default=PRESET["tokens"], metavar="SOURCE",
              help="an icl-markov source (the references are defined for it)")  # fmt: skip
@click.option("--chi", type=float, default=30.0, help="concentration chi")
@click.option("--g-w", "g_w", type=float, default=1.0, help="attention-weight scale g_W")
@click.option("--g-o", "g_o", type=float, default=1.0, help="readout scale g_O")
@click.option("--sigma2", type=float, default=30.0, help="noise scale sigma^2")
@activation_option(ACTIVATIONS + ("both",), "softmax")
@click.option("--P", "P", type=INTS, default="400", help="training sequences, comma-separated")
@click.option("--seed", type=INTS, default="0", help="dataset seeds, comma-separated")
@click.option("--num-test", type=click.IntRange(min=1), default=2000,
              help="held-out sequences for the scores and losses")  # fmt: skip
@click.option("--maxiter", type=click.IntRange(min=1), default=300,
              help="trust-region iterations per start")  # fmt: skip
@out_option("induction_map.nc", help="the sweep NetCDF file (resumed if it exists)")
@verbosity_options
@click.pass_context
def map_command(ctx, task, model, d_model, L, V, tokens, chi, g_w, g_o, sigma2, activation, P,
                seed, num_test, maxiter, out):  # fmt: skip
    """The MAP of the induction head's two layers at each P and seed; write a sweep file and
    print its table (bayes-attn diagnose FILE reads it again)."""
    from bayes_attn.experiments import sweep as sweeps

    options = {"num_test": num_test, "maxiter": maxiter}
    if model == "network":
        options["d_model"] = d_model
    table = {
        "kind": MODEL_KINDS[model], "P": P, "L": [L], "V": [V], "activation": activations(activation),
        "seed": seed, "tokens": tokens, "options": options,
        "hyper": {"chi": chi, "g_w": g_w, "g_o": g_o, "sigma2": sigma2},
    }  # fmt: skip
    cfg = sweeps.SweepConfig.from_dict(table)  # every check, before any work (ValueError: exit 2)
    ds = sweeps.run_sweep(cfg, out, progress=ctx.obj["progress"])
    from bayes_attn.analysis.report import read_report

    click.echo(read_report(out).text)
    click.echo(f"{int(ds['done'].sum())} of {ds['done'].size} points done: {out}")
