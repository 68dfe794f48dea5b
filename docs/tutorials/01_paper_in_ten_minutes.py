# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. The paper in ten minutes
#
# One attention layer is trained, in the Bayesian sense, on the **copy task**: predict the previous
# token of a sequence of L i.i.d. tokens from a vocabulary of V. The paper (Lavie et al.,
# arXiv:2606.12058) reduces the posterior over the layer's weights to two **order parameters**:
# how much each query pools uniformly over all keys (ĉ1, or â1 for softmax) and how much it puts
# on its predecessor, the copy entry (ĉG, or âG). As the number of training sequences P grows,
# the layer goes through **phase transitions**: linear attention switches on continuously (a
# second-order transition, then a crossover to copying), softmax attention jumps from weak to strong
# copying (first order).
#
# This notebook reads the theory at the paper's Table 1 (L = 25, V = 5, χ = 30, σ² = 30): the phase
# boundaries, the attention patterns of Fig. 1 and the phase diagram. Everything here is the
# reduced theory ("Level 2": the posterior over the two order parameters, exact as χ → ∞), so it
# runs in about a minute.
#
# Run time, measured at a docs build on 2026-12-06: 182 s wall on the 2-core build machine,
# shared with other jobs (39 s of CPU); the last cell prints this run's.

# %%
import subprocess
import sys
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets

import bayes_attn as ba
from bayes_attn import algebra, theory
from bayes_attn.plotting import plots

t_start, c_start = time.perf_counter(), time.process_time()
task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
print(task, hyper)

# %% [markdown]
# ## The phase boundaries
#
# `bayes-attn theory` prints the boundaries and the global saddle point (the most probable order
# parameters) at the paper's training-set sizes. Here at four of them:

# %%
cli = Path(sys.executable).with_name("bayes-attn")
print(subprocess.run([str(cli), "theory", "--P", "20,100,300,800", "-q"],
                     capture_output=True, text=True, check=True).stdout)  # fmt: skip

# %% [markdown]
# The same numbers from Python. A **spinodal** is where a local minimum of the action appears or
# disappears: between the two spinodals both softmax phases exist, and at the first-order P* they
# have equal action.

# %%
b = theory.phase_boundaries(task, hyper)
print(f"linear second-order P*  {b.second_order:8.2f}")
print(f"linear crossover        {b.crossover:8.2f}")
print(f"softmax first-order P*  {b.first_order:8.2f}")
print(f"softmax spinodals       {b.spinodals[0]:8.2f} {b.spinodals[1]:8.2f}")
for s in theory.saddles(task, hyper, 280, "softmax"):  # every local minimum, global first
    print(f"P = 280, softmax minimum: aG = {s.aG:.3f}, action/chi = {s.action:.4f}, "
          f"loss/token = {s.loss:.3f}")  # fmt: skip

# %% [markdown]
# ## Fig. 1: the attention patterns of the theory
#
# At each P the global saddle gives the order parameters, and they give the attention matrix:
# linear `A = (ĉ1 J + ĉG G*) / L`, softmax `A = softmax(ĉG G*)` row by row, where J is all ones and
# G* the shift-by-one (copy) pattern.

# %%
Ps = [20, 100, 300, 800]
fig, axes = plt.subplots(2, 4, figsize=(10, 5.2), constrained_layout=True)
for row, act in enumerate(["linear", "softmax"]):
    pats = []
    for P in Ps:
        s = theory.saddles(task, hyper, P, act)[0]
        c1 = s.c1 if act == "linear" else 0.0
        pats.append(np.asarray(algebra.attention(algebra.reduced_logits(c1, s.cG, task.L), act)))
    top = max(np.abs(p).max() for p in pats)
    cmap, lo = ("RdBu_r", -top) if act == "linear" else ("magma", 0.0)
    for ax, P, A in zip(axes[row], Ps, pats, strict=True):
        im = ax.imshow(A, cmap=cmap, vmin=lo, vmax=top)
        ax.set(xticks=[], yticks=[], title=f"{act}, P = {P}")
    fig.colorbar(im, ax=axes[row], shrink=0.8)
plt.show()

# %% [markdown]
# Read against the boundaries above: at P = 20, below the linear P* ≈ 22.8, linear attention is
# zero and softmax pools uniformly. At P = 100 linear attention pools uniformly (ĉ1 > 0, ĉG small).
# At P = 300, past the softmax jump (P* ≈ 276), the softmax copy diagonal appears, and linear
# attention copies too, beside its pooling (ĉG = 0.35, ĉ1 = 0.51); at 800, past the linear
# crossover (P ≈ 443), both patterns are mostly the copy diagonal (linear ĉG = 2.31, ĉ1 = 0.16).
#
# ## The order parameters against P
#
# `theory.phase_diagram` solves the saddle point on a grid of P (and of L or V). The softmax
# curve breaks at the first-order jump.

# %%
grid = np.geomspace(5, 3000, 120)
lin = theory.phase_diagram(task, hyper, grid, "linear", L=[task.L], boundaries=False).sel(L=task.L)
soft = theory.phase_diagram(task, hyper, grid, "softmax", L=[task.L], boundaries=False).sel(L=task.L)
fig = plots.order_parameters(lin, soft, b)
plt.show()
i = int(np.argmax(np.diff(soft.aG.values)))
print(f"largest softmax step on this grid: aG {float(soft.aG[i]):.2f} -> {float(soft.aG[i + 1]):.2f} "
      f"between P = {grid[i]:.0f} and {grid[i + 1]:.0f}")  # fmt: skip

# %% [markdown]
# ## The phase diagram over (P, L)
#
# The softmax loss per token over P and the sequence length L, with the first-order line and the
# spinodals. For short sequences the line ends: at the **critical end point** the weak and strong
# minima merge and the transition becomes continuous.

# %%
Ls = np.arange(10, 41, 3)
Pg = np.geomspace(50, 1500, 60)
pd = theory.phase_diagram(task, hyper, Pg, "softmax", L=Ls)
fig, ax = plt.subplots(figsize=(6.5, 4.2), constrained_layout=True)
mesh = ax.pcolormesh(pd.P, pd.L, pd.loss, shading="auto", cmap="viridis")
fig.colorbar(mesh, ax=ax, label="theory loss per token")
for name, style in [("first_order", "w-"), ("spinodal_lower", "w:"), ("spinodal_upper", "w--")]:
    ax.plot(pd[name], pd.L, style, label=name.replace("_", " "))
ax.set(xscale="log", xlabel="P (training sequences)", ylabel="L (sequence length)")
ax.legend(loc="lower right", fontsize=8)
plt.show()
end = theory.critical_end_point(task, hyper)
print(end)

# %% [markdown]
# The white lines are the first-order P* and the spinodals of each L; where they stop (at short L,
# see the critical end point printed above) the transition is no longer first order. Longer
# sequences need more training sequences before the copy head appears.
#
# Next: [the multimodal softmax posterior](02_multimodal_posterior.py) samples the two phases at
# P*; [theory](../theory.md) derives everything used here.

# %%
print(f"run time of this notebook: {time.perf_counter() - t_start:.0f} s wall, "
      f"{time.process_time() - c_start:.0f} s CPU")
