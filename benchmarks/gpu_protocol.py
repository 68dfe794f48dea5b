"""The paper's protocol at the paper's width, d_model = 10,000, on the GPUs of one host.

The paper needed about 100 H100-hours; the goal here is 8 minutes on one H200, compilation
included, for two stages:

1. the explicit protocol (Adam, then SGLD) at ``--d`` (default 10,000; pass the largest width that
   fits the time: the span forward costs (V + L) d^2 per step and member, ~30 x 10^8 multiply-adds
   at d = 10^4, plus Adam's O(d^2) update);
2. the exact path at d = 10^4 (``experiments.frozen.run_frozen_protocol``: every member's MAP on
   the whitened Level 1, which does not depend on d; 4.4 min on the 2-core CPU), unless
   ``--no-exact``.

Both use the paper's 14 values of P and 10 members (``--quick``: the quick variant) and print the
time per stage. A third stage, unless ``--no-profile``, times the free-energy profile of the
Level-1 posterior at Table 1, P = 272 (dataset 0 of ``bayes_attn/configs/level1_transition.toml``): umbrella
sampling along aG with every window's chains vectorised on the device and a Hessian per window
(:func:`bayes_attn.experiments.landscape.run_landscape` with ``batch=0, metric="window"``), then
MBAR; it prints the wall time, Delta F at the level's divide and its standard error.

A fourth stage, unless ``--no-induction``, times the induction head's two-layer kernel limit
(issue 43) at its study's preset (L = 16, V = 3): one gradient of the potential at P = 8000 and
the MAP from both starts (:func:`bayes_attn.experiments.induction.induction_map`) at P = 1000 and
8000; with ``--quick`` at L = 6, V = 2 and P = 30, 100 (a minute on the CPU).
``--induction-only`` runs that stage alone.

Scaling out: ``train_adam`` and the protocol's SGLD stage split the members over all local devices
(``bayes_attn.inference.sharding``), so a host with several GPUs runs them in parallel. Before
starting, the script prints :func:`~bayes_attn.inference.memory.estimate_bytes` for the largest P
against the device's memory limit, and how many groups the members will be run in when they do
not all fit at once (``--memory-limit`` or ``BAYES_ATTN_MEMORY_LIMIT`` override the limit the
device reports). At d = 10^4 one member holds ~0.4 GB of W_G in float32 (0.8 GB in float64), times
six for Adam's moments and the chunk's inputs and outputs.

Run on a machine with a GPU (JAX with CUDA):
``python benchmarks/gpu_protocol.py [--d 10000] [--quick] [--no-exact] [--no-profile]
[--no-induction | --induction-only] [--out out/protocol_gpu.nc]``.
It falls back to the CPU with a warning, where the explicit d = 10,000 would take days; use
``--d 256`` (or ``--quick --d 32``, a smoke run of both stages) there.
"""

from __future__ import annotations

import os
import sys

import jax

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_protocol import main as protocol_main  # noqa: E402

from bayes_attn.experiments.protocol import ProtocolConfig  # noqa: E402
from bayes_attn.inference.memory import (  # noqa: E402
    estimate_bytes,
    format_bytes,
    members_per_group,
    memory_limit,
)


def memory_report(d_model: int, limit=None) -> None:
    """Print the estimate for the largest P, the per-device limit and the member groups."""
    cfg = ProtocolConfig.paper(d_model=d_model)
    task, P = cfg.task(), max(cfg.Ps)
    devices = jax.local_devices()
    per_device = -(-cfg.members // len(devices))
    est = estimate_bytes(task, d_model, P, per_device, num_test=cfg.adam.num_test)
    lim = memory_limit(devices, limit)
    print(
        f"memory: {cfg.members} members over {len(devices)} device(s), P = {P}: "
        f"estimate {format_bytes(est)} per device, limit "
        f"{format_bytes(lim) if lim is not None else 'unknown'}"
    )
    group = members_per_group(
        task, d_model, P, cfg.members, limit=lim, n_devices=len(devices), num_test=cfg.adam.num_test
    )
    groups = -(-cfg.members // group)
    print(f"memory: the members run in {groups} group(s) of up to {group}")


def profile_run(quick: bool) -> None:
    """The Level-1 free-energy profile at Table 1, P = 272, dataset 0, timed."""
    import time

    import bayes_attn as ba
    from bayes_attn.experiments.coexistence import level_modes
    from bayes_attn.experiments.landscape import landscape_report, run_landscape

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(0), 320)[:272]
    _, cut = level_modes(task, hyper, tokens, "kernel")
    t0 = time.perf_counter()
    idata = run_landscape(task, hyper, 272, "kernel", tokens=tokens, batch=0, metric="window",
                          num_chains=2, num_warmup=100, num_samples=100 if quick else 500,
                          progress=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    prof = landscape_report(idata, divide=cut)
    print(
        f"profile, Level 1, P = 272: {prof.sizes['window']} windows in {seconds:.0f} s; "
        f"Delta F = {float(prof.delta_F):.2f} ± {float(prof.delta_F_se):.2f} at aG = {cut:.3f}"
    )


def induction_run(quick: bool) -> None:
    """The induction head's kernel limit: one gradient, then the MAP (both starts) at two P."""
    import time

    from bayes_attn.experiments.induction import induction_map
    from bayes_attn.induction import InductionTask
    from bayes_attn.inference.potential import flat_potential
    from bayes_attn.models.two_layer import two_layer_kernel_model
    from bayes_attn.task import Hyper
    from bayes_attn.tokens import parse_tokens

    jax.config.update("jax_enable_x64", True)  # the MAP's potentials are compared at 1e-6
    L, V, Ps = (6, 2, (30, 100)) if quick else (16, 3, (1000, 8000))
    task = InductionTask(L, V, parse_tokens("icl-markov:alpha=1,start=uniform"))
    hyper = Hyper(30.0, 1.0, 1.0, 30.0)
    tokens = task.sample(jax.random.key(0), Ps[-1])
    pot = flat_potential(two_layer_kernel_model, (task, hyper, tokens, "softmax"))
    grad = jax.jit(jax.grad(pot.U))
    x = 0.1 * jax.random.normal(jax.random.key(1), (pot.dim,))
    jax.block_until_ready(grad(x))
    t0 = time.perf_counter()
    for _ in range(5):
        jax.block_until_ready(grad(x))
    print(f"induction, L = {L}, V = {V}: gradient at P = {Ps[-1]} "
          f"{(time.perf_counter() - t0) / 5 * 1e3:.1f} ms ({pot.dim} dimensions)")  # fmt: skip
    for P in Ps:
        t0 = time.perf_counter()
        out = induction_map(task, hyper, P, "softmax", num_test=500 if quick else 2000)
        print(f"induction MAP, P = {P}: {time.perf_counter() - t0:.1f} s (both starts, "
              f"compilation included), U = {min(v for k, v in out.items() if k.startswith('U_')):.6f}, "
              f"copy1 {out['copy1']:.3f}, induction2 {out['induction2']:.3f}")  # fmt: skip


if __name__ == "__main__":
    backend = jax.default_backend()
    print(f"JAX backend: {backend}, devices: {jax.local_devices()}")
    if backend == "cpu":
        print("warning: no GPU found; d_model = 10,000 on the CPU takes days", file=sys.stderr)
    argv = sys.argv[1:]
    if "--induction-only" in argv:
        induction_run("--quick" in argv)
        sys.exit(0)
    induction = "--no-induction" not in argv
    argv = [a for a in argv if a != "--no-induction"]
    if "--memory-limit" in argv:
        i = argv.index("--memory-limit")
        os.environ["BAYES_ATTN_MEMORY_LIMIT"] = argv[i + 1]  # read by train_adam too
        del argv[i : i + 2]
    if "--d" not in argv:
        argv = ["--d", "10000", *argv]
    memory_report(int(argv[argv.index("--d") + 1]))
    exact = "--no-exact" not in argv
    profile = "--no-profile" not in argv
    argv = [a for a in argv if a not in ("--no-exact", "--no-profile")]
    # Level 1 does not depend on d; skip it here (the CPU run has it)
    protocol_main([*argv, "--no-level1"])
    if exact:
        import time

        from bayes_attn.experiments.frozen import run_frozen_protocol

        cfg = ProtocolConfig.quick() if "--quick" in argv else ProtocolConfig.paper()
        t0 = time.perf_counter()
        ds, seconds = run_frozen_protocol(cfg, d_model=10_000)
        print(
            f"exact path, d_model = 10000: {len(cfg.activations)} x {len(cfg.Ps)} P x "
            f"{cfg.members} members, MAPs {seconds['map']:.0f} s, all "
            f"{time.perf_counter() - t0:.0f} s"
        )
        if "--out" in argv:
            out = argv[argv.index("--out") + 1]
            from bayes_attn.io import write_atomic

            write_atomic(ds, out.removesuffix(".nc") + "_exact_d10000.nc")
    if profile:
        profile_run("--quick" in argv)
    if induction:
        induction_run("--quick" in argv)
