"""The free energy of the order parameter from umbrella windows, by MBAR.

:func:`bayes_attn.inference.run_umbrella` samples ``K`` windows, each the posterior tilted by a
harmonic bias ``kappa_k / 2 (q - q_k)^2`` in one scalar site ``q``. MBAR (Shirts & Chodera 2008,
``pymbar.MBAR``) pools every draw of every window and weighs it for the unbiased posterior: with
``u_k(q) = kappa_k / 2 (q - q_k)^2`` and ``N_k`` independent draws per window, the weight of draw n
is ``1 / sum_k N_k exp(f_k - u_k(q_n))``, the ``f_k`` solving the MBAR equations. Only the biases
enter (the posterior's own density is common to all windows), so only q is needed.

* Draws are correlated: each chain of each window is subsampled at its statistical inefficiency
  (``pymbar.timeseries``, the integrated autocorrelation time of q), so that the MBAR standard
  errors, which assume independent draws, hold.
* ``F(q) = -log p(q)`` is reported on bins (the normalised density: ``-log(mass / width)``), its
  standard error from the covariance of the bins' masses (MBAR's asymptotic covariance).
* The overlap of neighbouring windows (MBAR's overlap matrix, ``O[k, k+1]``) says whether the
  windows join: below ``min_overlap`` (0.03, pymbar's rule of thumb) the profile is not to be trusted
  there and a warning says where.
* The minima (local minima of F that rise at least ``min_depth`` nats to either side), the
  barrier (F's maximum between the outer two minima, above each), and for a divide ``q0`` each
  side's mass and ``Delta F = F_strong - F_weak = log P(q < q0) - log P(q > q0)`` with its standard
  error; ``Delta F`` as a function of the divide.

References
----------
Shirts & Chodera (2008), J. Chem. Phys. 129, 124105 (MBAR); Chodera (2016), J. Chem. Theory Comput.
12, 1799 (statistical inefficiency, ``pymbar.timeseries``). docs/theory.md, "The free-energy
landscape".
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import xarray as xr
from scipy.special import logsumexp

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int, check_positive
from bayes_attn.progress import say
from bayes_attn.theory.profile import reduced_profile

__all__ = ["Verdict", "equal_weight_crossing", "free_energy_profile", "landscape_report",
           "landscape_text", "profile_mean", "profile_minima", "profile_verdict"]  # fmt: skip

#: pymbar's rule of thumb for the overlap of neighbouring states
MIN_OVERLAP = 0.03
#: the verdict's bounds on each window's R-hat and bulk ESS of q (:func:`profile_verdict`): one
#: split chain of 250 draws (Level 1's default) scatters its R-hat by a few hundredths, so the
#: classic 1.1; fewer than 20 independent draws in a window leave MBAR's weights there to chance
MAX_WINDOW_RHAT = 1.1
MIN_WINDOW_ESS = 20


def _subsample(q) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window: the subsampled draws pooled, N_k, and the statistical inefficiency g_k.

    ``q``: (window, chain, draw)."""
    from pymbar import timeseries

    kept, N, g = [], [], []
    for w in q:
        gk = max(_inefficiency(timeseries, chain) for chain in w)
        stride = max(1, math.ceil(gk))
        draws = np.concatenate([chain[::-1][::stride][::-1] for chain in w])
        kept.append(draws)
        N.append(draws.size)
        g.append(gk)
    return np.concatenate(kept), np.array(N), np.array(g)


def _inefficiency(timeseries, chain) -> float:
    if np.ptp(chain) == 0:
        return 1.0
    try:
        return float(timeseries.statistical_inefficiency(np.asarray(chain, dtype=np.float64)))
    except Exception:  # pymbar raises on a series too short or constant to estimate
        return 1.0


def _mbar(q_n, N_k, centres, kappa):
    import pymbar

    u_kn = 0.5 * kappa[:, None] * (q_n[None, :] - centres[:, None]) ** 2
    return pymbar.MBAR(u_kn, N_k, initialize="BAR")


def _expect(mbar, indicators) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased expectations of the rows of ``indicators`` and their covariance (MBAR's asymptotic
    covariance, assembled from its ``Theta`` as pymbar assembles the diagonal ``sigma``). Where
    pymbar's default (SVD) covariance does not converge, its ``approximate`` one is used."""
    kw = {"return_theta": True}
    try:
        out = mbar.compute_multiple_expectations(indicators, np.zeros(indicators.shape[1]), **kw)
    except np.linalg.LinAlgError:
        out = mbar.compute_multiple_expectations(
            indicators, np.zeros(indicators.shape[1]), uncertainty_method="approximate", **kw
        )
    n = indicators.shape[0]
    T = np.asarray(out["Theta"])
    cov = T[:n, :n] + T[n:, n:] - T[:n, n:] - T[n:, :n]
    return np.asarray(out["mu"]), cov


def _bin_masses(mbar, ind) -> tuple[np.ndarray, np.ndarray]:
    """Each bin's unbiased mass and their covariance. A bin no draw falls in has mass 0 and no
    covariance (nan): pymbar takes the log of each observable, and one that is zero for every
    draw would make the whole covariance nan, every bin's standard error with it."""
    full = ind.any(axis=1)
    if full.all():
        return _expect(mbar, ind.astype(np.float64))
    n = ind.shape[0]
    mu, cov = np.zeros(n), np.full((n, n), np.nan)
    if full.any():
        m, c = _expect(mbar, ind[full].astype(np.float64))
        mu[full] = m
        cov[np.ix_(full, full)] = c
    return mu, cov


def _log_ratio(mu, cov, i, j) -> tuple[float, float]:
    """``log mu_i - log mu_j`` and its delta-method standard error."""
    if mu[i] <= 0 or mu[j] <= 0:
        return math.nan, math.nan
    var = cov[i, i] / mu[i] ** 2 + cov[j, j] / mu[j] ** 2 - 2 * cov[i, j] / (mu[i] * mu[j])
    return float(math.log(mu[i]) - math.log(mu[j])), float(math.sqrt(max(var, 0.0)))


def _delta_F(mbar, q_n, divide) -> dict:
    """Each side's mass of ``divide`` and Delta F = log P(below) - log P(above), with s.e."""
    mu, cov = _bin_masses(mbar, np.stack([(q_n < divide), (q_n >= divide)]))
    dF, se = _log_ratio(mu, cov, 0, 1)
    return {"mass_below": mu[0], "mass_above": mu[1], "delta_F": dF, "delta_F_se": se}


def profile_minima(q, F, *, min_depth: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the minima of ``F`` on the grid ``q`` and of the maxima between them.

    A minimum is a grid point lower than its two neighbours on each side; of two neighbouring
    minima whose barrier rises less than ``min_depth`` above the higher one, the higher is
    dropped. Returns ``(minima, tops)``, ``tops[i]`` the highest point between minima i and i+1.
    """
    F = np.where(np.isfinite(F), F, np.inf)
    n = F.size
    cand = [i for i in range(n) if np.isfinite(F[i])
            and all(F[i] <= F[j] for j in range(max(0, i - 2), min(n, i + 3)))]  # fmt: skip
    changed = True
    while changed and len(cand) > 1:
        changed = False
        for a in range(len(cand) - 1):
            i, j = cand[a], cand[a + 1]
            seg = F[i : j + 1]
            top = float(np.max(np.where(np.isfinite(seg), seg, -np.inf)))
            if top - max(F[i], F[j]) < min_depth:
                cand.pop(a if F[i] > F[j] else a + 1)
                changed = True
                break
    tops = []
    for i, j in zip(cand[:-1], cand[1:], strict=True):
        seg = np.where(np.isfinite(F[i : j + 1]), F[i : j + 1], -np.inf)
        tops.append(i + int(np.argmax(seg)))
    return np.array(cand, dtype=int), np.array(tops, dtype=int)


def _bins(q_n, grid) -> np.ndarray:
    if grid is None:
        grid = 60
    if np.ndim(grid) == 0:
        n = check_int("grid", int(grid), 2)
        lo, hi = np.quantile(q_n, [1e-4, 1 - 1e-4])
        return np.linspace(lo, hi, n + 1)
    edges = np.sort(np.asarray(grid, dtype=np.float64).ravel())
    if edges.size < 3 or np.any(np.diff(edges) <= 0):
        raise ValueError("grid: give at least three increasing bin edges, or a number of bins")
    return edges


def _windows(idata):
    """(q (window, chain, draw), centres, kappa, cv) from a :func:`run_umbrella` result."""
    attrs = dict(az.dataset(idata, "posterior").attrs)
    cv = attrs.get("cv")
    if cv is None or "constant_data" not in az.groups(idata):
        raise ValueError("idata: not a run_umbrella result (no 'cv' attribute or constant_data)")
    const = az.dataset(idata, "constant_data")
    q = az.dataset(idata, "posterior")[cv].transpose("window", "chain", "draw").values
    return q, const["centre"].values, const["kappa"].values, cv


def free_energy_profile(
    idata,
    grid=None,
    *,
    divide: float | None = None,
    divides=None,
    min_depth: float = 1.0,
    min_overlap: float = MIN_OVERLAP,
) -> xr.Dataset:
    """F(q) of a :func:`~bayes_attn.inference.run_umbrella` result by MBAR, with its minima,
    barrier and the free-energy difference across a divide.

    Parameters
    ----------
    idata : InferenceData
        The windows (``posterior[cv]`` over chain, draw, window; ``constant_data`` ``centre``
        and ``kappa``).
    grid : int or array_like, optional
        The number of bins (default 60, over the pooled draws' 1e-4 to 1 - 1e-4 quantiles), or
        the bin edges.
    divide : float, optional
        Where to split the two phases for ``delta_F``. Default: the highest point of F between
        its outer two minima (nan where F has one minimum).
    divides : array_like, optional
        Divides at which ``delta_F`` is also reported (``delta_F_divide``). Default: every bin
        edge between the outer two minima.
    min_depth : float
        How far (nats) F must rise between two minima for both to count (:func:`profile_minima`).
    min_overlap : float
        Neighbouring windows whose MBAR overlap is below it are named in a warning.

    Returns
    -------
    xarray.Dataset
        Over ``q`` (bin centres): ``F`` = -log p(q) (normalised density; inf in an empty bin),
        ``F_se``, ``edge_lo``, ``edge_hi``. Over ``window``: ``centre``, ``kappa``,
        ``n_independent`` (draws kept), ``inefficiency`` (g), ``overlap_next`` (MBAR overlap with
        the next window; nan for the last), ``f`` (the window's MBAR free energy). Over
        ``minimum``: ``q_minimum``, ``F_minimum``. Scalars: ``divide``, ``mass_below``,
        ``mass_above``, ``delta_F`` = F_above - F_below = log P(below) - log P(above) (the strong
        phase above), ``delta_F_se``, ``q_barrier``, ``barrier_below`` and ``barrier_above``
        (F at the barrier above each outer minimum), ``min_overlap_next``. Over ``divide_q``:
        ``delta_F_divide``, ``delta_F_divide_se``. Attrs: the run's record and ``cv``.
    """
    min_depth = check_positive("min_depth", min_depth)
    if divide is not None and not math.isfinite(divide := float(divide)):
        raise ValueError(f"divide must be a finite value of the order parameter, got {divide}")
    if divides is not None and not np.all(np.isfinite(np.asarray(divides, dtype=np.float64))):
        raise ValueError("divides must be finite values of the order parameter")
    q, centres, kappa, cv = _windows(idata)
    q_n, N_k, g = _subsample(q)
    mbar = _mbar(q_n, N_k, centres, kappa)
    edges = _bins(q_n, grid)
    F, F_se = _profile(mbar, q_n, edges)
    centre_q = 0.5 * (edges[:-1] + edges[1:])
    minima, tops = profile_minima(centre_q, F, min_depth=min_depth)
    over = _overlap_next(mbar, len(centres))
    _warn_overlap(over, centres, min_overlap)
    q_top, barrier = _barrier(centre_q, F, minima)
    if divide is None:
        divide = q_top
    split = _delta_F(mbar, q_n, divide) if math.isfinite(divide) else dict.fromkeys(
        ("mass_below", "mass_above", "delta_F", "delta_F_se"), math.nan)  # fmt: skip
    if divides is None:
        divides = (edges[(edges > centre_q[minima[0]]) & (edges < centre_q[minima[-1]])]
                   if len(minima) >= 2 else np.array([]))  # fmt: skip
    divides = np.asarray(divides, dtype=np.float64).ravel()
    curve = [_delta_F(mbar, q_n, d) for d in divides]
    ds = xr.Dataset(
        {
            "F": ("q", F),
            "F_se": ("q", F_se),
            "edge_lo": ("q", edges[:-1]),
            "edge_hi": ("q", edges[1:]),
            "centre": ("window", centres),
            "kappa": ("window", kappa),
            "n_independent": ("window", N_k),
            "inefficiency": ("window", g),
            "overlap_next": ("window", over),
            "f": ("window", np.asarray(mbar.f_k)),
            "q_minimum": ("minimum", centre_q[minima]),
            "F_minimum": ("minimum", F[minima]),
            "divide": divide,
            **split,
            "q_barrier": q_top,
            "barrier_below": barrier[0],
            "barrier_above": barrier[1],
            "min_overlap_next": float(np.nanmin(over)) if len(over) > 1 else math.nan,
            "delta_F_divide": ("divide_q", np.array([c["delta_F"] for c in curve])),
            "delta_F_divide_se": ("divide_q", np.array([c["delta_F_se"] for c in curve])),
        },
        coords={"q": centre_q, "window": np.arange(len(centres)), "divide_q": divides},
    )
    return _stamp(ds, idata, cv, min_depth, min_overlap)


def _profile(mbar, q_n, edges) -> tuple[np.ndarray, np.ndarray]:
    """F = -log of the normalised density in each bin of ``edges`` and its standard error (inf
    and nan in an empty bin)."""
    width = np.diff(edges)
    ind = np.stack([(q_n >= a) & (q_n < b) for a, b in zip(edges[:-1], edges[1:], strict=True)])
    mu, cov = _bin_masses(mbar, ind)
    with np.errstate(divide="ignore", invalid="ignore"):
        F = np.where(mu > 0, -np.log(mu / width), np.inf)
        F_se = np.where(mu > 0, np.sqrt(np.clip(np.diag(cov), 0, None)) / mu, np.nan)
    return F, F_se


def _overlap_next(mbar, windows: int) -> np.ndarray:
    """Each window's MBAR overlap with the next (nan for the last)."""
    try:
        return np.append(np.diag(np.asarray(mbar.compute_overlap()["matrix"]), 1), np.nan)
    except np.linalg.LinAlgError:  # the overlap's eigenvalues did not converge: windows apart
        return np.append(np.zeros(windows - 1), np.nan)


def _barrier(centre_q, F, minima) -> tuple[float, tuple[float, float]]:
    """Where F is highest between its outer two minima, and its height above each (nan with
    fewer than two minima)."""
    if len(minima) < 2:
        return math.nan, (math.nan, math.nan)
    inner = F[minima[0] : minima[-1] + 1]
    top = int(np.argmax(np.where(np.isfinite(inner), inner, -np.inf))) + minima[0]
    F_top = float(F[top])
    return float(centre_q[top]), (F_top - float(F[minima[0]]), F_top - float(F[minima[-1]]))


def _stamp(ds, idata, cv, min_depth, min_overlap) -> xr.Dataset:
    """The run's record (the posterior's plain attrs) and the profile's own settings."""
    ds.attrs.update({k: v for k, v in az.dataset(idata, "posterior").attrs.items()
                     if isinstance(v, str | int | float | np.ndarray | np.generic)})  # fmt: skip
    ds.attrs.update(cv=cv, min_depth=min_depth, min_overlap=min_overlap, method="mbar")
    ds["F"].attrs["description"] = f"-log p({cv}) (normalised density, MBAR over the windows)"
    ds["delta_F"].attrs["description"] = "log P(q < divide) - log P(q >= divide)"
    return ds


def _warn_overlap(over, centres, min_overlap) -> None:
    bad = np.flatnonzero(over[:-1] < min_overlap)
    if bad.size:
        where = ", ".join(f"{centres[k]:.4g}-{centres[k + 1]:.4g}" for k in bad)
        warnings.warn(
            f"free_energy_profile: neighbouring windows overlap less than {min_overlap} between "
            f"centres {where}; F there is not to be trusted (add windows or lower kappa there)",
            stacklevel=3,
        )


# --------------------------------------------------------------------------------------------------
# The landscape of an order parameter beside Level 2


def landscape_report(idata, *, grid=None, divide=None, divides=None) -> xr.Dataset:
    """F(q) by MBAR (:func:`free_energy_profile`) with the exact Level-2 profile ``F_level2`` on
    the same grid (bin averages, at the run's P and preset, the log-determinant in as Level 1 has
    it; softmax aG, or linear cG with c1 integrated out), and the windows' ``r_hat``, ``ess_bulk``
    and ``acceptance``."""
    prof = free_energy_profile(idata, grid, divide=divide, divides=divides)
    a = prof.attrs
    const = az.dataset(idata, "constant_data")
    for name in ("r_hat", "ess_bulk", "acceptance"):
        prof[name] = ("window", const[name].values)
    act = str(a.get("activation", "softmax"))
    if "L" in a and (act, a.get("cv")) in (("softmax", "aG"), ("linear", "cG")):
        from bayes_attn.task import preset_from_attrs

        task, hyper = preset_from_attrs(a)  # tokens too: Level 2 refuses all but uniform ones
        logdet = bool(a.get("include_logdet", 1)) if a.get("level") == "reduced" else True
        try:
            prof["F_level2"] = ("q", _bin_profile(task, hyper, float(a["P"]), prof, logdet, act))
        except ValueError as err:  # no two phases at this preset: no Level-2 line
            say("landscape: no Level-2 profile (%s)", err)
    return prof


def _bin_profile(task, hyper, P, prof, include_logdet, activation="softmax") -> np.ndarray:
    """-log of the Level-2 mass of each bin over its width (41-point trapezoid per bin), the
    density conditioned on the grid's range (the range MBAR's F is normalised over: for linear
    attention's cG one Z2 image, half the mass)."""
    lo, hi = prof.edge_lo.values, prof.edge_hi.values
    t = np.linspace(0.0, 1.0, 41)
    x = lo[:, None] + (hi - lo)[:, None] * t[None]
    var = "aG" if activation == "softmax" else "cG"
    F = reduced_profile(task, hyper, P, activation, x, include_logdet, var=var)
    top = np.min(F, axis=1, keepdims=True)
    mass = np.trapezoid(np.exp(-(F - top)), x, axis=1)
    F_bin = top[:, 0] - np.log(mass / (hi - lo))
    ok = np.isfinite(F_bin)  # conditioned on the grid's range, as MBAR's F is
    return F_bin + logsumexp(-F_bin[ok] + np.log(hi - lo)[ok])


def equal_weight_crossing(P, delta_F) -> float:
    """The P where ``delta_F`` (F_strong - F_weak, one value per P, sorted by P) first changes
    sign, linear in log P between the two points that bracket it: where the two phases weigh
    the same. Non-finite values are left out; NaN where it does not change sign."""
    P, dF = np.asarray(P, dtype=np.float64).ravel(), np.asarray(delta_F, np.float64).ravel()
    if P.shape != dF.shape:
        raise ValueError(f"delta_F must have one value per P ({P.size}), got {dF.size}")
    ok = np.isfinite(dF) & np.isfinite(P)
    P, dF = P[ok], dF[ok]
    for i in range(len(P) - 1):
        if dF[i] == 0:
            return float(P[i])
        if dF[i] * dF[i + 1] < 0:
            t = dF[i] / (dF[i] - dF[i + 1])
            return float(np.exp(np.log(P[i]) + t * (np.log(P[i + 1]) - np.log(P[i]))))
    return math.nan


def profile_mean(prof) -> float:
    """The mean of q under the profile's density (bins with mass, weighted by mass): the
    posterior mean of the order parameter over the windows' range."""
    w = np.exp(-prof.F.values) * (prof.edge_hi - prof.edge_lo).values
    ok = np.isfinite(w)
    return float(np.sum((w * prof.q.values)[ok]) / np.sum(w[ok]))


class Verdict(NamedTuple):
    """Whether a profile is to be trusted (:func:`profile_verdict`): ``trusted``, the
    ``failures`` that make it not, and ``notes`` that do not decide it (the windows' coverage)."""

    trusted: bool
    failures: tuple[str, ...]
    notes: tuple[str, ...]

    def line(self) -> str:
        if self.trusted:
            return ("verdict: to be trusted (neighbour overlap >= "
                    f"{MIN_OVERLAP}, window R-hat <= {MAX_WINDOW_RHAT}, ESS >= {MIN_WINDOW_ESS})")  # fmt: skip
        return "verdict: NOT to be trusted: " + "; ".join(self.failures)


def profile_verdict(prof) -> Verdict:
    """The one judgement of a landscape (:func:`landscape_report`), printed by ``bayes-attn
    diagnose`` and ``bayes-attn landscape`` (which exits non-zero on it): not to be trusted where
    neighbouring windows overlap less than :data:`MIN_OVERLAP` (MBAR cannot join them), a
    window's R-hat of q exceeds :data:`MAX_WINDOW_RHAT` or its bulk ESS is under
    :data:`MIN_WINDOW_ESS` (its chain has not mixed in its window). Where the windows cover one
    basin only (the run's ``coverage`` attr), a note says so."""
    failures, notes = [], []
    ov = float(prof.min_overlap_next)
    if not ov >= MIN_OVERLAP:
        bad = np.flatnonzero(~(prof.overlap_next.values[:-1] >= MIN_OVERLAP))
        c = prof.centre.values
        where = ", ".join(f"{c[k]:.3g}-{c[k + 1]:.3g}" for k in bad[:4])
        failures.append(f"neighbour overlap {ov:.3f} < {MIN_OVERLAP} ({bad.size} gap(s): {where}"
                        f"{', ...' if bad.size > 4 else ''}); add windows or draws")  # fmt: skip
    if "r_hat" in prof:
        r, ess = prof.r_hat.values, prof.ess_bulk.values
        if np.any(r > MAX_WINDOW_RHAT):
            failures.append(f"window R-hat {np.nanmax(r):.3f} > {MAX_WINDOW_RHAT} "
                            f"({int(np.sum(r > MAX_WINDOW_RHAT))} window(s)); run longer")  # fmt: skip
        if np.any(ess < MIN_WINDOW_ESS):
            failures.append(f"window ESS {np.nanmin(ess):.0f} < {MIN_WINDOW_ESS} "
                            f"({int(np.sum(ess < MIN_WINDOW_ESS))} window(s)); run longer")  # fmt: skip
    if prof.attrs.get("coverage"):
        notes.append(f"warning: {prof.attrs['coverage']}")
    return Verdict(not failures, tuple(failures), tuple(notes))


def landscape_text(prof) -> str:
    """A few lines: the minima, the barrier, Delta F at the divide, the overlap, the windows,
    Level 2 on the same bins, and the verdict (:func:`profile_verdict`)."""
    a = prof.attrs
    lines = [f"free-energy profile of {a.get('cv', 'q')} by umbrella sampling + MBAR "
             f"({prof.sizes['window']} windows)"]  # fmt: skip
    lo, hi = float(prof.edge_lo.values[0]), float(prof.edge_hi.values[-1])
    lines.append(f"F = -log p({a.get('cv', 'q')}), p the posterior density normalised over the "
                 f"{prof.sizes['q']} bins from {lo:.3f} to {hi:.3f} (nats)")  # fmt: skip
    mins = ", ".join(f"{q:.3f} (F {F:.2f})" for q, F in
                     zip(prof.q_minimum.values, prof.F_minimum.values, strict=True))  # fmt: skip
    lines.append(f"minima: {mins or 'none'}")
    empty = ~np.isfinite(prof.F.values)
    if empty.any():
        lines.append(f"{int(empty.sum())} bin(s) empty (no draw after subsampling, F = inf): at "
                     + ", ".join(f"{x:.3f}" for x in prof.q.values[empty][:6])
                     + (", ..." if empty.sum() > 6 else ""))  # fmt: skip
    if math.isfinite(float(prof.q_barrier)):
        lines.append(f"barrier at {float(prof.q_barrier):.3f}: {float(prof.barrier_below):.2f} "
                     f"above the lower-q minimum, {float(prof.barrier_above):.2f} above the "
                     "higher-q one")  # fmt: skip
    if math.isfinite(float(prof.delta_F)):
        lines.append(f"Delta F (above - below {float(prof.divide):.3f}) = "
                     f"{float(prof.delta_F):.3f} ± {float(prof.delta_F_se):.3f}; masses "
                     f"{float(prof.mass_below):.4g}, {float(prof.mass_above):.4g}")  # fmt: skip
    ov = float(prof.min_overlap_next)
    lines.append(f"smallest neighbour overlap {ov:.3f}"
                 + (" (below 0.03: not to be trusted)" if ov < 0.03 else ""))  # fmt: skip
    if "r_hat" in prof:
        r = prof.r_hat.values
        lines.append(f"per-window R-hat max {np.nanmax(r):.3f}, ESS min {np.nanmin(prof.ess_bulk):.0f},"
                     f" acceptance {np.nanmin(prof.acceptance):.2f}-{np.nanmax(prof.acceptance):.2f}")  # fmt: skip
    if "F_level2" in prof:
        lines.append(_level2_line(prof))
    verdict = profile_verdict(prof)
    lines.extend(verdict.notes)
    lines.append(verdict.line())
    return "\n".join(lines)


def _level2_line(prof) -> str:
    """The exact Level-2 profile on the same bins, in numbers: F at the MBAR minima, Delta F at
    the same divide, and the largest gap to MBAR in standard errors."""
    F2, F, se = prof.F_level2.values, prof.F.values, prof.F_se.values
    q = prof.q.values
    at = [f"{x:.3f}: {F2[int(np.argmin(np.abs(q - x)))]:.2f}" for x in prof.q_minimum.values]
    parts = [f"F at the minima {', '.join(at)}"] if at else []
    divide = float(prof.divide)
    mass = np.exp(-F2) * (prof.edge_hi - prof.edge_lo).values
    below, above = np.nansum(mass[q < divide]), np.nansum(mass[q >= divide])
    if math.isfinite(divide) and below > 0 and above > 0:
        parts.append(f"Delta F {math.log(below) - math.log(above):.3f} at {divide:.3f}")
    ok = np.isfinite(F) & np.isfinite(F2) & (se > 0)
    if ok.any():
        gap = np.abs(F[ok] - F2[ok])  # only the finite bins: inf - inf is no number
        z = gap / se[ok]
        parts.append(f"largest |F - F_level2| {np.max(gap):.2f} nats, "
                     f"{np.max(z):.1f} s.e. ({ok.sum()} bins)")  # fmt: skip
    return "Level 2 on the same bins: " + ("; ".join(parts) or "no finite bin")
