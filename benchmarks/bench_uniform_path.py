"""Benchmark: does ``Uniform()`` cost what the path before token sources cost? (issue 42, Performance)

One protocol point (``ProtocolConfig.quick()``, softmax, P = 100 by default: three members of width
32, Adam then SGLD, the Level-2 saddle) is run in a fresh process for each of three trees of this
repository, in turn, ``--rounds`` times:

* **before**: the commit before token sources (``6728b76``, where ``CopyTask.sample`` was
  ``jax.random.randint``);
* **after**: the commit that added them (``98fb303``, ``CopyTask(L, V, tokens=Uniform())``);
* **head**: the working tree.

Each tree is exported with ``git archive`` into a temporary folder and imported from there (the
same virtual environment). Each child times the point alone (after the import; its compiles
included, cold in every process) in wall and CPU (user + system of the process) seconds, and
prints a digest of its numbers. Printed: the least of the rounds per tree, the ratios after /
before and head / before, and whether the digests agree (the draws are the same bit for bit, so
before and after must give the same numbers; head may differ where later changes moved
something else, and says so). Rounds alternate the trees so that a passing load weighs on all.

Run: ``.venv/bin/python benchmarks/bench_uniform_path.py [--P 100] [--activation softmax]
[--rounds 3] [--revs 6728b76 98fb303]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import bayes_attn
from bayes_attn.experiments.protocol import ProtocolConfig, protocol_point
from bayes_attn.task import Hyper
assert bayes_attn.__file__.startswith(sys.argv[1]), bayes_attn.__file__
cfg, act, P = ProtocolConfig.quick(), sys.argv[2], int(sys.argv[3])
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
values, _ = protocol_point(cfg, Hyper.paper(), act, P)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
h = hashlib.sha256()
for k in sorted(values):
    v = np.asarray(values[k])
    if v.dtype.kind in "fiub":
        h.update(k.encode()); h.update(np.round(v.astype(float), 10).tobytes())
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"wall": wall, "cpu": cpu, "digest": h.hexdigest()[:16]}))
"""


def export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (``None``: the working tree itself) as a folder to import from."""
    if rev is None:
        return ROOT
    tar = into / f"{rev}.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), rev, "bayes_attn"],
                   check=True)  # fmt: skip
    folder = into / rev
    with tarfile.open(tar) as t:
        t.extractall(folder, filter="data")
    return folder


def run_child(tree: Path, activation: str, P: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), activation, str(P)],
                         check=True, capture_output=True, text=True, env=env, cwd=tree)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--P", type=int, default=100)
    parser.add_argument("--activation", default="softmax", choices=("linear", "softmax"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--revs", nargs=2, default=["6728b76", "98fb303"],
                        metavar=("BEFORE", "AFTER"))  # fmt: skip
    args = parser.parse_args(argv)
    print(f"load average: {os.getloadavg()[0]:.1f}; protocol point: quick preset, "
          f"{args.activation}, P = {args.P}; {args.rounds} rounds")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": export(args.revs[0], Path(tmp)),
                 "after": export(args.revs[1], Path(tmp)), "head": export(None, Path(tmp))}  # fmt: skip
        runs = {name: [] for name in trees}
        for r in range(args.rounds):
            for name, tree in trees.items():
                runs[name].append(run_child(tree, args.activation, args.P))
                print(f"  round {r + 1} {name:6s} wall {runs[name][-1]['wall']:6.2f} s  "
                      f"CPU {runs[name][-1]['cpu']:6.2f} s", flush=True)  # fmt: skip
    best = {n: {k: min(x[k] for x in v) for k in ("wall", "cpu")} for n, v in runs.items()}
    digest = {n: {x["digest"] for x in v} for n, v in runs.items()}
    for name in trees:
        b = best[name]
        print(f"{name:6s} least wall {b['wall']:6.2f} s, CPU {b['cpu']:6.2f} s, digest "
              f"{', '.join(sorted(digest[name]))}")  # fmt: skip
    for name in ("after", "head"):
        w, c = (best[name][k] / best["before"][k] for k in ("wall", "cpu"))
        same = digest[name] == digest["before"]
        print(f"{name} / before: wall x{w:.3f}, CPU x{c:.3f}; numbers "
              f"{'the same' if same else 'DIFFER'} as before")  # fmt: skip


if __name__ == "__main__":
    main()
