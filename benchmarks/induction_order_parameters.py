"""Numbers in docs/validation.md "The induction head: order parameters" and docs/theory.md §13
("Where it breaks"): the reduced two-layer softmax theory (bayes_attn.theory.induction_action)
along P, and against the two-layer kernel limit's MAP of the induction study
(out/induction_study.nc, read-only) on the same datasets.

    python benchmarks/induction_order_parameters.py scan 512 0 100,400,1000,1500,2000,3000,5000,8000
    python benchmarks/induction_order_parameters.py level1 out/induction_study.nc 400:0 1000:0 1500:0
    python benchmarks/induction_order_parameters.py pull 1000 0 0.0696 0.0682

``scan NUM SEED PS``: both continuation branches (reference batch of NUM sequences from SEED) and
the scores of each minimum. ``level1 FILE P:SEED ...``: the kernel limit's potential (log-det
included) at the best reduced point on that dataset (P = N, the exact data term) against the
sweep's MAP potential. ``pull P SEED cG1 KAPPA2``: the norm of the potential's gradient by block of
M1 and M2 at a reduced point: where the exact posterior pulls out of the ansatz. L = 16, V = 3,
Table-1 scales, icl-markov:alpha=1,start=uniform, as the study.

The extended families and the token-symmetric floor against the MAP, and the symmetry test, are
the sweep kinds ``induction_closure`` and ``induction_symmetry``
(bayes_attn/configs/induction_{closure,symmetry}.toml; tables: docs/scripts/induction_tables.py).
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bayes_attn.experiments.induction_closure import dataset_reference
from bayes_attn.induction import InductionTask
from bayes_attn.inference.potential import flat_potential
from bayes_attn.keys import dataset_key, run_key
from bayes_attn.models.two_layer import induction_scores, two_layer_kernel_model
from bayes_attn.task import Hyper
from bayes_attn.theory import induction_action as ia
from bayes_attn.tokens import parse_tokens

L, V = 16, 3
TASK = InductionTask(L, V, parse_tokens("icl-markov:alpha=1,start=uniform"))
HYPER = Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)


def scan(num, seed, Ps):
    ref = ia.induction_reference(TASK, HYPER, num=int(num), seed=int(seed))
    Ps = [float(p) for p in Ps.split(",")]
    br = ia.induction_branches(Ps, ref)
    for name, (th, s) in br.items():
        for k, P in enumerate(Ps):
            _, A1, A2 = ia.reduced_patterns(th[k], ref.psi, V)
            sc = {a: round(float(b), 4) for a, b in induction_scores(A1, A2, ref.tokens, V).items()}
            print(name, P, np.round(th[k], 4).tolist(), round(float(s[k]), 3), json.dumps(sc))
    print("equal-action P:", ia.transition_P(Ps, br))


def _dataset(P, seed):
    tokens = TASK.sample(dataset_key(run_key(None, seed)), P)
    return tokens, dataset_reference(TASK, HYPER, tokens)


def level1(path, *specs):
    from bayes_attn.experiments.sweep import load_sweep

    ds = load_sweep(path)
    for spec in specs:
        P, seed = map(int, spec.split(":"))
        tokens, ref = _dataset(P, seed)
        runs = [ia.induction_minimum(x0, float(P), ref) for x0 in [(0, 0), (1, 2), (1, -2), (2, 4)]]
        x, s = min(runs, key=lambda r: r[1])
        pot = flat_potential(two_layer_kernel_model, model_args=(TASK, HYPER, tokens, "softmax"))
        M1, M2 = ia.induction_forms(jnp.asarray(x), L, V)
        U = float(pot.U(ravel_pytree({"M1": M1, "M2": M2})[0]))
        pt = ds.sel(activation="softmax", P=P, seed=seed).squeeze()
        U_map = min(float(pt[k]) for k in pt.data_vars if str(k).startswith("U_"))
        print(
            P,
            seed,
            np.round(x, 4).tolist(),
            f"U_reduced {U:.3f} U_map {U_map:.3f} gap {U - U_map:.3f}",
        )


def pull(P, seed, c, k):
    tokens, _ = _dataset(int(P), int(seed))
    pot = flat_potential(two_layer_kernel_model, model_args=(TASK, HYPER, tokens, "softmax"))
    M1, M2 = ia.induction_forms(jnp.array([float(c), float(k)]), L, V)
    x, unravel = ravel_pytree({"M1": M1, "M2": M2})
    g = unravel(jax.grad(pot.U)(x))
    n = L + V
    blocks = {"x": slice(0, V), "e": slice(V, n), "A1x": slice(n, n + V), "A1e": slice(n + V, None)}
    out = {}
    for name, G in g.items():
        keys = list(blocks)[: 2 if name == "M1" else 4]
        for a in keys:
            for b in keys:
                out[f"{name}[{a},{b}]"] = round(float(jnp.linalg.norm(G[blocks[a], blocks[b]])), 2)
    print(json.dumps(dict(sorted(out.items(), key=lambda t: -t[1]))))


if __name__ == "__main__":
    cmds = {"scan": scan, "level1": level1, "pull": pull}
    cmds[sys.argv[1]](*sys.argv[2:])
