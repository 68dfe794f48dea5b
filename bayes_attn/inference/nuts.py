"""NUTS over any of the package's NumPyro models, returning ArviZ InferenceData.

``run_nuts`` is a thin driver over the one NUTS home, :mod:`bayes_attn.inference.hmc`
(BlackJAX's kernel): the model's density comes from :mod:`bayes_attn.inference.potential`, the
chains are vectorised, the draws are scanned in compiled chunks between the progress bar's
updates (the draws do not depend on the chunks: every transition has its own key), and
:func:`bayes_attn.inference.convert.from_unconstrained` builds the result. Its defaults live in
:class:`NUTSSettings`. Two metrics (``run_nuts(..., metric=...)``):

* ``"adapt"`` (default): Stan's windowed warm-up
  (:func:`~bayes_attn.inference.hmc.window_adaptation`, the LLC's NUTS uses it too) adapts a
  diagonal mass matrix and the step of each chain, as NumPyro's did.
* ``"laplace"``: the mode is found first (:func:`~bayes_attn.inference.potential.find_mode`),
  the dense inverse mass matrix is the Laplace covariance there
  (:func:`~bayes_attn.inference.hmc.laplace_metric`, the one that
  :func:`~bayes_attn.inference.members.member_nuts` uses), held fixed, and only the step adapts
  (:func:`~bayes_attn.inference.hmc.adapt_nuts_step`, each chain its own);
  the chains start at independent draws of the Laplace approximation around the mode, so a short
  warm-up suffices. In the metric's coordinates a near-Gaussian posterior is near-isotropic and
  correlations cost nothing. Any fixed metric leaves the posterior invariant: the choice costs
  nothing but efficiency, and a posterior far from Gaussian, or with several modes, may still
  need ``"adapt"`` or SMC. Measured on the README's d = 10^4 network (Level 1 with its Gram, 900
  dimensions, P = 400), 2 chains x (150 + 150): 15 gradients per draw against 23 for ``"adapt"``
  with the same warm-up, at the same ESS (594 and 586 of 300 draws for aG). What made the
  default call slow there was its length (4 chains x 2000 iterations), not its metric. (Measured
  with NumPyro's NUTS, which ``run_nuts`` drove until BlackJAX replaced it.)

Both announce their cost before they start (``progress=True``; :mod:`bayes_attn.progress`).

References
----------
BlackJAX's ``nuts`` and ``window_adaptation``; Stan's warm-up windows. Hoffman & Gelman
(2014) for NUTS; Betancourt (2017), "A conceptual introduction to Hamiltonian Monte Carlo", §4.2,
for the metric as the inverse of the posterior's curvature.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int, check_output_folder
from bayes_attn.inference import hmc, smc_checkpoint
from bayes_attn.inference._call import sampler_call
from bayes_attn.inference.convert import from_unconstrained
from bayes_attn.inference.hmc import GRADIENTS_PER_DRAW, laplace_metric
from bayes_attn.inference.llc_checkpoint import Keeper, chunks
from bayes_attn.inference.potential import find_mode, flat_potential, uniform_init
from bayes_attn.inference.record import RunRecord
from bayes_attn.keys import resolve_key
from bayes_attn.progress import announce, bar, say, seconds_per_call

__all__ = ["GRADIENTS_PER_DRAW", "METRICS", "LaplaceStart", "NUTSSettings", "announce_cost",
           "laplace_start", "run_nuts"]  # fmt: skip

METRICS = ("adapt", "laplace")

#: draws per compiled chunk between the progress bar's updates (the driver's, not an option: every
#: transition has its own key, so the draws do not depend on it)
CHUNK = 250


@dataclasses.dataclass(frozen=True)
class NUTSSettings:
    """:func:`run_nuts`'s options and their defaults, their one home (the CLI and the sweep read
    them here); :meth:`checked` checks them, each error naming its field.

    Attributes
    ----------
    num_chains : int
        Chains, vectorised (default 4).
    num_warmup : int
        Warm-up transitions per chain (default 1000).
    num_samples : int
        Kept draws per chain (default 1000).
    target_accept : float
        The acceptance the step adapts towards, in (0, 1) (dual averaging; default 0.8).
    metric : {"adapt", "laplace"}
        The mass matrix (module docstring; default ``"adapt"``). ``"adapt"``: an adapted
        diagonal mass matrix per chain (Stan's windowed warm-up). ``"laplace"``: a dense inverse
        mass matrix, the Laplace covariance at the mode found from :func:`run_nuts`' ``start``
        (for Level 1 and the frozen-embedding networks: fewer gradients per draw, and a short
        warm-up since there is no metric to learn); the chains start at draws of the Laplace
        approximation unless ``init_params`` is given.
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    target_accept: float = 0.8
    metric: str = "adapt"

    def checked(self) -> NUTSSettings:
        """Every option checked before any work starts (the counts as ints)."""
        counts = {"num_chains": 1, "num_warmup": 0, "num_samples": 1}
        counts = {name: check_int(name, getattr(self, name), low) for name, low in counts.items()}
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if not 0.0 < float(self.target_accept) < 1.0:
            raise ValueError(f"target_accept must be in (0, 1), got {self.target_accept}")
        return dataclasses.replace(self, **counts)


class LaplaceStart(NamedTuple):
    """The mode of a model's potential and its Laplace approximation (:func:`laplace_start`).

    Attributes
    ----------
    mode : bayes_attn.inference.potential.Mode
        The mode (flat unconstrained ``mode.x``; ``mode.sites()`` its constrained values).
    inverse_mass_matrix : numpy.ndarray (dim, dim)
        The Laplace covariance at the mode, in the flat unconstrained space of
        :func:`~bayes_attn.inference.potential.flat_potential` (sites sorted by name).
    chain_starts : dict
        Unconstrained starting values per latent site with a leading chain axis (none when
        ``num_chains == 1``): independent draws of N(mode, inverse_mass_matrix).
    """

    mode: object
    inverse_mass_matrix: np.ndarray
    chain_starts: dict


def _default_start(pot, key) -> dict:
    """NumPyro's default initial value (uniform in [-2, 2] in the unconstrained space,
    :func:`~bayes_attn.inference.potential.uniform_init`), constrained."""
    sites = pot.sites(uniform_init(pot, key))
    return {n: sites[n] for n in pot.shapes}


def _laplace(pot, start, num_chains, key, chunk, progress):
    """The mode from ``start``, its Laplace covariance, and ``num_chains`` flat draws of N(mode,
    covariance) (chains, dim)."""
    k_start, k_draw = jax.random.split(key)
    start = _default_start(pot, k_start) if start is None else start
    mode = find_mode(pot.model, start=start, model_args=pot.model_args,
                     model_kwargs=pot.model_kwargs)  # fmt: skip
    if not mode.converged:
        say("the mode search stopped before its tolerance (U = %.6g)", mode.U, enabled=progress)
    cov = laplace_metric(lambda x: pot.log_density(x), mode.x, chunk=chunk)
    root = np.linalg.cholesky(cov + 1e-12 * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0]))
    z = np.asarray(jax.random.normal(k_draw, (num_chains, pot.dim)))
    return mode, cov, mode.x[None, :] + z @ root.T


def laplace_start(
    model,
    model_args=(),
    model_kwargs=None,
    *,
    start: dict | None = None,
    num_chains: int = 1,
    key=None,
    chunk: int = 30,
    progress: bool = False,
) -> LaplaceStart:
    """The mode of ``model``'s posterior from ``start``, its Laplace covariance and chain starts.

    Parameters
    ----------
    model, model_args, model_kwargs
        The NumPyro model and its arguments.
    start : dict, optional
        Constrained values of every latent site, inside the basin of the wanted mode (for
        example the Level-1 MAP, :func:`bayes_attn.theory.level1_map`). Default: NumPyro's
        initial value (uniform in [-2, 2] in the unconstrained space, drawn from ``key``).
    num_chains : int
        How many starting points to draw from N(mode, covariance).
    key : jax PRNG key
    chunk : int
        Hessian-vector products per batch (:func:`~bayes_attn.inference.potential.hessian`).
    progress : bool
        Say when the mode search stops before its tolerance.

    Raises
    ------
    ValueError
        When the start's log density is not finite.
    """
    num_chains = check_int("num_chains", num_chains, 1)
    key = jax.random.key(0) if key is None else key
    pot = flat_potential(model, model_args, model_kwargs)
    mode, cov, x = _laplace(pot, start, num_chains, key, chunk, progress)
    starts = jax.vmap(pot.unravel)(jnp.asarray(x))
    if num_chains == 1:
        starts = jax.tree.map(lambda a: a[0], starts)
    return LaplaceStart(mode, cov, starts)


def announce_cost(pot, metric, num_chains, num_warmup, num_samples, who="run_nuts:", resumed=False):
    """Say what a NUTS run costs before it starts: one timed gradient times the gradients it takes.

    Parameters
    ----------
    pot : Potential
        The run's density (:func:`~bayes_attn.inference.potential.flat_potential`).
    metric : str
        The run's metric; its gradients per draw are :data:`GRADIENTS_PER_DRAW`'s.
    num_chains, num_warmup, num_samples : int
        The run's chains, warm-up transitions and draws per chain.
    who : str
        What the line starts with (:func:`run_nuts` says ``"run_nuts:"``; a caller that runs
        NUTS without its bar names itself).
    resumed : bool
        The run goes on from its checkpoint: its warm-up (and mode) are done, so the line counts
        the draws alone, an upper bound on what is left.
    """
    x0 = uniform_init(pot, jax.random.key(0))
    seconds = seconds_per_call(jax.jit(jax.grad(pot.U)), x0)
    lo, hi = GRADIENTS_PER_DRAW[metric]
    draws = num_chains * (num_samples if resumed else num_warmup + num_samples)
    extra = 0
    what = f"{who} {num_chains} chains x ({num_warmup} warm-up + {num_samples}) draws"
    what += f" in {pot.dim} dimensions, {lo} to {hi} gradients per draw"
    if resumed:
        what += ", resumed from its checkpoint (warm-up done; at most the draws left)"
    elif metric == "laplace":
        extra = 4 * pot.dim  # the Hessian: dim Hessian-vector products, ~4 gradients each
        what += f", after the mode and its {pot.dim} x {pot.dim} Hessian"
    announce(what, (extra + lo * draws, extra + hi * draws), seconds)


def _given_starts(pot, init_params, num_chains) -> np.ndarray:
    """The flat unconstrained starts (chains, dim) of constrained ``init_params`` (a leading
    chain axis when ``num_chains > 1``)."""
    rows = []
    for c in range(num_chains):
        one = {k: (np.asarray(v)[c] if num_chains > 1 else v) for k, v in init_params.items()}
        try:
            rows.append(np.asarray(pot.unconstrain(one)))
        except ValueError as err:
            raise ValueError(f"init_params: {str(err).removeprefix('start: ')}") from None
    return np.stack(rows)


def _starts(pot, key, init_params, num_chains, metric, start, progress):
    """The chains' flat starts (chains, dim), the Laplace metric (or None) and what to record."""
    given = None if init_params is None else _given_starts(pot, init_params, num_chains)
    if metric != "laplace":
        x0 = uniform_init(pot, key, num_chains) if given is None else given
        return x0, None, {}
    if start is None and init_params is not None:
        start = {k: (v[0] if num_chains > 1 else v) for k, v in init_params.items()}
    mode, cov, draws = _laplace(pot, start, num_chains, key, 30, progress)
    x0 = draws if given is None else given
    return x0, cov, {"mode_potential": mode.U, "mode_converged": mode.converged}


def _window_warmup(key, x, logdensity, stages, target_accept):
    """One chain's Stan window warm-up (:func:`~bayes_attn.inference.hmc.window_adaptation`):
    its last state, step and diagonal inverse mass matrix; ``stages`` the
    :func:`~bayes_attn.inference.hmc.window_schedule` of its steps."""
    init, update, final = hmc.window_adaptation(target_accept)
    k_init, k_steps = jax.random.split(key)
    state, window = init(k_init, x, logdensity)
    if len(stages) == 0:
        return state, window.step_size, window.inverse_mass_matrix

    def step(carry, xs):
        state, window, _ = update(xs[0], *carry, logdensity, xs[1])
        return (state, window), None

    keys = jax.random.split(k_steps, len(stages))
    (state, window), _ = jax.lax.scan(step, (state, window), (keys, jnp.asarray(stages)))
    return state, *final(window)


def _warmup(pot, key, x0, inv_mass, num_warmup, target_accept):
    """Every chain's warm-up (vmapped): its last state, step and inverse mass matrix. With the
    Laplace metric (``inv_mass``) only the step adapts
    (:func:`~bayes_attn.inference.hmc.adapt_nuts_step`)."""
    logdensity = pot.log_density
    stages = hmc.window_schedule(num_warmup)  # outside the trace: a constant of the program

    def one(k, x):
        if inv_mass is None:
            return _window_warmup(k, x, logdensity, stages, target_accept)
        state, step = hmc.adapt_nuts_step(k, x, logdensity, inv_mass, num_warmup, target_accept)
        return state, step, inv_mass

    keys = jax.random.split(key, x0.shape[0])
    return jax.jit(jax.vmap(one))(keys, jnp.asarray(x0))


def _draws(pot, key, warm, num_samples, chunk, shown, keeper, saved=None, extra=None):
    """``num_samples`` transitions of every chain from its warm state, in compiled chunks of
    ``chunk`` (the bar moves between them): positions (chain, draw, dim), log densities and
    the NUTS stats (chain, draw). ``saved``: the checkpoint's ``(done, draws so far)``; after
    each chunk ``keeper`` may write the chains' state and the draws (beside ``extra``)."""
    state, step, inv_mass = warm
    chains = step.shape[0]
    keys = jax.vmap(lambda k: jax.random.split(k, num_samples))(jax.random.split(key, chains))
    run = jax.jit(jax.vmap(lambda k, s, e, m: hmc.nuts_transitions(k, s, pot.log_density, e, m)))
    done, parts = saved if saved is not None else (0, [])
    for lo in range(done, num_samples, chunk):
        state, out = run(keys[:, lo : lo + chunk], state, step, inv_mass)
        parts.append(jax.tree.map(np.asarray, out))
        shown.update(chains * min(chunk, num_samples - lo))
        if keeper.due():  # the draws so far joined only when they are written
            arrays = {**(extra or {}), **_flat(_joined(parts))}
            keeper.tick((state, step, inv_mass), lo + min(chunk, num_samples - lo), arrays)
    return _joined(parts)


def _chains(pot, rng, s, keeper, init_params, start, progress):
    """Every chain's warm-up and draws, from ``keeper``'s checkpoint when it has one: the draws
    ``(x, lp, stats)``, the chains' steps and what the Laplace start found."""
    k_start, k_warmup, k_draws = jax.random.split(rng, 3)
    chains, warmup, draws = s.num_chains, s.num_warmup, s.num_samples
    saved = _resume(keeper, pot, k_warmup, chains, s.metric, warmup, s.target_accept)
    if saved is None:
        x0, inv_mass, found = _starts(pot, k_start, init_params, chains, s.metric, start, progress)
    else:
        found = {k: v.item() for k, v in saved[2].items() if k.startswith("mode_")}
    kept = {k: np.asarray(v) for k, v in found.items()}
    chunk = CHUNK if keeper.path is None else chunks(draws)[0]  # about 20 chances to save
    with bar(chains * (warmup + draws), "run_nuts", progress) as shown:
        if saved is None:
            warm, done = _warmup(pot, k_warmup, x0, inv_mass, warmup, s.target_accept), None
            keeper.tick(warm, 0, kept, force=True)
        else:
            warm, n, arrays = saved
            done = (n, [_unflat(arrays)] if n else [])
            say("run_nuts: resumed from %s after %d of %d draws", keeper.path, n, draws,
                enabled=progress)  # fmt: skip
        shown.update(chains * (warmup + (done[0] if done else 0)))
        out = _draws(pot, k_draws, warm, draws, chunk, shown, keeper, done, kept)
    keeper.done()
    return out, warm[1], found


def _joined(parts):
    return jax.tree.map(lambda *a: np.concatenate(a, axis=1), *parts)


def _flat(out) -> dict:
    """The draws ``(x, lp, stats)`` as the checkpoint's named arrays."""
    x, lp, stats = out
    return {"x": x, "lp": lp, **{f"stats.{k}": v for k, v in stats.items()}}


def _unflat(arrays: dict):
    stats = {k.removeprefix("stats."): v for k, v in arrays.items() if k.startswith("stats.")}
    return arrays["x"], arrays["lp"], stats


def _keeper(checkpoint, model, model_args, model_kwargs, pot, rng, *settings) -> Keeper:
    """The checkpoint of one ``run_nuts`` call: its file under a digest of the model, its
    arguments, its density at two points, the key and the settings (the starts included)."""
    if checkpoint is None:
        return Keeper(None)
    check_output_folder("checkpoint", str(Path(checkpoint).parent))
    parts = smc_checkpoint.fingerprint(model, model_args, model_kwargs, pot.log_density,
                                       lambda x: x, pot.dim, jax.random.key_data(rng), settings)  # fmt: skip
    return Keeper(checkpoint, fp=smc_checkpoint.digest("run_nuts", parts))


def _resume(keeper, pot, key, chains, metric, num_warmup, target_accept):
    """``(warm state, done, arrays)`` from ``keeper``'s file, or None when there is none. The
    state's structure comes from tracing the warm-up (no compilation)."""
    if keeper.path is None or not keeper.path.exists():
        return None
    x = jax.ShapeDtypeStruct((chains, pot.dim), jnp.zeros(()).dtype)
    m = None if metric == "adapt" else jax.ShapeDtypeStruct((pot.dim, pot.dim), x.dtype)

    def warm(x, m):
        with jax.ensure_compile_time_eval():  # the warm-up's schedule: constants, not traced
            return _warmup(pot, key, x, m, num_warmup, target_accept)

    template = jax.eval_shape(warm, x, m)
    return keeper.resume(template)


def _sample_stats(lp, stats, step) -> dict:
    """The sample stats under ArviZ's names, (chain, draw)."""
    n_steps = np.asarray(stats["num_integration_steps"])
    return {
        "lp": lp,
        "energy": stats["energy"],
        "acceptance_rate": stats["acceptance_rate"],
        "diverging": np.asarray(stats["is_divergent"], bool),
        "n_steps": n_steps,
        "tree_depth": np.log2(n_steps + 1.0),  # NumPyro's: doublings of a full tree
        "step_size": np.broadcast_to(np.asarray(step)[:, None], n_steps.shape).copy(),
    }


def run_nuts(
    model, *args, model_args: tuple = (), model_kwargs: dict | None = None,
    settings: NUTSSettings | None = None,
    seed: int | None = None, key=None, progress: bool = True,
    init_params: dict | None = None, start: dict | None = None,
    progress_bar: bool | None = None, checkpoint=None, **changes,
) -> az.InferenceData:  # fmt: skip
    """Sample ``model(*model_args, **model_kwargs)`` with NUTS (BlackJAX), chains vectorised.

    Parameters
    ----------
    model : callable
        A NumPyro model, e.g. :func:`bayes_attn.models.order_param_model`.
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from the sampler's options. (The old form
        ``run_nuts(model, *model_args, ..., **model_kwargs)`` still works and warns.)
    settings, **changes
        The fields of :class:`NUTSSettings` (its docstring lists them with their defaults):
        ``num_chains``, ``num_warmup``, ``num_samples``, ``target_accept``, ``metric``. An
        unknown keyword is a TypeError naming it.
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given).
    progress : bool
        The cost announced before the run starts, and a progress bar. (``progress_bar=`` is the
        old name: it still works and warns.)
    init_params : dict, optional
        Starting values of every latent site in the constrained space (the sites' own values),
        with a leading chain axis when ``num_chains > 1`` (for example to start chains in
        different phases). Default: NumPyro's, uniform in [-2, 2] in the unconstrained space.
    start : dict, optional
        With ``metric="laplace"``: constrained values of the latent sites in the basin of the
        mode (default: the first chain's ``init_params``, else NumPyro's initial value).
    checkpoint : str or Path, optional
        A file (npz) where the run keeps its state: written after the warm-up and then every
        :data:`~bayes_attn.inference.llc_checkpoint.CHECKPOINT_SECONDS` between chunks of draws,
        removed when the run completes. A rerun with the same arguments goes on from it and gives
        the same draws, bit for bit; a file written with other arguments is refused (a
        ValueError naming ``checkpoint``).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (sites and deterministic sites, such as the order parameters),
        ``sample_stats`` (``diverging``, ``energy``, ``lp``, ``acceptance_rate``, ``n_steps``,
        ``tree_depth``, ``step_size``), ``observed_data`` (``tokens``, when the model is given a
        dataset) and ``attrs``: the run's record (:mod:`bayes_attn.inference.record`: sampler,
        seed, chains, warm-up, draws, level, model options, versions; ``metric``).
    """
    s, model_args, model_kwargs, progress = sampler_call(
        "run_nuts", NUTSSettings, settings, changes, args, model_args, model_kwargs, progress,
        progress_bar,
    )  # fmt: skip
    if start is not None and s.metric != "laplace":
        raise ValueError("start: only used with metric='laplace'")
    rng, seed, key_attrs = resolve_key(key, seed)
    pot = flat_potential(model, model_args, model_kwargs)
    chains, warmup, draws = s.num_chains, s.num_warmup, s.num_samples
    keeper = _keeper(checkpoint, model, model_args, model_kwargs, pot, rng, s, init_params, start)
    if progress:
        resumed = keeper.path is not None and keeper.path.exists()
        announce_cost(pot, s.metric, chains, warmup, draws, resumed=resumed)
    (x, lp, stats), step, found = _chains(pot, rng, s, keeper, init_params, start, progress)
    record = {"target_accept": s.target_accept, "init_given": init_params is not None,
              **key_attrs, "metric": s.metric, **found}  # fmt: skip
    record = RunRecord("nuts", seed, chains, warmup, draws, settings=record)
    stats = _sample_stats(lp, stats, step)
    return from_unconstrained(pot, x, stats, record, model, model_args, model_kwargs)
