"""Benchmark: an Adam ensemble with its members split over two devices against one device.

Each setting runs in its own subprocess, since the CPU device count
(``XLA_FLAGS=--xla_force_host_platform_device_count``) must be set before JAX is imported. Each
subprocess compiles one training chunk of ``train_adam``
(``bayes_attn.inference.adam._chunk_program``) for the whole ensemble and times it, best of
``--repeat`` calls; the ratio of the two is the speed-up. On the 2-core CPU two devices can give at
most x2, and other processes on the machine make it noisy.

Run: ``.venv/bin/python benchmarks/bench_sharding.py [--d 64] [--P 400] [--members 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def _time_chunk(args) -> dict:
    import time

    import jax

    import bayes_attn as ba
    from bayes_attn.inference.adam import _chunk_program, adam_optimizer
    from bayes_attn.inference.sharding import member_mesh, pad_leading, shard_leading
    from bayes_attn.models.network import init_params

    task, hyper = ba.CopyTask(L=25, V=5), ba.Hyper.paper()
    mesh = member_mesh()
    opt = adam_optimizer(1e-3, patience=10**6)
    prog = _chunk_program(opt, hyper, "softmax", args.P, task.L, None, mesh)
    keys = jax.random.split(jax.random.key(0), args.members)
    params = jax.vmap(lambda k: init_params(k, task, hyper, args.d))(keys)
    state = (params, jax.vmap(opt.init)(params))
    tokens = jax.vmap(lambda k: task.sample(k, args.P))(keys)
    test = task.sample(jax.random.key(1), 100)
    run_keys = jax.random.split(jax.random.key(2), (args.members, args.chunk))
    (params, opt_state, tokens, run_keys), _ = pad_leading((*state, tokens, run_keys), mesh.size)
    params, opt_state, tokens, run_keys = shard_leading((params, opt_state, tokens, run_keys), mesh)
    t0 = time.perf_counter()
    jax.block_until_ready(prog(params, opt_state, run_keys, tokens, {}, test))
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(prog(params, opt_state, run_keys, tokens, {}, test))
        times.append(time.perf_counter() - t0)
    return dict(devices=mesh.size, compile_s=compile_s, best_s=min(times), times=times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=64, help="d_model")
    parser.add_argument("--P", type=int, default=400, help="training sequences per member")
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=50, help="steps per timed chunk")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_time_chunk(args)))
        return None
    results = {}
    for n in (1, 2):
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={n}",
        }
        cmd = [sys.executable, __file__, "--child", *(argv if argv is not None else sys.argv[1:])]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        results[n] = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"train_adam chunk: softmax, L=25, V=5, d_model={args.d}, P={args.P}, "
        f"{args.members} members, {args.chunk} steps, best of {args.repeat}"
    )
    for n, r in results.items():
        print(
            f"  {n} device{'s' if n > 1 else ' '}: {r['best_s'] * 1e3:8.1f} ms per chunk "
            f"({r['best_s'] / args.chunk * 1e3:.2f} ms per step; compile {r['compile_s']:.1f} s)"
        )
    ratio = results[1]["best_s"] / results[2]["best_s"]
    print(f"  speed-up with 2 devices: x{ratio:.2f}")
    return results


if __name__ == "__main__":
    main()
