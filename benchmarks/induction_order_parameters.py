"""Numbers in docs/validation.md "The induction head: order parameters": the reduced two-layer
softmax theory (bayes_attn.theory.induction_action) along P, and against the two-layer kernel
limit's MAP of the induction study (out/induction_study.nc, read-only) on the same datasets.

    python benchmarks/induction_order_parameters.py scan 512 0 100,400,1000,1500,2000,3000,5000,8000
    python benchmarks/induction_order_parameters.py level1 out/induction_study.nc 400:0 1000:0 1500:0
    python benchmarks/induction_order_parameters.py pull 1000 0 0.0696 0.0682
    bayes-attn sweep --config bayes_attn/configs/induction_maps.toml --out out/induction_maps.nc
    python benchmarks/induction_order_parameters.py closure out/induction_study.nc softmax \
        2,line,line+pos2,pos 1000:0 400:0

``scan NUM SEED PS``: both continuation branches (reference batch of NUM sequences from SEED) and
the scores of each minimum. ``level1 FILE P:SEED ...``: the kernel limit's potential (log-det
included) at the best reduced point on that dataset (P = N, the exact data term) against the
sweep's MAP potential. ``pull P SEED cG1 KAPPA2``: the norm of the potential's gradient by block of
M1 and M2 at a reduced point: where the exact posterior pulls out of the ansatz. The MAPs' forms
come from the ``induction`` sweep with ``store_maps`` (configs/induction_maps.toml; the study's
keys and starts), which ``closure`` and ``sym`` read from out/induction_maps*.nc.
``closure FILE ACT FAMILIES P:SEED ...``: the
potential minimised over each extended family (FAMILIES below, nested, each from the previous
one's optimum and from the MAP's projection where the forms are stored) and over all
token-symmetric forms (from the symmetrised MAP), against the MAP's potential. L = 16, V = 3,
Table-1 scales, icl-markov:alpha=1,start=uniform, as the study.
``symmetry OUT DATA:P:SEED START [STEPS]``, ``symmetry_report OUT``, ``symmetry_hessian OUT
RUN``: is the MAP's token-symmetry breaking spontaneous or fitted (docs/validation.md, "Is the
symmetry breaking spontaneous?"): one MAP per call on the real or the relabelling-closed dataset,
the modes compared up to relabelling, the Hessian on the asymmetric forms.
"""

import glob
import itertools
import json
import os
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
        if "config" in mp.attrs:  # a sweep of configs/induction_maps.toml (store_maps)
            mp = mp.squeeze(["L", "V"])
            if act not in mp.activation or P not in mp.P or seed not in mp.seed:
                continue
            one = mp.sel(activation=act, P=P, seed=seed)
            if not bool(one.done):
                continue
        elif f"{act}:{P}:{seed}" in list(mp.point.values):  # the files of the former `maps`
            one = mp.sel(point=f"{act}:{P}:{seed}")
        else:
            continue
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


def _sym_minimum(pot, forms, maxiter=300, return_forms=False):
    """The potential minimised over the token-symmetric forms, from the symmetrised MAP:
    ``(U at the symmetrised MAP, U at the minimum)``, and with ``return_forms`` also the
    minimum's ``(M1, M2)`` and whether L-BFGS converged."""
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
    if return_forms:
        m = unravel(jnp.asarray(r.x))
        return U0, float(r.fun), _symmetrise(m["M1"], m["M2"]), bool(r.success)
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


# --------------------------------------------------------------------------------------------------
# symmetry: is the MAP's token-symmetry breaking spontaneous or fitted to the dataset?

#: what the random starts' keys fold into the run key of seed 0 (start j: folded again with j)
RANDOM_START_FOLD = 43
#: their scale: N(0, 0.1^2) entries, three times the RMS entry of the P = 1000 MAP's forms
RANDOM_START_SCALE = 0.1


def _permute(M1, M2, p):
    """The forms seen through the relabelling ``p`` of the tokens: Pi^T M Pi on both layers."""
    n = L + V
    Pi = jnp.eye(n)[np.r_[list(p), V:n]]
    Pi2 = jax.scipy.linalg.block_diag(Pi, Pi)
    return Pi.T @ M1 @ Pi, Pi2.T @ M2 @ Pi2


def _off_symmetric(M1, M2):
    """The share of |M1|^2 and of |M2|^2 off the token-symmetric forms."""
    S1, S2 = _symmetrise(jnp.asarray(M1), jnp.asarray(M2))
    return tuple(float(jnp.sum((M - S) ** 2) / jnp.sum(M**2)) for M, S in ((M1, S1), (M2, S2)))


def _perm_distance(a, b, identity=False):
    """``(d, p)``: the least relative distance |a - p(b)| / |a| over the relabellings p of the
    tokens (both layers' forms together; the identity only with ``identity``), and the
    relabelling that reaches it."""
    na = float(np.sqrt(np.sum(a[0] ** 2) + np.sum(a[1] ** 2)))
    best = (np.inf, None)
    for p in [tuple(range(V))] if identity else itertools.permutations(range(V)):
        q1, q2 = _permute(jnp.asarray(b[0]), jnp.asarray(b[1]), p)
        d = float(np.sqrt(np.sum((a[0] - q1) ** 2) + np.sum((a[1] - q2) ** 2))) / na
        best = min(best, (d, p), key=lambda t: t[0])
    return best


def _symmetry_data(name, P, seed):
    """The tokens of data ``name``: ``real`` the study's dataset (P, seed); ``sym`` its first
    ceil(P / V!) sequences and every relabelling of each (:func:`bayes_attn.induction.relabellings`)."""
    from bayes_attn.induction import relabellings

    tokens = TASK.sample(dataset_key(run_key(None, seed)), P)
    if name == "real":
        return tokens
    if name == "sym":
        k = -(-P // len(list(itertools.permutations(range(V)))))
        return jnp.asarray(relabellings(tokens[:k], V))
    raise ValueError(f"data must be 'real' or 'sym', got {name!r}")


def _symmetry_start(name, P, seed):
    """The start ``name``: ``zero`` and ``circuit`` the study's (map_search's keys), ``randJ`` N(0,
    RANDOM_START_SCALE^2) from the key RANDOM_START_FOLD then J, ``map`` the study MAP of
    (softmax, P, seed) in out/induction_maps.nc."""
    from bayes_attn.experiments.induction import START_SCALE, circuit

    n = TASK.n_features
    if name == "zero":
        k1, k2 = jax.random.split(jax.random.fold_in(run_key(None, seed), 2))
        return {"M1": START_SCALE * jax.random.normal(k1, (n, n)),
                "M2": START_SCALE * jax.random.normal(k2, (2 * n, 2 * n))}  # fmt: skip
    if name == "circuit":
        return circuit(TASK, 3.0)
    if name.startswith("rand"):
        key = jax.random.fold_in(
            jax.random.fold_in(run_key(None, 0), RANDOM_START_FOLD), int(name[4:])
        )
        k1, k2 = jax.random.split(key)
        return {"M1": RANDOM_START_SCALE * jax.random.normal(k1, (n, n)),
                "M2": RANDOM_START_SCALE * jax.random.normal(k2, (2 * n, 2 * n))}  # fmt: skip
    if name == "map":
        _, forms = _map_U("out/induction_study.nc", "softmax", P, seed)
        return {"M1": jnp.asarray(forms[0]), "M2": jnp.asarray(forms[1])}
    raise ValueError(f"start must be zero, circuit, randJ or map, got {name!r}")


def symmetry(path, spec, start, maxiter="300"):
    """One softmax MAP for the symmetry test, appended as a row to the NetCDF ``path``.

    ``spec`` is ``DATA:P:SEED`` (``real`` or ``sym``, :func:`_symmetry_data`), ``start`` a name of
    :func:`_symmetry_start` or ``floor`` (the potential minimised over the token-symmetric forms,
    L-BFGS from the symmetrised study MAP); the search is the study's (trust-krylov, ``maxiter``
    steps). Writes the forms, U, the off-symmetric shares, and the largest |U(p(M)) - U(M)| over
    the token relabellings p (~1e-10 on a dataset closed under them; the data's asymmetry on a
    real one)."""
    import time

    import xarray as xr

    from bayes_attn.inference.potential import find_modes

    data, P, seed = spec.split(":")
    tokens = _symmetry_data(data, int(P), int(seed))
    args = (TASK, HYPER, tokens, "softmax", None)
    t0 = time.perf_counter()
    if start == "floor":  # the token-symmetric minimum, from the symmetrised study MAP
        import types

        pot = flat_potential(two_layer_kernel_model, model_args=args)
        st = _symmetry_start("map", int(P), int(seed))
        _, U1, forms, ok = _sym_minimum(pot, (st["M1"], st["M2"]), int(maxiter), True)
        x = ravel_pytree(dict(zip(("M1", "M2"), forms, strict=True)))[0]
        mode = types.SimpleNamespace(x=np.asarray(x), U=U1, converged=ok, potential=pot)
    else:
        start_forms = _symmetry_start(start, int(P), int(seed))
        (mode,) = find_modes(two_layer_kernel_model, starts=[start_forms], model_args=args,
                             maxiter=int(maxiter), hvp="difference")  # fmt: skip
    M = mode.potential.unravel(jnp.asarray(mode.x))
    M1, M2 = np.asarray(M["M1"]), np.asarray(M["M2"])
    U = jax.jit(mode.potential.U)
    dU = max(abs(float(U(ravel_pytree(dict(zip(("M1", "M2"), _permute(M1, M2, p), strict=True)))[0]))
                 - mode.U) for p in itertools.permutations(range(V)))  # fmt: skip
    gnorm = float(jnp.linalg.norm(jax.grad(mode.potential.U)(jnp.asarray(mode.x))))
    off1, off2 = _off_symmetric(M1, M2)
    row = {"M1": (("i", "j"), M1), "M2": (("k", "l"), M2), "U": ((), mode.U),
           "converged": ((), int(mode.converged)), "grad_norm": ((), gnorm), "off_symmetric1": ((), off1),
           "off_symmetric2": ((), off2), "perm_dU": ((), dU), "P_data": ((), int(tokens.shape[0])),
           "seconds": ((), time.perf_counter() - t0)}  # fmt: skip
    name = f"{spec}:{start}"
    print(name, f"P' {tokens.shape[0]} U {mode.U:.6f} converged {mode.converged} |grad| {gnorm:.1e}",
          f"off-symmetric M1 {off1:.4f} M2 {off2:.4f} max|U(pM)-U(M)| {dU:.2e}",
          f"({row['seconds'][1]:.0f} s)", flush=True)  # fmt: skip
    new = xr.Dataset(row).expand_dims(run=np.array([name], dtype=object))
    try:
        with xr.open_dataset(path) as f:
            old = f.load().drop_sel(run=[name], errors="ignore")
        old = old.assign_coords(run=old.run.values.astype(object))
        new = xr.concat([old, new], dim="run")
    except FileNotFoundError:
        pass
    new.attrs.update(L=L, V=V, tokens="icl-markov:alpha=1,start=uniform", chi=HYPER.chi,
                     sigma2=HYPER.sigma2, activation="softmax",
                     random_start=f"fold_in(fold_in(run_key(seed=0), {RANDOM_START_FOLD}), J), "
                                  f"N(0, {RANDOM_START_SCALE}^2)")  # fmt: skip
    new.attrs[f"command {name}"] = " ".join(sys.argv)
    new.to_netcdf(path + ".tmp")
    os.replace(path + ".tmp", path)


def symmetry_hessian(path, run, chunk="20"):
    """The Hessian of the potential at the row ``run`` of ``symmetry``'s file on the
    token-asymmetric forms (the complement of :func:`_symmetrise`'s projection; exact
    Hessian-vector products, ``chunk`` at a time): its smallest eigenvalues. On a dataset closed
    under relabelling the Hessian at a token-symmetric point has no block between symmetric and
    asymmetric forms, so a symmetric MAP whose asymmetric block is positive is a minimum, not a
    saddle; the prior's own curvature, chi / g_W = 30, is the reference."""
    import time

    import xarray as xr

    with xr.open_dataset(path) as f:
        one = f.load().sel(run=run)
    data, P, seed, _ = run.split(":")
    tokens = _symmetry_data(data, int(P), int(seed))
    pot = flat_potential(two_layer_kernel_model, model_args=(TASK, HYPER, tokens, "softmax"))
    x, unravel = ravel_pytree({"M1": jnp.asarray(one.M1.values), "M2": jnp.asarray(one.M2.values)})
    t0 = time.perf_counter()

    def sym(v):
        m = unravel(v)
        return ravel_pytree(dict(zip(("M1", "M2"), _symmetrise(m["M1"], m["M2"]), strict=True)))[0]

    S = np.asarray(jax.vmap(sym)(jnp.eye(x.size)))
    w, Q = np.linalg.eigh(np.eye(x.size) - 0.5 * (S + S.T))
    Q = Q[:, w > 0.5]  # an orthonormal basis of the asymmetric forms
    hvp = jax.jit(jax.vmap(lambda v: jax.jvp(jax.grad(pot.U), (x,), (v,))[1]))
    k = int(chunk)
    HQ = np.concatenate(
        [np.asarray(hvp(jnp.asarray(Q[:, i : i + k].T))) for i in range(0, Q.shape[1], k)]
    )
    H = Q.T @ HQ.T
    lam = np.linalg.eigvalsh(0.5 * (H + H.T))
    print(run, f"asymmetric block ({Q.shape[1]} of {x.size} dims): smallest eigenvalues",
          np.round(lam[:6], 3).tolist(), f"largest {lam[-1]:.1f}",
          f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip


def symmetry_report(path):
    """The rows of ``symmetry``'s file: U, the off-symmetric shares, and each row's nearest other
    row of the same data up to a relabelling of the tokens (relative distance, relabelling)."""
    import xarray as xr

    ds = xr.open_dataset(path).load()
    runs = list(ds.run.values)
    for r in runs:
        one = ds.sel(run=r)
        line = (f"{r:22s} U {float(one.U):.4f} off1 {float(one.off_symmetric1):.4f} "
                f"off2 {float(one.off_symmetric2):.4f} perm_dU {float(one.perm_dU):.1e} "
                f"|grad| {float(one.grad_norm):.1e}")  # fmt: skip
        for o in runs:
            if o != r and o.rsplit(":", 1)[0] == r.rsplit(":", 1)[0]:
                two = ds.sel(run=o)
                d, p = _perm_distance(
                    (one.M1.values, one.M2.values), (two.M1.values, two.M2.values)
                )
                d0 = _perm_distance(
                    (one.M1.values, one.M2.values), (two.M1.values, two.M2.values), identity=True
                )[0]
                line += f" | vs {o.rsplit(':', 1)[1]}: {d0:.1e} as is, {d:.1e} after {p}"
        data, P, seed, _ = r.split(":")
        try:
            U_map, forms = _map_U("out/induction_study.nc", "softmax", int(P), int(seed))
        except (FileNotFoundError, KeyError):  # no study point to compare with
            forms = None
        if data == "real" and forms is not None:
            d0 = _perm_distance((one.M1.values, one.M2.values), forms, identity=True)[0]
            line += f" | vs the study's MAP (U {U_map:.4f}): {d0:.1e}"
        print(line)


if __name__ == "__main__":
    cmds = {
        "scan": scan,
        "level1": level1,
        "pull": pull,
        "closure": closure,
        "sym": sym,
        "symmetry": symmetry,
        "symmetry_hessian": symmetry_hessian,
        "symmetry_report": symmetry_report,
    }
    cmds[sys.argv[1]](*sys.argv[2:])
