"""Benchmark: ``Uniform()``'s draw (``jax.random.randint``) split over the CPU's cores as devices.

With ``jax_threefry_partitionable`` (JAX's default since 0.5) a draw whose output is sharded over
devices gives the same bits as the unsharded one. For each device count (1, then 2: each in a
fresh process, since ``XLA_FLAGS=--xla_force_host_platform_device_count`` must be set before JAX is
imported) this checks that the sharded draw of 10^6 x 128 tokens at V = 5 is bit-identical to the
plain one, and prints the least wall time of 4 calls of each after compiling, in turn within the
same process (the baseline is the plain call of that run). Issue 42's goal is 1 s.

Run: ``.venv/bin/python benchmarks/bench_tokens_sharded.py [--P 1000000] [--L 128] [--V 5]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def _run(P: int, L: int, V: int) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as Spec

    def draw(k):
        return jax.random.randint(k, (P, L), 0, V, dtype=jnp.int32)

    mesh = Mesh(np.array(jax.devices()), ("p",))
    plain = jax.jit(draw)
    sharded = jax.jit(draw, out_shardings=NamedSharding(mesh, Spec("p", None)))
    key = jax.random.key(0)
    same = bool((np.asarray(plain(key)) == np.asarray(sharded(key))).all())
    times = {"plain": [], "sharded": []}
    for r in range(4):
        k = jax.random.fold_in(key, r + 1)
        for name, f in (("plain", plain), ("sharded", sharded)):
            t0 = time.perf_counter()
            jax.block_until_ready(f(k))
            times[name].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    print(f"devices {len(jax.devices())}: bit-identical {same}; plain {best['plain']:.3f} s, "
          f"sharded {best['sharded']:.3f} s (x{best['sharded'] / best['plain']:.2f}); "
          f"goal 1 s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, default=10**6)
    ap.add_argument("--L", type=int, default=128)
    ap.add_argument("--V", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _run(args.P, args.L, args.V)
        return
    print(f"load average {os.getloadavg()[0]:.2f}")
    for n in (1, 2):
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}")
        sizes = [f"--{k}={getattr(args, k)}" for k in "PLV"]
        subprocess.run([sys.executable, __file__, "--child", *sizes], env=env, check=True)


if __name__ == "__main__":
    main()
