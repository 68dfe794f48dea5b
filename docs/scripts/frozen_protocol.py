"""The paper protocol at d = 10^4 (and at the explicit protocol's d = 256) through the frozen-embedding
identity, beside the explicit d = 256 protocol and the Level-2 theory.

    python docs/scripts/frozen_protocol.py [--d 256 10000] [--members 10] [--posterior-draws 40]
        [--posterior-widths 10000] [--explicit docs/figures/paper/protocol.nc]
        [--out docs/figures/paper]

Writes ``exact_dD.nc`` for each width (skipped when it exists and was made with the same settings:
delete it to rerun), with the exact posterior means (NUTS, ``--posterior-draws`` per member) at the
widths in ``--posterior-widths``; prints the table of docs/validation.md ("The protocol at any
width, exactly") and draws ``exact_widths.png``. The members are split over as many forced CPU
devices as there are cores (``XLA_FLAGS``, unless it is set already).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

os.environ.setdefault(
    "XLA_FLAGS", f"--xla_force_host_platform_device_count={min(os.cpu_count() or 1, 8)}"
)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

import bayes_attn as ba  # noqa: E402
from bayes_attn.experiments.frozen import run_frozen_protocol  # noqa: E402
from bayes_attn.experiments.protocol import ProtocolConfig  # noqa: E402
from bayes_attn.io import write_atomic  # noqa: E402


def _filtered(ds, name, mask):
    v = np.where(mask, ds[name].values, np.nan)
    return np.nanmean(v, -1), np.nanstd(v, -1), mask.sum(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[256, 10_000])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--posterior-draws", type=int, default=40)
    ap.add_argument("--posterior-widths", type=int, nargs="*", default=[10_000])
    ap.add_argument("--explicit", default="docs/figures/paper/protocol.nc")
    ap.add_argument("--out", default="docs/figures/paper")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    cfg = ProtocolConfig.paper(members=args.members)
    hyper = ba.Hyper.paper()
    runs = {}
    for d in args.d:
        path = out / f"exact_d{d}.nc"
        draws = args.posterior_draws if d in args.posterior_widths else 0
        if path.exists():
            ds = xr.load_dataset(path)
            if ds.attrs.get("members") == args.members and ds.attrs.get("posterior_draws") == draws:
                print(f"d = {d}: read {path} (MAP {ds.attrs['map_seconds']:.0f} s when made)")
                runs[d] = ds
                continue
        t0 = time.perf_counter()
        ds, sec = run_frozen_protocol(cfg, hyper, d_model=d, posterior_draws=draws)
        wall = time.perf_counter() - t0
        ds.attrs.update(wall_seconds=wall, command="python docs/scripts/frozen_protocol.py")
        write_atomic(ds, path)
        print(
            f"d = {d}: MAP {sec['map']:.0f} s, posterior {sec['posterior']:.0f} s, all {wall:.0f} s"
        )
        runs[d] = ds
    explicit = None
    if pathlib.Path(args.explicit).exists():  # a protocol sweep: its L, V, seed axes have one value
        explicit = xr.load_dataset(args.explicit).squeeze(drop=True)
        explicit.attrs["d_model"] = json.loads(explicit.attrs["config"]).get("d_model", 256)

    header = "| act | P | Level 2 q1, qG |"
    for d in args.d:
        header += f" exact d={d} q1, qG (filter) |"
        if "exact_post_cG" in runs[d]:
            header += f" posterior d={d} q1, qG (ESS) |"
    if explicit is not None:
        header += f" Adam d={explicit.attrs.get('d_model', 256)} q1, qG (filter) |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    ref = runs[args.d[0]]
    for i, act in enumerate(ref.activation.values):
        for j, P in enumerate(ref.P.values):
            row = f"| {act} | {P} | {float(ref.theory_c1[i, j]):.3f}, {float(ref.theory_cG[i, j]):.3f} |"
            for d in args.d:
                ds = runs[d]
                mask = ds.exact_global_min.values[i, j].astype(bool)
                m1, s1, n = _filtered(ds.isel(activation=i, P=j), "exact_c1", mask)
                m2, s2, _ = _filtered(ds.isel(activation=i, P=j), "exact_cG", mask)
                row += f" {m1:.3f}, {m2:.3f} ± {s2:.3f} ({n}) |"
                if "exact_post_cG" in ds:
                    p = ds.isel(activation=i, P=j)
                    m1, _, _ = _filtered(p, "exact_post_c1", mask)
                    m2, s2, _ = _filtered(p, "exact_post_cG", mask)
                    ess = np.nanmin(np.where(mask, p.exact_post_ess.values, np.nan))
                    row += f" {m1:.3f}, {m2:.3f} ± {s2:.3f} (≥{ess:.0f}) |"
            if explicit is not None:
                e = explicit.sel(activation=act, P=P)
                mask = e.global_min.values.astype(bool)
                m1, _, n = _filtered(e, "adam_c1", mask)
                m2, s2, _ = _filtered(e, "adam_cG", mask)
                row += f" {m1:.3f}, {m2:.3f} ± {s2:.3f} ({n}) |"
            print(row)

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), constrained_layout=True, sharex=True)
    for i, act in enumerate(ref.activation.values):
        names = ("ĉ1", "ĉG") if act == "linear" else ("â1", "âG")
        for row, (var, label) in enumerate(zip(("c1", "cG"), names, strict=True)):
            ax = axes[row, i]
            Ps = ref.P.values
            ax.plot(Ps, ref[f"theory_{var}"].values[i], "k-", lw=1.5, label="Level 2 (theory)")
            for d, marker in zip(args.d, ("s", "o", "^", "v"), strict=False):
                ds = runs[d]
                mask = ds.exact_global_min.values[i].astype(bool)
                m, sd, _ = _filtered(ds.isel(activation=i), f"exact_{var}", mask)
                ax.errorbar(Ps, m, sd, marker=marker, ls="none", ms=5, capsize=2, mfc="none",
                            label=f"exact MAP, d = {d} (frozen embeddings)")  # fmt: skip
                if f"exact_post_{var}" in ds:
                    m, sd, _ = _filtered(ds.isel(activation=i), f"exact_post_{var}", mask)
                    ax.errorbar(Ps * 1.04, m, sd, marker=marker, ls="none", ms=4, capsize=2,
                                color="C2", label=f"exact posterior mean, d = {d} (NUTS)")  # fmt: skip
            if explicit is not None:
                e = explicit.isel(activation=i)
                mask = e.global_min.values.astype(bool)
                m, sd, _ = _filtered(e, f"adam_{var}", mask)
                ax.errorbar(Ps, m, sd, marker="x", ls="none", ms=6, capsize=2, color="C3",
                            label=f"Adam, d = {explicit.attrs['d_model']} (explicit)")  # fmt: skip
            ax.set_xscale("log")
            ax.set_ylabel(label)
            if row == 0:
                ax.set_title(f"{act} attention (Table 1, σ² = 30)")
            else:
                ax.set_xlabel("training sequences P")
            if row == 0 and i == 0:
                ax.legend(fontsize=8, title="members past the loss filter: mean ± sd",
                          title_fontsize=8)  # fmt: skip
    fig.savefig(out / "exact_widths.png", dpi=130)
    print(f"wrote {out / 'exact_widths.png'}")


if __name__ == "__main__":
    main()
