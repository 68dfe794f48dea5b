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

import argparse
import pathlib

from _study import filtered, open_study, pyplot, setting


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
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), constrained_layout=True, sharex=True)
    ref = next(iter(runs.values()))
    for i, act in enumerate(ref.activation.values):
        names = ("ĉ1", "ĉG") if act == "linear" else ("â1", "âG")
        for row, (var, label) in enumerate(zip(("c1", "cG"), names, strict=True)):
            ax, Ps = axes[row, i], ref.P.values
            ax.plot(Ps, ref[f"theory_{var}"].values[i], "k-", lw=1.5, label="Level 2 (theory)")
            for (d, ds), marker in zip(runs.items(), ("s", "o", "^", "v"), strict=False):
                ds = ds.isel(activation=i)
                keep = ds.exact_global_min > 0.5
                m, sd, _ = filtered(ds, f"exact_{var}", keep)
                ax.errorbar(Ps, m, sd, marker=marker, ls="none", ms=5, capsize=2, mfc="none",
                            label=f"exact MAP, d = {d} (frozen embeddings)")  # fmt: skip
                if f"exact_post_{var}" in ds:
                    m, sd, _ = filtered(ds, f"exact_post_{var}", keep)
                    ax.errorbar(Ps * 1.04, m, sd, marker=marker, ls="none", ms=4, capsize=2,
                                color="C2", label=f"exact posterior mean, d = {d} (NUTS)")  # fmt: skip
            if explicit is not None:
                m, sd, _ = filtered(explicit.isel(activation=i), f"adam_{var}")
                ax.errorbar(Ps, m, sd, marker="x", ls="none", ms=6, capsize=2, color="C3",
                            label=f"Adam, d = {explicit.attrs['d_model']} (explicit)")  # fmt: skip
            ax.set(xscale="log", ylabel=label, **({"title": f"{act} attention (Table 1, σ² = 30)"}
                   if row == 0 else {"xlabel": "training sequences P"}))  # fmt: skip
            if row == 0 and i == 0:
                ax.legend(fontsize=8, title="members past the loss filter: mean ± sd",
                          title_fontsize=8)  # fmt: skip
    fig.savefig(path, dpi=130)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
