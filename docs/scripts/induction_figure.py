"""Figures for docs/validation.md "The induction head: the study across P": the order parameters of
both layers and the held-out loss of the two-layer kernel limit's MAP against P, softmax and
linear, beside the reference losses (the study file), and both layers' attention patterns at a few
P (the maps file: the same sweep kind with ``store_maps``, which also writes each MAP's forms and
patterns):

    bayes-attn sweep --config bayes_attn/configs/induction_study.toml --out out/induction_study.nc
    bayes-attn sweep --config bayes_attn/configs/induction_maps.toml --out out/induction_maps.nc
    python docs/scripts/induction_figure.py out/induction_study.nc --maps out/induction_maps.nc

Prints the table of seed means and writes docs/figures/induction/order_parameters.png and
docs/figures/induction/patterns.png. With ``--posterior``, ``--sgld``, ``--llc`` and
``--llc_network`` (the files of configs/induction_{posterior,sgld,llc,llc_network}.toml) it also
prints their table and writes docs/figures/induction/beyond_map.png; with ``--profiles FOLDER``
(configs/induction_profile.toml's ``profiles``; again for the one layer's ``profiles_onelayer``)
it prints their table and draws docs/figures/induction/profiles.png (``--split copy1=1.5 --split
induction2=0.43 --split aG=2``: Delta F across those divides). Only reads the files.
Several study files (one config's sweep run per activation, ``--activation softmax`` and
``--activation linear`` with their own ``--out``) are read together: each activation from the
file that has the most of its points done.
"""

from pathlib import Path

from _study import arguments, open_study, save

from bayes_attn.analysis.induction_tables import (
    ACTIVATIONS,
    beyond_map_table,
    fold_linear,
    network_llc,
    profile_table,
    study_table,
)
from bayes_attn.experiments.results import profile_reports
from bayes_attn.io import concat_disjoint
from bayes_attn.plotting.plots import (
    induction_across_P,
    induction_beyond_map,
    induction_patterns,
    induction_profiles,
)


def main():
    ap = arguments(__doc__)
    ap.add_argument("paths", nargs="+", help="the sweep file(s) of configs/induction_study.toml")
    ap.add_argument("--maps", default=None, help="the sweep file of configs/induction_maps.toml")
    for name in ("posterior", "sgld", "llc", "llc_network"):
        ap.add_argument(f"--{name}", help=f"the file of configs/induction_{name}.toml")
    ap.add_argument("--profiles", action="append", default=[], help="a profiles folder (repeat)")
    ap.add_argument("--split", action="append", default=[], help="SITE=Q: Delta F across Q")
    ap.add_argument("--out", default="docs/figures/induction")
    args = ap.parse_args()
    ds = fold_linear(_per_activation([open_study(p, keep=("seed",)) for p in args.paths]))
    mp = fold_linear(open_study(args.maps, keep=("seed",))) if args.maps else None
    print(study_table(ds))
    save(induction_across_P(ds, mp), Path(args.out) / "order_parameters.png", dpi=90)
    if mp is not None:
        save(induction_patterns(mp), Path(args.out) / "patterns.png", dpi=90)
    more = {k: fold_linear(open_study(getattr(args, k))) if getattr(args, k) else None
            for k in ("posterior", "sgld", "llc")}  # fmt: skip
    if args.llc_network:
        more["llc_net"] = network_llc(open_study(args.llc_network))
    if any(v is not None for v in more.values()):
        print(beyond_map_table(**more))
        save(induction_beyond_map(ds, **more), Path(args.out) / "beyond_map.png", dpi=90)
    splits = {k: float(v) for k, v in (a.split("=") for a in args.split)}
    panels = {k: v for f in args.profiles for k, v in profile_reports(f, divides=splits).items()}
    if panels:
        print(profile_table(panels))
        save(induction_profiles(panels), Path(args.out) / "profiles.png", dpi=90)


def _per_activation(files):
    """One dataset over ACTIVATIONS: each activation's slice from the file with most points done
    (an activation in no file: not yet done)."""
    best = {}
    for ds in files:
        for act in ds.activation.values:
            one = ds.sel(activation=[act])
            if act not in best or int(one.done.sum()) > int(best[act].done.sum()):
                best[act] = one
    ds = concat_disjoint(list(best.values()), "activation")
    return ds.reindex(activation=list(ACTIVATIONS), fill_value={"done": False})


if __name__ == "__main__":
    main()
