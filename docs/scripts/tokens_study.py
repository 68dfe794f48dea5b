"""Numbers and the figure of docs/validation.md "Structured tokens: where P* moves", from the files
of the ``tokens`` sweeps (bayes_attn.experiments.tokens_study; it only reads them):

- ``measure = "pstar"`` files (``tokens_zipf.toml``, ``tokens_markov.toml``, and the same with
  ``--option gram_width=10000``): P* per source and dataset, tabulated (mean ± sd over datasets;
  for the chains, over the five chains of each alpha, with their range) beside Level 2 for
  uniform tokens, and drawn as P*(s) and P*(alpha) in ``docs/figures/tokens/pstar_tokens.png``;
- ``measure = "crossover"`` files (``tokens_crossover.toml``): the Level-1 MAP's linear crossover
  (max d cG / d log P) per source and dataset, a column of the same table and open diamonds in
  the figure;
- ``measure = "competitor"`` files (``tokens_competitor.toml``): per P, which start's minimum is
  the global Level-1 MAP (uniform, copy, diagonal), its attention on the previous (copy) and the
  current (token-only) position and its train loss, beside the exact losses of the token-only
  predictor and of the unigram law.

    bayes-attn sweep --config bayes_attn/configs/tokens_zipf.toml --out docs/figures/tokens/tokens_zipf.nc
    bayes-attn sweep --config bayes_attn/configs/tokens_markov.toml --out docs/figures/tokens/tokens_markov.nc
    bayes-attn sweep --config bayes_attn/configs/tokens_competitor.toml --out docs/figures/tokens/tokens_competitor.nc
    python docs/scripts/tokens_study.py docs/figures/tokens/tokens_*.nc --level2 [--figure=PATH]

``--level2`` adds Level 2 where it holds (``bayes_attn.theory.structured``: both transitions and
the linear crossover of the i.i.d. sources, the linear point of the chains; a few minutes),
``--level2-chains`` the chains' softmax point and linear crossover too (minutes per chain).
"""

import sys
from pathlib import Path

import numpy as np
import xarray as xr
from _study import open_study, options, preset, pyplot, save

from bayes_attn.plotting.studies import pstar_per_x, tokens_pstar
from bayes_attn.theory import phase_boundaries
from bayes_attn.tokens import Markov, Zipf, parse_tokens

FIGURE = Path(__file__).parents[1] / "figures" / "tokens" / "pstar_tokens.png"
STARTS = ["uniform", "copy", "diagonal"]  # bayes_attn.experiments.tokens_study.STARTS


def read(path):
    """The file with its sources named (``source``: the spec; ``family``, ``x``: zipf and s, or
    markov and alpha; ``chain``: the chain's seed) and the datasets kept as ``seed``."""
    ds = open_study(path, keep=("seed",))
    specs = options(ds)["sources"]
    fam, x, chain = [], [], []
    for spec in specs:
        src = parse_tokens(spec)
        if isinstance(src, Markov):
            fam.append("markov"), x.append(src.alpha), chain.append(src.seed)
        else:
            fam.append("zipf"), x.append(src.s if isinstance(src, Zipf) else 0.0), chain.append(0)
    ds = ds.assign_coords(source=specs, family=("source", fam), x=("source", x),
                          chain=("source", chain))  # fmt: skip
    ds.attrs.update(gram_width=options(ds).get("gram_width", 0),
                    aG_split=options(ds).get("aG_split", 2.0))  # fmt: skip
    if "aG_hi" in ds:  # the global MAP's aG at the bracket's ends: no jump, one minimum only
        ds["crossover"] = (ds.aG_hi - ds.aG_lo) < 1.0  # (the 1.0 that splits two minima)
    if "start" in ds.dims:
        ds = ds.assign_coords(start=STARTS)
    if "path_cG" in ds:  # the crossover measure: its P drawn and tabulated as a "pstar"
        ds = ds.rename(crossover="pstar")
    ds.attrs["measure"] = options(ds).get("measure", "pstar")
    return ds


def level2_uniform(ds) -> dict:
    """Level 2's P* of both transitions for uniform tokens at the file's preset."""
    task, hyper = preset(ds)
    b = phase_boundaries(task.uniform(), hyper)
    return {"linear": b.second_order, "softmax": b.first_order, "crossover": b.crossover}


def level2_crossover_general(task, hyper, P_lo=100.0, P_hi=2000.0, n=21) -> float:
    """Level 2's linear crossover of the token-independent closure (a global chain): the
    minima of ``structured.general_path`` on n geometric P over [P_lo, P_hi], then on n more over
    the steepest interval widened by one step each side, read by
    :func:`bayes_attn.experiments.tokens_study.steepest_slope` (a parabola through the three
    largest slopes). On uniform tokens it gives 443.11 (the (c1, cG) closure's exact 442.74); on
    Zipf s = 1 455.27 (454.80): 0.1% high."""
    from bayes_attn.experiments.tokens_study import steepest_slope
    from bayes_attn.theory import structured

    Ps = np.geomspace(P_lo, P_hi, n)
    path = structured.general_path(task, hyper, Ps, "linear")
    x = steepest_slope(Ps, path["cG"])
    step = (P_hi / P_lo) ** (1 / (n - 1))
    fine = np.geomspace(x["lo"] / step, x["hi"] * step, n)
    k = int(np.argmin(np.abs(np.log(Ps / fine[0]))))
    path = structured.general_path(task, hyper, fine, "linear", K0=path["K"][k])
    return steepest_slope(fine, path["cG"])["crossover"]


def level2(ds, softmax_chains: bool = False) -> dict:
    """Level 2 where it holds (bayes_attn.theory.structured): ``{(activation, spec): P*}``, the
    linear crossover under the key "crossover". I.i.d. sources: both transitions and the
    crossover (the (c1, cG) closure); global chains: the linear second-order point of the
    token-independent closure (``second_order_general``) and, with ``softmax_chains``, its
    equal-action point (``general_first_order`` on P in [100, 1000]) and its crossover
    (:func:`level2_crossover_general`; minutes per chain)."""
    from bayes_attn.task import CopyTask
    from bayes_attn.theory import structured

    task0, hyper = preset(ds)
    out = {}
    for spec in ds.source.values:
        task = CopyTask(task0.L, task0.V, parse_tokens(str(spec)))
        if isinstance(task.tokens, Markov):
            out["linear", spec] = structured.second_order_general(task, hyper)
            if softmax_chains:
                r = structured.general_first_order(task, hyper, 100.0, 1000.0)
                out["softmax", spec] = r["first_order"]
                out["crossover", spec] = level2_crossover_general(task, hyper)
        else:
            b = structured.phase_boundaries(task, hyper)
            out["linear", spec], out["softmax", spec] = b.second_order, b.first_order
            out["crossover", spec] = b.crossover
    return out


def _level2_cell(l2, ds, act, x) -> str:
    v = np.array([l2.get((act, spec), np.nan) for spec in ds.source.values[ds.x.values == x]])
    v = v[np.isfinite(v)]
    if not v.size:
        return "–"
    return f"{v.mean():.1f}" if v.size == 1 else f"{v.mean():.1f} ({v.min():.1f} – {v.max():.1f})"


def pstar_table(files, l2s=None) -> str:
    ds0 = files[0]
    ref = level2_uniform(ds0)
    lines = [f"Level 2, uniform tokens: linear second-order P* {ref['linear']:.2f}, crossover "
             f"{ref['crossover']:.1f}, softmax equal-action P* {ref['softmax']:.2f}",
             "| source | level | n | linear P* (mean ± sd; range) | linear crossover (mean ± sd; "
             "range) | softmax P* (mean ± sd; range) | Level 2 linear | Level 2 crossover "
             "| Level 2 softmax |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for j, ds in enumerate(files):
        l2 = (l2s or {}).get(j, {})
        width = ds.attrs["gram_width"]
        level = f"network d = {width}" if width else "Level 1"
        fam = str(ds.family.values[0])
        name = "Zipf s" if fam == "zipf" else "chain α"
        cells = {}
        cross = ds.attrs["measure"] == "crossover"
        for act in ("linear", "softmax"):
            if act in ds.activation.values:
                cells["crossover" if cross else act] = {r[0]: r for r in pstar_per_x(ds, act)}
        for x in np.unique(ds.x.values):
            row = [f"{name} = {x:g}", level]
            n = max((c[x][5] for c in cells.values()), default=0)
            row.append(str(n))
            for act in ("linear", "crossover", "softmax"):
                if act not in cells or not np.isfinite(cells[act][x][1]):
                    row.append("–")
                    continue
                _, m, sd, lo, hi, _ = cells[act][x]
                row.append(f"{m:.1f} ± {sd:.1f}; {lo:.1f} – {hi:.1f}")
            row += [_level2_cell(l2, ds, act, x) for act in ("linear", "crossover", "softmax")]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def figure(files, path=FIGURE, l2s=None):
    """:func:`bayes_attn.plotting.studies.tokens_pstar` of the files, written to ``path``."""
    pyplot()
    save(tokens_pstar(files, level2_uniform(files[0]), *preset(files[0]), l2s), path, dpi=130)


def competitor_table(ds) -> str:
    """Per P (finished points): over the chains, how many reach the global Level-1 MAP from each
    start (action within 1e-6 of the lowest), and the global MAP's copy and self weights, train
    loss and aG (mean ± sd); the exact losses of the token-only predictor and of the unigram law
    per chain."""
    lines = ["| chain | token-only loss | unigram loss |", "|---|---|---|"]
    ds = ds.isel(seed=0) if "seed" in ds.dims else ds
    ds = ds.squeeze("activation") if "activation" in ds.dims else ds
    for spec in ds.source.values:
        row = ds.sel(source=spec).isel(P=0)
        lines.append(f"| {spec} | {float(row.loss_token_only):.4f} | "
                     f"{float(row.loss_unigram):.4f} |")  # fmt: skip
    lines += ["", "| P | global MAP reached from (chains) | copy weight | self weight | "
              "train loss | aG |", "|---|---|---|---|---|---|"]  # fmt: skip
    for P in ds.P.values[ds.done.values.astype(bool)]:
        row = ds.sel(P=P)
        best = row.action.fillna(np.inf).argmin("start")
        reach = row.action <= row.action.min("start") + 1e-6
        who = ", ".join(f"{s} {int(reach.sel(start=s).sum())}" for s in STARTS)
        pick = {
            k: row[k].isel(start=best) for k in ("copy_weight", "self_weight", "train_loss", "q")
        }

        def ms(x):
            return f"{float(x.mean()):.3f} ± {float(x.std()):.3f}"

        lines.append(f"| {P} | {who} | {ms(pick['copy_weight'])} | {ms(pick['self_weight'])} | "
                     f"{ms(pick['train_loss'])} | {ms(pick['q'])} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    pstar, other, out, flags = [], [], FIGURE, set()
    for path in sys.argv[1:]:
        if path.startswith("--figure="):  # elsewhere than docs/figures/tokens (the tests)
            out = Path(path.split("=", 1)[1])
            continue
        if path in ("--level2", "--level2-chains"):  # compute Level 2 where it holds (minutes)
            flags.add(path)
            continue
        ds = read(path)
        (pstar if "pstar" in ds else other).append(ds)
    if pstar:
        l2s, done = {}, {}  # done: Level 2 of a list of sources, computed once
        for j, ds in enumerate(pstar):
            key = tuple(ds.source.values)
            if flags and not ds.attrs["gram_width"]:
                l2s[j] = done[key] = done.get(key) or level2(ds, "--level2-chains" in flags)
        print(pstar_table(pstar, l2s))
        figure(pstar, out, l2s)
    for ds in other:
        print(competitor_table(ds))
    if not pstar and not other:
        print(xr.Dataset())
