"""The table of docs/validation.md "The paper protocol at Table 1": per (activation, P) the Adam and
SGLD ensemble means ± sd over the members that pass the loss filter, the Level-2 saddle, the Level-1
MAP on the first member's dataset, and the train losses; from a protocol sweep file (the one
``bayes-attn figures`` writes, ``docs/figures/paper/protocol.nc``).

Run: ``.venv/bin/python docs/scripts/protocol_table.py docs/figures/paper/protocol.nc``
"""

from __future__ import annotations

import argparse

import numpy as np
import xarray as xr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    args = parser.parse_args(argv)
    ds = xr.load_dataset(args.file, engine="h5netcdf")
    ds = ds.isel({d: 0 for d in ("L", "V", "seed") if d in ds.dims})
    print(
        "| act | P | filter | Adam q1 | Adam qG | SGLD q1 | SGLD qG | Level 2 q1, qG | Level 1 q1, qG "
        "| Adam / SGLD / theory loss | SGLD step |"
    )
    print("|---" * 11 + "|")
    for act in ds.activation.values:
        for P in ds.P.values:
            s = ds.sel(activation=act, P=P)
            keep = s.global_min > 0.5

            def ms(v, s=s, keep=keep):
                x = s[v].where(keep)
                return f"{float(x.mean()):.3f} ± {float(x.std()):.3f}"

            step = float(s.sgld_step.mean()) if "sgld_step" in s else np.nan
            print(
                f"| {act} | {P} | {int(keep.sum())}/{s.sizes['member']} | {ms('adam_c1')} "
                f"| {ms('adam_cG')} | {ms('sgld_c1')} | {ms('sgld_cG')} "
                f"| {float(s.theory_c1):.3f}, {float(s.theory_cG):.3f} "
                f"| {float(s.level1_c1):.3f}, {float(s.level1_cG):.3f} "
                f"| {float(s.adam_train_loss.where(keep).mean()):.4f} / "
                f"{float(s.sgld_train_loss.where(keep).mean()):.4f} / {float(s.theory_loss):.4f} "
                f"| {step:.2e} |"
            )


if __name__ == "__main__":
    main()
