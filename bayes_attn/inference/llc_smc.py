"""The local learning coefficient by tempered SMC over the inverse temperature.

:func:`run_llc_smc` (``run_llc(..., sampler="smc")``) samples the localized tempered target of
:func:`bayes_attn.inference.llc_target.llc_target` by the package's adaptive tempered SMC
(:func:`bayes_attn.inference.run_smc`'s kernel and driver), along the path

    p_t(w) ∝ base(w) exp(-t L_n(w)),      t = λ nβ,  λ from 0 to 1,

from the base (the model's prior when ``gamma == 0`` and ``include_prior``; the localization
N(w*, 1/γ) without the prior) up to the target at nβ. The reference of the SMC is the base,
normalised, and its tempered part is ``l(w) = -nβ L_n(w) + log Z_base``, so the run gives, at every
tempering step k, the weighted mean of ``l`` at λ_k (``StepRecord.mean_log_likelihood``), hence

    λ̂(t_k) = t_k (E_{t_k}[L_n] - L_n(w*)),       log Z(t_k) = log ∫ base e^{-t_k L_n},

and ``F(t) = -log Z(t)``, in one run (docs/theory.md, "The tempered path: the LLC at every
temperature"). The estimate at nβ is the mean of L_n over the rejuvenated particles at λ = 1.

Error bars come from independent runs: λ̂_r per run, ``llc_se = sd(λ̂_r) / sqrt(R)``; the
default R = 16 keeps the relative error of the se itself near 1/sqrt(2(R - 1)) = 18%. The result
records the runs' agreement test (each run's own variance from its genealogy, the particles grouped
by their initial ancestor) and the lineages (``llc_smc_problems``).

With ``gamma > 0`` and ``include_prior`` the base (prior times localization) is not drawn
directly: the reference is N(w*, 1/γ) and the prior is tempered with the data, so the run is exact
at nβ but λ̂(t) on the way is not the fixed-base LLC (``exact_path`` 0; the per-step values are
NaN). The same holds for the frozen-embedding target (``frozen=True``, W_O integrated out), whose
integrated readout depends on nβ.

References
----------
Del Moral, Doucet & Jasra (2006), "Sequential Monte Carlo samplers"; Lee & Whiteley (2018),
"Variance estimation in the particle filter"; Chan & Lai (2013), "A general theory of particle
filters in hidden Markov models and some applications".
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bayes_attn import _arviz as az
from bayes_attn._deprecation import renamed
from bayes_attn._validation import with_changes
from bayes_attn.inference import llc as _llc
from bayes_attn.inference import potential, smc_evidence, smc_kernel
from bayes_attn.inference import smc as _smc
from bayes_attn.inference.llc_frozen import frozen_llc_target
from bayes_attn.inference.llc_settings import TARGET_FIELDS, LLCSettings
from bayes_attn.inference.llc_target import LLCTarget, llc_target
from bayes_attn.inference.record import RunRecord
from bayes_attn.keys import resolve_key

__all__ = [
    "DEFAULT_MIXING",
    "DEFAULT_RUNS",
    "FROZEN_BATCH",
    "LLC_SMC",
    "genealogy_variance",
    "llc_runs_agreement",
    "llc_smc_problems",
    "run_llc_smc",
]

DEFAULT_RUNS = 16
#: the moves' stopping rule (run_smc's ``mixing_target``): 0.2 rather than run_smc's 0.05 halves
#: the moves on the normal crossings with the same error and coverage (docs/validation.md)
DEFAULT_MIXING = 0.2
#: ``batch_size`` of the frozen target (``frozen=True``; 0, one vmap, otherwise): particles through
#: ``lax.map`` 16 at a time, the runs one after another. One vmap over the 1600 particles of 8
#: runs x 200 at Table 1 (P = 10, d = 256) spent 0.63 ms of CPU a gradient against 0.22 ms in
#: batches of 8 and 0.36 ms of 64, and 3.3x the wall time of batches of 16 for the same draws
#: (docs/validation.md, "The Table-1 check"); the design also grows with P (P L (V + L) numbers a
#: particle).
FROZEN_BATCH = 16
_ALPHA = 1e-3  # level of the runs' agreement test
LLC_SMC = _smc.SMCSettings(num_runs=DEFAULT_RUNS, mixing_target=DEFAULT_MIXING)
""":func:`run_llc_smc`'s SMC defaults: :class:`~bayes_attn.inference.smc.SMCSettings` with
:data:`DEFAULT_RUNS` runs and :data:`DEFAULT_MIXING` (``batch_size``: :data:`FROZEN_BATCH` with
``frozen``, unless given; None is the default too)."""


def _split(target: LLCTarget, model, model_args, model_kwargs):
    """(SplitDensity over one flat site ``x``, log Z_base, exact_path, reference name)."""
    d = int(target.x_star.size)
    prior_base = target.include_prior and target.gamma == 0.0
    if prior_base:
        if target.potential is None:
            raise ValueError("gamma: 0 needs the model's own prior, not the frozen target")
        sites = potential.split_log_density(model, model_args, model_kwargs)
        if sites.improper:
            raise ValueError(
                f"include_prior: the sites {sites.improper} have improper priors, so the prior "
                "cannot be the base; give gamma > 0"
            )
        _, unravel_sites = ravel_pytree({k: jnp.zeros(s) for k, s in sites.shapes.items()})

        def log_ref(x):
            return sites.log_parts(unravel_sites(x))[0]

        def draw(key):
            return {"x": ravel_pytree(sites.draw_reference(key))[0]}

        log_z_base = 0.0
        # the flat orders of the two unravels must agree: the reference is the log prior
        probe = target.x_star + 0.1 * jnp.cos(jnp.arange(d) + 1.0)
        diff = float(target.log_density(probe) + target.nbeta * target.loss(probe) - log_ref(probe))
        if not abs(diff) < 1e-6 * (1 + abs(float(log_ref(probe)))):
            raise RuntimeError(f"llc_smc: the prior reference disagrees with the target ({diff})")
    else:
        if target.gamma <= 0.0:
            raise ValueError("gamma: 0 leaves no base to start from unless include_prior=True")
        sd = 1.0 / math.sqrt(target.gamma)
        centre = target.x_star

        def log_ref(x):
            return jnp.sum(jax.scipy.stats.norm.logpdf(x, centre, sd))

        def draw(key):
            return {"x": centre + sd * jax.random.normal(key, centre.shape, centre.dtype)}

        log_z_base = 0.5 * d * math.log(2 * math.pi / target.gamma)

    exact_path = (not target.include_prior or prior_base) and target.potential is not None

    def log_parts(u):
        x = u["x"]
        return log_ref(x), target.log_density(x)

    split = potential.SplitDensity(log_parts, draw, {"x": (d,)}, ())
    return split, log_z_base, bool(exact_path), "prior" if prior_base else "localization"


def _per_particle(fn, x, batch_size: int):
    """``fn`` at every particle of ``x`` (runs, N, d), ``batch_size`` (or 64) at a time."""
    r, n = x.shape[:2]
    out = jax.jit(lambda xs: jax.lax.map(fn, xs, batch_size=batch_size or 64))(x.reshape(r * n, -1))
    return np.asarray(out).reshape(r, n)


def genealogy_variance(values, eve) -> float:
    """The variance of an equally weighted particle mean, from its genealogy: the particles
    grouped by their initial ancestor, ``sum_e (sum_{i in e} (f_i - f̄))² / N²`` (Chan & Lai 2013;
    Lee & Whiteley 2018). It tends to the true variance as N grows while enough lineages survive;
    with few lineages it is noisy and tends to be low."""
    values = np.asarray(values, dtype=float)
    n = values.size
    dev = np.bincount(np.asarray(eve), weights=values - values.mean(), minlength=n)
    return float(np.sum(dev**2) / n**2)


def llc_runs_agreement(llc_runs, run_var) -> tuple[float, float]:
    """``(chi2, p)``: do the runs' λ̂_r agree within their own genealogy errors?
    ``X2 = sum_r (λ̂_r - mean)² / mean_r(v_r)`` on R - 1 dof (nan for one run)."""
    from scipy import stats

    llc_runs = np.atleast_1d(np.asarray(llc_runs, dtype=float))
    k = llc_runs.size
    scale = float(np.mean(run_var))
    if k < 2 or not scale > 0:
        return math.nan, math.nan
    chi2 = float(np.sum((llc_runs - llc_runs.mean()) ** 2) / scale)
    return chi2, float(stats.chi2.sf(chi2, k - 1))


def llc_smc_problems(attrs) -> list[str]:
    """The warnings of an SMC LLC run from its attrs: collapsed lineages (any run below
    ``min_lineages``), runs whose λ̂ disagree beyond their genealogy errors (p < 1e-3), and fewer
    than 8 runs (the error bar from the runs' spread is itself then too uncertain)."""
    out = []
    lineages = np.atleast_1d(np.asarray(attrs["num_eve_lineages"]))
    thr = int(attrs["min_lineages"])
    low = np.flatnonzero(lineages < thr)
    if low.size:
        out.append(
            f"runs {low.tolist()} descend from fewer than {thr} initial particles: the particles "
            "collapsed, so the region they hold was not explored; raise num_particles or lower "
            "mixing_target"
        )
    p = float(attrs.get("llc_runs_p_value", math.nan))
    if math.isfinite(p) and p < _ALPHA:
        out.append(
            f"the runs' λ̂ disagree beyond their genealogy errors (chi2 {attrs['llc_runs_chi2']:.3g}"
            f" on {lineages.size - 1} dof, p = {p:.2g}): each run holds part of the target; raise "
            "num_particles or lower mixing_target"
        )
    if lineages.size < 8:
        out.append(
            f"{lineages.size} runs: the standard error from their spread is uncertain by "
            f"{100 / math.sqrt(2 * max(lineages.size - 1, 1)):.0f}%; use 8 or more"
        )
    return out


def run_llc_smc(
    model, w_star, *, model_args: tuple = (), model_kwargs: dict | None = None,
    n: int | None = None, frozen: bool = False, settings: LLCSettings | None = None,
    smc_settings: _smc.SMCSettings | None = None, seed: int | None = None, key=None,
    progress: bool = False, progress_bar: bool | None = None, **changes,
):  # fmt: skip
    """The LLC around ``w_star`` by tempered SMC from the base up to nβ (module docstring).

    Parameters
    ----------
    n : int, optional
        As in :func:`bayes_attn.inference.llc_target.llc_target`.
    settings : LLCSettings, optional
        The target's options: ``nbeta``, ``gamma``, ``include_prior`` (the
        :data:`~bayes_attn.inference.llc_settings.TARGET_FIELDS` of
        :class:`~bayes_attn.inference.llc_settings.LLCSettings`; its sampler's are not read).
    smc_settings : SMCSettings, optional
        The SMC's options (:class:`bayes_attn.inference.smc.SMCSettings`), default
        :data:`LLC_SMC`: ``num_runs`` :data:`DEFAULT_RUNS`, ``mixing_target`` 0.2
        (:data:`DEFAULT_MIXING`) and ``batch_size`` :data:`FROZEN_BATCH` with ``frozen``.
    **changes
        Fields of either: the target's go to ``settings``, the others to ``smc_settings``
        (``num_particles``, ``num_runs``, ``num_mcmc_steps``, ``max_mcmc_steps``,
        ``mixing_target``, ``target_ess``, ``kernel``, ``num_integration_steps``,
        ``batch_size``, ``max_tempering_steps``, ...); an unknown keyword raises ``TypeError``.
    frozen : bool
        Sample :func:`~bayes_attn.inference.llc_frozen.frozen_llc_target` (the frozen-embedding network,
        W_O integrated out) instead: the SMC counterpart of ``exact_frozen_llc``. Its particles
        go through ``lax.map`` :data:`FROZEN_BATCH` at a time, and HMC's first step is its
        ceiling π/(2L) (docs/validation.md, "The Table-1 check").
    progress : bool
        Announce the cost and show the progress (``progress_bar``, its old name, still works and
        warns).

    Returns
    -------
    arviz.InferenceData
        :func:`~bayes_attn.inference.llc.run_llc`'s form, one chain per run and one draw per
        particle (equally weighted, after the rejuvenation at λ = 1): ``loss``, ``llc``,
        ``distance``; ``acceptance`` (the rejuvenation's mean acceptance of each run). Attrs: the
        record (``llc_sampler`` "smc"), ``llc_runs`` (λ̂_r), ``llc_run_se`` (each run's genealogy
        error), ``llc_runs_chi2``, ``llc_runs_p_value``, ``num_eve_lineages``, ``min_lineages``,
        ``log_evidence`` (log Z(nβ) of the localized target, the log of the runs' mean Z),
        ``log_evidence_se``, ``log_z_base`` (log Z(0)), ``exact_path``, ``reference`` and, per
        tempering step, all runs concatenated (split by ``num_tempering_steps``):
        ``path_nbeta`` (t_k), ``path_llc`` (λ̂(t_k)), ``path_log_z`` (log Z(t_k)), and
        ``wall_time_s``.
    """
    t0 = time.perf_counter()
    progress = renamed("progress_bar", progress_bar, "progress", progress)
    own = {k: changes.pop(k) for k in TARGET_FIELDS if k in changes}
    llc_s = with_changes(settings, LLCSettings, own, where="run_llc_smc")
    if changes.get("batch_size") is None and (smc_settings is None or "batch_size" in changes):
        changes["batch_size"] = FROZEN_BATCH if frozen else 0  # None: the default
    s = LLC_SMC if smc_settings is None else smc_settings
    s = with_changes(s, _smc.SMCSettings, changes, where="run_llc_smc").checked()
    rng, seed, key_attrs = resolve_key(key, seed)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    target = (frozen_llc_target if frozen else llc_target)(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, n=n, settings=llc_s
    )
    split, log_z_base, exact_path, ref_name = _split(target, model, model_args, model_kwargs)
    s, done = _run(split, int(target.x_star.size), rng, s, progress, first_step_at_cap=frozen)
    loss, dist, eve, llc_runs, run_var = _estimates(target, done, s)
    chi2, p_value = llc_runs_agreement(llc_runs, run_var)
    acc = np.broadcast_to(np.asarray(done.last.acceptance_rate)[:, None], loss.shape)
    record = RunRecord("llc", seed, s.num_runs, 0, s.num_particles, 1, settings={
        "llc_sampler": "smc", "nbeta": target.nbeta, "gamma": target.gamma,
        "include_prior": target.include_prior, "n": target.n, "frozen": int(frozen), **key_attrs,
    })  # fmt: skip
    idata = _llc._result(target, record, loss, dist, acc, math.nan, model, model_args, model_kwargs)
    attrs = {
        "llc_runs": llc_runs, "llc_run_se": np.sqrt(run_var), "llc_runs_chi2": chi2,
        "llc_runs_p_value": p_value, "log_z_base": log_z_base, "exact_path": int(exact_path),
        "reference": ref_name, **_path(done, target, log_z_base, exact_path),
        **_run_attrs(done, eve, s), "wall_time_s": time.perf_counter() - t0,
    }  # fmt: skip
    for group in az.groups(idata):
        idata[group].attrs.update(attrs)
    return idata


def _path(done, target, log_z_base, exact_path) -> dict:
    """t_k, λ̂(t_k) and log Z(t_k) per tempering step, all runs concatenated (the tempered part
    is -nβ L_n + log Z_base; NaN where the base's log Z is not exact), and the evidence."""
    nb, l_star = target.nbeta, target.init_loss
    lam = np.concatenate([[r.tempering_param for r in run] for run in done.records])
    mean_l = np.concatenate([[r.mean_log_likelihood for r in run] for run in done.records])
    cum = np.concatenate([np.cumsum([r.log_increment for r in run]) for run in done.records])
    t = lam * nb
    e_loss = (log_z_base - mean_l) / nb
    path_llc = t * (e_loss - l_star) if exact_path else np.full_like(t, np.nan)
    path_log_z = cum + (1.0 - lam) * log_z_base if exact_path else np.full_like(t, np.nan)
    log_z_runs = smc_evidence.run_log_evidences(done.records)
    log_z, log_z_se = smc_evidence.log_evidence(log_z_runs)
    return {"path_nbeta": t, "path_llc": path_llc, "path_log_z": path_log_z,
            "log_evidence": log_z, "log_evidence_se": log_z_se,
            "log_evidence_runs": log_z_runs}  # fmt: skip


def _run_attrs(done, eve, s) -> dict:
    """The runs' lineages, tempering steps and moves, and the SMC settings (the result's attrs)."""
    return {
        "num_eve_lineages": np.array([np.unique(e).size for e in eve]),
        "min_lineages": s.min_lineages,
        "num_particles": s.num_particles,
        "num_tempering_steps": np.array([len(run) for run in done.records]),
        "smc_kernel": s.kernel,
        "mixing_target": s.mixing_target,
        "target_ess": s.target_ess,
        "final_num_moves": np.asarray(done.last.num_moves, dtype=np.int64),
        "total_moves": int(
            sum(r.num_moves for run in done.records for r in run) + np.sum(done.last.num_moves)
        ),
    }


def _estimates(target, done, s):
    """The loss and |w - w*| of every particle (runs, N), the eve indices, each run's λ̂ and its
    genealogy variance."""
    x = done.state.smc.sampler_state.particles  # (runs, N, d), equally weighted
    eve = np.asarray(done.state.eve)
    loss = _per_particle(target.loss, x, s.batch_size)
    if target.sq_distance is None:
        dist = np.asarray(jnp.linalg.norm(x - target.x_star, axis=-1))
    else:
        dist = np.sqrt(_per_particle(target.sq_distance, x, s.batch_size))
    nb, l_star = target.nbeta, target.init_loss
    llc_runs = nb * (loss.mean(axis=1) - l_star)
    run_var = np.array([nb**2 * genealogy_variance(loss[r], eve[r]) for r in range(len(loss))])
    return loss, dist, eve, llc_runs, run_var


def _run(split, d, rng, s, progress, first_step_at_cap=False):
    """run_smc's driver on this split (the moves, the adaptive schedule, the rejuvenation): the
    settings for dimension ``d`` and the finished runs. ``first_step_at_cap``: HMC's first step
    is its ceiling π/(2L) (a quarter period in the cloud's metric) instead of 0.5 d^(-1/4)
    (:func:`~bayes_attn.inference.smc_kernel.build_moves`). The frozen target starts from
    N(w*, 1/γ), in whose metric it stays close to a unit Gaussian: its step climbs to the
    ceiling, but between tempering steps only, and there are 1-3 of them (0.09, 0.13, 0.17 at
    Table 1, linear P = 10), so at 0.09 the first step took 6 of a run's 13 moves. Started at the
    ceiling, the runs at Table 1 took 38-48% fewer moves for the same genealogy error
    (docs/validation.md, "The Table-1 check"). A constant step keeps every move exact."""
    flat0, unravel = ravel_pytree({"x": jnp.zeros(d)})
    s = s.for_dimension(d)
    seconds = _smc._announce(split.log_parts, unravel, flat0, s) if progress else math.nan
    program = _smc._compile(split, unravel, d, s)
    if first_step_at_cap and s.kernel == "hmc":
        cap = smc_kernel.build_moves("hmc", d, num_integration_steps=s.num_integration_steps)
        program = program._replace(init=_starting_at(program.init, cap.scale_max))
    with _smc._Progress(progress, s, seconds) as shown:
        return s, _smc._sample(program, rng, s, None, shown)


def _starting_at(init, step: float):
    """``init`` (keys -> the runs' states) with the moves' first step set to ``step``."""

    def start(keys):
        state = init(keys)
        params = dict(state.smc.parameter_override)
        params["step_size"] = jnp.full_like(params["step_size"], step)
        return state._replace(smc=state.smc._replace(parameter_override=params))

    return start
