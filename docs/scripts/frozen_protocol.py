"""The table and figure of docs/validation.md "The protocol at any width, exactly": the paper's
protocol through the frozen-embedding identity at each width, beside the explicit d = 256 protocol
and the Level-2 theory, from the files of ``bayes_attn/configs/frozen_protocol.toml``:

    bayes-attn sweep --config bayes_attn/configs/frozen_protocol.toml --out docs/figures/paper/exact_d10000.nc
    bayes-attn sweep --config bayes_attn/configs/frozen_protocol.toml --option d_model=256 \
        --option posterior_draws=0 --out docs/figures/paper/exact_d256.nc
    python docs/scripts/frozen_protocol.py docs/figures/paper/exact_d256.nc \
        docs/figures/paper/exact_d10000.nc [--explicit docs/figures/paper/protocol.nc] [--out docs/figures/paper]

Prints the table and draws ``exact_widths.png``.
"""

import pathlib

from _study import arguments, filtered, open_study, pyplot, setting

from bayes_attn.plotting.studies import frozen_protocol


def _cell(ds, var, keep, extra=None):
    """``q1, qG ± sd (n)`` of the members that pass the filter (``extra``: instead of n)."""
    (m1, _, n), (m2, s2, _) = (filtered(ds, f"{var}_{q}", keep) for q in ("c1", "cG"))
    return f" {float(m1):.3f}, {float(m2):.3f} ± {float(s2):.3f} ({extra or int(n)}) |"


def table(runs, explicit):
    header = "| act | P | Level 2 q1, qG |"
    for d, ds in runs.items():
        header += f" exact d={d} q1, qG (filter) |"
        if "exact_post_cG" in ds:
            header += f" posterior d={d} q1, qG (ESS) |"
    if explicit is not None:
        header += f" Adam d={explicit.attrs['d_model']} q1, qG (filter) |"
    print(header + "\n|" + "---|" * (header.count("|") - 1))
    ref = next(iter(runs.values()))
    for act in ref.activation.values:
        for P in ref.P.values:
            t = ref.sel(activation=act, P=P)
            row = f"| {act} | {P} | {float(t.theory_c1):.3f}, {float(t.theory_cG):.3f} |"
            for ds in runs.values():
                p = ds.sel(activation=act, P=P)
                keep = p.exact_global_min > 0.5
                row += _cell(p, "exact", keep)
                if "exact_post_cG" in p:
                    ess = float(p.exact_post_ess.where(keep).min())
                    row += _cell(p, "exact_post", keep, f"≥{ess:.0f}")
            if explicit is not None:
                row += _cell(explicit.sel(activation=act, P=P), "adam", None)
            print(row)


def figure(runs, explicit, path):
    pyplot()
    frozen_protocol(runs, explicit).savefig(path, dpi=130)
    print(f"wrote {path}")


def main():
    ap = arguments(__doc__)
    ap.add_argument("files", nargs="+", help="the frozen sweeps' files, one per width")
    ap.add_argument("--explicit", default="docs/figures/paper/protocol.nc")
    ap.add_argument("--out", default="docs/figures/paper")
    args = ap.parse_args()
    runs = {int(setting(ds, "d_model")): ds for ds in map(open_study, args.files)}
    explicit = None
    if pathlib.Path(args.explicit).exists():  # a protocol sweep: its L, V, seed axes have one value
        explicit = open_study(args.explicit)
        explicit.attrs["d_model"] = setting(explicit, "d_model", 256)
    runs = dict(sorted(runs.items()))
    table(runs, explicit)
    figure(runs, explicit, pathlib.Path(args.out) / "exact_widths.png")


if __name__ == "__main__":
    main()
