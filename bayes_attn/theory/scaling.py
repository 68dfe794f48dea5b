"""The scaling of the transition points P*(L, V) for i.i.d. uniform tokens (issue 42, part 4).

* :func:`pstar_grid`: P* of both transitions on a log grid of (L, V) from Level 2 (linear: the
  second-order point and the crossover; softmax: the first-order point and its spinodals), as an
  ``xarray.Dataset``; a cell without a transition is NaN and its reason is counted.
* :func:`local_exponents` and ``ASYMPTOTIC``: the exponents of the linear second-order point,
  exact from its closed form, and its two limits in closed form, :func:`second_order_limits`
  (docs/theory.md, "The scaling of P*(L, V)").
* :func:`fit_exponents`: log P* = a + b log L + c log V (+ d log L log V) by least squares, with the
  residual-based standard errors, over a named region of the grid.
* :func:`level1_second_order`: the linear second-order point of the Level-1 action on one dataset
  (the exact Hessian at M = 0), the check of the grid against Level 1.

References
----------
Paper Sec. 5 (outlook: "the phase boundary P*(L, V) ... as a basis for scaling laws"); docs/theory.md
§7, §8 and "The scaling of P*(L, V)"; docs/validation.md, "The scaling of P*(L, V)".
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from scipy.sparse.linalg import LinearOperator, svds

import bayes_attn
from bayes_attn._validation import check_activation, check_int, check_tokens
from bayes_attn.theory.action import Scales
from bayes_attn.theory.boundaries import (
    crossover,
    second_order_closed_form,
    softmax_boundaries,
    softmax_boundaries_many,
)

#: the issue's (L, V) box
L_RANGE = (4, 256)
V_RANGE = (2, 512)

#: the transitions of each activation, in the Dataset's variable names
TRANSITIONS = {
    "linear": ("second_order", "crossover"),
    "softmax": ("first_order", "spinodal_lower", "spinodal_upper"),
}

#: the exponents (b, c) of P* ~ L^b V^c of the linear second-order point in its two limits,
#: derived in docs/theory.md "The scaling of P*(L, V)" from the exact root: long sequences
#: (L >> V) and, as L grows too, large vocabularies (V >> L; at finite L, b = 1/2 + 1/(4(sqrt(L) + 1)),
#: :func:`second_order_limits`)
ASYMPTOTIC = {"long": (-1.0, 2.0), "wide": (0.5, 0.5)}

#: regions of the grid a fit can be restricted to (ratio 4 on either side of the diagonal)
REGIONS = {
    "all": lambda L, V: np.ones(np.broadcast(L, V).shape, bool),
    "long": lambda L, V: L >= 4 * V,
    "wide": lambda L, V: V >= 4 * L,
}

_SPANS = (1e3, 1e5)  # crossover tracking spans in units of P*, tried in turn (400 points each)


def log_grid(lo: int, hi: int, n: int = 12, name: str = "L") -> np.ndarray:
    """``n`` distinct integers spaced evenly in log between ``lo`` and ``hi`` (both included)."""
    lo, hi = check_int(name, lo, 2), check_int(name, hi, 2)
    n = check_int("n", n, 2)
    if hi - lo + 1 < n:
        raise ValueError(f"{name}: [{lo}, {hi}] holds fewer than n = {n} integers")
    values = np.unique(np.rint(np.geomspace(lo, hi, n)).astype(int))
    k = 1
    while values.size < n:  # rounding merged neighbours at the low end: oversample
        values = np.unique(np.rint(np.geomspace(lo, hi, n + k)).astype(int))
        k += 1
    return values


def _axis(name: str, values) -> np.ndarray:
    """An (L or V) axis: a non-empty 1-D list of distinct integers >= 2, increasing."""
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D list of integers >= 2, got {values!r}")
    out = np.array([check_int(name, v, 2) for v in arr])
    if np.unique(out).size != out.size:
        raise ValueError(f"{name} must not repeat values, got {out.tolist()}")
    return np.sort(out)


def _activations(activation) -> tuple[str, ...]:
    acts = (activation,) if isinstance(activation, str) else tuple(activation)
    if not acts:
        raise ValueError("activation must name at least one of 'linear', 'softmax'")
    return tuple(check_activation(a) for a in acts)


def _scales(L, V, hyper) -> Scales:
    f = lambda x: jnp.float64(x)  # noqa: E731
    return Scales(f(L), f(V), f(hyper.g_w), f(hyper.g_o), f(hyper.sigma2))


def _linear_cell(sc: Scales) -> tuple[dict, dict]:
    """(values, reasons for NaN) of the linear transitions at one (L, V)."""
    P2 = float(second_order_closed_form(sc))
    values, reasons = {"second_order": P2, "crossover": math.nan}, {}
    if not math.isfinite(P2):
        return values, {"second_order": "no real root", "crossover": "no second-order point"}
    for span in _SPANS:
        values["crossover"] = crossover(sc, P2, span=span, markers=False)["crossover"]
        if math.isfinite(values["crossover"]):
            break
    else:
        reasons["crossover"] = f"no maximum of dcG/dlogP below {_SPANS[-1]:g} P*"
    return values, reasons


def _softmax_cell(sc: Scales) -> tuple[dict, dict]:
    """(values, reasons for NaN) of the softmax transitions at one (L, V)."""
    soft = softmax_boundaries(sc, float(second_order_closed_form(sc)))
    lo, hi = soft["spinodals"]
    values = {"first_order": soft["first_order"], "spinodal_lower": lo, "spinodal_upper": hi}
    if not math.isfinite(lo):
        why = "continuous: no coexistence of two minima"
        return values, dict.fromkeys(values, why)
    if not math.isfinite(soft["first_order"]):
        return values, {"first_order": "no equal-action root between the spinodals"}
    return values, {}


_CELLS = {"linear": _linear_cell, "softmax": _softmax_cell}
_FAILURES = (ArithmeticError, ValueError, np.linalg.LinAlgError)


def _softmax_cells(scs: list[Scales]) -> list:
    """:func:`_softmax_cell` at every cell, the solves batched across cells."""
    P2 = [float(second_order_closed_form(sc)) for sc in scs]
    out = []
    for res in softmax_boundaries_many(scs, P2):
        if isinstance(res, Exception) and not isinstance(res, _FAILURES):
            raise res
        if isinstance(res, Exception):
            keys = TRANSITIONS["softmax"]
            out.append(({}, dict.fromkeys(keys, f"failed: {type(res).__name__}")))
            continue
        lo, hi = res["spinodals"]
        values = {"first_order": res["first_order"], "spinodal_lower": lo, "spinodal_upper": hi}
        if not math.isfinite(lo):
            out.append((values, dict.fromkeys(values, "continuous: no coexistence of two minima")))
        elif not math.isfinite(res["first_order"]):
            out.append((values, {"first_order": "no equal-action root between the spinodals"}))
        else:
            out.append((values, {}))
    return out


_BATCHED = {"softmax": _softmax_cells}  # the linear crossover stays cell by cell (see pstar_grid)


def pstar_grid(Ls, Vs, activation="linear", hyper=None, batched: bool = True) -> xr.Dataset:
    """P* of the transitions of ``activation`` at every (L, V) of ``Ls`` x ``Vs``, from Level 2.

    Parameters
    ----------
    Ls, Vs : sequence of int
        Sequence lengths and vocabulary sizes, integers >= 2 (for example :func:`log_grid`).
    activation : str or sequence of str
        ``"linear"`` (variables ``second_order``, ``crossover``), ``"softmax"`` (``first_order``,
        ``spinodal_lower``, ``spinodal_upper``) or both.
    hyper : Hyper, optional
        The scales; default the paper's Table 1 (``Hyper.paper()``). Every P* is proportional to
        sigma^2 at fixed (L, V, g_W, g_O) (docs/theory.md §8).
    batched : bool
        Solve the softmax cells together, their programs batched across cells (one compile per
        program; :func:`bayes_attn.theory.boundaries.softmax_boundaries_many`), default; or cell
        by cell (``False``), as :func:`bayes_attn.theory.phase_boundaries` does. The two agree to
        1e-10. The linear cells are always solved one by one: the crossover is the maximum of a
        slope that the damped Newton continuation fixes only to ~1e-8, so any change in how its
        programs are evaluated (vmapped: ~3e-5 at L = 4, V = 2) moves it by more than 1e-10.

    Returns
    -------
    xarray.Dataset
        Dims (L, V). A cell where the theory has no such transition (for example a continuous
        softmax transition at small L) or where it fails is NaN; each variable's attrs
        ``nan_reasons`` count why (``"reason: count; ..."``, :func:`nan_counts` reads it back).
        The attrs record the provenance: level, tokens, scales, grid, package versions.
    """
    acts = _activations(activation)
    Ls, Vs = _axis("Ls", Ls), _axis("Vs", Vs)
    if hyper is None:
        hyper = bayes_attn.Hyper.paper()
    data = {}
    cells = [(i, j) for i in range(Ls.size) for j in range(Vs.size)]
    scs = [_scales(Ls[i], Vs[j], hyper) for i, j in cells]

    def solve(act):
        if batched and act in _BATCHED:
            return _BATCHED[act](scs)
        return [_one_cell(act, sc) for sc in scs]

    if batched and len(acts) > 1:  # the activations side by side, on two cores
        with ThreadPoolExecutor(len(acts)) as pool:
            solved_by = dict(zip(acts, pool.map(solve, acts), strict=True))
    else:
        solved_by = {act: solve(act) for act in acts}
    for act in acts:
        out = {k: np.full((Ls.size, Vs.size), np.nan) for k in TRANSITIONS[act]}
        why = {k: Counter() for k in TRANSITIONS[act]}
        for (i, j), (values, reasons) in zip(cells, solved_by[act], strict=True):
            for k, v in values.items():
                out[k][i, j] = v
            for k, r in reasons.items():
                why[k][r] += 1
        for k, arr in out.items():
            data[k] = xr.DataArray(arr, dims=("L", "V"))
            data[k].attrs.update(
                activation=act,
                units="sequences",
                nan_reasons="; ".join(f"{r}: {c}" for r, c in sorted(why[k].items())),
            )
    ds = xr.Dataset(data, coords={"L": Ls, "V": Vs})
    ds.attrs.update(
        level="Level 2 (reduced action, saddle point)",
        tokens="uniform",
        activations=",".join(acts),
        source="bayes_attn.theory.scaling.pstar_grid",
        grid=f"L {Ls.size} values in [{Ls[0]}, {Ls[-1]}], V {Vs.size} values in [{Vs[0]}, {Vs[-1]}]",
        bayes_attn_version=bayes_attn.__version__,
        jax_version=jax.__version__,
        **{k: float(v) for k, v in hyper.as_dict().items()},
    )
    return ds


def _one_cell(act: str, sc: Scales) -> tuple[dict, dict]:
    try:
        return _CELLS[act](sc)
    except _FAILURES as err:
        return {}, dict.fromkeys(TRANSITIONS[act], f"failed: {type(err).__name__}")


def nan_counts(ds: xr.Dataset) -> dict[str, dict[str, int]]:
    """``{variable: {reason: count}}`` of the NaN cells of a :func:`pstar_grid` Dataset."""
    out = {}
    for k, var in ds.data_vars.items():
        text = var.attrs.get("nan_reasons", "")
        out[k] = {r: int(c) for r, c in (p.rsplit(": ", 1) for p in text.split("; ") if p)}
    return out


# --------------------------------------------------------------------------------------------------
# Exponents


def local_exponents(L, V, hyper=None) -> tuple[np.ndarray, np.ndarray]:
    """(b, c) = (d log P*/d log L, d log P*/d log V) of the exact linear second-order point.

    L and V are treated as continuous (broadcast arrays of values >= 2). The limits are
    ``ASYMPTOTIC``: (-1, 2) for L >> V and (1/2 + 1/(4(sqrt(L) + 1)), 1/2) for V >> L
    (docs/theory.md, "The scaling of P*(L, V)").
    """
    hyper = hyper or bayes_attn.Hyper.paper()

    def logp(logL, logV):
        return jnp.log(second_order_closed_form(_scales(jnp.exp(logL), jnp.exp(logV), hyper)))

    grad = jax.vmap(jax.grad(logp, argnums=(0, 1)))
    L, V = np.broadcast_arrays(np.asarray(L, float), np.asarray(V, float))
    if np.any(~np.isfinite(L)) or np.any(L < 2):
        raise ValueError("L must be finite and >= 2")
    if np.any(~np.isfinite(V)) or np.any(V < 2):
        raise ValueError("V must be finite and >= 2")
    b, c = grad(jnp.log(L.ravel()), jnp.log(V.ravel()))
    return np.asarray(b).reshape(L.shape), np.asarray(c).reshape(L.shape)


def second_order_limits(L, V, hyper=None) -> dict:
    """The two limits of the exact linear second-order P* (docs/theory.md, "The scaling of P*(L, V)").

    ``long`` (L >> V): sigma^2 V^2 / (L sqrt(g_O g_W)), corrections O(V/L).
    ``wide`` (V >> L): sigma^2 sqrt(V) L^(3/4) / sqrt(g_O g_W (sqrt(L) + 1)), corrections O(L/V).
    The leading form of docs/theory.md §7 (the beta^2 term dropped) has L / sqrt(L + 1) in place of
    L^(3/4) / sqrt(sqrt(L) + 1) in the second: it is off by up to 9% at V >> L, L = 4-6.
    """
    hyper = hyper or bayes_attn.Hyper.paper()
    L, V = np.asarray(L, float), np.asarray(V, float)
    g = math.sqrt(hyper.g_o * hyper.g_w)
    return {
        "long": hyper.sigma2 * V**2 / (L * g),
        "wide": hyper.sigma2 * np.sqrt(V) * L**0.75 / (g * np.sqrt(np.sqrt(L) + 1)),
    }


def fit_exponents(ds: xr.Dataset, variable: str, region: str = "all", cross: bool = False) -> dict:
    """Least-squares fit of log P* = a + b log L + c log V (+ d log L log V with ``cross``).

    Over the finite cells of ``ds[variable]`` in ``region`` (a key of ``REGIONS``: ``"all"``,
    ``"long"`` L >= 4V, ``"wide"`` V >= 4L). The standard errors are the square roots of the
    diagonal of s^2 (X^T X)^-1, s^2 = RSS / (n - k): the residuals of the power law, not noise
    (the grid values are exact to ~1e-9), so they measure how far the power law misfits.

    Returns ``{"a", "b", "c"[, "d"]}: (value, standard error)`` plus ``n``, ``rms`` (of the log
    residuals) and ``region``.
    """
    if variable not in ds:
        raise ValueError(f"variable must be one of {sorted(ds.data_vars)}, got {variable!r}")
    if region not in REGIONS:
        raise ValueError(f"region must be one of {sorted(REGIONS)}, got {region!r}")
    L, V = np.meshgrid(ds["L"].values, ds["V"].values, indexing="ij")
    y = ds[variable].values
    keep = REGIONS[region](L, V) & np.isfinite(y) & (y > 0)
    cols = [np.ones(keep.sum()), np.log(L[keep]), np.log(V[keep])]
    names = ["a", "b", "c"]
    if cross:
        cols.append(np.log(L[keep]) * np.log(V[keep]))
        names.append("d")
    X = np.stack(cols, axis=1)
    n, k = X.shape
    if n <= k:
        raise ValueError(f"region {region!r}: {n} finite cells of {variable}, need more than {k}")
    coef, *_ = np.linalg.lstsq(X, np.log(y[keep]), rcond=None)
    resid = np.log(y[keep]) - X @ coef
    s2 = float(resid @ resid) / (n - k)
    se = np.sqrt(np.diag(s2 * np.linalg.inv(X.T @ X)))
    out = {name: (float(v), float(e)) for name, v, e in zip(names, coef, se, strict=True)}
    out.update(n=int(n), rms=float(np.sqrt(np.mean(resid**2))), region=region)
    return out


# --------------------------------------------------------------------------------------------------
# Level 1: the second-order point on a dataset


def _readout_map(tokens, L: int, V: int):
    """M -> Phi(A(M))^T y ((V + L) x V) for linear attention A = psi^T M psi / L: the first-order
    part of the readout's right-hand side B (docs/theory.md, "The scaling of P*(L, V)").

    The logits are gathered from M's four blocks and B is a scatter-add, O(P L^2) per call, with
    no (V L) x (V L) table (:func:`bayes_attn.algebra.logits_from_M` forms one, too large at
    L = 256, V = 512). ``tests/test_scaling.py`` checks it against the design of
    :func:`bayes_attn.algebra.phi`.
    """
    x = jnp.asarray(tokens)
    return lambda M: _apply(M, x, L, V)


@functools.partial(jax.jit, static_argnames=("L", "V"))
def _apply(M, x, L: int, V: int):
    y = jnp.roll(x, 1, axis=-1)  # targets: y[a] = x[a - 1]
    pos = V + jnp.arange(L)
    xa, xb, ya = x[:, :, None], x[:, None, :], y[:, :, None]
    pa, pb = pos[:, None], pos[None, :]
    K = M[xa, xb] + M[xa, pb] + M[pa, xb] + M[pa, pb]  # (P, L, L) logits
    w = (K / L).ravel()
    tok_idx = (xb * V + ya).ravel()  # (token at b, target at a)
    pos_idx = jnp.broadcast_to(pb * V + ya, K.shape).ravel()  # (position b, target at a)
    out = jnp.zeros(((V + L) * V,), M.dtype).at[tok_idx].add(w).at[pos_idx].add(w)
    return out.reshape(V + L, V)


@functools.partial(jax.jit, static_argnames=("L", "V"))
def _apply_transpose(Y, x, L: int, V: int):
    zero = jnp.zeros((V + L, V + L), Y.dtype)
    return jax.linear_transpose(lambda M: _apply(M, x, L, V), zero)(Y)[0]


def level1_second_order(tokens, V: int, hyper=None) -> dict:
    """Where M = 0 stops being a minimum of the Level-1 linear action on ``tokens`` (P, L).

    At M = 0 the attention vanishes, and to second order s(M) = |M|^2/(2 g_W) - g_O |B(M)|^2/(2
    sigma^4) + const, with B(M) = Phi(M)^T y linear in M (the readout's right-hand side). So M = 0
    is a minimum while g_W g_O sigma_max(B)^2 < sigma^4. B is a sum over the P sequences; with B =
    P Bbar the dataset puts the transition at P1 = sigma^2 / (sqrt(g_W g_O) sigma_max(Bbar)), the
    Level-1 counterpart of the Level-2 P* (which uses the average over datasets instead).

    Returns ``{"P": P1, "curvature": g_W g_O sigma_max(B)^2 / sigma^4}`` (> 1: M = 0 is a saddle).
    """
    hyper = hyper or bayes_attn.Hyper.paper()
    V = check_int("V", V, 2)
    tokens = jnp.asarray(check_tokens(tokens, None, V))
    P, L = tokens.shape
    n = V + L
    op = LinearOperator(
        (n * V, n * n),
        matvec=lambda v: np.asarray(_apply(jnp.asarray(v).reshape(n, n), tokens, L, V)).ravel(),
        rmatvec=lambda v: np.asarray(
            _apply_transpose(jnp.asarray(v).reshape(n, V), tokens, L, V)
        ).ravel(),
        dtype=np.float64,
    )
    top = float(svds(op, k=1, return_singular_vectors=False, tol=1e-10, random_state=0)[0])
    scale = math.sqrt(hyper.g_w * hyper.g_o) / hyper.sigma2
    return {"P": P / (scale * top), "curvature": (scale * top) ** 2}
