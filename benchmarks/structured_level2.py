"""Level 2 for structured tokens against the Level-1 MAP (docs/validation.md, "Level 2 for
structured tokens"): the order parameters along P and the softmax equal-action point, on three
nested datasets per source, at Table 1.

    python benchmarks/structured_level2.py zipf:s=1 [--out FILE.json]
    python benchmarks/structured_level2.py markov:alpha=0.3,seed=0 [--out FILE.json]
    python benchmarks/structured_level2.py --table FILE.json [FILE.json ...]  (the markdown rows)
    python benchmarks/structured_level2.py markov:alpha=0.3,seed=0 --part tokendep-exact \
        --branch low --P-soft 270,280,290 --out FILE.json  (one branch of exact softmax minima)

Level 2 is :mod:`bayes_attn.theory.structured`: the (c1, cG) theory for i.i.d. tokens, the
general token-independent K for a global chain. Level 1 is the exact action over M
(:func:`bayes_attn.theory.level1.level1_action`, no log-determinant), minimised by L-BFGS on the
first P sequences of a pool of ``POOL`` drawn with ``jax.random.PRNGKey(k)``, k = 0, 1, 2 (the
unused sequences masked out, so that one compiled program serves every P). Linear starts from the
minimum-norm M of the Level-2 minimum; softmax from M = 0 and from the Level-2 strong minimum, the
lower action being the MAP; the equal-action P is the linear root of the action gap between the
two on a grid of P around Level 2's.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

import bayes_attn  # noqa: F401  (float64)
from bayes_attn import algebra
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.theory import structured as st
from bayes_attn.theory.action import woodbury_evidence
from bayes_attn.tokens import Markov, parse_tokens

POOL = 640
P_LINEAR = (60, 200, 400, 600)
P_SOFTMAX = (150, 450, 600)


@functools.partial(jax.jit, static_argnames=("V", "activation"))
def _value_and_grad(m, tokens, mask, hyper_vals, V: int, activation: str):
    g_w, g_o, sigma2 = hyper_vals
    n = int(math.isqrt(m.shape[0]))

    def f(x):
        M = x.reshape(n, n)
        A = algebra.attention(algebra.logits_from_M(M, tokens, V), activation)
        Phi = algebra.phi(A, tokens, V) * mask[:, None, None]
        y = algebra.targets(tokens, V) * mask[:, None, None]
        Phi, y = Phi.reshape(-1, n), y.reshape(-1, V)
        s_data, _ = woodbury_evidence(Phi.T @ Phi, Phi.T @ y, jnp.sum(y**2), sigma2, g_o)
        return jnp.sum(M**2) / (2 * g_w) + s_data

    return jax.value_and_grad(f)(m)


def level1(task, hyper, pool, P, activation, M0):
    """The Level-1 minimum from M0 on pool[:P]: (action, c1, cG, token residual)."""
    mask = jnp.asarray(np.arange(pool.shape[0]) < P, dtype=float)
    hv = jnp.asarray([hyper.g_w, hyper.g_o, hyper.sigma2])

    def fun(x):
        v, g = _value_and_grad(jnp.asarray(x), pool, mask, hv, task.V, activation)
        return float(v), np.asarray(g)

    res = optimize.minimize(fun, np.ravel(M0), jac=True, method="L-BFGS-B",
                            options={"maxiter": 5000, "gtol": 1e-9, "ftol": 1e-15})  # fmt: skip
    n = task.n_features
    A = algebra.attention(algebra.logits_from_M(jnp.asarray(res.x.reshape(n, n)), pool[:P], task.V),
                          activation)  # fmt: skip
    pr = algebra.project(A)
    c1, cG = float(pr["c1"]), float(pr["cG"])
    if activation == "linear":
        sgn = float(algebra.z2_sign(c1, cG))
        c1, cG = sgn * c1, sgn * cG
    return float(res.fun), c1, cG, float(pr["token_residual"])


def level2_K(task, hyper, P, activation):
    """Level 2's global minimum as logits K (L, L) and its (c1, cG) / (a1, aG)."""
    if isinstance(task.tokens, Markov):
        r = st.general_path(task, hyper, [P], activation)
        return r["K"][0], r["c1"][0], r["cG"][0]
    sd = st.global_saddle(task, hyper, P, activation)
    if activation == "linear":
        return np.asarray(algebra.reduced_logits(sd.c1, sd.cG, task.L)), sd.c1, sd.cG
    return np.asarray(algebra.reduced_logits(-sd.cG / task.L, sd.cG, task.L)), sd.a1, sd.aG


def min_norm(task, K):
    return np.asarray(algebra.min_norm_M(jnp.asarray(K), task.V))


def along_P(task, hyper, pools):
    rows = []
    for activation, Ps in (("linear", P_LINEAR), ("softmax", P_SOFTMAX)):
        for P in Ps:
            K, c1, cG = level2_K(task, hyper, P, activation)
            starts = [min_norm(task, K)] if activation == "linear" else [
                np.zeros((task.n_features,) * 2), min_norm(task, K)]  # fmt: skip
            if activation == "softmax":  # both phases: the strong start from the strong minimum
                Ks, _, _ = level2_K(task, hyper, 1.5 * P + 300, activation)
                starts[1] = min_norm(task, Ks)
            fits = [min((level1(task, hyper, pool, P, activation, s) for s in starts),
                        key=lambda r: r[0]) for pool in pools]  # fmt: skip
            f = np.array(fits)
            rows.append(dict(activation=activation, P=P, level2=(c1, cG), c1=f[:, 1].tolist(),
                             cG=f[:, 2].tolist(), resid=f[:, 3].tolist()))  # fmt: skip
            print(rows[-1], flush=True)
    return rows


def equal_action(task, hyper, pools, P2, rel=(0.88, 0.94, 1.0, 1.06, 1.12)):
    """Level 1's equal-action P on each pool: gap(P) = s_strong - s_weak on a grid around P2
    (nan where the two starts end in one phase), with the aG of both minima."""
    K_strong, _, _ = level2_K(task, hyper, 1.3 * P2, "softmax")
    weak0, strong0 = np.zeros((task.n_features,) * 2), min_norm(task, K_strong)
    out = []
    for pool in pools:
        grid = [int(round(P2 * r)) for r in rel]
        gaps, aG = [], []
        for P in grid:
            w = level1(task, hyper, pool, P, "softmax", weak0)
            s = level1(task, hyper, pool, P, "softmax", strong0)
            gaps.append(s[0] - w[0] if abs(s[2] - w[2]) > 1.0 else math.nan)
            aG.append((w[2], s[2]))
        k = next((i for i in range(len(grid) - 1) if gaps[i] > 0 > gaps[i + 1]), None)
        root = math.nan
        if k is not None:
            root = grid[k] + (grid[k + 1] - grid[k]) * gaps[k] / (gaps[k] - gaps[k + 1])
        out.append(dict(grid=grid, gaps=gaps, aG=aG, equal_action=root))
        print(out[-1], flush=True)
    return out


def token_dependent(task, hyper, n_sample: int, P_soft, P_lin=P_LINEAR, sample_key: int = 10):
    """The token-dependent Level 2 (:mod:`bayes_attn.theory.token_dependent`, the EK average of
    Level 1's action over the whole M): linear with exact moments along ``P_lin`` (start: the
    minimum-norm M of the (c1, cG) saddle of the chain's stationary law); softmax with the Monte
    Carlo moments of ``n_sample`` sequences (``PRNGKey(sample_key)``) on ``P_soft``, from M = 0 (weak) and from the
    minimum-norm M of the i.i.d. strong saddle at 1.3 P (strong), then the exact moments of the
    minimum at each P against the Monte Carlo ones (the data term's relative difference)."""
    from bayes_attn.theory import token_dependent as td

    out = {"linear": [], "softmax": []}
    for P in P_lin:
        K0 = st._iid_start(task, hyper, float(P), "linear")
        _, val, o = td.minimum(task, hyper, P, "linear", min_norm(task, K0))
        out["linear"].append(dict(P=P, action=val, **o))
        print("linear", out["linear"][-1], flush=True)
    sample = task.sample(jax.random.PRNGKey(sample_key), n_sample)
    law = td.chain_law(task.tokens, task.V)
    zero = np.zeros((task.n_features,) * 2)
    prev_w = None
    for P in P_soft:
        strong0 = min_norm(task, st._iid_start(task, hyper, 1.3 * float(P), "softmax"))
        w = td.minimum(task, hyper, P, "softmax", zero if prev_w is None else prev_w, sample=sample)
        s = td.minimum(task, hyper, P, "softmax", strong0, sample=sample)
        prev_w = w[0]
        row = dict(P=P, weak=w[2], strong=s[2], action_weak=w[1], action_strong=s[1])
        if abs(s[2]["cG"] - w[2]["cG"]) < 0.1 * max(1.0, abs(s[2]["cG"])):
            best = w if w[1] <= s[1] else s
            exact = td.moments(best[0], law, "softmax", td.STUDY)
            mc = td.moments_sampled(best[0], sample, task.V, "softmax")
            ex = float(td.data_term(exact, P, hyper.sigma2, hyper.g_o))
            row["data_rel_mc_vs_exact"] = (
                float(td.data_term(mc, P, hyper.sigma2, hyper.g_o)) / ex - 1
            )
            row["aG_exact_moments"] = float(algebra.project(exact.A_bar[None])["cG"])
        out["softmax"].append(row)
        print("softmax", row, flush=True)
    return out


def token_dependent_exact(task, hyper, P_soft, branch: str, n_sample: int = 2000,
                          sample_key: int = 10, out=None, warm=None):  # fmt: skip
    """One branch of softmax minima of the token-dependent Level 2 with the exact moments
    (:data:`bayes_attn.theory.token_dependent.FAST`), by continuation along ``P_soft`` in the order
    given. The first start is the Monte Carlo minimum (``n_sample`` sequences, ``PRNGKey(sample_key)``)
    at ``P_soft[0]``, from M = 0 (``branch`` "low") or from the minimum-norm M of the i.i.d. strong
    saddle at 1.3 P (``branch`` "high"); each later P starts from the minimum before it. Every
    finished minimum is appended to ``out`` (JSON lines) and its M to ``out + ".npz"``. ``warm``
    ("FILE.npz:KEY", an earlier run's minimum) replaces the Monte Carlo start."""
    from bayes_attn.theory import token_dependent as td

    rows, Ms = [], {}
    if warm:
        path, key = warm.rsplit(":", 1)
        M = np.load(path)[key]
    else:
        M, val, o = monte_carlo_start(task, hyper, float(P_soft[0]), branch, n_sample, sample_key)
        rows.append(dict(branch=branch, P=float(P_soft[0]), kind="monte-carlo", action=val, **o))
    for P in P_soft:
        t0 = time.time()
        M, val, o = td.minimum(task, hyper, float(P), "softmax", M)
        rows.append(
            dict(branch=branch, P=float(P), kind="exact", action=val, seconds=time.time() - t0, **o)
        )
        Ms[f"P{float(P):g}"] = np.asarray(M)
        print(json.dumps(rows[-1]), flush=True)
        if out:
            with open(out, "a") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
            np.savez(out + ".npz", **Ms)
    return rows


def monte_carlo_start(task, hyper, P0, branch, n_sample, sample_key):
    """The Monte Carlo minimum at ``P0`` from M = 0 ("low") or the strong saddle ("high")."""
    from bayes_attn.theory import token_dependent as td

    sample = task.sample(jax.random.PRNGKey(sample_key), n_sample)
    if branch == "low":
        M0 = np.zeros((task.n_features,) * 2)
    else:
        M0 = min_norm(task, st._iid_start(task, hyper, 1.3 * P0, "softmax"))
    return td.minimum(task, hyper, P0, "softmax", M0, sample=sample)


def table(paths):
    """The markdown rows of docs/validation.md from the JSON files of earlier runs."""
    exact = {}
    for path in paths:
        if path.endswith(".jsonl"):  # tokendep-exact: one minimum a line
            with open(path) as fh:
                for r in map(json.loads, fh):
                    print(f"| {r['branch']} | {r['P']:g} | {r['cG']:.4f} | {r['c1']:.4f} | "
                          f"{r['action']:.6f} | {r['resid']:.3f} | {r['nit']} |")  # fmt: skip
                    exact.setdefault(r["P"], {})[r["branch"]] = r
            continue
        with open(path) as fh:
            res = json.load(fh)
        for r in res.get("along", []):
            c1, cG = np.array(r["c1"]), np.array(r["cG"])
            print(f"| {res['tokens']} | {r['activation']} | {r['P']} | "
                  f"({r['level2'][0]:.3f}, {r['level2'][1]:.3f}) | ({c1.mean():.3f} ± {c1.std(ddof=1):.3f}, "
                  f"{cG.mean():.3f} ± {cG.std(ddof=1):.3f}) | {np.mean(r['resid']):.3f} |")  # fmt: skip
        for k, e in enumerate(res.get("equal", [])):
            gaps = ", ".join(f"{g:+.2f}" for g in e["gaps"])
            print(f"| {res['tokens']} | {k} | {e['grid']} | {gaps} | {e['equal_action']:.1f} |")
    for P, b in sorted(exact.items()):  # the two branches at each P: one minimum or two
        if len(b) == 2:
            lo, hi = b["low"], b["high"]
            print(f"| {P:g} | {lo['cG']:.4f} | {hi['cG']:.4f} | {hi['cG'] - lo['cG']:+.1e} | "
                  f"{hi['action'] - lo['action']:+.1e} |")  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokens", nargs="+")
    ap.add_argument("--table", action="store_true", help="print the tables of the JSON files given")
    ap.add_argument("--out")
    ap.add_argument("--part", choices=("all", "level2", "along", "equal", "tokendep",
                                       "tokendep-exact"), default="all")  # fmt: skip
    ap.add_argument("--branch", choices=("low", "high"), default="low",
                    help="tokendep-exact: the first start (M = 0 or the strong saddle)")  # fmt: skip
    ap.add_argument("--warm", help="tokendep-exact: start from FILE.npz:KEY (an earlier minimum)")
    ap.add_argument("--n-sample", type=int, default=2000, help="tokendep: Monte Carlo sequences")
    ap.add_argument("--P-soft", default="260,280,290,300,320", help="tokendep: softmax P grid")
    ap.add_argument("--P-lin", default="60,200,400,600", help="tokendep: linear P grid")
    ap.add_argument("--sample-key", type=int, default=10, help="tokendep: the sample's key")
    ap.add_argument("--keys", default="0,1,2", help="the pools' keys (comma-separated)")
    ap.add_argument("--P2", type=float, help="Level 2's softmax P* (skips computing it)")
    ap.add_argument("--rel", default="0.88,0.94,1,1.06,1.12", help="the equal-action grid / P2")
    a = ap.parse_args()
    if a.table:
        return table(a.tokens)
    task = CopyTask(25, 5, tokens=parse_tokens(a.tokens[0]))
    hyper = Hyper.paper()
    res = {"tokens": a.tokens[0]}
    grid = lambda x: tuple(float(v) for v in x.split(",") if v)  # noqa: E731
    if a.part == "tokendep-exact":  # --out: JSON lines, appended as each minimum finishes
        token_dependent_exact(task, hyper, grid(a.P_soft), a.branch, a.n_sample, a.sample_key,
                              a.out, a.warm)  # fmt: skip
        return
    if a.part == "tokendep":
        res["tokendep"] = token_dependent(
            task, hyper, a.n_sample, grid(a.P_soft), grid(a.P_lin), a.sample_key
        )
        if a.out:
            with open(a.out, "w") as fh:
                json.dump(res, fh, indent=1, default=float)
        return
    if a.P2:
        P2 = a.P2
    elif isinstance(task.tokens, Markov):
        res["second_order"] = st.second_order_general(task, hyper)
        res["softmax"] = st.general_first_order(task, hyper, 150.0, 600.0, n=15)
        P2 = res["softmax"]["first_order"]
    else:
        pb = st.phase_boundaries(task, hyper)
        res.update(pb.as_dict())
        P2 = pb.first_order
    print(res, flush=True)
    pools = [task.sample(jax.random.PRNGKey(int(k)), POOL) for k in a.keys.split(",")]
    if a.part in ("all", "along"):
        res["along"] = along_P(task, hyper, pools)
    if a.part in ("all", "equal") and math.isfinite(P2):
        rel = tuple(float(r) for r in a.rel.split(","))
        res["equal"] = equal_action(task, hyper, pools, P2, rel)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
