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
# # 3. The free-energy landscape
#
# The free energy of the copy order parameter, F(âG) = −log p(âG | data), shows the two softmax
# phases as two minima and the barrier between them. At **Level 2** (the posterior over the order
# parameters alone) the package knows F exactly, by quadrature. At **Level 1** (the kernel limit
# d → ∞: the posterior over the full bilinear form M of the attention logits, 900 numbers at
# Table 1) it must be sampled. Both are sampled here by **umbrella sampling**: a row of windows,
# each holding âG near its centre with a quadratic bias, combined by MBAR into one profile
# (`inference.run_umbrella`, then `analysis.free_energy_profile`). Quick settings: few draws per window, so the error bars are wide.
#
# Run time, measured on 2026-12-06 (executed as a notebook, with the live Level-1 run below):
# 343 s wall on the 2-core machine, shared with other jobs at a load of 6-12 (187 s of CPU, of
# which about 135 s the Level-1 run). The last cell prints this run's.

# %%
import time
import warnings

import jax
import matplotlib.pyplot as plt
import numpy as np

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets

import bayes_attn as ba
from bayes_attn.analysis import free_energy_profile
from bayes_attn.experiments.coexistence import level_modes, phase_starts
from bayes_attn.experiments.landscape import run_landscape
from bayes_attn.inference import run_umbrella
from bayes_attn.inference.umbrella import CoverageWarning
from bayes_attn.models.levels import model_with_data
from bayes_attn.theory import modes, phase_boundaries, phase_boundary, reduced_profile

t_start, c_start = time.perf_counter(), time.process_time()
warnings.filterwarnings("ignore", category=RuntimeWarning, module="pymbar")  # log(0) in empty bins
task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()

# %% [markdown]
# ## Level 2 at the first-order P*, against the exact profile
#
# At P = 276 (Table 1's equal-action P* is 275.97) the two phases have nearly equal weight. The
# windows start from the weak and the strong mode (`phase_starts`); the divide between the phases
# is the density minimum between them (`phase_boundary`).

# %%
P = 276.0
model, args, kwargs = model_with_data("reduced", task, hyper, P, "softmax")
st = phase_starts(task, hyper, P, "reduced")
umb = run_umbrella(model, "aG", model_args=args, model_kwargs=kwargs,
                   starts=[st["weak"], st["strong"]], num_warmup=200, num_samples=1000,
                   num_chains=2, refine=0, seed=0)  # fmt: skip
cut = phase_boundary(task, hyper, P)
prof = free_energy_profile(umb, divide=cut)
exact_dF = float(modes(task, hyper, P, "softmax").delta_F)
print(f"{umb.posterior.sizes['window']} windows; minima at aG = {np.round(prof.q_minimum.values, 3)}")
print(f"delta_F = F_strong - F_weak = {float(prof.delta_F):.3f} ± {float(prof.delta_F_se):.3f} "
      f"(exact, quadrature: {exact_dF:.3f}; "
      f"{(float(prof.delta_F) - exact_dF) / float(prof.delta_F_se):+.1f} standard errors)")  # fmt: skip
print(f"barrier at aG = {float(prof.q_barrier):.3f}, {float(prof.barrier_below):.1f} nats above "
      f"the weak minimum")  # fmt: skip


# %%
def plot_profile(ax, prof, exact, title):
    q, F, se = prof.q.values, prof.F.values, prof.F_se.values
    ok = np.isfinite(F)
    shift = np.nanmin(F[ok])
    ax.errorbar(q[ok], F[ok] - shift, 2 * se[ok], fmt="o", ms=3, label="umbrella + MBAR (2 se)")
    ex = exact(q[ok])
    ax.plot(q[ok], ex - np.min(ex), "k-", lw=1, label="Level 2, exact")
    ax.axvline(float(prof.divide), color="grey", ls=":", label="divide")
    ax.set(xlabel="aG", ylabel="F - min F (nats)", title=title)
    ax.legend(fontsize=8)


fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
plot_profile(ax, prof, lambda q: reduced_profile(task, hyper, P, "softmax", q), f"Level 2, P = {P:g}")
plt.show()

# %% [markdown]
# Read ΔF against the quadrature, in standard errors, and the profile against the exact line. The
# error bars are MBAR's, from each window's draws thinned by their autocorrelation time; with 1000
# draws per chain a window they are rough (pymbar warns that the autocorrelation time may be
# underestimated), and the tests run the same check with 4000.
#
# ## Level 1 on one dataset, against Level 2
#
# At Table 1 a Level-1 profile takes minutes per window on 2 cores. A smaller noise level,
# σ² = 5, moves the Level-2 transition down to P* ≈ 46, where Level 1 is affordable: on one
# dataset of P = 42 sequences (the nested dataset of the [validation](../validation.md) page) the
# full posterior has a strong-copy mode beside the weak one. `experiments.run_landscape` plans the
# windows from the two Level-1 modes that the mode finder reaches from a uniform and a copy start,
# and `level_modes` gives that level's own divide, the highest point of the potential between
# them. Level 1 carries the log-determinant of the integrated readout, so its Level-2 reference
# does too.
#
# The run below is Level 1 at quick settings: 12 windows placed by hand on aG 0.1-2.0 (`centres`,
# with a bias `kappa` = 80 strong enough to hold each window against the steep rise of F past the
# weak minimum; beyond aG ≈ 2 the full posterior holds no mass that matters, e^-50 below the
# minimum), one chain of 50 warm-up steps and 100 draws each, no refinement. The umbrella sees
# that these windows stop short of the potential's strong mode and says so (a `CoverageWarning`,
# printed below); here that is by design, since F there is far above the divide. The
# landscape's own defaults at Level 1 (`UmbrellaSettings.for_level("kernel")`: up to 32 windows
# over both modes, 250 draws, a refinement round; `docs/scripts/landscape.py small`) take about
# four times as long.

# %%
small = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=5.0)
tokens = task.sample(jax.random.key(1), 60)[:42]
_, cut1 = level_modes(task, small, tokens, "kernel")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", CoverageWarning)
    umb1 = run_landscape(task, small, 42, "kernel", tokens=tokens,
                         centres=np.linspace(0.1, 2.0, 12), kappa=80.0, num_warmup=50,
                         num_samples=100, refine=0, seed=0, progress=False)  # fmt: skip
for w in caught:
    if issubclass(w.category, CoverageWarning):
        print("CoverageWarning:", w.message)
prof1 = free_energy_profile(umb1, divide=cut1)
b_small = phase_boundaries(task, small)
print(f"{umb1.posterior.sizes['window']} windows; Level-1 minima of F at aG = "
      f"{np.round(prof1.q_minimum.values, 3)}; divide at aG = {cut1:.3f}")  # fmt: skip
print(f"Level 1: delta_F = {float(prof1.delta_F):.2f} ± {float(prof1.delta_F_se):.2f} nats")
print(f"Level 2, sigma^2 = 5: first-order P* = {b_small.first_order:.2f}, spinodals "
      f"{b_small.spinodals[0]:.2f}, {b_small.spinodals[1]:.2f}")  # fmt: skip

# %%
fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
plot_profile(ax, prof1, lambda q: reduced_profile(task, small, 42, "softmax", q, include_logdet=True),
             "Level 1 (one dataset) and Level 2, σ² = 5, P = 42")  # fmt: skip
plt.show()

# %% [markdown]
# At P = 42 Level 2 is below its lower spinodal (printed above): it has one phase, the weak one,
# and no ΔF. On this dataset the full posterior's F also has one minimum, the weak one, but the
# mass beyond the divide, where the potential has its strong-copy mode, is finite: ΔF printed
# above, against 43.34 ± 0.14 from SMC restricted to each basin (the [validation](../validation.md)
# page, "Level 1 at the small preset against SMC"), at a small fraction of SMC's cost. The strong
# mode of the potential holds no minimum of F here (the run at the landscape's defaults, whose
# windows reach aG = 3.8, finds F still rising there): the entropy of the 900 directions that the
# order parameter leaves out outweighs it. The plot shows the same from the other side: past the
# weak minimum Level 1's F rises more slowly than Level 2's, so the full posterior puts more mass
# at large âG than the reduced theory does.

# %%
print(f"run time of this notebook: {time.perf_counter() - t_start:.0f} s wall, "
      f"{time.process_time() - c_start:.0f} s CPU")
