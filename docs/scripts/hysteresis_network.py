"""Numbers in docs/validation.md "Hysteresis loop": warm-started Adam networks at Table 1, softmax,
two members, each training on the first P sequences of one pool, warm-started from the previous P,
up the grid and back down (and, in the ``test`` run, SGLD from each Adam solution at every P).
From the files of ``bayes_attn/configs/hysteresis_network*.toml`` (``test``: width 32,
orthonormal embeddings; ``wide``: the same on a finer, wider grid; ``prior``: width 256, the
embeddings' prior draw):

    bayes-attn sweep --config bayes_attn/configs/hysteresis_network.toml --out out/hysteresis_test.nc
    bayes-attn sweep --config bayes_attn/configs/hysteresis_network_wide.toml --out out/hysteresis_wide.nc
    bayes-attn sweep --config bayes_attn/configs/hysteresis_network_prior.toml --out out/hysteresis_prior.nc
    python docs/scripts/hysteresis_network.py out/hysteresis_test.nc out/hysteresis_wide.nc out/hysteresis_prior.nc
"""

import sys

import numpy as np
from _study import open_study, options

import bayes_attn as ba
from bayes_attn.experiments.hysteresis import jump_points
from bayes_attn.theory.boundaries import phase_boundaries


def loop(path):
    """The file as hysteresis_sweep returns it: dims (direction, P, member)."""
    ds = open_study(path).squeeze(["activation", "P"], drop=True)
    o = options(ds)
    ds = ds.rename(rung="P").assign_coords(direction=["up", "down"], P=sorted(o["Ps"]))
    return ds.drop_vars("done"), o


def main(paths):
    pb = phase_boundaries(ba.CopyTask.paper(), ba.Hyper.paper())
    print(f"Level 2: spinodals {pb.spinodals[0]:.1f}, {pb.spinodals[1]:.1f}; "
          f"P* {pb.first_order:.1f}")  # fmt: skip
    for path in paths:
        ds, o = loop(path)
        Ps, sgld = ds.P.values.tolist(), "sgld_qG" in ds
        print(f"\n{path}: d = {o['d_model']}, {o['embeddings']} embeddings, {o['max_steps']} "
              "steps per P")  # fmt: skip
        for var in ("qG", "sgld_qG") if sgld else ("qG",):
            print(f" {'Adam' if var == 'qG' else 'SGLD (mean over draws)'}:")
            for direction in ("up", "down"):
                q = ds[var].sel(direction=direction)
                for P in Ps:
                    print(f"  {direction:4s} P = {P}: aG = {np.round(q.sel(P=P).values, 3).tolist()}")  # fmt: skip
                # per member: the grid cell of its jump (first change of phase met along the sweep)
                strong = q.values > 0.5 * (float(ds[var].min()) + float(ds[var].max()))
                for m in range(strong.shape[1]):
                    k = np.nonzero(strong[1:, m] != strong[:-1, m])[0]
                    cell = "none" if k.size == 0 else Ps[k[0] if direction == "up" else k[-1] :][:2]
                    print(f"  {direction} jump of member {m}: between P = {cell}")
            print("  jump_points (ensemble median):", jump_points(ds, min_jump=1.0, var=var))
        if sgld:
            print("  SGLD sd of aG over draws, max:", float(ds.sgld_qG_sd.max()))
            print("  max |SGLD mean - Adam| in aG:", float(np.abs(ds.sgld_qG - ds.qG).max()))


if __name__ == "__main__":
    main(sys.argv[1:])
