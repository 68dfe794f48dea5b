"""The structured-token study's files read back, and Level 2 beside them where it holds
(docs/validation.md, "Structured tokens: where P* moves"; ``docs/scripts/tokens_study.py`` prints
and draws them).

:func:`read_tokens` names the sources of a ``tokens`` sweep's file
(:mod:`bayes_attn.experiments.tokens_study`); :func:`level2_uniform` gives Level 2 for uniform
tokens at the file's preset, :func:`level2_pstar` Level 2 per source of a file
(:mod:`bayes_attn.theory.structured`: both transitions and the linear crossover of the i.i.d.
sources, the linear point of the global chains and, with ``softmax_chains``, their softmax point
and linear crossover, :func:`level2_crossover_general`) and :func:`level2_files` the same for a
list of files, each list of sources once. The tables are
:mod:`bayes_attn.analysis.tokens_tables`', the figure :func:`bayes_attn.plotting.plots.tokens_pstar`.
"""

from __future__ import annotations

import numpy as np

from bayes_attn.experiments.results import open_study, options
from bayes_attn.experiments.results import study_preset as preset
from bayes_attn.experiments.tokens_study import STARTS, steepest_slope
from bayes_attn.tokens import Markov, Zipf, parse_tokens

__all__ = [
    "CROSSOVER_MIN_SLOPE",
    "level2_crossover_general",
    "level2_files",
    "level2_pstar",
    "level2_uniform",
    "merge_tokens",
    "read_tokens",
]


#: the steepest d cG / d log P below which a crossover search found no crossover: copying barely
#: grows over the whole pool, so the P of its largest slope is noise. Uniform tokens: 2.9; the
#: chains at alpha >= 0.3: 1.4-3.0; alpha = 0.1, chains 1 and 3: 0.01-0.28 on every dataset
CROSSOVER_MIN_SLOPE = 0.5


def read_tokens(path):
    """The ``tokens`` sweep file at ``path`` with its sources named, the datasets kept as ``seed``.

    Coordinates over ``source`` (the spec): ``family`` and ``x`` (zipf and s, uniform as zipf
    with s = 0, or markov and alpha) and ``chain`` (the chain's seed); attrs ``gram_width``,
    ``aG_split`` and ``measure``. A pstar file gets ``crossover`` (the global MAP's aG at the
    bracket's ends less than 1.0 apart: no jump, one minimum only); a crossover file's P is
    renamed ``pstar``, nan where its steepest slope is below :data:`CROSSOVER_MIN_SLOPE`; a
    competitor file's ``start`` is named by the study's ``STARTS`` (uniform, copy, diagonal)."""
    ds = open_study(path, keep=("seed",))
    o = options(ds)
    fam, x, chain = [], [], []
    for spec in o["sources"]:
        src = parse_tokens(spec)
        if isinstance(src, Markov):
            fam.append("markov"), x.append(src.alpha), chain.append(src.seed)
        else:
            fam.append("zipf"), x.append(src.s if isinstance(src, Zipf) else 0.0), chain.append(0)
    ds = ds.assign_coords(source=o["sources"], family=("source", fam), x=("source", x),
                          chain=("source", chain))  # fmt: skip
    ds.attrs.update(gram_width=o.get("gram_width", 0), aG_split=o.get("aG_split", 2.0))
    if "aG_hi" in ds:
        ds["crossover"] = _one_minimum(ds)
    if "start" in ds.dims:
        ds = ds.assign_coords(start=list(STARTS))
    if "path_cG" in ds:  # the crossover measure: its P drawn and tabulated as a "pstar"
        ds = ds.rename(crossover="pstar")
        ds["pstar"] = ds.pstar.where(ds.slope >= CROSSOVER_MIN_SLOPE)
    ds.attrs["measure"] = o.get("measure", "pstar")
    return ds


def _one_minimum(ds):
    """Where a softmax search met one minimum only: the global MAP's aG at the bracket's ends
    less than 1.0 apart (the 1.0 that splits two minima), so no jump."""
    return (ds.aG_hi - ds.aG_lo) < 1.0


def merge_tokens(files) -> list:
    """The files of :func:`read_tokens` pooled: one dataset per (``measure``, ``gram_width``, the
    sources' families), in
    the order each first comes, holding every source, dataset (``seed``) and activation of its
    files (an outer join; a value present in two files must agree, else ``ValueError``). So
    the chains' softmax points split into a file per α, and datasets 1-2 run into files of their
    own, tabulate and draw as one study."""
    import xarray as xr

    groups: dict = {}
    for ds in files:
        key = (ds.attrs["measure"], ds.attrs["gram_width"], tuple(np.unique(ds.family.values)))
        groups.setdefault(key, []).append(ds)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        parts = [ds.drop_vars([v for v in ("done", "crossover") if v in ds]) for ds in group]
        try:
            ds = xr.merge(parts, compat="no_conflicts", join="outer", combine_attrs="override")
        except xr.MergeError as err:
            raise ValueError(f"files: two files disagree on a value ({err})") from None
        if "aG_hi" in ds:
            ds["crossover"] = _one_minimum(ds)
        out.append(ds)
    return out


def level2_uniform(ds) -> dict:
    """Level 2's P* of both transitions and the linear crossover for uniform tokens at the
    preset of the file ``ds``: ``{"linear", "softmax", "crossover": P}``."""
    from bayes_attn.theory import phase_boundaries

    task, hyper = preset(ds)
    b = phase_boundaries(task.uniform(), hyper)
    return {"linear": b.second_order, "softmax": b.first_order, "crossover": b.crossover}


def level2_crossover_general(task, hyper, P_lo=100.0, P_hi=2000.0, n=21) -> float:
    """Level 2's linear crossover of the token-independent closure (a global chain).

    The minima of :func:`bayes_attn.theory.structured.general_path` on ``n`` geometric P over
    [P_lo, P_hi], then on ``n`` more over the steepest interval widened by one step each side,
    read by :func:`bayes_attn.experiments.tokens_study.steepest_slope` (a parabola through the
    three largest slopes). On uniform tokens it gives 443.11 (the (c1, cG) closure's exact
    442.74); on Zipf s = 1 455.27 (454.80): 0.1% high."""
    from bayes_attn.theory import structured

    Ps = np.geomspace(P_lo, P_hi, n)
    path = structured.general_path(task, hyper, Ps, "linear")
    x = steepest_slope(Ps, path["cG"])
    step = (P_hi / P_lo) ** (1 / (n - 1))
    fine = np.geomspace(x["lo"] / step, x["hi"] * step, n)
    k = int(np.argmin(np.abs(np.log(Ps / fine[0]))))
    path = structured.general_path(task, hyper, fine, "linear", K0=path["K"][k])
    return steepest_slope(fine, path["cG"])["crossover"]


def level2_pstar(ds, softmax_chains: bool = False) -> dict:
    """Level 2 where it holds (:mod:`bayes_attn.theory.structured`) for each source of the file
    ``ds``: ``{(activation, spec): P*}``, the linear crossover under the activation
    ``"crossover"``.

    I.i.d. sources: both transitions and the crossover (the (c1, cG) closure); global chains:
    the linear second-order point of the token-independent closure (``second_order_general``)
    and, with ``softmax_chains``, its equal-action point (``general_first_order`` on P in
    [100, 1000]) and its crossover (:func:`level2_crossover_general`; minutes per chain)."""
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


def level2_files(files, softmax_chains: bool = False) -> dict:
    """:func:`level2_pstar` of each Level-1 file of ``files`` (not a network's, ``gram_width``
    > 0), computed once per list of sources: ``{file index: {(activation, spec): P*}}``."""
    out, done = {}, {}
    for j, ds in enumerate(files):
        key = tuple(ds.source.values)
        if not ds.attrs["gram_width"]:
            out[j] = done[key] = done.get(key) or level2_pstar(ds, softmax_chains)
    return out
