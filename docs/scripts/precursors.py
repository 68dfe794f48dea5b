"""Numbers and figure for docs/validation.md "Precursors": the posterior variance of the order
parameter against P, linear (c1, second order at P* = 100) against softmax (aG, first order at 1212).

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
from bayes_attn.analysis import plots  # noqa: E402
from bayes_attn.analysis.precursors import precursors  # noqa: E402
from bayes_attn.theory import phase_boundaries  # noqa: E402

task = ba.CopyTask.paper()
b = phase_boundaries(task, ba.Hyper.paper())
P2, P1 = b.second_order, b.first_order
lin_P = [10, 20, 30, 50, 70, 80, 90, 95, 98, 99, 99.5, P2, 101, 105, 120, 150, 200, 300]
soft_P = [
    150,
    300,
    500,
    600,
    700,
    900,
    1000,
    1100,
    1150,
    1180,
    1200,
    1210,
    P1,
    1215,
    1250,
    1300,
    1500,
]
lin_nuts, soft_nuts = [50, 90, 99, P2], [600, 1100, 1200]
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
