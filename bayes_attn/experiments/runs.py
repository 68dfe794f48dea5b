"""One run at one point, as ``bayes-attn sample`` and ``bayes-attn train`` make it: a posterior
sampled on the model of a level (its dataset drawn from the seed), or an Adam ensemble trained
(in shares over processes, merged) and filtered against the theory's loss.
"""

from __future__ import annotations

from pathlib import Path

from bayes_attn.distributed import ProcessInfo, gather_parts, process_share
from bayes_attn.models.levels import model_with_data

SAMPLERS = ("nuts", "sgld", "smc")


def checkpoint_path(out, sampler: str) -> Path:
    """Where ``bayes-attn sample --sampler SAMPLER --out OUT`` keeps its checkpoint, beside the
    output: ``OUT.smc-checkpoint`` (:mod:`bayes_attn.inference.smc_checkpoint`) or
    ``OUT.nuts-checkpoint.npz`` (``run_nuts(checkpoint=)``). A killed run, rerun with the same
    arguments, resumes from it; it is removed when the run completes."""
    out = Path(out)
    suffix = {"smc": ".smc-checkpoint", "nuts": ".nuts-checkpoint.npz"}[sampler]
    return out.with_name(out.name + suffix)


def smc_checkpoint_path(out) -> Path:
    """:func:`checkpoint_path` of SMC (the name of before)."""
    return checkpoint_path(out, "smc")


def sample_posterior(
    sampler: str,
    level: str,
    activation: str,
    P: float,
    task,
    hyper,
    *,
    seed: int = 0,
    d_model: int | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    **options,
):
    """Sample the posterior of ``level`` (reduced, kernel or network) at P with ``sampler``.

    Below Level 2 the dataset is drawn from ``seed`` (as a sweep point's); ``d_model`` is the
    network's width and ``batch_size`` SGLD's minibatch (ignored by the other samplers);
    ``options`` go to :func:`~bayes_attn.inference.run_nuts`, :func:`~bayes_attn.inference.run_sgld`
    or :func:`~bayes_attn.inference.run_smc`. Returns the InferenceData.
    """
    from bayes_attn.inference import run_nuts, run_sgld, run_smc

    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    model, args, kw = model_with_data(
        level, task, hyper, P, activation, seed=seed, d_model=d_model,
        batch_size=batch_size if sampler == "sgld" else None,
    )  # fmt: skip
    run = {"nuts": run_nuts, "sgld": run_sgld, "smc": run_smc}[sampler]
    return run(model, model_args=args, model_kwargs=kw, seed=seed, progress=progress, **options)


def train_ensemble(
    task,
    hyper,
    activation: str,
    d_model: int,
    P: int,
    *,
    members: int,
    seed: int = 0,
    settings=None,
    out=None,
    process: ProcessInfo | None = None,
    progress: bool = True,
):
    """Train an Adam ensemble with the paper's warm-up (:meth:`AdamSettings.with_warmup
    <bayes_attn.inference.adam.AdamSettings.with_warmup>`) and mark its members at the global
    minimum against the Level-2 saddle's loss (:func:`~bayes_attn.analysis.classify_minima`).

    With ``process`` one of several (:func:`~bayes_attn.distributed.initialize_distributed`),
    this process trains its contiguous share of the members, with the data, weights and keys they
    have in a one-process run, into ``OUT.part-I-of-N.nc``; process 0 waits for the other parts
    (on a shared filesystem), merges them and returns the ensemble, the others return None.
    """
    from bayes_attn.analysis import classify_minima
    from bayes_attn.experiments.protocol import level2_saddle
    from bayes_attn.inference.adam import AdamSettings, merge_ensembles, train_adam

    process = process or ProcessInfo(0, 1, None)
    n, i = process.num_processes, process.process_id
    if members < n:
        raise ValueError(f"members: fewer members ({members}) than processes ({n})")
    share = process_share(range(members), i, n)
    settings = (settings or AdamSettings()).with_warmup(activation)
    ds = train_adam(
        task, hyper, activation, d_model, P, members=members, seed=seed, settings=settings,
        progress=progress, member_range=(share[0], share[-1] + 1),
    )  # fmt: skip
    ds = gather_parts(ds, out, process, merge_ensembles)
    if ds is None:
        return None
    sd = level2_saddle(task, hyper, P, activation)  # None (a warning): tokens not uniform
    return classify_minima(ds, theory_loss=None if sd is None else sd.loss)
