"""Times of the README's Python examples, compilation included (the comments in "A tour of the
Python API").

Run: ``.venv/bin/python docs/scripts/readme_times.py`` (about 4 minutes on 2 cores). The last
call also prints the Delta F that the README quotes.
"""

import time

import jax

import bayes_attn as ba
from bayes_attn import theory
from bayes_attn.experiments import phase_free_energies
from bayes_attn.inference import run_nuts, run_sgld, run_smc, train_adam
from bayes_attn.models import kernel_limit_model, network_model, order_param_model

task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
tokens = task.sample(jax.random.key(0), 400)
small = ba.CopyTask(L=8, V=3)


def timed(name, f):
    t0 = time.perf_counter()
    f()
    print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)


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
timed(
    "run_smc, reduced",
    lambda: run_smc(order_param_model, model_args=(task, hyper, 276.0, "softmax")),
)
free = {}
timed(
    "phase_free_energies, reduced",
    lambda: free.update(ds=phase_free_energies(task, hyper, 276.0, "reduced", progress=False)),
)
ds = free["ds"]
print(
    f"  Delta F = {float(ds.delta_F):.2f} +- {float(ds.delta_F_se):.2f} "
    f"(exact, Level 2: {float(ds.delta_F_level2):.2f})"
)
