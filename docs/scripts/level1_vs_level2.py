"""Numbers in docs/validation.md and docs/theory.md: the Level-1 MAP against the Level-2 saddle.

Three sampled datasets per P at the paper preset; L-BFGS on the exact evidence from the minimum-norm
realisation of the saddle. Run: ``.venv/bin/python docs/scripts/level1_vs_level2.py`` (~1 min).
"""

import jax

import bayes_attn as ba
from bayes_attn.theory import global_saddle, level1_map

task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
for activation in ("linear", "softmax"):
    for P in (150, 400, 1600):
        sd = global_saddle(task, hyper, P, activation)
        for seed in range(3):
            m = level1_map(task, hyper, task.sample(jax.random.key(seed), P), activation)
            print(
                f"{activation:8s} P={P:5d} seed={seed} saddle {sd.order_parameters()} | Level-1 MAP "
                f"c1={m.c1:.4f} cG={m.cG:.4f} residual={m.token_residual:.4f} converged={m.converged}"
            )
