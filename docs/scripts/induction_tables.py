"""The induction head's closure and symmetry tables (docs/validation.md, "The induction head: the
extended family" and "Is the symmetry breaking spontaneous?"), read from their sweeps.

Only reads and tabulates: every number is computed by the sweep kinds ``induction_closure`` and
``induction_symmetry`` (bayes_attn/configs/induction_{closure,symmetry}.toml).

    bayes-attn sweep --config bayes_attn/configs/induction_maps.toml --out out/induction_maps.nc
    bayes-attn sweep --config bayes_attn/configs/induction_closure.toml --out out/induction_closure.nc
    bayes-attn sweep --config bayes_attn/configs/induction_symmetry.toml --out out/induction_symmetry_sweep.nc
    python docs/scripts/induction_tables.py out/induction_closure.nc out/induction_symmetry_sweep.nc

Each file's table is chosen by the kind of the sweep that wrote it (closure files first).
"""

import sys

from bayes_attn.analysis.induction_tables import closure_table, symmetry_table
from bayes_attn.experiments.results import options
from bayes_attn.experiments.sweep import load_sweep

#: the table of each sweep kind, and the option that names its axis
TABLES = {"induction_closure": (closure_table, "family", "families"),
          "induction_symmetry": (symmetry_table, "run", "runs")}  # fmt: skip

if __name__ == "__main__":
    files = {p: load_sweep(p) for p in sys.argv[1:]}
    bad = [p for p, ds in files.items() if ds.attrs.get("kind") not in TABLES]
    if not files or bad:
        sys.exit(f"usage: induction_tables.py FILE [FILE ...], each a sweep of {tuple(TABLES)}; "
                 f"not one: {bad}")  # fmt: skip
    for kind, (table, dim, option) in TABLES.items():
        mine = [ds.assign_coords({dim: options(ds)[option]}) for ds in files.values()
                if ds.attrs.get("kind") == kind]  # fmt: skip
        if mine:
            print(table(*mine), end="\n\n")
