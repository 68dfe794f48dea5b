"""``sample`` and ``train``: one sampled posterior, one Adam ensemble (the work is
:mod:`bayes_attn.experiments.runs`')."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click

from bayes_attn._validation import LEVELS
from bayes_attn.cli import _defaults as homes
from bayes_attn.cli._interrupt import interruptibly
from bayes_attn.cli._options import (
    P_option,
    activation_option,
    adam_options,
    batch_size_option,
    d_model_option,
    distributed_options,
    fold_option,
    level_option,
    out_option,
    preset_options,
    sampler_options,
    seed_option,
    start_processes,
    verbosity_options,
)

log = logging.getLogger("bayes_attn")


@click.command()
@preset_options
@level_option(LEVELS, "reduced",
              "order parameters (Level 2), kernel limit (Level 1) or the finite network (Level 0)")  # fmt: skip
@activation_option()
@P_option(float, 400.0, "training sequences (an integer below Level 2)")
@d_model_option(homes.sweep("nuts", "d_model"), "network width (level network)")
@sampler_options
@batch_size_option("SGLD minibatch (sequences)")
@seed_option()
@out_option("posterior.nc", help="InferenceData NetCDF file (its folder must exist)")
@fold_option
@verbosity_options
@click.pass_context
def sample(ctx, preset, level, activation, P, d_model, run, batch_size, seed, out, fold):
    """Sample a posterior with NUTS, SGLD or tempered SMC; write NetCDF and print diagnostics."""
    from bayes_attn._validation import check_positive
    from bayes_attn.cli._checks import check_run_P

    sampler, options = run
    P = check_positive("P", P)  # every check before the log line and the sampling
    check_run_P(*preset, P, level, d_model)  # the float P goes on, as before
    if level == "reduced":
        from bayes_attn.tokens import check_uniform

        check_uniform(preset[0].tokens)
    if "step_size" in options:
        options["step_size"] = check_positive("step_size", options["step_size"])
    from bayes_attn import _arviz as az
    from bayes_attn.analysis import diagnose
    from bayes_attn.experiments.runs import checkpoint_path, sample_posterior
    from bayes_attn.models.levels import ORDER_PARAMETERS

    if sampler != "sgld":  # beside the output: a rerun with the same arguments resumes from it
        options["checkpoint"] = checkpoint_path(out, sampler)
        log.info("%s checkpoint: %s (removed when the run completes)", sampler.upper(),
                 options["checkpoint"])  # fmt: skip
    t0 = time.perf_counter()
    log.info("%s on the %s model, %s attention, P=%g", sampler, level, activation, P)
    idata = interruptibly(
        sample_posterior, sampler, level, activation, P, *preset, seed=seed, d_model=d_model,
        batch_size=batch_size, progress=ctx.obj["progress"], **options,
    )  # fmt: skip
    az.to_netcdf(idata, out)
    log.info("wrote %s in %.1f s", out, time.perf_counter() - t0)
    names = [q for q in ORDER_PARAMETERS if q in idata.posterior]
    click.echo(diagnose(idata, var_names=names or None, fold=fold))
    if "log_evidence" in idata.posterior.attrs:
        click.echo(f"log evidence: {idata.posterior.attrs['log_evidence']:.4f}")


@click.command()
@preset_options
@activation_option()
@P_option(click.IntRange(min=1), 400)
@d_model_option(homes.protocol("d_model"))
@click.option("--members", type=click.IntRange(min=1), default=homes.sweep("adam", "members"),
              help="ensemble members")  # fmt: skip
@adam_options
@seed_option("seed of the data and the initial weights")
@out_option("adam.nc", help="ensemble NetCDF file (its folder must exist)")
@verbosity_options
@distributed_options
@click.pass_context
def train(ctx, preset, activation, P, d_model, members, adam, seed, out, process):
    """Train an Adam ensemble to the MAP; write NetCDF and print the ensemble summary.

    The defaults are the paper's protocol's (width 256, Adam with a cosine decay, the embeddings
    held at their prior draw): on the paper's preset a member reaches the theory's loss within
    the filter's 5%, where the adam sweep's (width 64, trained embeddings) all end above it.

    With --num-processes N each process trains a contiguous share of the members (with the data,
    weights and keys they have in a one-process run) into OUT.part-I-of-N.nc; process 0 waits for
    the other parts (on a shared filesystem) and merges them into OUT.
    """
    from bayes_attn.cli._checks import check_run_P

    check_run_P(*preset, P, "network", d_model)
    n = process["num_processes"]
    if members < n:
        raise click.BadParameter(
            f"fewer members ({members}) than processes ({n})", param_hint="--members"
        )
    info = start_processes(process)
    from bayes_attn.analysis import ensemble_summary
    from bayes_attn.distributed import part_paths, process_share
    from bayes_attn.experiments.runs import train_ensemble
    from bayes_attn.io import write_atomic

    task, hyper = preset
    ds = interruptibly(
        train_ensemble, task, hyper, activation, d_model, P, members=members, seed=seed,
        settings=adam, out=out, process=info, progress=ctx.obj["progress"],
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
