"""Numbers and figure for docs/validation.md "Precursors": the posterior variance of the order
parameter against P, linear (c1, second order at P* = 22.76) against softmax (aG, first order at
275.97), at Table 1.

The reduced (Level-2) posterior at the paper preset: Laplace (inverse Hessian at the global saddle)
and quadrature at chi = 30 and 3000, and NUTS (4 chains x 2000 draws, 500 warm-up, seed 0, chains
started at the saddle) at chi = 30 for a few P. Writes docs/figures/precursors.png.
Run: ``.venv/bin/python docs/scripts/precursors.py`` (~10 min on two CPU cores).
"""

import pathlib

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

import bayes_attn as ba  # noqa: E402
from bayes_attn.experiments.precursors import precursors  # noqa: E402
from bayes_attn.plotting import plots  # noqa: E402
from bayes_attn.theory import phase_boundaries  # noqa: E402

task = ba.CopyTask.paper()
b = phase_boundaries(task, ba.Hyper.paper())
P2, P1 = b.second_order, b.first_order
# Table 1 (sigma^2 = 30): P* = 22.76 (linear), 275.97 (softmax, spinodals 264.97, 296.76)
lin_P = [f * P2 for f in (0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.0)]
lin_P += [f * P2 for f in (1.01, 1.05, 1.2, 1.5, 2.0, 3.0)]
soft_P = [34, 68, 114, 137, 159, 205, 228, 250, 262, 269, 273, 275.4, P1, 276.6, 284.5, 296, 341]
lin_nuts, soft_nuts = [0.5 * P2, 0.9 * P2, 0.99 * P2, P2], [137, 250, 273]
keep = ["var_nuts", "mcse_nuts", "divergences"]

out = {}
for chi in (30.0, 3000.0):
    hyper = ba.Hyper.paper().replace(chi=chi)
    lin = precursors(task, hyper, lin_P, "linear")
    soft = precursors(task, hyper, soft_P, "softmax")
    if chi == 30.0:
        kw = dict(exact=False, nuts=True, num_warmup=500, num_samples=2000, seed=0)
        lin = xr.merge([lin, precursors(task, hyper, lin_nuts, "linear", **kw)[keep]], join="outer")
        soft = xr.merge(
            [soft, precursors(task, hyper, soft_nuts, "softmax", **kw)[keep]], join="outer"
        )
    out[chi] = (lin, soft)

with np.printoptions(precision=5, suppress=False, linewidth=150):
    for chi, (lin, soft) in out.items():
        print(f"\nchi = {chi:g}: linear (c1), P* = {P2:.4f}")
        print(lin.to_dataframe().to_string(float_format=lambda v: f"{v:.5g}"))
        print(f"chi = {chi:g}: softmax (aG), P* = {P1:.3f}, spinodals {b.spinodals}")
        print(soft.to_dataframe().to_string(float_format=lambda v: f"{v:.5g}"))

fig = plots.precursors([out[30.0][0], out[3000.0][0]], [out[30.0][1], out[3000.0][1]], b)
path = pathlib.Path(__file__).resolve().parents[1] / "figures" / "precursors.png"
fig.savefig(path, dpi=100)
print("wrote", path)
