"""The text tables of the structured-token study (docs/validation.md, "Structured tokens: where P*
moves"), from the ``tokens`` sweeps' files as
:func:`bayes_attn.experiments.tokens_results.read_tokens` reads them back (the sources named by
``family``, ``x`` and ``chain``): P* per source and dataset beside Level 2 (:func:`pstar_table`,
on :func:`pstar_per_x`) and the in-weights competitor per P (:func:`competitor_table`). Only reads
what it is given; Level 2 comes in computed
(:func:`bayes_attn.experiments.tokens_results.level2_files`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["competitor_table", "pstar_per_x", "pstar_table"]


def pstar_per_x(ds, act):
    """P* of a ``tokens`` sweep per value of its ``x`` coordinate (Zipf s or the chain's α):
    ``(x, mean, sd, min, max, n)`` over datasets and chains, nan where none is finite."""
    p = ds.pstar.sel(activation=act)
    rows = []
    for x in np.unique(ds.x.values):
        v = p.where(ds.x == x, drop=True).values.ravel()
        v = v[np.isfinite(v)]
        if v.size:
            rows.append((x, v.mean(), v.std(ddof=1) if v.size > 1 else 0.0, v.min(), v.max(),
                         v.size))  # fmt: skip
        else:
            rows.append((x, np.nan, np.nan, np.nan, np.nan, 0))
    return rows


def _level2_cell(l2, ds, act, x) -> str:
    v = np.array([l2.get((act, spec), np.nan) for spec in ds.source.values[ds.x.values == x]])
    v = v[np.isfinite(v)]
    if not v.size:
        return "–"
    return f"{v.mean():.1f}" if v.size == 1 else f"{v.mean():.1f} ({v.min():.1f} – {v.max():.1f})"


def _pstar_cells(rows: dict, ds, l2) -> None:
    """One file's cells of :func:`pstar_table` into ``rows``, keyed by (family, x, level): its
    measure's columns per value of ``x``, as "mean ± sd; range (n)", and Level 2's."""
    width = ds.attrs["gram_width"]
    level = (width, f"network d = {width}" if width else "Level 1")
    fam = str(ds.family.values[0])
    cross = ds.attrs["measure"] == "crossover"
    for act in ("linear", "softmax"):
        if act not in ds.activation.values:
            continue
        for x, m, sd, lo, hi, n in pstar_per_x(ds, act):
            row = rows.setdefault((fam != "zipf", x, level), {})
            if np.isfinite(m):
                cell = f"{m:.1f} ± {sd:.1f}; {lo:.1f} – {hi:.1f} ({n})" if n > 1 else f"{m:.1f} (1)"
                row["crossover" if cross else act] = cell
    for x in np.unique(ds.x.values):
        row = rows.setdefault((fam != "zipf", x, level), {})
        for col in ("linear", "crossover", "softmax"):
            cell = _level2_cell(l2, ds, col, x)
            if cell != "–":
                row["level2", col] = cell


def pstar_table(files, reference, level2=None) -> str:
    """P* per source of the ``measure = "pstar"`` and ``"crossover"`` files, as markdown: per
    value of ``x`` (Zipf s, chain α) and level (Level 1, a network's width), the linear
    second-order point, the linear crossover and the softmax point (mean ± sd; range (n) over
    datasets and chains, pooled over the files), beside Level 2 where it holds.

    ``reference``: Level 2's uniform ``linear``, ``crossover`` and ``softmax`` P* (the first
    line); ``level2``: ``{file index: {(activation, source): P*}}`` (the crossover under the
    activation ``"crossover"``), a cell the mean (and range) over a value's chains."""
    lines = [f"Level 2, uniform tokens: linear second-order P* {reference['linear']:.2f}, "
             f"crossover {reference['crossover']:.1f}, softmax equal-action P* "
             f"{reference['softmax']:.2f}",
             "| source | level | linear P* (mean ± sd; range (n)) | linear crossover | softmax P* "
             "| Level 2 linear | Level 2 crossover | Level 2 softmax |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    rows: dict = {}
    for j, ds in enumerate(files):
        _pstar_cells(rows, ds, (level2 or {}).get(j, {}))
    for (chain, x, (_, level)), row in sorted(rows.items(), key=lambda kv: kv[0]):
        cols = [row.get(c, "–") for c in ("linear", "crossover", "softmax")]
        cols += [row.get(("level2", c), "–") for c in ("linear", "crossover", "softmax")]
        lines.append(
            f"| {'chain α' if chain else 'Zipf s'} = {x:g} | {level} | " + " | ".join(cols) + " |"
        )
    return "\n".join(lines)


def _ms(x) -> str:
    return f"{float(x.mean()):.3f} ± {float(x.std()):.3f}"


def competitor_table(ds) -> str:
    """Per P (finished points) of a ``measure = "competitor"`` file: over the chains, how many
    reach the global Level-1 MAP from each start (action within 1e-6 of the lowest), and the
    global MAP's copy and self weights, train loss and aG (mean ± sd); before it the exact losses
    of the token-only predictor and of the unigram law per chain, as markdown."""
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
        who = ", ".join(f"{s} {int(reach.sel(start=s).sum())}" for s in ds.start.values)
        pick = {
            k: row[k].isel(start=best) for k in ("copy_weight", "self_weight", "train_loss", "q")
        }
        lines.append(f"| {P} | {who} | {_ms(pick['copy_weight'])} | {_ms(pick['self_weight'])} | "
                     f"{_ms(pick['train_loss'])} | {_ms(pick['q'])} |")  # fmt: skip
    return "\n".join(lines)
