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
# # 5. Structured tokens
#
# The paper's copy task draws its tokens i.i.d. uniform, and the reduced theory (Level 2) is derived
# for exactly that law. Real text is neither uniform nor independent. The package's **token
# sources** (`bayes_attn.tokens`) give a task another law: every level that sees the data (Level 1,
# the kernel limit, and Level 0, the network) takes any source; Level 2 refuses all but uniform
# ones. This notebook shows the sources, what Level 2 refuses and why, a Level-1 MAP on Zipf tokens
# against uniform ones, and the scaling of the transition point P*(L, V) of uniform tokens
# (docs/theory.md, "Token sources" and §14).
#
# Run time, measured on 2026-12-06 (executed as a notebook): 96 s wall on the 2-core machine,
# shared with other jobs at a load of about 12 (42 s of CPU). The last cell prints this run's.

# %%
import time
import warnings

import jax
import matplotlib.pyplot as plt
import numpy as np

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets

import bayes_attn as ba
from bayes_attn.theory import phase_boundaries
from bayes_attn.theory.level1 import level1_map
from bayes_attn.theory.saddles import global_saddle
from bayes_attn.theory.scaling import (
    fit_exponents,
    level1_second_order,
    local_exponents,
    log_grid,
    pstar_grid,
    second_order_limits,
)
from bayes_attn.tokens import InContextMarkov, Markov, Uniform, Zipf, parse_tokens

t_start, c_start = time.perf_counter(), time.process_time()
hyper = ba.Hyper.paper()

# %% [markdown]
# ## The token sources
#
# A source is a small frozen dataclass with one method, `sample(key, P, L, V)`; a task holds one
# (`CopyTask(L, V, tokens=...)`) and `task.sample` draws from it. Each has a one-line **spec**,
# `str(source)`, which `parse_tokens` reads back and which the command line takes as
# `--tokens SPEC` (for example `bayes-attn sample --level kernel --tokens zipf:s=1`), the sweep
# configs as `tokens = "..."`, and the result files carry in their attrs:
#
# - `Uniform()`: i.i.d. uniform, the default (bit for bit the draws of every earlier version);
# - `Zipf(s)`: i.i.d. with p_k ∝ (k + 1)^(−s);
# - `Markov(T)` or `Markov.dirichlet(alpha, seed)`: one Markov chain for every sequence, started
#   from its stationary law;
# - `InContextMarkov(alpha)`: each sequence draws its own chain (rows ~ Dirichlet(alpha)), the
#   source of the induction task ([tutorial 6](06_induction_head.py)); `start="uniform"` draws the
#   first token uniformly instead of from the chain's stationary law.
#
# Below, for each at L = 25, V = 5: the token frequencies, how often a token repeats its
# predecessor (1/V = 0.2 for uniform tokens), and the share of a sequence taken by its most
# common token (averaged over sequences).

# %%
L, V = 25, 5
sources = [Uniform(), Zipf(1.0), Markov.dirichlet(0.3, seed=2), InContextMarkov(1.0),
           InContextMarkov(1.0, start="uniform")]  # fmt: skip
freqs = {}
for src in sources:
    assert parse_tokens(str(src)) == src  # the spec reads back
    t = np.asarray(ba.CopyTask(L, V, tokens=src).sample(jax.random.key(0), 2000))
    freqs[str(src)] = np.bincount(t.ravel(), minlength=V) / t.size
    repeat = np.mean(t[:, 1:] == t[:, :-1])
    top = np.mean(np.max(np.apply_along_axis(np.bincount, 1, t, minlength=V), axis=1)) / L
    print(f"{str(src):34s} frequencies {np.round(freqs[str(src)], 3)}  repeats {repeat:.3f}  "
          f"top share {top:.3f}")  # fmt: skip

# %%
fig, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
width = 0.8 / len(freqs)
for i, (spec, f) in enumerate(freqs.items()):
    ax.bar(np.arange(V) + (i - len(freqs) / 2 + 0.5) * width, f, width, label=spec)
ax.axhline(1 / V, color="k", lw=0.8, ls=":")
ax.set(xlabel="token k", ylabel="frequency", xticks=range(V),
       title=f"Token frequencies, 2000 sequences of L = {L}, V = {V}")  # fmt: skip
ax.legend(fontsize=7, ncol=2)
plt.show()

# %% [markdown]
# Zipf tokens repeat as often as two i.i.d. draws coincide (Σ p_k² = 0.28). The in-context
# chains keep uniform frequencies over sequences, while each sequence leans towards its own chain's
# likely tokens (more repeats, a larger top share than uniform tokens). The global chain skews the
# frequencies instead, and repeats rarely: its one matrix (alpha = 0.3, seed 2) happens to have
# small diagonal entries.
#
# ## What Level 2 refuses, and why
#
# The reduced theory replaces the data term's moments, ΦᵀΦ and Φᵀy, by P times their averages over
# datasets of i.i.d. uniform tokens (the matrices U and W of docs/theory.md §4, with entries such
# as L/V and 1/V²), and splits the outputs into modes by the symmetry of permuting token labels.
# Under any other law those averages change (and for a skewed law such as Zipf's the symmetry
# goes too), so every Level-2 computation passes through one gate,
# `tokens.check_uniform` (called by `theory.action.scales`), which raises a `ValueError` naming
# `tokens`. A source whose law happens to be uniform (Zipf with s = 0) passes.

# %%
for task in (ba.CopyTask(L, V, tokens=Zipf(1.0)), ba.CopyTask(L, V, tokens="icl-markov:alpha=1")):
    try:
        phase_boundaries(task, hyper)
    except ValueError as err:
        print("refused:", err)
print("Zipf(0) passes: first-order P* =",
      round(phase_boundaries(ba.CopyTask(L, V, tokens=Zipf(0.0)), hyper).first_order, 2))  # fmt: skip

# %% [markdown]
# The protocol (`bayes-attn train`) still trains networks on such tokens and leaves its Level-2
# columns NaN with a warning; the figures, which draw Level 2, refuse them.
#
# ## Level 1 on Zipf tokens against uniform ones
#
# Level 1 (the kernel limit, the posterior over the bilinear form M of the logits) sees only the
# dataset, so it takes any tokens. At a small size, L = 8, V = 4, linear attention, two readings:
#
# - **where the transition is.** With linear attention M = 0 (no attention) is the minimum of the
#   Level-1 action until the data make it a saddle, at P₁ = σ² / (√(g_W g_O) σ_max(B̄)), B̄ the
#   readout's right-hand side per sequence (`theory.scaling.level1_second_order`; docs/theory.md
#   §14). For uniform tokens P₁ approaches Level 2's second-order point; for other laws Level 2 has
#   no answer and this is the prediction. Three datasets of 400 sequences per source:

# %%
L1, V1 = 8, 4
small = ba.CopyTask(L1, V1)
print(f"Level 2, uniform tokens: second-order P* = {phase_boundaries(small, hyper).second_order:.2f}")
for src in (Uniform(), Zipf(0.5), Zipf(1.0), Zipf(2.0)):
    task = ba.CopyTask(L1, V1, tokens=src)
    P1 = [level1_second_order(task.sample(jax.random.key(s), 400), V1, hyper)["P"] for s in range(3)]
    print(f"Level 1, {str(src):10s}: P1 = {np.mean(P1):6.2f} (datasets: {np.round(P1, 2)})")

# %% [markdown]
# - **what switches on.** The Level-1 MAP (`theory.level1.level1_map`, L-BFGS in the 144
#   entries of M) on the first P sequences of one dataset, projected on the order parameters: ĉ1
#   (uniform pooling, which reads the sequence's token counts) and ĉG (copying the predecessor).
#   The start is a small random M (the default, the uniform task's Level-2 saddle, is M = 0 below
#   the uniform P*, a stationary point that L-BFGS would not leave). Level 2's saddle for uniform
#   tokens is drawn as lines, the Level-1 P₁ of this dataset as dotted verticals. With linear
#   attention the posterior is symmetric under M → −M (the readout flips with it), so each mode
#   is read with the sign that makes ĉ1 ≥ 0.

# %%
Ps = np.array([12, 24, 48, 96, 192])
M0 = 0.01 * np.asarray(jax.random.normal(jax.random.key(3), (L1 + V1, L1 + V1)))
maps, P1s = {}, {}
for src in (Uniform(), Zipf(1.0)):
    task = ba.CopyTask(L1, V1, tokens=src)
    tokens = task.sample(jax.random.key(0), int(Ps[-1]))
    found = [level1_map(task, hyper, tokens[:P], "linear", M0=M0) for P in Ps]
    maps[str(src)] = [np.sign(m.c1 or 1.0) * np.array([m.c1, m.cG]) for m in found]
    P1s[str(src)] = level1_second_order(tokens, V1, hyper)["P"]
    print(f"{str(src):8s}", "  ".join(f"P={P}: c1 {m[0]:.2f} cG {m[1]:.2f}"
                                      for P, m in zip(Ps, maps[str(src)], strict=True)))  # fmt: skip
P_fine = np.geomspace(10, 256, 25)
level2 = np.array([[s.c1, s.cG] for s in (global_saddle(small, hyper, P, "linear") for P in P_fine)])

# %%
fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True, constrained_layout=True)
for ax, k, name in zip(axes, (0, 1), ("ĉ1 (pooling)", "ĉG (copying)"), strict=True):
    ax.plot(P_fine, level2[:, k], "k-", lw=1, label="Level 2, uniform")
    for i, (spec, ms) in enumerate(maps.items()):
        ax.plot(Ps, [m[k] for m in ms], "os"[i] + "--", color=f"C{i}",
                label=f"Level-1 MAP, {spec}")  # fmt: skip
        ax.axvline(P1s[spec], color=f"C{i}", ls=":", lw=1)
    ax.set(xscale="log", xlabel="P (sequences)", title=name, xticks=Ps, xticklabels=Ps)
    ax.minorticks_off()
axes[0].set_ylabel("order parameter")
axes[0].legend(fontsize=8)
plt.show()

# %% [markdown]
# For uniform tokens the Level-1 MAP follows Level 2's saddle, and P₁ lies within 2% of Level
# 2's P* (the dataset's correction, docs/theory.md §14). Zipf tokens move the transition down, to
# about half at s = 1 and a quarter at s = 2: on this dataset the MAP pools already at P = 24,
# where uniform tokens leave M = 0. Pooling switches on first for both laws; copying comes later
# and, at P = 192, is weaker for Zipf tokens (ĉG printed above). Level 2 has no line for Zipf
# tokens: that theory is still to be derived.
#
# ## The scaling of P*(L, V) for uniform tokens
#
# For uniform tokens Level 2 gives the transition points on any (L, V):
# `theory.scaling.pstar_grid` computes them on a grid as an `xarray.Dataset` (NaN where a
# transition does not exist, with the reason counted in the attrs). The linear second-order
# point has a closed form whose limits are derived exactly: P* → σ² V² / (L √(g_O g_W)) for long
# sequences (L ≫ V: exponents (b, c) = (−1, 2), the paper's "P* ∼ V²") and
# P* → σ² √V L^{3/4} / √(g_O g_W (√L + 1)) for large vocabularies (V ≫ L: (½ + 1/(4(√L + 1)), ½)).
# `fit_exponents` fits log P* = a + b log L + c log V over a region of the grid; on a small grid:

# %%
Ls, Vs = log_grid(4, 256, 5, name="L"), log_grid(2, 512, 5, name="V")
grid = pstar_grid(Ls, Vs, "linear")
for region in ("long", "wide"):
    fit = fit_exponents(grid, "second_order", region)
    print(f"{region:4s} ({fit['n']} cells): b = {fit['b'][0]:+.3f} ± {fit['b'][1]:.3f}, "
          f"c = {fit['c'][0]:+.3f} ± {fit['c'][1]:.3f}, rms of log P* {fit['rms']:.3f}")  # fmt: skip
b, c = local_exponents([256.0, 4.0], [2.0, 512.0])
print(f"local exponents (b, c): ({b[0]:+.3f}, {c[0]:+.3f}) at L = 256, V = 2; "
      f"({b[1]:+.3f}, {c[1]:+.3f}) at L = 4, V = 512")  # fmt: skip

# %% [markdown]
# The fitted slopes lie between the local exponents at the edge of each region and the derived
# limits (a fit over a region averages the local exponents; the full 12 × 12 grid and its table
# are in docs/validation.md, "The scaling of P*(L, V)"). The figure draws the grid's P* against V
# at each L, with each limit drawn where its region lies (L ≥ 4V dashed, V ≥ 4L dotted).

# %%
fig, ax = plt.subplots(figsize=(6.5, 4), constrained_layout=True)
for i, Lv in enumerate(Ls):
    ax.plot(Vs, grid.second_order.sel(L=Lv), "o-", color=f"C{i}", ms=4, label=f"L = {Lv}")
    for region, ls, V_line in (("long", "--", np.geomspace(2, Lv / 4, 20)),
                               ("wide", ":", np.geomspace(4 * Lv, Vs[-1], 20))):  # fmt: skip
        if V_line[0] < V_line[-1]:
            ax.plot(V_line, second_order_limits(Lv, V_line, hyper)[region], ls, color=f"C{i}")
ax.set(xscale="log", yscale="log", xlabel="V", ylabel="second-order P*", xticks=Vs,
       xticklabels=Vs)  # fmt: skip
ax.minorticks_off()
ax.set_title("Linear second-order P*(L, V) from Level 2; its limits dashed (L ≥ 4V) and dotted "
             "(V ≥ 4L)", fontsize=9)  # fmt: skip
ax.legend(fontsize=8)
plt.show()

# %%
print(f"run time of this notebook: {time.perf_counter() - t_start:.0f} s wall, "
      f"{time.process_time() - c_start:.0f} s CPU")
