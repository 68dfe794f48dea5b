"""Numbers and figure for docs/validation.md "Precursors": the posterior variance of the order
parameter against P, linear (c1, second order at P* = 22.76) against softmax (aG, first order at
275.97), at Table 1: Laplace and quadrature at chi = 30 and 3000, NUTS at chi = 30 at a few P.
From the files of ``bayes_attn/configs/precursors_{linear,softmax}.toml``:

    bayes-attn sweep --config bayes_attn/configs/precursors_linear.toml --out out/precursors_linear.nc
    bayes-attn sweep --config bayes_attn/configs/precursors_softmax.toml --out out/precursors_softmax.nc
    python docs/scripts/precursors.py out/precursors_linear.nc out/precursors_softmax.nc

Prints the tables and writes docs/figures/precursors.png (``--fig``).
"""

import numpy as np
from _study import arguments, open_study, options, pyplot

import bayes_attn as ba
from bayes_attn.plotting import plots
from bayes_attn.theory import phase_boundaries


def per_chi(path):
    """{chi: the file's one activation at that chi, dim P, with chi in its attrs}."""
    ds = open_study(path).squeeze("activation")
    out = {}
    for k, chi in enumerate(options(ds)["chi"]):
        one = ds.isel(chi=k).drop_vars("done", errors="ignore").reset_coords(drop=True)
        one.attrs = {**one.attrs, "chi": float(chi)}
        out[float(chi)] = one
    return out


def main():
    ap = arguments(__doc__)
    ap.add_argument("linear")
    ap.add_argument("softmax")
    ap.add_argument("--fig", default="docs/figures/precursors.png")
    args = ap.parse_args()
    pyplot()  # the Agg backend, before plots draws
    b = phase_boundaries(ba.CopyTask.paper(), ba.Hyper.paper())
    lin, soft = per_chi(args.linear), per_chi(args.softmax)
    with np.printoptions(precision=5, suppress=False, linewidth=150):
        for chi in lin:
            print(f"\nchi = {chi:g}: linear (c1), P* = {b.second_order:.4f}")
            print(lin[chi].to_dataframe().to_string(float_format=lambda v: f"{v:.5g}"))
            print(f"chi = {chi:g}: softmax (aG), P* = {b.first_order:.3f}, spinodals {b.spinodals}")
            print(soft[chi].to_dataframe().to_string(float_format=lambda v: f"{v:.5g}"))
    fig = plots.precursors(list(lin.values()), list(soft.values()), b)
    fig.savefig(args.fig, dpi=100)
    print("wrote", args.fig)


if __name__ == "__main__":
    main()
