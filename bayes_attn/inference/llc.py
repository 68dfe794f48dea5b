"""The local learning coefficient (LLC) of any NumPyro model around a point w*.

The target is the localized, tempered posterior of singular learning theory (docs/theory.md,
"The local learning coefficient"),

    p(w) ∝ exp(-nβ L_n(w) - γ/2 |w - w*|²)      [times the prior, with ``include_prior=True``],

over the model's flat unconstrained space (:mod:`bayes_attn.inference.potential`), with L_n the
mean per-example negative log likelihood of the model's observed sites (``numpyro.factor`` sites
included), n the number of examples (the plates around the observed sites: P sequences for the
network) and nβ = n / log n by default. The estimate is

    llc = nβ (E_p[L_n(w)] - L_n(w*)),

which :func:`bayes_attn.analysis.llc.llc_estimate` forms from :func:`run_llc`'s result. The
package calls it ``llc``: λ is the SMC tempering exponent here.

Samplers (``sampler=``), all with vectorised chains started from Gaussian noise around w*:

* ``"sgld"``: w <- w + ε ∇log p(w) + √(2ε) ξ, the package's SGLD convention (devinterp's step
  size is 2ε: its update is -ε'/2 ∇ + N(0, ε')); a minibatch gradient when the model has a
  subsample plate (``batch_size`` of the network), full batch otherwise.
* ``"rmsprop"``: the same step preconditioned by RMSProp's running second moment, G = 1 / (√v + δ)
  (Li et al. 2016, without the Γ correction, as devinterp).
* ``"mala"``: the full-batch Langevin step with its Metropolis correction (exact).
* ``"nuts"``: the package's NUTS (:mod:`bayes_attn.inference.hmc`, BlackJAX) on the same log
  density; with ``metric="adapt"`` ``num_burnin`` is its window adaptation (the step and a
  diagonal metric), with ``metric="laplace"`` the metric is the dense inverse Hessian of the
  target at w* and ``num_burnin`` adapts the step alone (:mod:`~bayes_attn.inference.llc_nuts`).
* ``"smc"``: tempered SMC over the inverse temperature, from the prior or the localization up to
  nβ (:mod:`bayes_attn.inference.llc_smc`): λ̂ and log Z at every temperature on the way, the
  error bar from independent runs.

Every SGLD step also records the exact full-batch MALA acceptance of the move it made,
min(1, p(w') q(w | w') / (p(w) q(w' | w))) with q the full-batch Langevin proposal: how far the
discretisation is from exact at that ε (near 1: negligible bias).

The parts: the target (:mod:`~bayes_attn.inference.llc_target`, the frozen network's in
:mod:`~bayes_attn.inference.llc_frozen`), the Langevin kernel and loop
(:mod:`~bayes_attn.inference.llc_langevin`), NUTS (:mod:`~bayes_attn.inference.llc_nuts`), the
chunks and the checkpoint both loops share (:mod:`~bayes_attn.inference.llc_checkpoint`). This
module is the driver, :func:`run_llc`, with its defaults in :class:`LLCSettings`
(:mod:`~bayes_attn.inference.llc_settings`, re-exported here), and
:func:`exact_frozen_llc`.

References
----------
E. Lau, Z. Furman, G. Wang, D. Murfet and S. Wei, "The local learning coefficient: a
singularity-aware complexity measure", AISTATS 2025; C. Li, C. Chen, D. Carlson and L. Carin,
"Preconditioned stochastic gradient Langevin dynamics", AAAI 2016.
"""

from __future__ import annotations

import math

import jax
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn._deprecation import renamed
from bayes_attn._validation import with_changes
from bayes_attn.inference import llc_checkpoint as ckpt
from bayes_attn.inference.convert import finish
from bayes_attn.inference.llc_frozen import frozen_llc_target
from bayes_attn.inference.llc_langevin import run_langevin
from bayes_attn.inference.llc_nuts import LAPLACE_WARMUP, run_nuts_chains
from bayes_attn.inference.llc_settings import LLC_SAMPLERS, LLCSettings
from bayes_attn.inference.llc_target import (
    BURNIN_RELAXATIONS,
    STEP_FRACTION,
    LLCTarget,
    default_nbeta,
    llc_schedule,
    llc_step_size,
    llc_target,
)
from bayes_attn.inference.record import RunRecord
from bayes_attn.keys import resolve_key
from bayes_attn.progress import bar as make_bar

__all__ = [
    "BURNIN_RELAXATIONS",
    "COMMAND_SETTINGS",
    "EXACT_SETTINGS",
    "LLC_SAMPLERS",
    "STEP_FRACTION",
    "LLCSettings",
    "LLCTarget",
    "default_nbeta",
    "exact_frozen_llc",
    "frozen_llc_target",
    "llc_schedule",
    "llc_step_size",
    "llc_target",
    "run_llc",
]

COMMAND_SETTINGS = LLCSettings(sampler="nuts", num_draws=500, num_burnin="auto")
"""``bayes-attn llc``'s defaults: :class:`LLCSettings` with NUTS (its window adaptation, 500
warm-up steps with ``num_burnin="auto"``) and 500 draws per chain.

They differ from :func:`run_llc`'s (SGLD, 200 draws) because SGLD fails its own verdict on the
command's default problem, the frozen-embedding network at d = V + L (1050 weights at Table 1,
P = 300): the target's curvatures run from γ = 100 to about 7400, so SGLD's step is 1.35e-5 and
its chains need some 10⁵ steps each to explore what γ holds. NUTS passes the verdict there
(docs/guide.md, "The command line"). The Python API keeps SGLD, whose pinned numbers and cost per
step the package's studies rely on. The estimand (nβ, γ) is the same. NUTS's metric stays the
adapted diagonal one, which reaches any width: the dense Laplace metric (``metric="laplace"``)
passes there too, but its |w - w*| mixed worse per draw (and λ̂ better), and it is for at most
:data:`~bayes_attn.inference.llc_nuts.LAPLACE_MAX_DIM` weights."""

EXACT_SETTINGS = LLCSettings(sampler="nuts", num_draws=1000, num_burnin=500, init_noise=1e-3)
""":func:`exact_frozen_llc`'s defaults: NUTS (its window adaptation, 500 warm-up steps), 4 x 1000
draws, the chains started 1e-3 from w*."""


def run_llc(
    model, w_star, *, model_args: tuple = (), model_kwargs: dict | None = None,
    n: int | None = None, settings: LLCSettings | None = None, seed: int | None = None, key=None,
    progress: bool = False, progress_bar: bool | None = None, checkpoint=None, **changes,
):  # fmt: skip
    """Sample the localized tempered target of :func:`~bayes_attn.inference.llc_target.llc_target`
    around ``w_star``.

    Parameters
    ----------
    n : int, optional
        As in :func:`~bayes_attn.inference.llc_target.llc_target`.
    settings, **changes
        The fields of :class:`LLCSettings` (its docstring lists them with their defaults: the
        sampler, chains, draws, burn-in, thinning, step, the target's nβ, γ and prior, the
        chains' start, RMSProp's and NUTS's options): ``run_llc(model, w, num_draws=500)`` is
        ``run_llc(model, w, settings=LLCSettings(num_draws=500))``. An unknown keyword raises
        ``TypeError`` naming it.
    seed, key
        Either (seed 0 when neither is given).
    progress : bool
        Show a progress bar (``progress_bar``, its old name, still works and warns).
    checkpoint : path, optional
        A file that keeps the run's state and draws (every 30 s of steps; not for SMC), so that
        a rerun with the same arguments resumes where an interrupted one (Ctrl-C) stopped, with
        the draws of an uninterrupted run (refused when made with other arguments; removed when
        the run completes; :mod:`~bayes_attn.inference.llc_checkpoint`).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``loss`` (L_n at each kept draw, full batch), ``llc`` (nβ (L_n - L_n(w*))),
        ``distance`` (|w - w*|, unconstrained); ``sample_stats``: ``acceptance`` (the exact
        full-batch MALA acceptance of the SGLD step, averaged over the ``thinning`` steps of a
        draw; NUTS's mean acceptance for NUTS, and ``diverging``, its divergent transitions, which
        :func:`~bayes_attn.analysis.llc_exploration.llc_exploration` counts); ``constant_data``: ``init_loss`` (L_n(w*)),
        ``grad_norm`` (|∇L_n(w*)|), ``nbeta``, ``gamma``, ``step_size``, ``n``; the run's record in
        the attrs (sampler ``llc``, the LLC sampler as ``llc_sampler``).
    """
    progress = renamed("progress_bar", progress_bar, "progress", progress)
    s = with_changes(settings, LLCSettings, changes, where="run_llc").checked()
    if s.sampler == "smc":
        return _run_smc(model, w_star, s, model_args, model_kwargs, n, seed, key, progress,
                        checkpoint)  # fmt: skip
    rng, seed, key_attrs = resolve_key(key, seed)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    target = llc_target(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, n=n, settings=s
    )
    eps, burnin = llc_schedule(target, s.sampler, s.step_size, s.num_burnin)
    laplace = ("laplace",) if s.sampler == "nuts" and s.metric == "laplace" else ()
    burnin = LAPLACE_WARMUP if laplace and s.num_burnin == "auto" else burnin  # the step alone
    noise = math.sqrt(2 * eps) if s.init_noise is None else s.init_noise
    k_init, k_run = jax.random.split(rng)
    x0 = target.x_star + noise * jax.random.normal(
        k_init, (s.num_chains, target.x_star.size), target.x_star.dtype
    )
    keeper = ckpt.Keeper(checkpoint, (s.sampler, target, x0, k_run, burnin, s.num_draws,
                                      s.thinning, eps, s.rmsprop, *laplace))  # fmt: skip
    with make_bar(burnin + s.num_draws * s.thinning, f"llc {s.sampler}", progress) as bar:
        if s.sampler == "nuts":
            loss, dist, acc, _ = run_nuts_chains(
                target, x0, k_run, burnin, s.num_draws, s.thinning, bar, keeper, s.metric
            )
        else:
            loss, dist, acc = run_langevin(
                target, s.sampler, x0, jax.random.split(k_run, s.num_chains), eps, s.rmsprop,
                burnin, s.num_draws, s.thinning, bar, keeper,
            )  # fmt: skip
    keeper.done()
    record = _record(s, seed, burnin, eps, noise, target, key_attrs)
    return _result(target, record, loss, dist, acc, eps, model, model_args, model_kwargs)


def _record(s: LLCSettings, seed, burnin, eps, noise, target, key_attrs) -> RunRecord:
    """The run record of a Langevin or NUTS :func:`run_llc` run (its settings, the rules used)."""
    return RunRecord(
        "llc", seed, s.num_chains, burnin, s.num_draws, s.thinning,
        settings={
            "llc_sampler": s.sampler, "step_size": eps,
            **({"step_rule": "auto"} if s.step_size == "auto" and s.sampler != "nuts" else {}),
            **({"burnin_rule": "auto"} if s.num_burnin == "auto" else {}), "nbeta": target.nbeta,
            "gamma": target.gamma, "include_prior": s.include_prior, "n": target.n,
            "init_noise": noise, "subsampled": target.subsampled, **key_attrs,
            **({"metric": s.metric} if s.sampler == "nuts" else {}),
        },
    )  # fmt: skip


def _run_smc(model, w_star, s, model_args, model_kwargs, n, seed, key, progress, checkpoint):
    """``sampler="smc"``: tempered SMC over nβ; chains are its runs, draws its particles."""
    from bayes_attn.inference.llc_smc import run_llc_smc

    if checkpoint is not None:
        raise ValueError("checkpoint: the SMC sampler keeps none (NUTS and Langevin runs do)")
    return run_llc_smc(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, n=n, settings=s,
        num_particles=s.num_draws, num_runs=s.num_chains, seed=seed, key=key, progress=progress,
    )  # fmt: skip


def _result(target, record, loss, dist, acc, step_size, model, model_args, model_kwargs,
            order=None):  # fmt: skip
    """The InferenceData of :func:`run_llc` (with ``order``, {name: per-draw values}, beside)."""
    idata = az.from_dict(
        {
            "posterior": {
                "loss": loss,
                "llc": target.nbeta * (loss - target.init_loss),
                "distance": dist,
                **(order or {}),
            },
            # NUTS gives {"acceptance", "diverging"}, the Langevin samplers the acceptance
            "sample_stats": acc if isinstance(acc, dict) else {"acceptance": acc},
        }
    )
    const = xr.Dataset(
        {
            "init_loss": target.init_loss,
            "grad_norm": target.grad_norm,
            "nbeta": target.nbeta,
            "gamma": target.gamma,
            "step_size": float(step_size),
            "n": target.n,
        }
    )
    az.set_group(idata, "constant_data", const)
    return finish(idata, record, model, model_args, model_kwargs)


def exact_frozen_llc(
    model, w_star: dict, *, model_args: tuple = (), model_kwargs: dict | None = None,
    settings: LLCSettings | None = None, seed: int | None = None, key=None,
    progress: bool = False, progress_bar: bool | None = None, checkpoint=None, **changes,
):  # fmt: skip
    """The LLC of the frozen-embedding network by NUTS on :func:`frozen_llc_target` (M~, W_O
    integrated out): the ground truth for :func:`run_llc` on the explicit network at the same
    nβ and γ, at any width. The result has :func:`run_llc`'s form (``loss`` is E[L_n | M~],
    ``distance`` is the rms distance from w* in the embeddings' span given M~, the readout
    integrated: (|M~ - M~*|² + E[|W_O - W_O*|² | M~])^½; ``acceptance`` NUTS's), so
    :func:`bayes_attn.analysis.llc.llc_estimate` reads it; the record says ``llc_sampler``
    ``exact-nuts``. ``checkpoint`` (a path) keeps the state and the draws every 30 s of steps,
    so that a rerun with the same arguments resumes (as :func:`run_llc`'s). ``settings,
    **changes``: the fields of :class:`LLCSettings` (default :data:`EXACT_SETTINGS`), of which
    it reads the target's, ``num_chains``, ``num_draws``, ``num_burnin`` (``"auto"``: 500) and
    ``init_noise`` (None: 1e-3)."""
    progress = renamed("progress_bar", progress_bar, "progress", progress)
    s = EXACT_SETTINGS if settings is None else settings
    s = with_changes(s, LLCSettings, changes, where="exact_frozen_llc").checked()
    num_chains, num_draws = s.num_chains, s.num_draws
    num_burnin = llc_schedule(None, "nuts", 1.0, s.num_burnin)[1]
    init_noise = EXACT_SETTINGS.init_noise if s.init_noise is None else s.init_noise
    rng, seed, key_attrs = resolve_key(key, seed)
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    target = frozen_llc_target(
        model, w_star, model_args=model_args, model_kwargs=model_kwargs, settings=s
    )
    k_init, k_run = jax.random.split(rng)
    x0 = target.x_star + init_noise * jax.random.normal(k_init, (num_chains, target.x_star.size))
    keeper = ckpt.Keeper(checkpoint, ("exact-nuts", target, x0, k_run, num_burnin, num_draws))
    with make_bar(num_burnin + num_draws, "llc exact nuts", progress) as bar:
        loss, dist, acc, order = run_nuts_chains(
            target, x0, k_run, num_burnin, num_draws, 1, bar, keeper
        )
    keeper.done()
    record = RunRecord(
        "llc", seed, num_chains, num_burnin, num_draws, 1,
        settings={
            "llc_sampler": "exact-nuts", "nbeta": target.nbeta, "gamma": target.gamma,
            "include_prior": s.include_prior, "n": target.n, "init_noise": init_noise, **key_attrs,
        },
    )  # fmt: skip
    return _result(
        target, record, loss, dist, acc, math.nan, model, model_args, model_kwargs, order
    )
