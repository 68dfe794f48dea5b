"""Numbers in docs/validation.md "Hysteresis loop": warm-started Adam networks at the paper preset.

Softmax, L = 25, V = 5, d_model = 32, 2 members, Adam lr 1e-2, 300 steps per P (patience off), seed 0;
each member trains on the first P sequences of one pool of 3000, warm-started from the previous P.
* up: ``hysteresis_sweep`` over P = 800 ... 3000 (its down leg follows from the up leg's endpoint);
* down A: a fresh strong-copy solution at P = 3000 (600 steps), then 2000, 1500, 1300, 1200, 1100, 1000;
* down B: the same start, then 1000, 600, 300, 150, 50.
Run: ``.venv/bin/python docs/scripts/hysteresis_network.py`` (~45 min on two CPU cores).
"""

import jax

import bayes_attn as ba
from bayes_attn.analysis.hysteresis import hysteresis_sweep, jump_points
from bayes_attn.inference.adam import train_adam

task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
NET = dict(members=2, seed=0, lr=1e-2, patience=10**6)
Ps = [800, 1000, 1100, 1200, 1300, 1500, 2000, 3000]

ds = hysteresis_sweep(task, hyper, Ps, "softmax", 32, max_steps=300, **NET)
print("up sweep aG:", ds.qG.sel(direction="up").values.round(4).tolist())
print("train loss:", ds.train_loss.sel(direction="up").values.round(4).tolist())
print("jump points:", jump_points(ds))

pool = jax.vmap(lambda k: task.sample(k, 3000))(jax.random.split(jax.random.key(0), 2))
for name, path in (
    ("A", [3000, 2000, 1500, 1300, 1200, 1100, 1000]),
    ("B", [3000, 1000, 600, 300, 150, 50]),
):
    init = None
    for j, P in enumerate(path):
        run = train_adam(
            task,
            hyper,
            "softmax",
            32,
            P,
            tokens=pool[:, :P],
            init=init,
            return_params=True,
            progress_bar=False,
            max_steps=600 if j == 0 else 300,
            **NET,
        )
        init = {n: run[n].values for n in ("W_emb", "p", "W_G", "W_O")}
        last = run.isel(step=-1)
        print(
            f"down {name}: P = {P}: aG = {last.aG.values.round(3)}, loss {last.train_loss.values}"
        )
