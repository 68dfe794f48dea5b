"""Where the copy transition moves with structured tokens (issue 42, part 3): the study at Table 1.

One sweep kind, ``tokens`` (registered in ``KINDS`` of :mod:`bayes_attn.experiments.kinds`;
configs ``bayes_attn/configs/tokens_*.toml``; ``docs/scripts/tokens_study.py`` only reads their
files), with two measures (the option ``measure``):

- ``pstar``: P* of each token source in the option ``sources`` (an extra dim ``source``)
  on the point's dataset (the grid's seed; nested: the first P of ``task.sample(key(seed),
  pool)``). Softmax: the Level-1 MAP's equal-action point, where the minimum reached from the
  copy start and the one reached from the uniform start (M = 0) have equal action
  (:func:`equal_action_point`; the starts of
  :func:`bayes_attn.theory.phase_split.phase_starts`, the maps of
  :func:`bayes_attn.theory.level1.level1_map`: the owners that the ``level1`` kind and
  ``docs/scripts/level1.py`` use for uniform tokens). Linear: the Level-1 second-order point, where
  M = 0 stops being a minimum on the nested dataset (:func:`second_order_point`, on
  :func:`bayes_attn.theory.scaling.level1_second_order`). With ``gram_width`` > 0 the softmax point
  is that of the exact network of that width with frozen embeddings (one prior draw from the
  seed, :func:`bayes_attn.models.levels.seed_embeddings`).
- ``crossover`` (linear only): the Level-1 MAP's crossover, the P of steepest growth of its
  Z2-folded ĉG in log P on the nested datasets (:func:`crossover_point`, the Level-1 reading of
  :func:`bayes_attn.theory.boundaries.crossover`), with the path of ĉG it was read from.
- ``competitor``: the in-weights competitor of copying. At each P, the Level-1 MAP from
  three starts (uniform M = 0, copy, and ``diagonal``: attention on the current token, the route
  of a token-only predictor), with the action, the attention's weight on the previous position
  (copy) and on the current one (token-only), and the train loss; beside them the exact expected
  loss of the best token-only predictor (:func:`token_only_loss`: the reversed chain's prediction
  of the previous token from the current one) and of the unigram law.

A point resumes: in a sweep each source's result is saved as it finishes (:func:`per_source`, in
the point's folder of :func:`bayes_attn.experiments.sweep.point_folder`, under a digest of all
that decides it), and a rerun of the same sweep skips the finished sources.

References
----------
Issue 42 part 3; docs/validation.md, "Structured tokens: where P* moves"; docs/theory.md §1
("Token sources").
"""

from __future__ import annotations

import json
import math
import time

import numpy as np

__all__ = [
    "competitor_point",
    "crossover_measure",
    "crossover_point",
    "equal_action_point",
    "per_source",
    "pstar_point",
    "second_order_point",
    "steepest_slope",
    "token_only_loss",
    "tokens_point",
]

TOKENS_DEFAULTS = dict(
    measure="pstar",  # or "crossover", "competitor"
    sources=["uniform"],
    pool=0,  # pstar: the grid's one P (the nested datasets' pool); competitor: 0 or >= every P
    P0=276,  # where the search starts (Level 2's softmax P* for uniform tokens at Table 1;
    # the crossover measure's configs give 443, Level 2's linear crossover there)
    rtol=0.01,  # the search stops when the bracket is narrower than rtol * P (or 2 sequences)
    max_evals=14,
    aG_split=2.0,  # one minimum only: weak below this aG, strong above
    gram_width=0,  # > 0: the exact network of that width with frozen embeddings (softmax)
    diagonal_logit=6.0,  # competitor: the diagonal start's logit on the current position
)
#: the measures: what a point computes
MEASURES = ("pstar", "crossover", "competitor")

#: the starts of a competitor point
STARTS = ("uniform", "copy", "diagonal")


def _task(L: int, V: int, spec: str):
    from bayes_attn.task import CopyTask
    from bayes_attn.tokens import parse_tokens

    return CopyTask(L, V, parse_tokens(spec))


def _pool(task, seed: int, pool: int):
    import jax

    return np.asarray(task.sample(jax.random.key(int(seed)), int(pool)))


def check_tokens_study(cfg, options: dict) -> dict:
    """The measure is known and the sources parse. pstar and crossover: one P, the pool (``pool``
    0 takes it); rtol in (0, 1); ``gram_width`` with softmax only; crossover with linear only.
    competitor: ``pool`` 0 or >= every P."""
    from bayes_attn.tokens import parse_tokens

    options = dict(options)
    if options["measure"] not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {options['measure']!r}")
    sources = options["sources"]
    if isinstance(sources, str) or not sources:
        raise ValueError(f"sources must be a non-empty list of token specs, got {sources!r}")
    options["sources"] = [str(parse_tokens(s)) for s in sources]
    pool = int(options["pool"])
    if options["measure"] == "competitor":
        if pool and max(cfg.P) > pool:
            raise ValueError(f"pool: P = {max(cfg.P)} exceeds the pool of {pool} sequences")
        return options
    if len(cfg.P) != 1 or (pool and cfg.P[0] != pool):
        raise ValueError(f"P: a pstar sweep has one P, the pool; got P={list(cfg.P)}, pool={pool}")
    options["pool"] = int(cfg.P[0])
    if not 0 < float(options["rtol"]) < 1:
        raise ValueError(f"rtol must be in (0, 1), got {options['rtol']!r}")
    if int(options["gram_width"]) and "linear" in cfg.activation:
        raise ValueError("gram_width: the frozen network's P* is computed for softmax only")
    if options["measure"] == "crossover" and "softmax" in cfg.activation:
        raise ValueError("activation: the crossover measure is linear only (--activation linear)")
    return options


# --------------------------------------------------------------------------------------------------
# softmax: the equal-action point of the Level-1 MAP


def _pair(task, hyper, tokens, gram, aG_split: float) -> dict:
    """The Level-1 (or frozen-network) minima from the uniform and the copy start at P =
    len(tokens), and the signed action gap: > 0 where P* lies above P, < 0 below (infinite where
    one phase only is left)."""
    from bayes_attn import algebra
    from bayes_attn.theory.level1 import level1_map, start_in_span
    from bayes_attn.theory.phase_split import phase_starts

    P = int(tokens.shape[0])
    st = phase_starts(task, hyper, P, "kernel")
    factor = None if gram is None else algebra.gram_factor(gram, task.n_features)
    M0 = {k: start_in_span(np.asarray(st[k]["M"]), factor) for k in ("weak", "strong")}
    w = level1_map(task, hyper, tokens, "softmax", M0=M0["weak"], gram=gram)
    s = level1_map(task, hyper, tokens, "softmax", M0=M0["strong"], gram=gram)
    if abs(s.cG - w.cG) > 1.0:  # two minima (read cG as aG)
        gap = s.action - w.action
    else:
        best = min((w, s), key=lambda m: m.action)
        gap = math.inf if best.cG < aG_split else -math.inf
    best = min((w, s), key=lambda m: m.action)
    return {"P": P, "gap": gap, "aG": best.cG, "aG_weak": w.cG, "aG_strong": s.cG}


def equal_action_point(task, hyper, pool, *, gram=None, P0: int = 276, rtol: float = 0.01,
                       max_evals: int = 14, aG_split: float = 2.0) -> dict:  # fmt: skip
    """The P where the softmax Level-1 minima of the copy and the uniform start have equal action,
    on the nested datasets ``pool[:P]`` (the level1 study's measure, ``docs/scripts/level1.py``).

    Brackets P* by steps of 1.5 from ``P0``, then narrows the bracket (the secant of the action
    gap where both ends have two minima, else bisection) to rtol * P or 2 sequences. Returns
    ``pstar`` (the gap's linear root between the bracket's ends; their midpoint where an end has
    one phase only; nan where P* lies outside [2, len(pool)]), the bracket ``lo``, ``hi``, the
    global MAP's aG at each end and the number of P evaluated.
    """
    pool = np.asarray(pool)
    n = pool.shape[0]
    seen = {}

    def at(P):
        P = int(min(max(P, 2), n))
        if P not in seen:
            seen[P] = _pair(task, hyper, pool[:P], gram, aG_split)
        return seen[P]

    r = at(P0)
    lo = hi = None
    while len(seen) < max_evals:  # bracket
        if r["gap"] > 0:
            lo = r
            if hi is not None or r["P"] >= n:
                break
            r = at(math.ceil(r["P"] * 1.5))
        else:
            hi = r
            if lo is not None or r["P"] <= 2:
                break
            r = at(math.floor(r["P"] / 1.5))
    out = {"pstar": math.nan, "lo": math.nan, "hi": math.nan, "aG_lo": math.nan,
           "aG_hi": math.nan, "evals": len(seen)}  # fmt: skip
    if lo is None or hi is None:
        return out
    while hi["P"] - lo["P"] > max(2, rtol * lo["P"]) and len(seen) < max_evals:
        r = at(_probe(lo, hi))
        if r["gap"] > 0:
            lo = r
        else:
            hi = r
    a, b = lo["P"], hi["P"]
    if math.isfinite(lo["gap"]) and math.isfinite(hi["gap"]):
        pstar = a + (b - a) * lo["gap"] / (lo["gap"] - hi["gap"])
    else:
        pstar = (a + b) / 2
    out.update(pstar=pstar, lo=a, hi=b, aG_lo=lo["aG"], aG_hi=hi["aG"], evals=len(seen))
    return out


def _probe(lo: dict, hi: dict) -> int:
    """The next P to evaluate inside the bracket (lo["P"], hi["P"]), at least 3 apart: the secant
    root of the action gap where both ends have two minima (kept off the ends by an eighth of the
    bracket), else the midpoint; rounded to an integer strictly inside, so that every probe is a
    new P (a rounding back onto an end would evaluate nothing new, for ever)."""
    a, b = lo["P"], hi["P"]
    if math.isfinite(lo["gap"]) and math.isfinite(hi["gap"]):
        P = a + (b - a) * lo["gap"] / (lo["gap"] - hi["gap"])
        P = min(max(P, a + (b - a) / 8), b - (b - a) / 8)  # keep off the ends
    else:
        P = (a + b) / 2
    return min(max(round(P), a + 1), b - 1)


# --------------------------------------------------------------------------------------------------
# linear: the second-order point of the Level-1 action


def second_order_point(tokens_pool, V: int, hyper, *, rtol: float = 0.01) -> dict:
    """The smallest P at which M = 0 stops being a minimum of the linear Level-1 action on the
    nested datasets ``tokens_pool[:P]``: the root of curvature(P) = 1 of
    :func:`bayes_attn.theory.scaling.level1_second_order`, by bisection on P and linear
    interpolation between the last two P. Returns ``pstar``, ``lo``, ``hi`` and ``evals``; nan
    where M = 0 is still a minimum on the whole pool."""
    from bayes_attn.theory.scaling import level1_second_order

    pool = np.asarray(tokens_pool)
    n = pool.shape[0]
    seen = {}

    def curv(P):
        if P not in seen:
            seen[P] = level1_second_order(pool[:P], V, hyper)["curvature"] - 1.0
        return seen[P]

    lo, hi = 1, None
    P = 2
    while P <= n:  # the first P (doubling) at which M = 0 is a saddle
        if curv(P) > 0:
            hi = P
            break
        lo = P
        P = n if P < n < 2 * P else 2 * P
    out = {"pstar": math.nan, "lo": math.nan, "hi": math.nan, "evals": len(seen)}
    if hi is None:
        return out
    while hi - lo > max(1, rtol * lo):
        mid = (lo + hi) // 2
        if curv(mid) > 0:
            hi = mid
        else:
            lo = mid
    c_lo = curv(lo) if lo >= 2 else -1.0
    c_hi = curv(hi)
    out.update(pstar=lo + (hi - lo) * c_lo / (c_lo - c_hi), lo=lo, hi=hi, evals=len(seen))
    return out


# --------------------------------------------------------------------------------------------------
# linear: the crossover of the Level-1 MAP

#: the crossover search's coarse ratio in P, and the fine grid's steps per coarse step
CROSSOVER_RATIO, CROSSOVER_STEPS = 1.5, 4


def steepest_slope(P, q) -> dict:
    """Where ``q`` rises fastest in log P, from its values at the increasing ``P``.

    The slopes (q[i+1] - q[i]) / log(P[i+1] / P[i]) stand at the intervals' log-midpoints; the
    parabola through the largest and its two neighbours puts the maximum at its vertex (at the
    largest slope's midpoint where that is the first or the last, or the parabola is not
    concave). Returns ``crossover``, the interval ``lo``, ``hi`` of the largest slope and
    ``slope`` (the maximum, dq / dlog P).
    """
    P = np.asarray(P, float)
    x, q = np.log(P), np.asarray(q, float)
    s = np.diff(q) / np.diff(x)
    mid = 0.5 * (x[1:] + x[:-1])
    k = int(np.argmax(s))
    out = {"crossover": math.exp(mid[k]), "lo": P[k], "hi": P[k + 1], "slope": s[k]}
    if 0 < k < len(s) - 1:
        a, b, c = np.polyfit(mid[k - 1 : k + 2] - mid[k], s[k - 1 : k + 2], 2)
        if a < 0:
            v = min(max(-b / (2 * a), mid[k - 1] - mid[k]), mid[k + 1] - mid[k])
            out.update(crossover=math.exp(mid[k] + v), slope=(a * v + b) * v + c)
    return out


def _linear_map(task, hyper, tokens, near) -> dict:
    """The global linear Level-1 MAP on ``tokens``: the lower of the minima from the default start
    (the uniform task's Level-2 global saddle at P) and from ``near`` (the M of the nearest P
    done, None at the first); (c1, cG) in the Z2 image c1 + cG >= 0."""
    from bayes_attn import algebra
    from bayes_attn.theory.level1 import level1_map

    starts = [None] if near is None else [None, near]
    best = min((level1_map(task, hyper, tokens, "linear", M0=M0) for M0 in starts),
               key=lambda m: m.action)  # fmt: skip
    sign = float(algebra.z2_sign(best.c1, best.cG))
    return {"cG": sign * best.cG, "c1": sign * best.c1, "M": best.M}


def crossover_point(task, hyper, pool, *, P0: int = 443, max_evals: int = 14) -> dict:
    """The linear crossover of the Level-1 MAP on the nested datasets ``pool[:P]``: the P of the
    largest d ĉG / d log P along the global MAP's path (``_linear_map``, ĉG Z2-folded), the
    definition of :func:`bayes_attn.theory.boundaries.crossover` read on a dataset.

    Coarse: P0 / r, P0, P0 r (r = 1.5), extended by factors r until the largest finite-difference
    slope has a smaller one on each side (or meets the pool's ends). Fine: r^(1/4) steps (10.7%)
    over [p_k / r^(1/2), p_k+1 r^(1/2)] around the coarse interval of the largest slope; the
    crossover is :func:`steepest_slope` of all the P evaluated in that range (a parabola through
    the three largest slopes). Each P's MAP is computed once, warm-started from the nearest P
    done. Returns ``crossover``, the fine interval ``lo``, ``hi`` of the largest slope, ``slope``
    (max d ĉG / d log P), ``evals`` and the path ``path_P``, ``path_cG`` (length ``max_evals``,
    nan-padded); ``crossover`` nan where the largest slope lies at the pool's end.
    """
    pool = np.asarray(pool)
    n, r = pool.shape[0], CROSSOVER_RATIO
    seen: dict[int, dict] = {}

    def at(P):
        P = int(min(max(round(P), 2), n))
        if P not in seen and len(seen) < max_evals:
            near = min(seen, key=lambda p: abs(math.log(p / P)), default=None)
            seen[P] = _linear_map(task, hyper, pool[:P], None if near is None else seen[near]["M"])
        return P

    def largest(grid):
        grid = [p for p in sorted(set(grid)) if p in seen]
        return grid, int(np.argmax(np.diff([seen[p]["cG"] for p in grid]) / np.diff(np.log(grid))))

    grid, k = largest([at(P0 / r), at(P0), at(P0 * r)])
    while len(seen) < max_evals:
        if k == 0 and grid[0] > 2:
            grid, k = largest([at(grid[0] / r), *grid])
        elif k == len(grid) - 2 and grid[-1] < n:
            grid, k = largest([*grid, at(grid[-1] * r)])
        else:
            break
    a, b = grid[k], grid[k + 1]
    for j in range(-CROSSOVER_STEPS // 2, CROSSOVER_STEPS + CROSSOVER_STEPS // 2 + 1):
        at(a * r ** (j / CROSSOVER_STEPS))
    fine = sorted(p for p in seen if a / r**0.5 - 1 <= p <= b * r**0.5 + 1)
    out = steepest_slope(fine, [seen[p]["cG"] for p in fine])
    if (out["lo"] == fine[0] and fine[0] <= 2) or (out["hi"] == fine[-1] and fine[-1] >= n):
        out["crossover"] = math.nan
    path = sorted(seen)
    pad = lambda v: np.pad(np.asarray(v, float), (0, max_evals - len(v)), constant_values=np.nan)  # noqa: E731
    out.update(evals=len(seen), path_P=pad(path), path_cG=pad([seen[p]["cG"] for p in path]))
    return out


# --------------------------------------------------------------------------------------------------
# the kinds' points


_PSTAR_VARS = ("pstar", "lo", "hi", "aG_lo", "aG_hi", "evals")


def tokens_point(cfg, pt, task, hyper):
    """The point of the study's ``measure``: :func:`pstar_point`, :func:`crossover_measure` or
    :func:`competitor_point`."""
    point = {"pstar": pstar_point, "crossover": crossover_measure,
             "competitor": competitor_point}[cfg.options["measure"]]  # fmt: skip
    return point(cfg, pt, task, hyper)


def _source_digest(cfg, pt, spec: str) -> str:
    """A digest of all that decides one source's result at a point: the kind, the point's values,
    the hyperparameters, every option but the list of sources, and the source."""
    from bayes_attn.inference.umbrella_store import fingerprint

    o = {k: v for k, v in cfg.options.items() if k != "sources"}
    plain = lambda x: x.item() if hasattr(x, "item") else str(x)  # noqa: E731
    return fingerprint(json.dumps(
        {"kind": cfg.kind, "point": pt, "hyper": cfg.hyper, "options": o, "source": spec},
        sort_keys=True, default=plain,
    ))  # fmt: skip


def _load_row(path, digest: str) -> dict | None:
    """The result saved at ``path`` by a run with this ``digest``, else None."""
    import xarray as xr

    if not path.exists():
        return None
    try:
        with xr.open_dataset(path, engine="h5netcdf") as f:
            ds = f.load()
    except Exception:  # noqa: BLE001 - an unreadable part is computed again
        return None
    if ds.attrs.get("digest") != digest:
        return None
    return {k: ds[k].values for k in ds.data_vars}


def per_source(cfg, pt, compute) -> list[dict]:
    """``compute(spec)`` (name -> float64 array) of each source in ``cfg.options["sources"]``.

    In a sweep (:func:`bayes_attn.experiments.sweep.point_folder` set) each result is written as it
    finishes (:func:`bayes_attn.io.write_atomic`), one file per source named by the digest of all
    that decides it (``_source_digest``: the point, hyper, options, source), so a rerun of an
    interrupted point reads the finished sources back, bit for bit, and a changed setting never
    reuses one; the sweep removes the folder once the point is stored. One log line per source.
    """
    from bayes_attn.experiments.sweep import point_folder
    from bayes_attn.io import write_atomic
    from bayes_attn.progress import duration, say

    folder, sources = point_folder(), cfg.options["sources"]
    rows = []
    for i, spec in enumerate(sources):
        digest = _source_digest(cfg, pt, spec) if folder is not None else ""
        path = None if folder is None else folder / f"source-{digest[:24]}.nc"
        row = None if path is None else _load_row(path, digest)
        if row is not None:
            say("tokens: source %d of %d (%s) finished before, read from %s", i + 1,
                len(sources), spec, path)  # fmt: skip
        else:
            t0 = time.perf_counter()
            row = {k: np.asarray(v, float) for k, v in compute(spec).items()}
            if path is not None:
                import xarray as xr

                path.parent.mkdir(parents=True, exist_ok=True)
                ds = xr.Dataset({k: (tuple(f"d{j}" for j in range(v.ndim)), v)
                                 for k, v in row.items()}, attrs={"digest": digest})  # fmt: skip
                write_atomic(ds, path)
            say("tokens: source %d of %d (%s) done in %s", i + 1, len(sources), spec,
                duration(time.perf_counter() - t0))  # fmt: skip
        rows.append(row)
    return rows


def pstar_point(cfg, pt, task, hyper):
    """P* of every source on the point's nested datasets: dims ("source",)."""
    o = cfg.options

    def one(spec):
        t = _task(pt["L"], pt["V"], spec)
        pool = _pool(t, pt["seed"], o["pool"])
        if pt["activation"] == "linear":
            row = second_order_point(pool, t.V, hyper, rtol=float(o["rtol"]))
        else:
            gram = None
            if int(o["gram_width"]):
                from bayes_attn import algebra
                from bayes_attn.models.levels import seed_embeddings

                emb = seed_embeddings(t, hyper, int(o["gram_width"]), seed=pt["seed"])
                gram = np.asarray(algebra.embedding_gram(*emb))
            row = equal_action_point(t, hyper, pool, gram=gram, P0=int(o["P0"]),
                                     rtol=float(o["rtol"]), max_evals=int(o["max_evals"]),
                                     aG_split=float(o["aG_split"]))  # fmt: skip
        return {k: row.get(k, math.nan) for k in _PSTAR_VARS}

    rows = per_source(cfg, pt, one)
    return {k: (("source",), np.array([r[k] for r in rows], float)) for k in _PSTAR_VARS}


def crossover_measure(cfg, pt, task, hyper):
    """The Level-1 MAP's linear crossover of every source on the point's nested datasets
    (:func:`crossover_point` from ``P0``): dims ("source",), the path ("source", "eval")."""
    o = cfg.options

    def one(spec):
        t = _task(pt["L"], pt["V"], spec)
        r = crossover_point(t, hyper, _pool(t, pt["seed"], o["pool"]), P0=int(o["P0"]),
                            max_evals=int(o["max_evals"]))  # fmt: skip
        return {("crossover_" + k if k in ("lo", "hi") else k): v for k, v in r.items()}

    rows = per_source(cfg, pt, one)
    out = {k: (("source",), np.array([r[k] for r in rows], float))
           for k in ("crossover", "crossover_lo", "crossover_hi", "slope", "evals")}  # fmt: skip
    out.update(
        {k: (("source", "eval"), np.stack([r[k] for r in rows])) for k in ("path_P", "path_cG")}
    )
    return out


def token_only_loss(source, V: int, L: int) -> dict:
    """The exact expected loss per token (1/2 |y - f|^2, y[a] = x[a-1 mod L]) of the best
    predictors that see no other position: ``token_only``, f[a] = E[x[a-1] | x[a]] (the reversed
    chain R[i, j] = pi_j T[j, i] / pi_i; at a = 0 the target x[L-1] is L-1 steps ahead, so
    f[0] = E[x[L-1] | x[0]] = row x[0] of T^(L-1)), and ``unigram``, f = pi (the stationary law).
    For i.i.d. tokens the two coincide."""
    from bayes_attn.tokens import Markov, Zipf

    if isinstance(source, Markov):
        T = source.matrix(V)
        w, vecs = np.linalg.eig(T.T)
        pi = np.real(vecs[:, np.argmin(abs(w - 1))])
        pi = pi / pi.sum()
        R = (pi[None, :] * T.T) / pi[:, None]
        ahead = np.linalg.matrix_power(T, L - 1)
    else:
        pi = source.probabilities(V) if isinstance(source, Zipf) else np.full(V, 1.0 / V)
        R = ahead = np.tile(pi, (V, 1))

    def loss(F):  # 1/2 E|y - F[x]|^2 = 1/2 (1 - sum_i pi_i |F_i|^2) for F[i] = E[y | x = i]
        return 0.5 * (1.0 - float(np.sum(pi[:, None] * F**2)))

    return {"token_only": ((L - 1) * loss(R) + loss(ahead)) / L,
            "unigram": 0.5 * (1.0 - float(pi @ pi))}  # fmt: skip


def _weights(M, tokens, task, activation):
    """The mean attention's weight on the previous position (copy) and on the current one."""
    import jax.numpy as jnp

    from bayes_attn import algebra

    A = algebra.attention(algebra.logits_from_M(jnp.asarray(M), jnp.asarray(tokens), task.V),
                          activation)  # fmt: skip
    A_bar = np.asarray(A.mean(axis=0))
    L = task.L
    return float(np.mean(A_bar[np.arange(L), np.arange(L) - 1])), float(np.mean(np.diag(A_bar)))


def competitor_point(cfg, pt, task, hyper):
    """The Level-1 MAP from each start for every source: dims ("source", "start"); the exact
    losses of the token-only and the unigram predictors: dims ("source",)."""
    import jax.numpy as jnp

    from bayes_attn import algebra
    from bayes_attn.theory.level1 import level1_fit, level1_map
    from bayes_attn.theory.phase_split import phase_starts

    o, act, P = cfg.options, pt["activation"], int(pt["P"])
    names = ("action", "q", "copy_weight", "self_weight", "train_loss")

    def one(spec):
        t = _task(pt["L"], pt["V"], spec)
        tokens = _pool(t, pt["seed"], o["pool"] or P)[:P]
        strong = np.asarray(phase_starts(t, hyper, P, "kernel")["strong"]["M"])
        diag = algebra.min_norm_M(float(o["diagonal_logit"]) * jnp.eye(t.L), t.V)
        starts = {"uniform": np.zeros_like(strong), "copy": strong, "diagonal": np.asarray(diag)}
        out = {k: np.full(len(STARTS), np.nan) for k in names}
        for j, name in enumerate(STARTS):
            m = level1_map(t, hyper, tokens, act, M0=starts[name])
            q = m.cG if act == "softmax" else float(algebra.fold_sign(m.c1, m.cG)[1])
            copy_w, self_w = _weights(m.M, tokens, t, act)
            fit = level1_fit(m.M, jnp.asarray(tokens), t, hyper, act)
            for k, v in zip(names, (m.action, q, copy_w, self_w, fit["loss"]), strict=True):
                out[k][j] = v
        losses = token_only_loss(t.tokens, t.V, t.L)
        out.update(loss_token_only=losses["token_only"], loss_unigram=losses["unigram"])
        return out

    rows = per_source(cfg, pt, one)
    result = {k: (("source", "start"), np.stack([r[k] for r in rows])) for k in names}
    result.update({k: (("source",), np.array([r[k] for r in rows], float))
                   for k in ("loss_token_only", "loss_unigram")})  # fmt: skip
    return result


#: the variables a ``tokens`` sweep writes whose meaning here differs from the one table,
#: :data:`bayes_attn.experiments.kinds.DESCRIPTIONS` (which describes the rest)
DESCRIPTIONS = {
    "train_loss": ("1", "train loss per token of the minimum, the readout profiled out"),
    "loss_unigram": ("1", "exact expected loss of the stationary law (no token seen)"),
}
