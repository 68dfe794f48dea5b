"""Numbers in docs/validation.md "The induction head: order parameters": the reduced two-layer
softmax theory (bayes_attn.theory.induction_action) along P, and against the two-layer kernel
limit's MAP of the induction study (out/induction_study.nc, read-only) on the same datasets.

    python benchmarks/induction_order_parameters.py scan 512 0 100,400,1000,1500,2000,3000,5000,8000
    python benchmarks/induction_order_parameters.py level1 out/induction_study.nc 400:0 1000:0 1500:0
    python benchmarks/induction_order_parameters.py pull 1000 0 0.0696 0.0682
    python benchmarks/induction_order_parameters.py maps out/induction_maps.nc softmax:1000:0 ...
    python benchmarks/induction_order_parameters.py closure out/induction_study.nc softmax \
        2,line,line+pos2,pos 1000:0 400:0

``scan NUM SEED PS``: both continuation branches (reference batch of NUM sequences from SEED) and
the scores of each minimum. ``level1 FILE P:SEED ...``: the kernel limit's potential (log-det
included) at the best reduced point on that dataset (P = N, the exact data term) against the
sweep's MAP potential. ``pull P SEED cG1 KAPPA2``: the norm of the potential's gradient by block of
M1 and M2 at a reduced point: where the exact posterior pulls out of the ansatz. ``maps OUT
ACT:P:SEED ...``: the study's MAP recomputed (its keys and starts), its forms and patterns written
to OUT (the figures and ``closure`` read it). ``closure FILE ACT FAMILIES P:SEED ...``: the
potential minimised over each extended family (FAMILIES below, nested, each from the previous
one's optimum and from the MAP's projection where the forms are stored) and over all
token-symmetric forms (from the symmetrised MAP), against the MAP's potential. L = 16, V = 3,
Table-1 scales, icl-markov:alpha=1,start=uniform, as the study.
"""

import glob
import itertools
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bayes_attn import algebra
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
    y = TASK.targets(tokens)[:, np.asarray(TASK.target_mask)]
    ref = ia.induction_reference(TASK, HYPER, num=1)
    return tokens, ref._replace(psi=algebra.features(tokens, V), y=y, tokens=tokens)


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
        U_map = min(float(pt.U_zero), float(pt.U_circuit))
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


FAMILIES = {
    "2": ("copy", "induction"),
    "line": ("copy_line", "match1", "induction"),
    "line+pos2": ("copy_line", "match1", "induction", "pos2"),
    "pos": ("pos1", "match1", "induction", "match2", "pos2"),
}


def _embed(fam, M1, M2):
    """The family's point whose forms are nearest (least squares) to (M1, M2)."""
    B = np.concatenate([
        np.concatenate([np.asarray(fam.B1).reshape(fam.B1.shape[0], -1),
                        np.zeros((fam.B1.shape[0], np.asarray(M2).size))], 1),
        np.concatenate([np.zeros((fam.B2.shape[0], np.asarray(M1).size)),
                        np.asarray(fam.B2).reshape(fam.B2.shape[0], -1)], 1)])  # fmt: skip
    target = np.concatenate([np.ravel(M1), np.ravel(M2)])
    return np.linalg.lstsq(B.T, target, rcond=None)[0]


def _map_U(path, act, P, seed):
    """The MAP potential of (act, P, seed): the study file where it has the point, else the
    file of ``maps`` (out/induction_maps.nc), else None; and the MAP's forms where stored."""
    import xarray as xr

    from bayes_attn.experiments.sweep import load_sweep

    ds = load_sweep(path)
    pt = ds.sel(activation=act, P=P, seed=seed).squeeze()
    U = min(float(pt.U_zero), float(pt.U_circuit)) if bool(pt.done) else None
    forms = None
    for f in sorted(glob.glob("out/induction_maps*.nc")):
        mp = xr.open_dataset(f).load()
        key = f"{act}:{P}:{seed}"
        if key in list(mp.point.values):
            one = mp.sel(point=key)
            forms = (one.M1.values, one.M2.values)
            U = min(float(one.U_zero), float(one.U_circuit)) if U is None else U
    return U, forms


def _symmetrise(M1, M2):
    """The average of (M1, M2) over the V! relabellings of the tokens (the source is exchangeable
    in them): the orthogonal projection onto the token-symmetric forms."""
    n = L + V
    S1, S2 = jnp.zeros_like(M1), jnp.zeros_like(M2)
    perms = list(itertools.permutations(range(V)))
    for p in perms:
        Pi = jnp.eye(n)[np.r_[list(p), V:n]]
        Pi2 = jax.scipy.linalg.block_diag(Pi, Pi)
        S1, S2 = S1 + Pi.T @ M1 @ Pi, S2 + Pi2.T @ M2 @ Pi2
    return S1 / len(perms), S2 / len(perms)


def _sym_minimum(pot, forms, maxiter=300):
    """The potential minimised over the token-symmetric forms, from the symmetrised MAP:
    ``(U at the symmetrised MAP, U at the minimum)``."""
    from scipy import optimize

    y0, unravel = ravel_pytree(
        dict(zip(("M1", "M2"), _symmetrise(*map(jnp.asarray, forms)), strict=True))
    )
    f = jax.jit(
        jax.value_and_grad(
            lambda y: pot.U(
                ravel_pytree(
                    dict(
                        zip(
                            ("M1", "M2"),
                            _symmetrise(unravel(y)["M1"], unravel(y)["M2"]),
                            strict=True,
                        )
                    )
                )[0]
            )
        )
    )

    def fun(y):
        v, g = f(jnp.asarray(y))
        return float(v), np.asarray(g, dtype=np.float64)

    U0 = fun(np.asarray(y0))[0]
    r = optimize.minimize(fun, np.asarray(y0), jac=True, method="L-BFGS-B",
                          options={"gtol": 1e-7, "ftol": 1e-15, "maxiter": maxiter, "maxcor": 30})  # fmt: skip
    print(f"  sym L-BFGS: {r.nit} iterations, |grad| {np.linalg.norm(r.jac):.2e}, {r.message}")
    return U0, float(r.fun)


def sym(path, act, maxiter, *specs):
    """The potential minimised over the token-symmetric forms only (``maxiter`` L-BFGS steps from
    the symmetrised MAP; the forms' file must hold the point), against the MAP's."""
    for spec in specs:
        P, seed = map(int, spec.split(":"))
        tokens, _ = _dataset(P, seed)
        U_map, forms = _map_U(path, act, P, seed)
        pot = flat_potential(two_layer_kernel_model, model_args=(TASK, HYPER, tokens, act))
        U0, U1 = _sym_minimum(pot, forms, int(maxiter))
        print(act, P, seed, f"U_symmetrised_map {U0:.3f} U_sym_min {U1:.3f} U_map {U_map:.3f}",
              f"gap {U1 - U_map:.3f}", flush=True)  # fmt: skip


def closure(path, act, names, *specs):
    """The kernel limit's potential minimised over each family of ``names`` (comma separated keys
    of FAMILIES, nested: each starts from the previous one's optimum), against the MAP's."""
    import time

    fams = [(k, ia.induction_family(FAMILIES[k], L, V, act)) for k in names.split(",")]
    for spec in specs:
        P, seed = map(int, spec.split(":"))
        tokens, ref = _dataset(P, seed)
        U_map, forms = _map_U(path, act, P, seed)
        pot = flat_potential(two_layer_kernel_model, model_args=(TASK, HYPER, tokens, act))
        prev = None
        for key, fam in fams:
            t0 = time.perf_counter()
            starts = [np.zeros(fam.size)]
            if prev is not None:
                starts.append(_embed(fam, *prev))
            if forms is not None:
                starts.append(_embed(fam, *forms))
            runs = [ia.family_minimum(fam, float(P), ref, x0, chi=HYPER.chi) for x0 in starts]
            x, _ = min(runs, key=lambda r: r[1])
            M1, M2 = ia.family_forms(jnp.asarray(x), fam)
            prev = (np.asarray(M1), np.asarray(M2))
            U = float(pot.U(ravel_pytree({"M1": M1, "M2": M2})[0]))
            sc = ia.family_scores(x, fam, ref)
            gap = "nan" if U_map is None else f"{U - U_map:.3f}"
            print(act, P, seed, key, fam.size, f"U_family {U:.3f} U_map {U_map} gap {gap}",
                  f"copy1 {sc['copy1']:.3f} induction2_excess {sc['induction2_excess']:.4f}",
                  f"({time.perf_counter() - t0:.0f} s, {len(starts)} starts)", flush=True)  # fmt: skip
        if forms is not None:
            t0 = time.perf_counter()
            U0, U1 = _sym_minimum(pot, forms)
            print(act, P, seed, "sym", f"U_symmetrised_map {U0:.3f} U_sym_min {U1:.3f} U_map {U_map}",
                  f"gap {U1 - U_map:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip


def maps(path, *specs):
    """Recompute the study's MAP at each ``ACT:P:SEED`` (``map_problem``: the sweep's keys and
    starts) and write its forms, potentials and attention patterns (held-out mean, and held-out
    sequence 0) to the NetCDF ``path``, rewritten after every point (the figures read it)."""
    import xarray as xr

    from bayes_attn.experiments.induction import features
    from bayes_attn.experiments.induction_posterior import map_problem
    from bayes_attn.models.two_layer import forward

    rows = []
    for spec in specs:
        act, P, seed = spec.split(":")
        prob = map_problem(TASK, HYPER, int(P), act, seed=int(seed), num_test=2000, maxiter=300)
        M1, M2 = prob["map"]["M1"], prob["map"]["M2"]
        _, A1, A2 = forward(M1, M2, features(TASK, prob["test"]), act, True)
        sc = induction_scores(A1, A2, prob["test"], V)
        rows.append({"M1": (("i", "j"), np.asarray(M1)), "M2": (("k", "l"), np.asarray(M2)),
                     "U_zero": ((), prob["U"][0]), "U_circuit": ((), prob["U"][1]),
                     "A1_mean": (("a", "b"), np.asarray(A1.mean(0))),
                     "A2_mean": (("a", "b"), np.asarray(A2.mean(0))),
                     "A1_example": (("a", "b"), np.asarray(A1[0])),
                     "A2_example": (("a", "b"), np.asarray(A2[0])),
                     "tokens_example": (("a",), np.asarray(prob["test"][0])),
                     **{k: ((), float(v)) for k, v in sc.items()}})  # fmt: skip
        print(spec, f"U {min(prob['U']):.4f}", json.dumps({k: round(float(v), 4) for k, v in sc.items()}),
              flush=True)  # fmt: skip
        ds = xr.concat([xr.Dataset(r) for r in rows], dim="point")
        ds = ds.assign_coords(point=list(specs[: len(rows)]))
        ds.attrs.update(L=L, V=V, tokens="icl-markov:alpha=1,start=uniform", chi=HYPER.chi,
                        sigma2=HYPER.sigma2, command=" ".join(sys.argv))  # fmt: skip
        ds.to_netcdf(path)


if __name__ == "__main__":
    cmds = {
        "scan": scan,
        "level1": level1,
        "pull": pull,
        "maps": maps,
        "closure": closure,
        "sym": sym,
    }
    cmds[sys.argv[1]](*sys.argv[2:])
