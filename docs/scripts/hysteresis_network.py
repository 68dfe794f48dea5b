"""Numbers in docs/validation.md "Hysteresis loop": warm-started Adam networks at Table 1.

Softmax, L = 25, V = 5, 2 members, Adam lr 1e-2 constant, early stopping off, seed 0, embeddings
frozen (``train_embeddings=False``); each member trains on the first P sequences of one pool of
max(Ps) sequences, warm-started from the previous P (``hysteresis_sweep``), up the grid and back down.

* ``test``: width 32, embeddings at an orthonormal basis (``orthonormal_start``: Gram = identity, so
  the objective is the Level-1 action on the member's data), P = 240 ... 330 in steps of 15, 300
  steps per P, and at every P SGLD from each member's Adam solution (temperature 1, step 5e-4 / d,
  full batch, 100 warm-up steps, mean over 200 draws): the run of
  ``test_network_jumps_lie_between_the_spinodals`` and ``test_sgld_jumps_lie_between_the_spinodals``
  (~6.5 min on two CPU cores);
* ``wide``: the same embeddings and data on P = 230 ... 340 in steps of 10, 400 steps per P;
* ``prior``: width 256, embeddings at their prior draw (random Gram, E g^-1 = d / (d - n - 1) = 1.14),
  P = 240 ... 365, 300 steps per P.

Run: ``.venv/bin/python docs/scripts/hysteresis_network.py [test|wide|prior ...]`` (default: all).
"""

import sys

import numpy as np

import bayes_attn as ba
from bayes_attn.experiments.hysteresis import hysteresis_sweep, jump_points, orthonormal_start
from bayes_attn.theory.boundaries import phase_boundaries

task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
NET = dict(members=2, seed=0, lr=1e-2, patience=10**6, train_embeddings=False, progress=False)
RUNS = {
    "test": (32, "orthonormal", [240, 255, 270, 285, 300, 315, 330], 300),
    "wide": (32, "orthonormal", list(range(230, 341, 10)), 400),
    "prior": (256, "prior", [240, 250, 260, 270, 280, 290, 300, 320, 340, 365], 300),
}
SGLD = {"test": dict(sgld_warmup=100, sgld_steps=200)}  # SGLD from Adam at every P

pb = phase_boundaries(task, hyper)
print(f"Level 2: spinodals {pb.spinodals[0]:.1f}, {pb.spinodals[1]:.1f}; P* {pb.first_order:.1f}")
for name in sys.argv[1:] or list(RUNS):
    d, emb, Ps, steps = RUNS[name]
    init = (
        orthonormal_start(task, hyper, d, NET["members"], NET["seed"]) if emb != "prior" else None
    )
    extra = SGLD.get(name, {})
    ds = hysteresis_sweep(task, hyper, Ps, "softmax", d, init=init, max_steps=steps, **extra, **NET)
    print(f"\n{name}: d = {d}, {emb} embeddings, {steps} steps per P")
    for var in ("qG", "sgld_qG") if extra else ("qG",):
        print(f" {'Adam' if var == 'qG' else 'SGLD (mean over draws)'}:")
        for direction in ("up", "down"):
            q = ds[var].sel(direction=direction)
            for P in ds.P.values:
                print(f"  {direction:4s} P = {P}: aG = {np.round(q.sel(P=P).values, 3).tolist()}")
            # per member: the grid cell of its jump (first change of phase met along the sweep)
            strong = q.values > 0.5 * (float(ds[var].min()) + float(ds[var].max()))
            for m in range(strong.shape[1]):
                k = np.nonzero(strong[1:, m] != strong[:-1, m])[0]
                cell = "none" if k.size == 0 else Ps[k[0] if direction == "up" else k[-1] :][:2]
                print(f"  {direction} jump of member {m}: between P = {cell}")
        print("  jump_points (ensemble median):", jump_points(ds, min_jump=1.0, var=var))
    if extra:
        print("  SGLD sd of aG over draws, max:", float(ds.sgld_qG_sd.max()))
        print("  max |SGLD mean - Adam| in aG:", float(np.abs(ds.sgld_qG - ds.qG).max()))
