"""Numbers in docs/validation.md: the kernel-limit posterior at L = 8, V = 3 against the reduced theory.

4 chains x 500 draws (500 warm-up) of ``kernel_limit_model`` on one dataset per P, against the Level-2
saddle and the reduced posterior with its log-determinant. Draws are folded onto c1 >= 0 (Z2).
Run: ``.venv/bin/python benchmarks/kernel_limit_vs_level2.py [P ...]`` (P = 1500 takes ~15 min).
"""

import sys

import jax
import numpy as np

import bayes_attn as ba
from bayes_attn.analysis import diagnose
from bayes_attn.inference import run_nuts
from bayes_attn.models import kernel_limit_model, order_param_model
from bayes_attn.theory import global_saddle, phase_boundaries

# measured at sigma2 = 131.8 (the earlier preset, which puts the linear P* at 100), not Table 1
hyper, task = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=131.8), ba.CopyTask(8, 3)
print("P* =", phase_boundaries(task, hyper).second_order)
for P in [int(a) for a in sys.argv[1:]] or [30, 400, 1500]:
    tok = task.sample(jax.random.key(1), P)
    post = run_nuts(
        kernel_limit_model,
        model_args=(task, hyper, tok, "linear"),
        num_warmup=500,
        num_samples=500,
        progress_bar=False,
    )
    sign = np.sign(post.posterior.c1.values)
    c1, cG = post.posterior.c1.values * sign, post.posterior.cG.values * sign
    red = run_nuts(
        order_param_model,
        model_args=(task, hyper, float(P), "linear"),
        model_kwargs={"include_logdet": True},
        num_warmup=500,
        num_samples=1000,
        progress_bar=False,
    ).posterior
    s2 = np.sign(red.c1.values)
    sd = global_saddle(task, hyper, P, "linear")
    print(
        f"P={P}: saddle ({sd.c1:.4f}, {sd.cG:.4f}) | kernel limit: unfolded mean "
        f"({post.posterior.c1.values.mean():.4f}, {post.posterior.cG.values.mean():.4f}), folded mean "
        f"({c1.mean():.4f}, {cG.mean():.4f}), sd ({c1.std():.4f}, {cG.std():.4f}), token residual "
        f"{post.posterior.token_residual.values.mean():.3f} | reduced with log-det, folded "
        f"({(red.c1.values * s2).mean():.4f}, {(red.cG.values * s2).mean():.4f})"
    )
    print("  ", diagnose(post, var_names=["c1", "cG", "token_residual"]).warnings)
