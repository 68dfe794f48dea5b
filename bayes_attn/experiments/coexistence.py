"""The coexisting softmax phases beyond Level 2: occupancy from both starts, and their free energies.

Level 2 weighs the weak- and strong-copy phases exactly (:func:`bayes_attn.theory.modes`). At the
kernel limit (Level 1, :func:`~bayes_attn.models.kernel_limit_model`, the posterior over the
(V+L) x (V+L) form M) and at finite width (Level 0, :func:`~bayes_attn.models.network_model` with
the embeddings held at a draw, so the posterior is over W_G and W_O), this module

* starts samplers or ensemble members in both phases (:func:`phase_starts`): a *uniform*
  initialisation (zero logits: M = 0, W_G = 0), which falls into the weak-copy phase, and a *copy*
  initialisation (the logits of the strong-copy Level-2 minimum, realised with the smallest norm);
* reports the phase each chain or member is in (:func:`start_occupancy` for NUTS chains, with the
  verdict of :func:`~bayes_attn.analysis.phase_occupancy`; :func:`ensemble_occupancy` for Adam
  ensembles, whose members end in the minimum of the basin they start in);
* measures the free-energy difference ``Delta F = F_strong - F_weak = log Z_weak - log Z_strong``
  from the evidence of each basin (:func:`phase_free_energies`, by SMC from the basin's Laplace
  Gaussian, :func:`bayes_attn.inference.basins.basin_evidence`) and puts it beside the exact
  Level-2 value at the same P and chi.

Level 1 on one dataset is not Level 2: the dataset's token statistics fluctuate, and Level 2 keeps
only the attention's two order parameters. docs/validation.md ("Free energy of the phases beyond
Level 2") has the measured comparison.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_int, check_tokens
from bayes_attn.analysis.phases import PhaseOccupancy, phase_boundary, phase_occupancy
from bayes_attn.inference.basins import NoBasin, basin_evidence
from bayes_attn.models.levels import LEVELS, model_at
from bayes_attn.progress import announce, say, seconds_per_gradient
from bayes_attn.task import preset_attrs
from bayes_attn.theory.action import scales
from bayes_attn.theory.modes import softmax_minima, transition_window

__all__ = [
    "LEVELS",
    "ensemble_occupancy",
    "level_modes",
    "phase_free_energies",
    "phase_starts",
    "start_occupancy",
]

PHASES = ("weak", "strong")


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")


def _inside_window(task, hyper, P: float) -> float:
    """P moved just inside the Level-2 coexistence window (spinodals) if it lies outside."""
    _, lo, hi = transition_window(scales(task, hyper))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(
            f"task: the softmax transition is not first order at L={task.L}, V={task.V}; "
            "there are no two phases to start from"
        )
    margin = 1e-3 * (hi - lo)
    return min(max(float(P), lo + margin), hi - margin)


def _embedding_matrix(embeddings) -> jax.Array:
    """W (V+L, d) with psi^T W the hidden vector of a token, from (W_emb (d, V), p (d, L))."""
    W_emb, pos = (jnp.asarray(e) for e in embeddings)
    return jnp.concatenate([W_emb.T, pos.T], axis=0)


def network_gate(M, embeddings) -> jax.Array:
    """The W_G (d x d) of smallest norm whose network logits equal the kernel-limit form M.

    The network's logits are psi^T (W W_G W^T / d) psi with W = [W_emb^T; p^T], so
    ``W_G = d W^+ M W^+T`` gives exactly M when W has full row rank (d >= V + L).
    """
    W = _embedding_matrix(embeddings)
    n, d = W.shape
    if d < n:
        raise ValueError(f"d_model must be >= V + L = {n} to realise M exactly, got {d}")
    Wp = jnp.linalg.pinv(W)
    return d * Wp @ jnp.asarray(M) @ Wp.T


def phase_starts(task, hyper, P, level: str = "kernel", *, embeddings=None) -> dict[str, dict]:
    """Starting values in the weak (uniform start) and strong (copy start) softmax phases.

    Returns ``{"weak": {...}, "strong": {...}}``: constrained values of the latent sites of
    ``order_param_model`` (``aG``, the Level-2 minima), ``kernel_limit_model`` (``M``: zero, and the
    smallest-norm realisation of the strong Level-2 minimum's logits) or ``network_model`` with
    frozen ``embeddings`` (``W_G`` realising the same M, ``W_O`` = 0). Where P lies outside the
    Level-2 coexistence window, the minima are taken just inside it.
    """
    _check_level(level)
    Pw = _inside_window(task, hyper, P)
    cG, _, _ = softmax_minima(Pw, scales(task, hyper))
    cG = np.sort(np.asarray(cG))
    if level == "reduced":
        aG = [float(algebra.softmax_order(jnp.float64(c), task.L)[1]) for c in (cG[0], cG[-1])]
        return {"weak": {"aG": aG[0]}, "strong": {"aG": aG[1]}}
    strong = cG[-1]
    M = algebra.min_norm_M(algebra.reduced_logits(-strong / task.L, strong, task.L), task.V)
    n = task.n_features
    if level == "kernel":
        return {"weak": {"M": jnp.zeros((n, n))}, "strong": {"M": M}}
    if embeddings is None:
        raise ValueError("embeddings: the network level needs the frozen (W_emb, p)")
    W_G = network_gate(M, embeddings)
    d = W_G.shape[0]
    W_O = jnp.zeros((task.V, d))
    return {"weak": {"W_G": jnp.zeros((d, d)), "W_O": W_O}, "strong": {"W_G": W_G, "W_O": W_O}}


def _model(task, hyper, tokens, level, d_model, embeddings):
    """(model, args, kwargs) at ``level`` for softmax attention."""
    if level == "network" and embeddings is None:
        raise ValueError("embeddings: the network level needs the frozen (W_emb, p)")
    # the reduced level with the log-determinant, as the kernel-limit evidence has it
    return model_at(
        level, task, hyper, tokens, "softmax", d_model=d_model, include_logdet=True,
        embeddings=embeddings,
    )  # fmt: skip


def _size(tokens, level) -> float:
    return float(tokens) if level == "reduced" else float(np.shape(tokens)[0])


def level_modes(task, hyper, tokens, level: str = "kernel", *, embeddings=None, d_model=None):
    """The posterior modes reached from the uniform and the copy start, and the phase boundary.

    Returns ``(modes, boundary)``: ``modes[phase]`` holds the constrained values of every site at
    the mode (``start`` for further use), ``aG`` and the potential ``U``; ``boundary`` is the aG
    of the highest point of the potential on the straight line between the two modes (41 points),
    this level's own divide between the phases, or nan if both starts reach the same mode. (The
    Level-2 divide does not serve at Level 1 on a dataset: its phases sit at other P.)
    """
    from bayes_attn.inference.potential import find_mode

    _check_level(level)
    P = _size(tokens, level)
    model, args, kwargs = _model(task, hyper, tokens, level, d_model, embeddings)
    starts = phase_starts(task, hyper, P, level, embeddings=embeddings)
    found, flat = {}, {}
    for phase in PHASES:
        mode = find_mode(model, start=starts[phase], model_args=args, model_kwargs=kwargs)
        sites = mode.sites()
        latent = {n: sites[n] for n in starts[phase]}
        found[phase] = {"start": latent, "aG": float(sites["aG"]), "U": mode.U}
        flat[phase] = mode.x
    pot = mode.potential
    if abs(found["strong"]["aG"] - found["weak"]["aG"]) < 1e-3 * max(1.0, found["strong"]["aG"]):
        return found, math.nan
    t = np.linspace(0.0, 1.0, 41)
    path = jnp.asarray(flat["weak"])[None] + jnp.asarray(t)[:, None] * jnp.asarray(
        flat["strong"] - flat["weak"]
    )
    top = path[int(np.argmax(np.asarray(jax.vmap(pot.U)(path))))]
    sites = pot.sites(top)
    return found, float(sites["aG"])


def phase_free_energies(
    task,
    hyper,
    tokens,
    level: str = "kernel",
    *,
    embeddings=None,
    d_model: int | None = None,
    num_particles: int = 128,
    num_mcmc_steps: int | None = None,
    replicates: int = 2,
    seed: int = 0,
    progress: bool = True,
    **smc_kwargs,
) -> xr.Dataset:
    """The evidence of each softmax phase at one level, and Delta F beside Level 2's.

    Parameters
    ----------
    tokens : (P, L) ints, or P itself for ``level="reduced"``
    level : {"reduced", "kernel", "network"}
    embeddings : (W_emb, p), for ``level="network"`` (held fixed)
    num_particles, num_mcmc_steps, replicates, seed, smc_kwargs
        SMC settings of :func:`~bayes_attn.inference.basins.basin_evidence` (``replicates``
        independent runs of ``num_particles``; ``num_mcmc_steps``: the minimum number of moves
        per tempering step, None for :func:`~bayes_attn.inference.run_smc`'s default;
        ``smc_kwargs``: ``max_mcmc_steps``, ``mixing_target``).
    progress : bool
        Say each stage on stderr before it starts, with the cost of a tempering step, and log
        every tempering step (:mod:`bayes_attn.progress`). At Level 1 and the network a basin
        takes minutes to hours on a laptop CPU (docs/validation.md).

    Returns
    -------
    xarray.Dataset
        Over ``phase`` = weak, strong (the basins found from the uniform and the copy start, each
        the side of this level's phase boundary (:func:`level_modes`) its mode is on; where both
        starts reach the same mode there is one phase and the evidences are nan):
        ``aG`` at the mode, ``potential`` there, ``log_Z_laplace``, ``log_Z_smc`` (mean over
        replicates) and ``log_Z_smc_se``, ``tempering_steps`` (mean), ``distance`` (of the mode's aG from
        the boundary, which delimits the basins). Scalars: ``distinct`` (both phases
        exist; else the deltas are nan), ``delta_F`` and ``delta_F_se`` (SMC), ``delta_F_laplace``, ``delta_F_level2``
        (exact, :func:`~bayes_attn.theory.modes` with the log-determinant, at the same P and
        chi), ``delta_U`` (the difference of the potentials at the modes).
    """
    from bayes_attn.theory.modes import modes

    _check_level(level)
    replicates = check_int("replicates", replicates, 1)
    P = _size(tokens, level)
    model, args, kwargs = _model(task, hyper, tokens, level, d_model, embeddings)
    say("phase_free_energies: the %s modes from both starts at P = %g", level, P, enabled=progress)
    found, cut = level_modes(task, hyper, tokens, level, embeddings=embeddings, d_model=d_model)
    rows, aG = {}, {}
    for phase in PHASES:
        if not math.isfinite(cut):  # one phase: report the mode, no evidence to compare
            rows[phase], aG[phase] = None, found[phase]["aG"]
            continue
        say("phase_free_energies: SMC evidence of the %s basin", phase, enabled=progress)
        try:
            b = basin_evidence(
                model,
                *args,
                start=found[phase]["start"],
                num_particles=num_particles,
                num_mcmc_steps=num_mcmc_steps,
                replicates=replicates,
                seed=seed,
                **smc_kwargs,
                var="aG",
                boundary=cut,
                side="above" if phase == "strong" else "below",
                progress_bar=progress,
                **kwargs,
            )
        except NoBasin as err:  # this start fell into the other phase: one phase at this level
            rows[phase], aG[phase] = None, err.value
            continue
        rows[phase], aG[phase] = b, float(b.mode["aG"])

    def column(get):
        return ("phase", [math.nan if rows[p] is None else get(rows[p]) for p in PHASES])

    ds = xr.Dataset(
        {
            "aG": ("phase", [aG[p] for p in PHASES]),
            "potential": column(lambda b: b.potential),
            "log_Z_laplace": column(lambda b: b.log_Z_laplace),
            "log_Z_smc": column(lambda b: b.log_Z_smc_mean),
            "log_Z_smc_se": column(lambda b: b.log_Z_smc_se),
            "tempering_steps": column(lambda b: float(b.num_tempering_steps.mean())),
            "distance": column(lambda b: b.distance),
        },
        coords={"phase": list(PHASES)},
    )
    weak, strong = ds.sel(phase="weak"), ds.sel(phase="strong")
    ds["distinct"] = all(rows[p] is not None for p in PHASES)
    ds["delta_F"] = float(weak.log_Z_smc - strong.log_Z_smc)
    ds["delta_F_se"] = float(np.hypot(weak.log_Z_smc_se, strong.log_Z_smc_se))
    ds["delta_F_laplace"] = float(weak.log_Z_laplace - strong.log_Z_laplace)
    ds["delta_U"] = float(strong.potential - weak.potential)
    m = modes(task, hyper, P, "softmax", include_logdet=True)
    ds["delta_F_level2"] = float(m.delta_F) if (m.phase == "strong").any() else math.nan
    ds.attrs.update(
        level=level,
        P=P,
        **preset_attrs(task, hyper),
        boundary_aG=cut,
        dim=next((r.dim for r in rows.values() if r is not None), 0),  # 0: no evidence run
        num_particles=num_particles,
        replicates=replicates,
        description="Delta F = F_strong - F_weak = log Z_weak - log Z_strong",
    )
    return ds


def start_occupancy(
    task,
    hyper,
    tokens,
    level: str = "kernel",
    *,
    embeddings=None,
    d_model: int | None = None,
    num_chains: int = 8,
    num_warmup: int = 200,
    num_samples: int = 200,
    seed: int = 0,
    progress_bar: bool = False,
    progress: bool = True,
) -> tuple[PhaseOccupancy, object]:
    """NUTS with half the chains from the uniform start and half from the copy start.

    The chains start at the modes that :func:`level_modes` reaches from the two starts. Returns
    ``(occupancy, idata)``: the per-chain phase table and verdict of
    :func:`~bayes_attn.analysis.phase_occupancy` (boundary: this level's, from
    :func:`level_modes`; the Level-2 one where only one mode was found), and the draws. Where both basins are deep, chains stay where they start and the verdict is
    "not mixing"; a chain started in a shallow basin may leave it in warm-up (measured at
    Level 1 near a spinodal, docs/validation.md).

    ``progress`` says each stage on stderr before it starts, the NUTS run with its cost
    estimated from one timed gradient (:mod:`bayes_attn.progress`); ``progress_bar`` is NUTS's
    own bar. At Level 1 with P = 42 and 4 chains of 100 + 100 draws it takes minutes.
    """
    from bayes_attn.inference import run_nuts

    _check_level(level)
    num_chains = check_int("num_chains", num_chains, 2)
    P = _size(tokens, level)
    model, args, kwargs = _model(task, hyper, tokens, level, d_model, embeddings)
    say("start_occupancy: the %s modes from both starts at P = %g", level, P, enabled=progress)
    found, cut = level_modes(task, hyper, tokens, level, embeddings=embeddings, d_model=d_model)
    starts = {phase: found[phase]["start"] for phase in PHASES}
    if not math.isfinite(cut):
        cut = phase_boundary(task, hyper, P)
    half = num_chains // 2
    init = {
        name: jnp.stack(
            [jnp.asarray(starts["weak"][name])] * (num_chains - half)
            + [jnp.asarray(starts["strong"][name])] * half
        )
        for name in starts["weak"]
    }
    if progress:
        draws = num_chains * (num_warmup + num_samples)
        announce(
            f"start_occupancy: NUTS, {num_chains} chains x ({num_warmup} warm-up + {num_samples}) "
            "draws, 8 to 1023 gradients per draw",
            (8 * draws, 1023 * draws),
            seconds_per_gradient(model, args, kwargs),
        )
    idata = run_nuts(
        model,
        model_args=args,
        model_kwargs=kwargs,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        seed=seed,
        progress_bar=progress_bar,
        init_params=init,
    )
    occ = phase_occupancy(idata, "aG", boundary=cut)
    return occ, idata


def ensemble_occupancy(
    task,
    hyper,
    tokens,
    embeddings,
    *,
    members: int = 4,
    lr: float = 1e-2,
    max_steps: int = 600,
    seed: int = 0,
    progress_bar: bool = False,
) -> xr.Dataset:
    """Adam ensembles on one dataset with frozen ``embeddings``, half from each start.

    Members ``0 .. members - 1`` start uniform (W_G = 0) and ``members .. 2 members - 1`` from the
    copy start, each with a prior draw of W_O. Returns a Dataset over ``member``: ``start``,
    the final ``aG`` and ``phase`` (by the Level-2 boundary at this P), and the final ``objective``
    per token; attrs hold the fraction of members in the strong phase per start. The phase
    boundary is the network posterior's own (:func:`level_modes` at ``level="network"``).
    """
    from bayes_attn.inference import train_adam
    from bayes_attn.models.network import init_params

    members = check_int("members", members, 1)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    P = tokens.shape[0]
    W_emb, pos = (jnp.asarray(e) for e in embeddings)
    d = W_emb.shape[0]
    starts = phase_starts(task, hyper, P, "network", embeddings=embeddings)
    n = 2 * members
    keys = jax.random.split(jax.random.key(seed), n)
    W_O = jnp.stack([init_params(k, task, hyper, d)["W_O"] for k in keys])
    W_G = jnp.stack([starts["weak"]["W_G"]] * members + [starts["strong"]["W_G"]] * members)
    init = {
        "W_emb": jnp.broadcast_to(W_emb, (n, *W_emb.shape)),
        "p": jnp.broadcast_to(pos, (n, *pos.shape)),
        "W_G": W_G,
        "W_O": W_O,
    }
    ds = train_adam(
        task,
        hyper,
        "softmax",
        d,
        P,
        members=n,
        seed=seed,
        tokens=jnp.broadcast_to(tokens, (n, *tokens.shape)),
        lr=lr,
        max_steps=max_steps,
        patience=max_steps,
        train_embeddings=False,
        init=init,
        progress_bar=progress_bar,
    )
    _, cut = level_modes(task, hyper, tokens, "network", embeddings=embeddings)
    if not math.isfinite(cut):
        cut = phase_boundary(task, hyper, P)
    aG = ds.aG.isel(step=-1).values
    out = xr.Dataset(
        {
            "start": ("member", ["uniform"] * members + ["copy"] * members),
            "aG": ("member", aG),
            "phase": ("member", np.where(aG > cut, "strong", "weak")),
            "objective": ("member", ds.objective.isel(step=-1).values),
        },
        coords={"member": np.arange(n)},
    )
    for start in ("uniform", "copy"):
        sel = out.start == start
        out.attrs[f"strong_fraction_{start}_start"] = float((out.phase[sel] == "strong").mean())
    out.attrs.update(P=P, d_model=d, boundary_aG=cut, lr=lr, max_steps=max_steps)
    return out
