"""The induction head's closure and symmetry tables (docs/validation.md, "The induction head: the
extended family" and "Is the symmetry breaking spontaneous?"), read from their sweeps.

Only reads and tabulates: every number is computed by the sweep kinds ``induction_closure`` and
``induction_symmetry`` (bayes_attn/configs/induction_{closure,symmetry}.toml).

    bayes-attn sweep --config bayes_attn/configs/induction_maps.toml --out out/induction_maps.nc
    bayes-attn sweep --config bayes_attn/configs/induction_closure.toml --out out/induction_closure.nc
    bayes-attn sweep --config bayes_attn/configs/induction_symmetry.toml --out out/induction_symmetry_sweep.nc
    python docs/scripts/induction_tables.py out/induction_closure.nc out/induction_symmetry_sweep.nc

Each file's table is chosen by the kind of the sweep that wrote it.
"""

from __future__ import annotations

import sys

import numpy as np

from bayes_attn.experiments.results import options
from bayes_attn.experiments.sweep import load_sweep

#: runs closer than this (relative distance of the forms) are one mode
SAME_MODE = 1e-5


def _points(ds):
    """The finished grid points of ``ds``: ``(activation, P, seed, Dataset at the point)``."""
    for act in ds.activation.values:
        for P in ds.P.values:
            for seed in ds.seed.values:
                one = ds.sel(activation=act, P=P, seed=seed).isel(L=0, V=0)
                if bool(one.done):
                    yield str(act), int(P), int(seed), one


def closure(*paths) -> None:
    """The table "Against the MAP": U - U_MAP (nats) of each family and of the token-symmetric
    floor, then the same against the floor, and each point's U_MAP, scores and timings."""
    for path in paths:
        _closure(load_sweep(path))


def _closure(ds) -> None:
    fams = options(ds)["families"]
    print("| activation | P | seed | " + " | ".join(f"`{f}`" for f in fams) + " | `sym` (floor) |")
    print("|---" * (4 + len(fams)) + "|")
    rows = list(_points(ds))
    for act, P, seed, one in rows:
        gaps = one.U_family.values - float(one.U_map)
        floor = float(one.U_sym) - float(one.U_map)
        cells = [f"{g:.2f}" for g in gaps] + ["—" if np.isnan(floor) else f"{floor:.2f}"]
        print(f"| {act} | {P} | {seed} | " + " | ".join(cells) + " |")
    print("\nagainst the floor (U_family - U_sym):")
    for act, P, seed, one in rows:
        rel = one.U_family.values - float(one.U_sym)
        print(
            f"  {act} {P} {seed}: "
            + ", ".join(f"{f} {r:.2f}" for f, r in zip(fams, rel, strict=True))
        )
    print("\neach point:")
    for act, P, seed, one in rows:
        src = "maps file" if float(one.map_from_file) else "recomputed"
        print(f"  {act} {P} {seed}: U_MAP {float(one.U_map):.3f} ({src}); off-symmetric M1 "
              f"{float(one.off_symmetric1):.3f} M2 {float(one.off_symmetric2):.3f}; symmetrised "
              f"MAP {float(one.U_sym_start):.3f}, sym minimum {float(one.U_sym):.3f} "
              f"(|grad| {float(one.sym_grad_norm):.1e}, {float(one.sym_steps):.0f} steps)")  # fmt: skip
        for k, f in enumerate(fams):
            print(f"    {f:10s} {int(one.family_size[k]):4d} coordinates: U {float(one.U_family[k]):.3f}"
                  f"  copy1 {float(one.copy1_family[k]):.3f}  excess "
                  f"{float(one.excess_family[k]):.4f}  ({float(one.family_seconds[k]):.0f} s, "
                  f"{int(one.family_starts[k])} starts)")  # fmt: skip


def _modes(one, idx):
    """The runs ``idx`` grouped into modes (as-is distance < SAME_MODE) and the number of
    relabelling classes among them."""
    groups = []
    for i in idx:
        for g in groups:
            if one.distance.values[i, g[0]] < SAME_MODE:
                g.append(i)
                break
        else:
            groups.append([i])
    classes = []
    for g in groups:
        if not any(one.distance_relabelled.values[g[0], c[0]] < SAME_MODE for c in classes):
            classes.append(g)
    return groups, len(classes)


def symmetry(*paths) -> None:
    """The table of "Is the symmetry breaking spontaneous?": each run's U, off-symmetric shares,
    gradient and distances; the modes found on each dataset; the Hessian's lowest eigenvalues."""
    print("| data | P | P′ | seed | start | U | off-sym. M₁ / M₂ | |grad| | nearest |")
    print("|---|---|---|---|---|---|---|---|---|")
    notes = []
    for path in paths:
        ds = load_sweep(path)
        runs = options(ds)["runs"]
        for _act, P, seed, one in _points(ds):
            for i, r in enumerate(runs):
                data, start = r.split(":")
                d = one.distance.values[i]
                dr = one.distance_relabelled.values[i]
                near = "—"
                if np.isfinite(d).any():
                    j = int(np.nanargmin(dr))
                    near = f"{runs[j].split(':')[1]}: {d[j]:.1e} as is, {dr[j]:.1e} relabelled"
                if np.isfinite(float(one.distance_map[i])):
                    near += f"; study MAP {float(one.distance_map[i]):.1e}"
                print(f"| {data} | {P} | {int(one.P_data[i])} | {seed} | {start} | "
                      f"{float(one.U[i]):.4f} | {float(one.off_symmetric1[i]):.3g} / "
                      f"{float(one.off_symmetric2[i]):.3g} | {float(one.grad_norm[i]):.1e} | "
                      f"{near} |")  # fmt: skip
            for data in ("real", "sym"):
                idx = [i for i, r in enumerate(runs) if r.startswith(data + ":") and
                       not r.endswith(":floor")]  # fmt: skip
                if not idx:
                    continue
                groups, classes = _modes(one, idx)
                U = [float(one.U[g[0]]) for g in groups]
                line = (f"{data} P = {P} seed {seed}: {len(groups)} mode(s) from {len(idx)} "
                        f"starts, {classes} up to relabelling, lowest U {min(U):.4f}")  # fmt: skip
                if f"{data}:floor" in runs:
                    k = runs.index(f"{data}:floor")
                    line += f"; the symmetric floor {float(one.U[k]) - min(U):.2f} nats above"
                if data == "real":
                    line += f"; the study's U {float(one.U_map):.4f}"
                line += f"; max |U(pM) - U(M)| {np.nanmax(one.perm_dU.values[idx]):.1e}"
                notes.append(line)
            if "hessian_low" in one:
                lam = ", ".join(f"{v:.3f}" for v in one.hessian_low.values)
                notes.append(f"P = {P} seed {seed}: Hessian at sym:floor on the asymmetric forms "
                             f"({int(one.asymmetric_dim)} dims): lowest {lam}; largest "
                             f"{float(one.hessian_high):.1f} ({float(one.hessian_seconds):.0f} s)")  # fmt: skip
    print()
    print("\n".join(notes))


def main(paths) -> None:
    """Each file's table, by the kind of its sweep (closure files first)."""
    kinds = {p: load_sweep(p).attrs.get("kind") for p in paths}
    bad = [p for p, k in kinds.items() if k not in TABLES]
    if not paths or bad:
        sys.exit(f"usage: induction_tables.py FILE [FILE ...], each a sweep of {tuple(TABLES)}; "
                 f"not one: {bad}")  # fmt: skip
    for kind, table in TABLES.items():
        mine = [p for p, k in kinds.items() if k == kind]
        if mine:
            table(*mine)
            print()


#: the table of each sweep kind
TABLES = {"induction_closure": closure, "induction_symmetry": symmetry}

if __name__ == "__main__":
    main(sys.argv[1:])
