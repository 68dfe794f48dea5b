"""Umbrella sampling of a model's posterior along one scalar site (a collective variable).

The free energy of a scalar site ``q`` (the order parameter ``aG``, or any latent or deterministic
scalar), ``F(q) = -log p(q | data)``, is what a physicist draws of a multimodal posterior: its
minima are the phases and its maximum between them is the barrier. Where the barrier is high, one
chain never crosses it. Umbrella sampling runs one chain per *window* ``k`` on the posterior tilted
by a harmonic bias,

    p_k(x) ∝ p(x | data) exp(-kappa_k / 2 (q(x) - q_k)^2),

so that each window holds ``q`` near its centre ``q_k``; neighbouring windows overlap, and MBAR
(:func:`bayes_attn.analysis.free_energy_profile`) removes the biases and joins the windows into
one ``F(q)``. The windows are independent: they run as one program, ``batch`` chains vectorised
at a time (``jax.vmap``; all at once by default, one by one for Level 1 on a CPU, whose gradient
does not vectorise), split over the local devices where there are several
(:mod:`bayes_attn.inference.sharding`).

Each window

1. starts on the path through the modes (``find_mode`` from each of ``starts``, sorted by q,
   joined by straight lines in the flat unconstrained space, and continued past the outer modes
   along the Laplace conditional mean of x given q), relaxed to the minimum of the biased
   potential ``U(x) + kappa_k / 2 (q(x) - q_k)^2`` (L-BFGS, ``optax.lbfgs``); where the minima
   of neighbouring windows jump apart by more than twice their spacing, the barrier is curved
   nearly as sharply as the bias and the windows would slide into a basin, so kappa there is
   raised fourfold (at most twice) and the starts relaxed again;
2. takes as its dense NUTS metric the inverse of that biased potential's Hessian there
   (:func:`bayes_attn.inference.potential.hessian`; eigenvalues by magnitude, floored), so that in
   the metric's coordinates the window's posterior is near-isotropic (``metric="mode"``: the
   nearest mode's Hessian plus ``kappa grad q grad q'``, two Hessians in all);
3. runs ``num_chains`` NUTS chains from the one NUTS home (:mod:`bayes_attn.inference.hmc`):
   ``num_warmup`` steps of dual averaging of the step, then ``num_samples`` draws, recording
   every scalar site.

The windows run as compiled calls (up to
:data:`~bayes_attn.inference.umbrella_windows.CALL_WINDOWS` at once where they are vectorised
together, ``batch`` 0; otherwise as many as fill one batch), each in a worker thread the caller
waits on, so that Ctrl-C stops the run within a second (:func:`interruptible`); with
``checkpoint`` the plan of the windows and the finished windows are kept (:class:`WindowStore`)
and a rerun resumes them without finding the modes again.

The module is cut as the run flows: the placement in :mod:`bayes_attn.inference.umbrella_plan`,
the windows' chains in :mod:`bayes_attn.inference.umbrella_windows`, the interrupt and the
checkpoint in :mod:`bayes_attn.inference.umbrella_store`; here the settings, the driver
:func:`run_umbrella`, the result and :func:`merge_umbrella`.

Default placement (no ``centres``): the modes are found from ``starts`` (default: a start in
each phase of the package's softmax models, :func:`bayes_attn.theory.modes.phase_starts`; for
any other model NumPyro's initial values from four keys); from the modes' q and the Laplace
standard deviation of q at each, windows run from ``past`` standard deviations below the lowest
mode to ``past`` above the highest, evenly spaced by the smallest mode's standard deviation
(between 8 and ``max_windows`` windows), with ``kappa = 1 / spacing^2`` (each bias one spacing
wide, so neighbours overlap). Where the windows cover one basin only, a :class:`CoverageWarning`
says so.
Refinement (``refine`` rounds): where two neighbours' histograms of q overlap less than
``min_overlap``, a window is added at the midpoint of their centres, started from the nearer
neighbour's last draw, and the new windows are run.

References
----------
Torrie & Valleau (1977), umbrella sampling; Shirts & Chodera (2008), MBAR; Kästner (2011),
"Umbrella sampling", WIREs Comput. Mol. Sci. 1, 932. docs/theory.md, "The free-energy landscape".
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int, with_changes
from bayes_attn.distributed import process_share
from bayes_attn.inference import potential
from bayes_attn.inference.convert import finish
from bayes_attn.inference.hmc import GRADIENTS_PER_DRAW
from bayes_attn.inference.record import RunRecord
from bayes_attn.inference.umbrella_plan import (
    GENERIC_STARTS,
    CoverageWarning,
    UmbrellaPlan,
    _phase_starts,
    coverage,
    plan_windows,
)
from bayes_attn.inference.umbrella_store import WindowStore, fingerprint, interruptible
from bayes_attn.inference.umbrella_windows import (
    RELAX_STEPS,
    _Chains,
    _merge,
    _refine,
    _run_windows,
    _scalar_sites,
    overlap,
)
from bayes_attn.keys import resolve_key
from bayes_attn.progress import announce, say, seconds_per_call

__all__ = ["CoverageWarning", "UmbrellaPlan", "UmbrellaSettings", "WindowStore", "fingerprint",
           "interruptible", "merge_umbrella", "overlap", "plan_windows", "run_umbrella",
           "umbrella_settings"]  # fmt: skip

#: the windows' metrics (run_umbrella's ``metric``)
METRICS = ("window", "mode")


@dataclasses.dataclass(frozen=True)
class UmbrellaSettings:
    """:func:`run_umbrella`'s options and their defaults (the one place they are set).

    ``UmbrellaSettings()`` holds :func:`run_umbrella`'s own defaults; :meth:`for_level` the
    landscape's at a level, which ``bayes-attn landscape`` and the ``landscape`` sweep read.
    :meth:`checked` checks them, each error naming its field.

    Attributes
    ----------
    num_warmup, num_samples, num_chains : int
        Per window: dual-averaging steps, draws kept, and chains (R-hat needs two or more).
        Defaults 200, 500, 2.
    max_windows : int
        The default placement's most windows (default 48).
    refine : int
        Rounds of refinement (default 1): windows added where neighbours overlap less than
        ``min_overlap``.
    min_overlap : float
        In [0, 1) (default 0.1): the least common area of two neighbours' histograms of q
        (:func:`~bayes_attn.inference.umbrella_windows.overlap`) that refinement accepts.
    past : float
        The default placement's reach past the outer modes, in Laplace sds (default 4).
    target_accept : float
        The dual averaging's target acceptance (default 0.8).
    batch : int
        Chains vectorised together (``jax.vmap``); the batches run one after another. 0 (the
        default) vectorises the windows' chains together, up to
        :data:`~bayes_attn.inference.umbrella_windows.CALL_WINDOWS` windows a call, best for a
        cheap density; 1 runs them one by one, best on a CPU for Level 1, whose gradient does
        not vectorise well. Also the Hessian-vector products per batch of each window's metric
        (30 for 0).
    metric : {"window", "mode"}
        Each window's dense NUTS metric, the inverse Hessian of its biased potential at its
        start (``"window"``, the default: a Hessian per window), or the nearest mode's Hessian
        plus the bias term ``kappa g g'`` (``"mode"``: two Hessians in all; for a costly density
        in many dimensions, such as Level 1's 900).
    """

    num_warmup: int = 200
    num_samples: int = 500
    num_chains: int = 2
    max_windows: int = 48
    refine: int = 1
    min_overlap: float = 0.1
    past: float = 4.0
    target_accept: float = 0.8
    batch: int = 0
    metric: str = "window"

    @classmethod
    def for_level(cls, level: str) -> UmbrellaSettings:
        """The landscape's settings at ``level``. Level 2 (``reduced``: one dimension, every
        window vectorised, a Hessian per window) takes :func:`run_umbrella`'s defaults: with
        fewer draws or one chain its barrier windows mix too little to be trusted at Table 1
        (docs/validation.md, "Free-energy profiles"). Level 1 (``kernel``: 900 dimensions,
        a gradient that does not vectorise on a CPU) runs one chain of 100 warm-up steps and 250
        draws in at most 32 windows, one chain at a time, with the two modes' Hessians as the
        metric (``metric="mode"``): the budget validated against SMC at the small preset."""
        if level == "reduced":
            return cls()
        if level == "kernel":
            return cls(num_warmup=100, num_samples=250, num_chains=1, max_windows=32, batch=1,
                       metric="mode")  # fmt: skip
        raise ValueError(f"level must be 'reduced' or 'kernel', got {level!r}")

    def options(self, *names) -> dict:
        """The fields ``names`` (default all) as keyword arguments of :func:`run_umbrella`."""
        o = dataclasses.asdict(self)
        return {n: o[n] for n in (names or o)}

    def checked(self) -> UmbrellaSettings:
        """Every option checked before any work starts, each error naming its parameter
        (``past`` and ``max_windows`` are checked by :func:`plan_windows`)."""
        o = dataclasses.asdict(self)
        for name, low in [("num_warmup", 0), ("num_samples", 4), ("num_chains", 1),
                          ("refine", 0), ("batch", 0)]:  # fmt: skip
            o[name] = check_int(name, o[name], low)
        if o["metric"] not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {o['metric']!r}")
        if not 0.0 < o["target_accept"] < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {o['target_accept']}")
        if not 0.0 <= o["min_overlap"] < 1.0:
            raise ValueError(f"min_overlap must be in [0, 1), got {o['min_overlap']}")
        return UmbrellaSettings(**o)


def umbrella_settings(settings: UmbrellaSettings | None = None, **changes) -> UmbrellaSettings:
    """``settings`` (default :class:`UmbrellaSettings`) with ``changes``, which must name its
    fields (:func:`run_umbrella`'s keywords ``num_warmup``, ``num_samples``, ...), checked
    (:func:`~bayes_attn._validation.with_changes`)."""
    return with_changes(settings, UmbrellaSettings, changes, where="run_umbrella").checked()


# --------------------------------------------------------------------------------------------------
# The driver


def run_umbrella(
    model, cv: str, *, model_args: tuple = (), model_kwargs: dict | None = None,
    settings: UmbrellaSettings | None = None, starts=None, centres=None, kappa=None,
    seed: int | None = None, key=None, mesh=None, windows=None,
    share: tuple[int, int] | None = None, checkpoint=None, finished=None, progress: bool = False,
    **changes,
):  # fmt: skip
    """Umbrella sampling of ``model``'s posterior along its scalar site ``cv``.

    Parameters
    ----------
    model : callable
        A NumPyro model with a finite density (the package's models at any level).
    cv : str
        A scalar latent or deterministic site (``aG``, ``cG``, ``a1``, ``c1``, ...).
    model_args, model_kwargs : tuple, dict
        The model's arguments.
    settings, **changes
        The fields of :class:`UmbrellaSettings` (its docstring lists them with their defaults;
        the landscape's per level: :meth:`UmbrellaSettings.for_level`). An unknown keyword is a
        TypeError naming it.
    starts : sequence of dict, optional
        Constrained values of every latent site, one inside each phase; the modes found from
        them place the default windows. Default: for the package's softmax models a start in
        each phase (:func:`bayes_attn.theory.modes.phase_starts`), for any other model
        NumPyro's initial values from :data:`~bayes_attn.inference.umbrella_plan.GENERIC_STARTS`
        keys.
    centres, kappa : optional
        The windows' centres and bias strength (scalar or per window); default
        :func:`plan_windows`.
    seed, key
        A seed or a PRNG key (not both; seed 0 when neither).
    mesh : jax.sharding.Mesh, optional
        The devices the windows are split over (default: the local devices).
    windows : sequence of int, optional
        Run only these of the planned windows (indices into the sorted centres): one host's share
        (:func:`bayes_attn.distributed.process_share`). Every host plans and relaxes the same
        windows, and each window's draws come from its own index, so :func:`merge_umbrella` of
        the shares equals the run of all (``refine`` must then be 0: refinement needs every
        window).
    share : (process_id, num_processes), optional
        Instead of ``windows``: this process's share of the planned windows (every
        ``num_processes``-th from ``process_id`` on).
    checkpoint : path, optional
        A file that keeps the plan of the windows (the modes and their Hessians) and the
        finished windows (:class:`WindowStore`), rewritten after each stage and each compiled
        call: a run interrupted (Ctrl-C stops it within a second, ``KeyboardInterrupt``) and
        started again with the same arguments neither finds the modes again nor runs the
        finished windows, and its result equals the uninterrupted run's. A file made with other
        arguments is refused. It is left in place; remove it once the result is written.
    finished : path, optional
        A file where an earlier run's result may have been written (``write_landscape``): if it
        holds the result of a run with these same arguments (its attr ``fingerprint``, which
        every result carries), that result is read back and nothing is run. A result kept beside
        the figures thus survives the loss of the checkpoint.
    progress : bool
        Announce the cost before starting, say each stage on stderr, and after each compiled
        call the time left, from the gradients per draw measured so far.
    Warns
    -----
    CoverageWarning
        Where the windows cover one basin only (one mode found, or modes left outside the
        windows): F is then the profile of that basin, and a phase elsewhere is missing from it.
        The attrs say the same (``basins_found``, ``basins_covered``, ``coverage``).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: every scalar site, dims (chain, draw, window); ``sample_stats``:
        ``acceptance_rate``, ``n_steps``, ``diverging``, ``step_size``; ``constant_data``:
        ``centre`` and ``kappa`` per window and the window's ``r_hat``, ``ess_bulk`` and
        ``acceptance`` (of ``cv``); ``observed_data``: the tokens, where the model has them.
        Attrs: the run record (``sampler = "umbrella"``, seed, chains, warm-up, draws, the
        model's options, versions) and ``cv``. The windows are sorted by centre.
        :func:`bayes_attn.analysis.free_energy_profile` turns it into F(q).
    """
    s = umbrella_settings(settings, **changes)
    windows, share = _check_share(windows, share, s.refine)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    rng, seed, key_attrs = resolve_key(key, seed)
    k_plan, k_run = jax.random.split(rng)
    pot = potential.flat_potential(model, model_args, model_kwargs)
    q = pot.scalar_site(cv)
    names = _scalar_sites(pot, cv)
    # the digest of the arguments, before any work
    digest = fingerprint(model, model_args, model_kwargs, cv, rng, starts, centres, kappa,
                         dataclasses.asdict(s), windows, share)  # fmt: skip
    kept = _finished(finished, digest, cv, progress)
    if kept is not None:
        return kept
    store = None if checkpoint is None else WindowStore(checkpoint, digest)
    plan = _plan(model, pot, cv, starts, centres, kappa, s, k_plan, store, progress)
    if share is not None:
        windows = np.asarray(process_share(range(len(plan.centres)), *share, interleave=True))
    if windows is not None and (windows[0] < 0 or windows[-1] >= len(plan.centres)):
        raise ValueError(f"windows: indices in [0, {len(plan.centres)}), got {windows}")
    if progress:
        _announce(pot, plan, cv, s, len(plan.centres) if windows is None else windows.size)
    opts = dict(plan=plan, mesh=mesh, progress=progress, store=store)
    chains = _run_windows(pot, q, names, plan.centres, plan.kappa, True, plan.starts,
                          jax.random.split(k_run, s.refine + 1)[0], s, windows=windows, **opts)  # fmt: skip
    centres_ = plan.centres if windows is None else plan.centres[windows]
    centres_, chains, rounds = _refinement(pot, q, names, centres_, chains, cv, s, k_run, opts)
    attrs = {"cv": cv, "windows": len(centres_), "target_accept": s.target_accept,
             "refine": s.refine, "refinement_rounds": rounds, "min_overlap": s.min_overlap,
             "metric": s.metric, "batch": s.batch, "mode_q": plan.mode_q,
             "mode_sd": plan.mode_sd, "planned_windows": len(plan.centres),
             **coverage(plan, plan.centres if windows is not None else centres_, cv),
             **key_attrs, "fingerprint": digest}  # fmt: skip
    record = RunRecord("umbrella", seed, s.num_chains, s.num_warmup, s.num_samples, settings=attrs)
    index = np.arange(len(centres_)) if windows is None else windows
    idata = _to_idata(chains, centres_, cv, record, (model, model_args, model_kwargs), index)
    if progress:
        _say_windows(idata, chains, centres_, cv)
    return idata


def _finished(path, digest: str, cv: str, progress: bool):
    """The result in ``path`` if it exists and was made by a run with the fingerprint
    ``digest``, else None."""
    if path is None or not Path(path).exists():
        return None
    kept = az.from_netcdf(path)
    if str(kept.posterior.attrs.get("fingerprint", "")) != digest:
        return None
    say("umbrella: %s read back from %s (a finished run with the same arguments)", cv, path,
        enabled=progress)  # fmt: skip
    return kept


def _check_share(windows, share, refine):
    """``windows`` (sorted, unique) and ``share`` checked: one or neither, and no refinement."""
    if share is not None:
        if windows is not None:
            raise ValueError("windows, share: give one or neither")
        share = (check_int("share[0]", share[0], 0), check_int("share[1]", share[1], 1))
    if (windows is not None or share is not None) and refine:
        raise ValueError("refine: refinement needs every window; give refine=0 with windows")
    if windows is not None:
        windows = np.unique(np.asarray(windows, dtype=int))
        if windows.size == 0:
            raise ValueError("windows: give at least one window index")
    return windows, share


def _plan(model, pot, cv, starts, centres, kappa, s, key, store, progress) -> UmbrellaPlan:
    """The plan of the windows: kept in ``store`` by an earlier run with the same arguments, or
    made by :func:`plan_windows` (the modes found by Newton, their Hessians) and kept there."""
    kept = store.plan() if store is not None else None
    if kept is not None:
        say("umbrella: the windows' plan (%d windows, %d modes) resumed from %s",
            len(kept.centres), len(kept.mode_q), store.path, enabled=progress)  # fmt: skip
        return kept
    known = starts is None and _phase_starts(model, pot.model_args, pot.model_kwargs) is not None
    say("umbrella: finding the modes (Newton in %d dimensions, from %s) and their Hessians "
        "before the windows are placed", pot.dim, "the starts given" if starts is not None
        else "a start in each phase" if known else f"{GENERIC_STARTS} NumPyro starts",
        enabled=progress)  # fmt: skip
    plan = plan_windows(model, cv, model_args=pot.model_args, model_kwargs=pot.model_kwargs,
                        starts=starts, centres=centres, kappa=kappa, past=s.past,
                        max_windows=s.max_windows, key=key)  # fmt: skip
    if store is not None:
        store.keep_plan(plan)
    return plan


def _announce(pot, plan, cv, s, W) -> None:
    """The cost before the windows start: one timed gradient times the gradients the windows
    take (a range: NUTS's trees are not known in advance; after the first compiled call the
    measured gradients per draw narrow it). The gradient timed is the program that found the
    modes (:func:`~bayes_attn.inference.potential.find_modes`' value and gradient), so that
    JAX's persistent compilation cache, where it is on, gives it back instead of a gradient
    compiled only to be timed."""
    seconds = seconds_per_call(jax.jit(jax.value_and_grad(pot.U)), jnp.asarray(plan.starts[0]))
    lo, hi = GRADIENTS_PER_DRAW["window"]
    draws = W * s.num_chains * (s.num_warmup + s.num_samples)
    hessians = W if s.metric == "window" else len(plan.mode_q)
    extra = 4 * pot.dim * hessians + 3 * 3 * W * RELAX_STEPS
    refine = f", and up to {s.refine} refinement round(s)" if s.refine else ""
    announce(f"run_umbrella: {W} windows in {cv} ({plan.centres[0]:.4g} to "
             f"{plan.centres[-1]:.4g}, kappa {plan.kappa[0]:.3g}) x {s.num_chains} chains x "
             f"({s.num_warmup} warm-up + {s.num_samples}) draws in {pot.dim} dimensions, {lo} "
             f"to {hi} gradients per draw{refine}", (extra + lo * draws, extra + hi * draws),
             seconds)  # fmt: skip


def _refinement(pot, q, names, centres, chains, cv, s, k_run, opts):
    """Up to ``s.refine`` rounds of windows added where neighbours overlap too little; returns
    the centres, the chains (sorted by centre) and the rounds run."""
    keys = jax.random.split(k_run, s.refine + 1)
    rounds = 0
    for r in range(s.refine):
        new_c, new_k, new_x = _refine(centres, chains.kappa, chains.draws[cv], chains.last,
                                      s.min_overlap)  # fmt: skip
        if new_c.size == 0:
            break
        rounds += 1
        say("umbrella: refinement %d adds %d window(s) at q = %s", r + 1, new_c.size,
            np.array2string(new_c, precision=4), enabled=opts["progress"])  # fmt: skip
        more = _run_windows(pot, q, names, new_c, new_k, False, new_x, keys[r + 1], s,
                            round_=r + 1, **opts)  # fmt: skip
        order = np.argsort(np.concatenate([centres, new_c]), kind="stable")
        centres = np.concatenate([centres, new_c])[order]
        chains = _merge(chains, more, order)
    return centres, chains, rounds


def _say_windows(idata, chains, centres, cv) -> None:
    const = az.dataset(idata, "constant_data")
    for k in range(len(centres)):
        say("umbrella: window %d, centre %.4g, kappa %.3g: mean %s %.4g, acceptance %.2f, "
            "R-hat %.3f, ESS %.0f", k, centres[k], chains.kappa[k], cv,
            chains.draws[cv][k].mean(), float(const.acceptance[k]), float(const.r_hat[k]),
            float(const.ess_bulk[k]))  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The result


def _window_stats(chains: _Chains, cv: str) -> dict:
    qd = chains.draws[cv]
    r_hat = np.array([_rhat(w) for w in qd])
    ess = np.array([az.ess(w) for w in qd])
    return {
        "r_hat": (("window",), r_hat),
        "ess_bulk": (("window",), ess),
        "acceptance": (("window",), chains.acceptance.mean(axis=(1, 2))),
    }


def _rhat(draws) -> float:
    """Split R-hat of (chain, draw) (one chain is split in two)."""
    d = np.asarray(draws, dtype=float)
    if d.shape[0] == 1:
        half = d.shape[1] // 2
        d = np.stack([d[0, :half], d[0, half : 2 * half]])
    return float(az.rhat(d, method="rank")) if d.shape[1] >= 4 else math.nan


def _to_idata(chains: _Chains, centres, cv, record, call, index):
    """The windows' draws as ArviZ groups over (chain, draw, window), finished by the one result
    builder, :func:`bayes_attn.inference.convert.finish` (the tokens, the record in every
    group's attrs); ``call`` is ``(model, model_args, model_kwargs)``."""
    import xarray as xr

    move = lambda a: np.moveaxis(a, 0, -1)  # (window, chain, draw) -> (chain, draw, window)  # noqa: E731
    stats = {
        "acceptance_rate": move(chains.acceptance),
        "n_steps": move(chains.steps),
        "diverging": move(chains.diverging),
        "step_size": move(np.broadcast_to(chains.step_size[..., None], chains.acceptance.shape)),
    }
    idata = az.from_dict(
        {"posterior": {n: move(v) for n, v in chains.draws.items()}, "sample_stats": stats},
        coords={"window": np.asarray(index)},
        dims={n: ["window"] for n in [*chains.draws, *stats]},
    )
    const = xr.Dataset(
        {"centre": ("window", centres), "kappa": ("window", chains.kappa),
         **_window_stats(chains, cv)},
        coords={"window": np.asarray(index)},
    )  # fmt: skip
    az.set_group(idata, "constant_data", const)
    return finish(idata, record, *call)


def merge_umbrella(parts):
    """Join the shares of one umbrella run (:func:`run_umbrella` with ``windows``, the same model,
    plan and seed on every host) into the result of the run of all windows, group by group with
    :func:`bayes_attn.io.concat_disjoint` (which refuses a window in two shares, or missing); a
    group without windows (the tokens) is the same in every share and taken from the first."""
    from bayes_attn.io import concat_disjoint

    parts = list(parts)
    if not parts:
        raise ValueError("parts: nothing to merge")
    first = az.dataset(parts[0], "posterior").attrs
    same = ("cv", "seed", "planned_windows", "draws", "chains")
    for p in parts[1:]:
        a = az.dataset(p, "posterior").attrs
        if any(str(a.get(k)) != str(first.get(k)) for k in same):
            raise ValueError(f"parts: not shares of one run (they differ in {same})")
    index = np.concatenate([az.dataset(p, "constant_data").window.values for p in parts])
    planned = int(first.get("planned_windows", index.size))
    merged = parts[0].copy()
    names = [f"share {i}" for i in range(len(parts))]
    for group in az.groups(parts[0]):
        if "window" not in az.dataset(parts[0], group).dims:
            continue
        # the one merge of disjoint shares: refuses a window in two shares, or one missing
        try:
            joined = concat_disjoint([az.dataset(p, group) for p in parts], "window",
                                     expected=np.arange(planned), names=names)  # fmt: skip
        except ValueError as err:
            raise ValueError(f"parts: {err}") from None
        az.set_group(merged, group, joined)
        merged[group].attrs.clear()  # a share's fingerprint is not the whole run's
        merged[group].attrs.update({k: v for k, v in first.items() if k != "fingerprint"},
                                   windows=planned)  # fmt: skip
    return merged
