"""Times of the README's Python examples, compilation included (the comments in "A tour of the
Python API"), in the order a reader pastes them, in one process.

Each line prints the wall time and the CPU time of the process (all threads) for one call. The
README quotes the CPU time: it does not depend on what else shares the machine, and on an idle
2-core machine the wall time is at most that (JAX keeps both cores busy for part of it).

Run: ``.venv/bin/python benchmarks/readme_times.py`` (about 20 minutes of CPU). ``--quick`` skips
the two calls of minutes (the d = 10^4 NUTS block and ``start_occupancy``). The last calls also
print the Delta F that the README quotes.
"""

import sys
import time

import jax

import bayes_attn as ba
from bayes_attn import algebra, theory
from bayes_attn.experiments import phase_free_energies, start_occupancy
from bayes_attn.inference import run_nuts, run_sgld, run_smc, train_adam
from bayes_attn.models import init_embeddings, kernel_limit_model, network_model, order_param_model

task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
tokens = task.sample(jax.random.key(0), 400)
small = ba.CopyTask(L=8, V=3)
quick = "--quick" in sys.argv[1:]
out = {}


def timed(name, f):
    t0, c0 = time.perf_counter(), time.process_time()
    out[name] = f()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{name}: wall {wall:.0f} s, CPU {cpu:.0f} s", flush=True)


timed("phase_boundaries + saddles", lambda: (theory.phase_boundaries(task, hyper),
                                             theory.saddles(task, hyper, 270, "softmax")))  # fmt: skip
timed(
    "phase_diagram",
    lambda: theory.phase_diagram(task, hyper, P=[50, 100, 400], activation="linear", L=[10, 25]),
)
timed("level1_map", lambda: theory.level1_map(task, hyper, tokens, "linear"))
timed(
    "run_nuts, reduced, 2000 draws",
    lambda: run_nuts(
        order_param_model,
        model_args=(task, hyper, 300.0, "softmax"),
        num_samples=2000,
        progress_bar=False,
    ),
)
timed(
    "run_nuts, kernel limit, L = 8, V = 3",
    lambda: run_nuts(kernel_limit_model, model_args=(small, hyper, small.sample(jax.random.key(1), 200), 'linear'), num_warmup=300, num_samples=300, progress_bar=False),
)  # fmt: skip
W_emb, p = init_embeddings(jax.random.key(2), task, hyper, 10_000)
g = algebra.embedding_gram(W_emb, p)
timed(
    "level1_map, d = 10^4 Gram", lambda: theory.level1_map(task, hyper, tokens, "softmax", gram=g)
)
if not quick:
    timed(
        "run_nuts, d = 10^4 Gram, metric='laplace'",
        lambda: run_nuts(kernel_limit_model, model_args=(task, hyper, tokens, "softmax"),
                         model_kwargs={"gram": g}, metric="laplace",
                         start={"M": out["level1_map, d = 10^4 Gram"].M}, num_chains=2,
                         num_warmup=150, num_samples=150, progress_bar=False),
    )  # fmt: skip
timed(
    "train_adam, d = 256, 10 members",
    lambda: train_adam(
        task, hyper, "linear", 256, P=400, members=10, lr=1e-2, max_steps=300, progress_bar=False
    ),
)
timed(
    "run_sgld, d = 64",
    lambda: run_sgld(network_model, model_args=(task, hyper, tokens, 'linear', 64), model_kwargs={"batch_size": 100}, step_size=1e-05, num_chains=2, num_samples=500, progress_bar=False),
)  # fmt: skip
timed("modes", lambda: theory.modes(task, hyper, 276.0, "softmax"))
timed(
    "run_smc, reduced",
    lambda: run_smc(order_param_model, model_args=(task, hyper, 276.0, "softmax")),
)
timed(
    "phase_free_energies, reduced",
    lambda: phase_free_energies(task, hyper, 276.0, "reduced", progress=False),
)
ds = out["phase_free_energies, reduced"]
print(
    f"  Delta F = {float(ds.delta_F):.3f} +- {float(ds.delta_F_se):.3f} "
    f"(exact, Level 2: {float(ds.delta_F_level2):.3f})"
)
if not quick:
    small_hyper = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=5.0)
    tok = task.sample(jax.random.key(1), 60)[:42]
    timed(
        "start_occupancy, kernel",
        lambda: start_occupancy(task, small_hyper, tok, "kernel", num_chains=4, num_warmup=100,
                                num_samples=100),
    )  # fmt: skip
