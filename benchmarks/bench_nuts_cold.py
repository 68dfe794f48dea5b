"""Benchmark: reduced-posterior NUTS from a cold start, compilation included (issue 14, §5).

Each case runs in a fresh Python process (so nothing is compiled yet): ``run_nuts`` on
``order_param_model`` at Table 1, 4 vectorised chains x 2000 draws after 500 warm-up, up to the
``InferenceData``. The issue's goal is at most 10 s per case on the 2-core CPU. The process's
imports are timed apart (they are paid once per session, not per run).

Run: ``.venv/bin/python benchmarks/bench_nuts_cold.py``.
"""

from __future__ import annotations

import subprocess
import sys

CASES = [("linear", 50.0), ("linear", 300.0), ("softmax", 300.0), ("softmax", 2000.0)]

CHILD = """
import time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import bayes_attn as ba
from bayes_attn.inference import run_nuts
from bayes_attn.models import order_param_model
t1 = time.perf_counter()
task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
run_nuts(order_param_model, model_args=(task, hyper, {P}, "{act}"), num_chains=4, num_warmup=500,
         num_samples=2000, seed=0, progress_bar=False)
print(f"{{t1 - t0:.2f}} {{time.perf_counter() - t1:.2f}}")
"""


def main():
    print("reduced NUTS, 4 chains x 2000 draws after 500 warm-up, Table 1, fresh process per case")
    for act, P in CASES:
        out = subprocess.run([sys.executable, "-c", CHILD.format(act=act, P=P)], check=True,
                             capture_output=True, text=True).stdout.split()  # fmt: skip
        imports, run = (float(x) for x in out[-2:])
        print(f"{act:8s} P = {P:7.1f}: {run:5.2f} s cold (compile + sampling + InferenceData), "
              f"imports {imports:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
