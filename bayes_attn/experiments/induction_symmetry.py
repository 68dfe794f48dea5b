"""Is the induction MAP's token-symmetry breaking spontaneous or fitted? The sweep kind
``induction_symmetry`` (bayes_attn/configs/induction_symmetry.toml).

The in-context Markov source is exchangeable in the token labels, so the two-layer kernel limit's
potential on a dataset closed under relabelling (:func:`bayes_attn.induction.relabellings`) is
exactly invariant under relabelling the forms (:func:`relabel_forms`). A MAP that breaks the
symmetry there breaks it spontaneously; on the study's own dataset it may have fitted the data's
asymmetry. At a grid point (activation, L, V, P, seed) :func:`symmetry_point` runs one MAP search
per ``DATA:START`` of the option ``runs`` (:func:`symmetry_data`, :func:`symmetry_start`), and
reports each mode's potential, its share off the token-symmetric forms (:func:`off_symmetric`),
its distances to the other modes up to relabelling (:func:`perm_distance`), and, with the option
``hessian``, the lowest eigenvalues of the Hessian on the token-asymmetric forms at the
token-symmetric minimum of the closed dataset (:func:`asymmetric_hessian`).

The study's MAP (start ``map``, and the symmetrised start of ``floor``) comes from the ``maps``
file (an ``induction`` sweep with ``store_maps``, configs/induction_maps.toml) where it holds the
point, else it is recomputed by :func:`~bayes_attn.experiments.induction.map_search` (:func:`study_map`).

References
----------
docs/validation.md, "Is the symmetry breaking spontaneous?"; docs/theory.md §13.
"""

from __future__ import annotations

import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import check_int
from bayes_attn.experiments.induction import (
    START_SCALE,
    blocked_data,
    blocked_potential,
    blocked_scales,
    blocked_value_and_grad,
    circuit,
    map_search,
)
from bayes_attn.keys import dataset_key, run_key

__all__ = [
    "DESCRIPTIONS",
    "RANDOM_START_FOLD",
    "RANDOM_START_SCALE",
    "SYMMETRY_DEFAULTS",
    "asymmetric_hessian",
    "check_study_map",
    "check_symmetry",
    "off_symmetric",
    "perm_distance",
    "relabel_forms",
    "study_map",
    "symmetric_minimum",
    "symmetrise",
    "symmetry_data",
    "symmetry_point",
    "symmetry_start",
]

#: what the random starts' keys fold into the run key of the point's seed (start J: again with J)
RANDOM_START_FOLD = 43
#: their scale: N(0, 0.1^2) entries, three times the RMS entry of the P = 1000 MAP's forms
RANDOM_START_SCALE = 0.1


def _perms(V: int):
    return list(itertools.permutations(range(V)))


def relabel_forms(M1, M2, p, V: int):
    """The forms seen through the relabelling ``p`` of the tokens: ``Pi^T M Pi`` on both layers,
    ``Pi`` permuting the token block of the features (the first ``V`` of ``n``)."""
    n = M1.shape[0]
    Pi = jnp.eye(n)[np.r_[list(p), V:n]]
    Pi2 = jax.scipy.linalg.block_diag(Pi, Pi)
    return Pi.T @ M1 @ Pi, Pi2.T @ M2 @ Pi2


def symmetrise(M1, M2, V: int):
    """The average of (M1, M2) over the ``V!`` relabellings of the tokens: the orthogonal
    projection onto the token-symmetric forms."""
    S1, S2 = jnp.zeros_like(M1), jnp.zeros_like(M2)
    for p in _perms(V):
        Q1, Q2 = relabel_forms(M1, M2, p, V)
        S1, S2 = S1 + Q1, S2 + Q2
    k = len(_perms(V))
    return S1 / k, S2 / k


def off_symmetric(M1, M2, V: int) -> tuple[float, float]:
    """The share of ``|M1|^2`` and of ``|M2|^2`` off the token-symmetric forms."""
    M1, M2 = jnp.asarray(M1), jnp.asarray(M2)
    S1, S2 = symmetrise(M1, M2, V)
    return tuple(float(jnp.sum((M - S) ** 2) / jnp.sum(M**2)) for M, S in ((M1, S1), (M2, S2)))


def perm_distance(a, b, V: int, identity: bool = False) -> tuple[float, tuple]:
    """``(d, p)``: the least relative distance ``|a - p(b)| / |a|`` over the relabellings ``p``
    of the tokens (``a``, ``b`` pairs of forms (M1, M2), both layers together; only the identity
    with ``identity``), and the relabelling that reaches it."""
    a = tuple(np.asarray(m) for m in a)
    na = float(np.sqrt(np.sum(a[0] ** 2) + np.sum(a[1] ** 2)))
    best = (np.inf, None)
    for p in [tuple(range(V))] if identity else _perms(V):
        q1, q2 = relabel_forms(jnp.asarray(b[0]), jnp.asarray(b[1]), p, V)
        d = float(np.sqrt(np.sum((a[0] - q1) ** 2) + np.sum((a[1] - q2) ** 2))) / na
        best = min(best, (d, p), key=lambda t: t[0])
    return best


def _flat(M1, M2):
    return jnp.concatenate([jnp.ravel(M1), jnp.ravel(M2)])


def _forms(x, n: int):
    return x[: n * n].reshape(n, n), x[n * n :].reshape(2 * n, 2 * n)


def symmetric_minimum(task, hyper, tokens, activation: str, forms, maxiter: int = 3000, *,
                      data=None):  # fmt: skip
    """The potential minimised over the token-symmetric forms (L-BFGS from the symmetrised
    ``forms``, gradient tolerance 1e-7, relative decrease 1e-15, ``maxiter`` steps), on the
    blocked potential (:func:`~bayes_attn.experiments.induction.blocked_potential`; ``data``:
    ``tokens``' :func:`~bayes_attn.experiments.induction.blocked_data` where the caller has it).

    Returns ``{"U_start", "U", "M1", "M2", "converged", "grad_norm", "steps"}``: the potential at
    the symmetrised ``forms`` and at the minimum, the minimum's forms, whether L-BFGS converged and
    the norm of its (projected) gradient."""
    from bayes_attn.theory._lbfgs import lbfgs

    V, n = task.V, task.n_features
    data = blocked_data(task, tokens) if data is None else data

    def U(y):
        return blocked_potential(_flat(*symmetrise(*_forms(y, n), V)), data, blocked_scales(hyper),
                                 activation)  # fmt: skip

    vg = jax.jit(jax.value_and_grad(U))
    y0 = _flat(*symmetrise(jnp.asarray(forms[0]), jnp.asarray(forms[1]), V))
    r = lbfgs(vg, y0, gtol=1e-7, ftol=1e-15, maxiter=check_int("maxiter", maxiter, 1), maxcor=30)
    M1, M2 = symmetrise(*_forms(jnp.asarray(r.x), n), V)
    return {"U_start": float(vg(y0)[0]), "U": float(r.fun), "M1": np.asarray(M1),
            "M2": np.asarray(M2), "converged": bool(r.success),
            "grad_norm": float(np.linalg.norm(r.jac)), "steps": int(r.nit)}  # fmt: skip


def study_map(task, hyper, activation: str, P: int, seed: int, maps: str = "",
              maxiter: int = 300) -> dict:  # fmt: skip
    """The ``induction`` study's MAP at (activation, P, seed): ``{"U", "M1", "M2", "from_file"}``
    (U the lowest of the starts' potentials). Read from the file ``maps`` (an ``induction``
    sweep with ``store_maps`` at this L and V) where it holds the finished point, else recomputed
    by :func:`~bayes_attn.experiments.induction.map_search` with the study's keys, starts and
    ``maxiter``."""
    if maps:
        import xarray as xr

        with xr.open_dataset(maps) as f:
            mp = f.load()
        ok = (
            "M1" in mp
            and int(mp.L[0]) == task.L
            and int(mp.V[0]) == task.V
            and activation in mp.activation
            and P in mp.P
            and seed in mp.seed
        )
        if ok:
            one = mp.squeeze(["L", "V"]).sel(activation=activation, P=P, seed=seed)
            if bool(one.done):
                U = min(float(one[k]) for k in one.data_vars if str(k).startswith("U_"))
                return {"U": U, "M1": one.M1.values, "M2": one.M2.values, "from_file": True}
    s = map_search(task, hyper, P, activation, seed=seed, maxiter=maxiter)
    return {"U": float(s["modes"][s["won"]].U), "M1": np.asarray(s["map"]["M1"]),
            "M2": np.asarray(s["map"]["M2"]), "from_file": False}  # fmt: skip


def symmetry_data(task, name: str, P: int, seed: int):
    """The tokens of data ``name``: ``real`` the study's dataset (P, seed; the run key's dataset
    key); ``sym`` its first ``ceil(P / V!)`` sequences and every relabelling of each
    (:func:`bayes_attn.induction.relabellings`), ``V! ceil(P / V!)`` sequences."""
    from bayes_attn.induction import relabellings

    tokens = task.sample(dataset_key(run_key(None, seed)), P)
    if name == "real":
        return tokens
    if name == "sym":
        k = -(-P // len(_perms(task.V)))
        return jnp.asarray(relabellings(tokens[:k], task.V))
    raise ValueError(f"runs: data must be 'real' or 'sym', got {name!r}")


def symmetry_start(task, name: str, seed: int, study=None) -> dict:
    """The start ``name``: ``zero`` and ``circuit`` the study's
    (:func:`~bayes_attn.experiments.induction.map_search`'s keys),
    ``randJ`` N(0, RANDOM_START_SCALE^2) entries from the run key of ``seed`` folded with
    RANDOM_START_FOLD, then J; ``map`` the study's MAP (``study``, :func:`study_map`)."""
    n = task.n_features
    if name == "zero":
        k1, k2 = jax.random.split(jax.random.fold_in(run_key(None, seed), 2))
        scale = START_SCALE
    elif name.startswith("rand") and name[4:].isdigit():
        key = jax.random.fold_in(jax.random.fold_in(run_key(None, seed), RANDOM_START_FOLD),
                                 int(name[4:]))  # fmt: skip
        k1, k2 = jax.random.split(key)
        scale = RANDOM_START_SCALE
    elif name == "circuit":
        return circuit(task, 3.0)
    elif name == "map":
        return {"M1": jnp.asarray(study["M1"]), "M2": jnp.asarray(study["M2"])}
    else:
        raise ValueError(f"runs: start must be zero, circuit, randJ, map or floor, got {name!r}")
    return {"M1": scale * jax.random.normal(k1, (n, n)),
            "M2": scale * jax.random.normal(k2, (2 * n, 2 * n))}  # fmt: skip


def asymmetric_hessian(task, hyper, tokens, activation: str, forms, chunk: int = 20, *,
                       data=None):  # fmt: skip
    """The eigenvalues (ascending) of the potential's Hessian at ``forms`` restricted to the
    token-asymmetric forms (the complement of :func:`symmetrise`'s projection), by exact
    Hessian-vector products of the blocked potential, ``chunk`` at a time.

    On a dataset closed under relabelling the Hessian at a token-symmetric point has no block
    between symmetric and asymmetric forms, so a symmetric point whose asymmetric block is
    positive is a minimum, not a saddle; the prior's own curvature, chi / g_W, is the reference.
    ``data``: ``tokens``' :func:`~bayes_attn.experiments.induction.blocked_data`, where the caller
    has it. Returns ``(eigenvalues, dimension of the asymmetric forms)``."""
    V, n = task.V, task.n_features
    data = blocked_data(task, tokens) if data is None else data
    x = _flat(jnp.asarray(forms[0]), jnp.asarray(forms[1]))
    S = np.asarray(jax.vmap(lambda v: _flat(*symmetrise(*_forms(v, n), V)))(jnp.eye(x.size)))
    w, Q = np.linalg.eigh(np.eye(x.size) - 0.5 * (S + S.T))
    Q = Q[:, w > 0.5]  # an orthonormal basis of the asymmetric forms
    grad = jax.grad(lambda y: blocked_potential(y, data, blocked_scales(hyper), activation))
    hvp = jax.jit(jax.vmap(lambda v: jax.jvp(grad, (x,), (v,))[1]))
    HQ = np.concatenate([np.asarray(hvp(jnp.asarray(Q[:, i : i + chunk].T)))
                         for i in range(0, Q.shape[1], chunk)])  # fmt: skip
    H = Q.T @ HQ.T
    return np.linalg.eigvalsh(0.5 * (H + H.T)), Q.shape[1]


def _search(task, hyper, tokens, activation, start, maxiter, data):
    """The study's MAP search (trust-krylov, difference products, the blocked potential on
    ``data``, ``tokens``' :func:`blocked_data`) from one start: ``(x, U, converged)``."""
    from bayes_attn.inference.potential import find_modes
    from bayes_attn.models.two_layer import two_layer_kernel_model

    def fg(x):
        return blocked_value_and_grad(x, data, blocked_scales(hyper), activation=activation)

    (mode,) = find_modes(two_layer_kernel_model, starts=[start],
                         model_args=(task, hyper, tokens, activation, None), maxiter=maxiter,
                         hvp="difference", value_and_grad=fg)  # fmt: skip
    M = mode.potential.unravel(jnp.asarray(mode.x))
    return (np.asarray(M["M1"]), np.asarray(M["M2"])), float(mode.U), bool(mode.converged)


# --------------------------------------------------------------------------------------------------
# The sweep kind ``induction_symmetry``

#: the options of the ``induction_symmetry`` kind: ``runs`` the ``DATA:START`` searches at each
#: point (:func:`symmetry_data`, :func:`symmetry_start`; start ``floor``: the token-symmetric
#: minimum from the symmetrised study MAP), ``maxiter`` the search's steps, ``hessian`` how many
#: of the lowest eigenvalues of the asymmetric block at ``sym:floor`` to write (0: none),
#: ``maps`` the study's store_maps file (empty: recompute the MAP) and ``map_maxiter`` its steps
SYMMETRY_DEFAULTS = {
    "runs": ["real:zero", "sym:zero", "sym:circuit", "sym:map", "sym:floor"],
    "maxiter": 500,
    "hessian": 0,
    "maps": "",
    "map_maxiter": 300,
}

#: the variables an ``induction_symmetry`` sweep writes whose meaning here differs from the one
#: table, :data:`bayes_attn.experiments.kinds.DESCRIPTIONS`, which describes the rest (dims ``run``,
#: ``other``: the option ``runs``; ``eigen``: the ``hessian`` lowest eigenvalues)
DESCRIPTIONS = {"grad_norm": ("1", "|grad U| at the run's mode (floor: the symmetric gradient)")}


def check_symmetry(cfg, options: dict) -> dict:
    """The runs ``DATA:START`` (data real or sym; start zero, circuit, randJ, map or floor, each
    once), integers ``maxiter``, ``map_maxiter`` >= 1 and ``hessian`` >= 0 (which needs the run
    ``sym:floor``), ``maps`` a path or empty: a ``ValueError`` naming the first that is not."""
    from bayes_attn.experiments.induction import check_induction

    check_induction(cfg, {})
    runs = options.get("runs", SYMMETRY_DEFAULTS["runs"])
    if isinstance(runs, str):
        runs = [r for r in runs.split(",") if r]
    if not runs or len(set(runs)) != len(runs):
        raise ValueError(f"runs must list distinct DATA:START, got {runs!r}")
    for r in runs:
        data, _, start = str(r).partition(":")
        ok = start in ("zero", "circuit", "map", "floor") or (
            start.startswith("rand") and start[4:].isdigit()
        )
        if data not in ("real", "sym") or not ok:
            raise ValueError(
                f"runs: each run is DATA:START, DATA real or sym, START zero, circuit, randJ, map "
                f"or floor, got {r!r}"
            )
    options["runs"] = list(runs)
    for name, low in (("maxiter", 1), ("hessian", 0)):
        if name in options:
            options[name] = check_int(name, options[name], low)
    if options.get("hessian", 0) and "sym:floor" not in runs:
        raise ValueError("hessian: the Hessian is taken at the run sym:floor; add it to runs")
    return check_study_map(options)


def check_study_map(options: dict) -> dict:
    """The options of :func:`study_map` that a kind passes on, ``maps`` a path or empty and
    ``map_maxiter`` an integer >= 1: a ``ValueError`` naming the first that is not."""
    if "map_maxiter" in options:
        options["map_maxiter"] = check_int("map_maxiter", options["map_maxiter"], 1)
    if not isinstance(options.get("maps", ""), str):
        raise ValueError(f"maps must be a file's path or empty, got {options['maps']!r}")
    return options


def _run(task, hyper, act, tokens, start, maxiter, study, data):
    if start == "floor":
        m = symmetric_minimum(task, hyper, tokens, act, (study["M1"], study["M2"]), maxiter,
                              data=data)  # fmt: skip
        return (m["M1"], m["M2"]), m["U"], m["converged"]
    return _search(task, hyper, tokens, act, symmetry_start(task, start, study["seed"], study),
                   maxiter, data)  # fmt: skip


def symmetry_point(cfg, pt, task, hyper) -> dict:
    """One grid point of an ``induction_symmetry`` sweep: each run of the option ``runs``, its
    mode's potential, shares off the symmetric forms, invariance check, distances to the other
    runs' modes (as is and up to relabelling) and to the study's MAP; with ``hessian`` the lowest
    eigenvalues of the asymmetric block at ``sym:floor`` (:func:`asymmetric_hessian`)."""
    from bayes_attn.induction import InductionTask

    o = {**SYMMETRY_DEFAULTS, **cfg.options}
    task = InductionTask(task.L, task.V, task.tokens)
    act, P, seed, V = pt["activation"], int(pt["P"]), int(pt["seed"]), task.V
    runs = o["runs"]
    study = {"seed": seed}
    if any(r.endswith((":map", ":floor")) for r in runs):
        study.update(study_map(task, hyper, act, P, seed, o["maps"], o["map_maxiter"]))
    rows, forms = {}, {}
    datas = {k: symmetry_data(task, k, P, seed) for k in {r.split(":")[0] for r in runs}}
    blocked = {k: blocked_data(task, t) for k, t in datas.items()}  # once for all the runs
    for r in runs:
        data, start = r.split(":")
        tokens, d = datas[data], blocked[data]
        t0 = time.perf_counter()
        (M1, M2), U, ok = _run(task, hyper, act, tokens, start, o["maxiter"], study, d)

        def vg(x, d=d):
            return blocked_value_and_grad(x, d, blocked_scales(hyper), activation=act)

        x = _flat(jnp.asarray(M1), jnp.asarray(M2))
        g = vg(x)[1]
        if start == "floor":
            g = _flat(*symmetrise(*_forms(g, task.n_features), V))
        dU = max(abs(float(vg(_flat(*relabel_forms(jnp.asarray(M1), jnp.asarray(M2), p, V)))[0])
                     - U) for p in _perms(V))  # fmt: skip
        rows[r] = {"U": U, "converged": float(ok), "grad_norm": float(jnp.linalg.norm(g)),
                   **dict(zip(("off_symmetric1", "off_symmetric2"), off_symmetric(M1, M2, V),
                              strict=True)),
                   "perm_dU": dU, "P_data": float(tokens.shape[0]),
                   "seconds": time.perf_counter() - t0}  # fmt: skip
        forms[r] = (M1, M2)
    k = len(runs)
    dist, drel = np.full((k, k), np.nan), np.full((k, k), np.nan)
    for i, a in enumerate(runs):
        for j, b in enumerate(runs):
            if i != j and a.split(":")[0] == b.split(":")[0]:
                dist[i, j] = perm_distance(forms[a], forms[b], V, identity=True)[0]
                drel[i, j] = perm_distance(forms[a], forms[b], V)[0]
    dmap = [perm_distance(forms[r], (study["M1"], study["M2"]), V, identity=True)[0]
            if r.startswith("real:") and "M1" in study else np.nan for r in runs]  # fmt: skip
    out = {name: (("run",), np.array([rows[r][name] for r in runs])) for name in rows[runs[0]]}
    out.update(
        distance=(("run", "other"), dist),
        distance_relabelled=(("run", "other"), drel),
        distance_map=(("run",), np.array(dmap)),
        U_map=((), np.asarray(study.get("U", np.nan))),
        map_from_file=((), np.asarray(float(study.get("from_file", np.nan)))),
        M1=(("run", "M1_row", "M1_col"), np.stack([forms[r][0] for r in runs])),
        M2=(("run", "M2_row", "M2_col"), np.stack([forms[r][1] for r in runs])),
    )
    if o["hessian"]:
        t0 = time.perf_counter()
        lam, dim = asymmetric_hessian(task, hyper, datas["sym"], act, forms["sym:floor"],
                                      data=blocked["sym"])  # fmt: skip
        low = np.full(o["hessian"], np.nan)
        low[: min(o["hessian"], lam.size)] = lam[: o["hessian"]]
        out.update(hessian_low=(("eigen",), low), hessian_high=((), np.asarray(lam[-1])),
                   asymmetric_dim=((), np.asarray(float(dim))),
                   hessian_seconds=((), np.asarray(time.perf_counter() - t0)))  # fmt: skip
    return out
