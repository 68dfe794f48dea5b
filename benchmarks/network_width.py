"""Numbers in docs/validation.md: the network posterior against the kernel limit at three widths.

L = 4, V = 2, P = 20, linear attention, paper scales; NUTS 4 chains x 1000 draws (500 warm-up).
Run: ``.venv/bin/python benchmarks/network_width.py`` (~2 min).
"""

import jax

import bayes_attn as ba
from bayes_attn.analysis import diagnose
from bayes_attn.inference import run_nuts
from bayes_attn.models import kernel_limit_model, network_model

# the scale this measurement (and tests/test_network.py's width test) was designed at, not Table 1
task, hyper = ba.CopyTask(L=4, V=2), ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=131.8)
tok = task.sample(jax.random.key(0), 20)
kw = dict(num_chains=4, num_warmup=500, num_samples=1000, progress_bar=False)
cols = ["mean", "sd", "mcse_mean", "mcse_sd", "r_hat"]
d = diagnose(
    run_nuts(kernel_limit_model, model_args=(task, hyper, tok, "linear"), **kw), ["c1", "cG"]
)
print("kernel limit\n", d.table[cols].round(4))
for width in (2, 8, 32):
    d = diagnose(
        run_nuts(network_model, model_args=(task, hyper, tok, "linear", width), **kw), ["c1", "cG"]
    )
    print(f"d_model = {width}, divergences {d.divergences}\n", d.table[cols].round(4))
