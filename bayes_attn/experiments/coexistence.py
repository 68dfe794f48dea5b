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

import dataclasses
import math
import os
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_attn import _deprecation
from bayes_attn._deprecation import renamed
from bayes_attn._validation import check_int, check_tokens, with_changes
from bayes_attn.analysis.phases import PhaseOccupancy, phase_occupancy
from bayes_attn.inference import resolve_key, smc_checkpoint
from bayes_attn.inference.basins import BasinEvidence, NoBasin, basin_evidence
from bayes_attn.inference.nuts import NUTSSettings
from bayes_attn.inference.potential import flat_potential
from bayes_attn.models.levels import LEVELS, model_at
from bayes_attn.progress import say
from bayes_attn.task import preset_attrs
from bayes_attn.theory.modes import phase_boundary, phase_starts

__all__ = [
    "LEVELS",
    "OCCUPANCY_NUTS",
    "PROBLEM_KEYWORDS",
    "FreeEnergyKeys",
    "LevelProblem",
    "ensemble_occupancy",
    "free_energy_keys",
    "level_modes",
    "phase_free_energies",
    "phase_starts",
    "start_occupancy",
]

__getattr__ = _deprecation.moved(__name__, {"network_gate": "bayes_attn.algebra"})

PHASES = ("weak", "strong")
#: :func:`start_occupancy`'s NUTS: 8 chains (half from each start) of 200 warm-up + 200 draws
OCCUPANCY_NUTS = NUTSSettings(num_chains=8, num_warmup=200, num_samples=200)


def _modes_from_starts(model, args, kwargs, starts):
    """:func:`level_modes` on a model already built: each mode found once, from its start."""
    from bayes_attn.inference.potential import find_mode

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


#: the fields of :class:`LevelProblem` that :func:`level_modes`, :func:`phase_free_energies` and
#: :func:`start_occupancy` take as keywords (the old form, beside ``task, hyper, tokens, level``)
PROBLEM_KEYWORDS = ("embeddings", "d_model", "include_logdet")


@dataclasses.dataclass(frozen=True, eq=False)
class LevelProblem:
    """Softmax attention at one level on one dataset: what :func:`level_modes`,
    :func:`phase_free_energies` and :func:`start_occupancy` are asked about. Each takes one, or
    its fields as before (``task, hyper, tokens, level`` and the keywords of
    :data:`PROBLEM_KEYWORDS`), and builds its model and finds its modes once per call
    (:meth:`modes`).

    Attributes
    ----------
    task, hyper : CopyTask, Hyper
    tokens : (P, L) ints, or P itself for ``level="reduced"``
    level : {"reduced", "kernel", "network"}
        Default ``"kernel"``.
    embeddings : (W_emb, p), optional
        The frozen embeddings, for (and only needed at) ``level="network"``.
    d_model : int, optional
        The network's width (``network``; implied by ``embeddings``).
    include_logdet : bool
        The O(1) log-determinant in the reduced model's density (``level="reduced"``) and in the
        Level-2 references (the boundary, ``delta_F_level2``), as in
        :func:`bayes_attn.theory.modes` (same default, False). Level 1 and the network carry the
        log-determinant in their own density (the readout integrated out).
    """

    task: object
    hyper: object
    tokens: object = dataclasses.field(repr=False)
    level: str = "kernel"
    embeddings: object = dataclasses.field(default=None, repr=False)
    d_model: int | None = None
    include_logdet: bool = False

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")

    @classmethod
    def of(cls, task, hyper=None, tokens=None, level: str = "kernel", **fields) -> LevelProblem:
        """``task`` if it is a :class:`LevelProblem` (given alone), else the problem of these
        fields."""
        if isinstance(task, LevelProblem):
            if hyper is not None or tokens is not None or level != "kernel" or fields:
                raise TypeError("a LevelProblem comes alone: its fields are set in it")
            return task
        return cls(task, hyper, tokens, level, **fields)

    @property
    def P(self) -> float:
        """The training-set size (``tokens`` itself at the reduced level)."""
        return float(self.tokens) if self.level == "reduced" else float(np.shape(self.tokens)[0])

    def model(self) -> tuple:
        """``(model, args, kwargs)`` at this level, softmax (:func:`~bayes_attn.models.levels.model_at`)."""
        if self.level == "network" and self.embeddings is None:
            raise ValueError("embeddings: the network level needs the frozen (W_emb, p)")
        return model_at(self.level, self.task, self.hyper, self.tokens, "softmax",
                        d_model=self.d_model, include_logdet=self.include_logdet,
                        embeddings=self.embeddings)  # fmt: skip

    def modes(self, who: str = "") -> tuple:
        """The model, built once, and its modes from the uniform and the copy start:
        ``(P, (model, args, kwargs), modes, boundary)`` (the last two as :func:`level_modes`
        returns them). ``who``, where given, says the search on stderr first."""
        P, built = self.P, self.model()
        say("%s: the %s modes from both starts at P = %g", who, self.level, P, enabled=bool(who))
        starts = phase_starts(self.task, self.hyper, P, self.level, embeddings=self.embeddings)
        return P, built, *_modes_from_starts(*built, starts)


def _problem(task, hyper, tokens, level, keywords: dict) -> tuple[LevelProblem, dict]:
    """The :class:`LevelProblem` of a call (its keywords taken out of ``keywords``) and the
    keywords left."""
    fields = {k: keywords.pop(k) for k in PROBLEM_KEYWORDS if k in keywords}
    return LevelProblem.of(task, hyper, tokens, level, **fields), keywords


def level_modes(task, hyper=None, tokens=None, level: str = "kernel", **fields):
    """The posterior modes reached from the uniform and the copy start, and the phase boundary.

    ``task`` is a :class:`LevelProblem`, or its fields (``task, hyper, tokens, level`` and the
    keywords ``embeddings``, ``d_model``, ``include_logdet``).

    Returns ``(modes, boundary)``: ``modes[phase]`` holds the constrained values of every site at
    the mode (``start`` for further use), ``aG`` and the potential ``U``; ``boundary`` is the aG
    of the highest point of the potential on the straight line between the two modes (41 points),
    this level's own divide between the phases, or nan if both starts reach the same mode. (The
    Level-2 divide, :func:`bayes_attn.theory.modes.phase_boundary`, does not serve at Level 1 on a
    dataset: its phases sit at other P.)
    """
    problem, unknown = _problem(task, hyper, tokens, level, fields)
    if unknown:
        raise TypeError(f"level_modes got unexpected keyword arguments {sorted(unknown)}")
    return problem.modes()[2:]


class FreeEnergyKeys(NamedTuple):
    """The keys :func:`phase_free_energies` splits from its key or seed, one per basin: each
    basin's SMC runs (reference draws, moves, resampling) are independent of the other's, as
    ``delta_F_se`` assumes."""

    weak: jax.Array
    strong: jax.Array


def free_energy_keys(key=None, seed: int | None = None) -> FreeEnergyKeys:
    """The keys of :func:`phase_free_energies` for ``key`` or ``seed`` (:class:`FreeEnergyKeys`)."""
    rng, _, _ = resolve_key(key, seed)
    return FreeEnergyKeys(*jax.random.split(rng, len(PHASES)))


#: the SMC options of :func:`phase_free_energies` (``smc_options``) with their defaults; None
#: leaves :func:`~bayes_attn.inference.run_smc`'s default
SMC_OPTIONS = {
    "num_particles": 128,
    "replicates": 2,
    "num_mcmc_steps": None,
    "max_mcmc_steps": None,
    "mixing_target": None,
    "batch_size": 0,
}


def _smc_options(smc_options, legacy: dict) -> dict:
    """The SMC options from ``smc_options``, or from the deprecated keywords of the old form."""
    unknown = sorted(set(legacy) - set(SMC_OPTIONS))
    if unknown:
        raise TypeError(f"phase_free_energies got unexpected keyword arguments {unknown}")
    if legacy:
        if smc_options:
            raise TypeError("phase_free_energies: pass the SMC options in smc_options= only")
        warnings.warn(
            "phase_free_energies(..., num_particles=..., replicates=...) is deprecated and will be "
            "removed in the next release; pass smc_options={'num_particles': ..., ...}",
            DeprecationWarning,
            stacklevel=3,
        )
        smc_options = legacy
    smc_options = dict(smc_options or {})
    unknown = sorted(set(smc_options) - set(SMC_OPTIONS))
    if unknown:
        raise ValueError(f"smc_options: unknown {unknown}; known: {sorted(SMC_OPTIONS)}")
    out = {**SMC_OPTIONS, **smc_options}
    out["replicates"] = check_int("replicates", out["replicates"], 1)
    out["num_particles"] = check_int("num_particles", out["num_particles"], 2)
    return out


def basin_checkpoints(prefix) -> dict:
    """phase -> the SMC checkpoint file of that basin's evidence, ``PREFIX.weak`` and
    ``PREFIX.strong`` (None without a prefix); the folder must exist."""
    if prefix is None:
        return dict.fromkeys(PHASES)
    paths = {p: Path(f"{os.fspath(prefix)}.{p}") for p in PHASES}
    for path in paths.values():
        smc_checkpoint.check_path(path)
    return paths


_BASIN_FIELDS = ("potential", "log_Z_laplace", "log_Z_smc", "log_Z_smc_mean", "log_Z_smc_se",
                 "num_tempering_steps", "distance", "dim", "converged")  # fmt: skip


def _save_basin(path: Path, b: BasinEvidence, run_digest: str) -> None:
    """A finished basin's evidence at ``path`` (.npz, no pickles, written atomically)."""
    arrays = {"digest": np.array(run_digest)}
    arrays.update({f: np.asarray(getattr(b, f)) for f in _BASIN_FIELDS})
    arrays.update({f"mode/{k}": np.asarray(v) for k, v in b.mode.items()})
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _load_basin(path: Path, run_digest: str) -> BasinEvidence | None:
    """The finished basin saved at ``path`` by this same run (its digest), else None."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        if str(z["digest"]) != run_digest:
            return None
        mode = {k.removeprefix("mode/"): z[k] for k in z.files if k.startswith("mode/")}
        values = {f: z[f] for f in _BASIN_FIELDS}
    for f in ("potential", "log_Z_laplace", "log_Z_smc_mean", "log_Z_smc_se", "distance"):
        values[f] = float(values[f])
    values["dim"], values["converged"] = int(values["dim"]), bool(values["converged"])
    return BasinEvidence(mode=mode, **values)


def _basins(model, args, kwargs, found, cut, smc, keys, progress, checkpoints):
    """Per phase: the :class:`BasinEvidence` (None where there is one phase only) and the mode's aG.

    :func:`basin_evidence` takes constrained starts, not a found mode, so it builds the potential
    and searches for the mode again from the mode's sites: the search makes no step and returns
    the same point (measured: the same aG and U to the last bit at Level 2 and Level 1), for a
    compilation and a gradient (0.4-3 s beside minutes to hours of SMC). Skipping it needs
    ``basin_evidence`` to accept a :class:`~bayes_attn.inference.potential.Mode`.
    """
    moves = {k: v for k, v in smc.items() if v is not None and k != "replicates"}
    rows, aG = {}, {}
    for phase in PHASES:
        if not math.isfinite(cut):  # one phase: report the mode, no evidence to compare
            rows[phase], aG[phase] = None, found[phase]["aG"]
            continue
        done = None if checkpoints[phase] is None else Path(f"{checkpoints[phase]}.done.npz")
        run_digest = smc_checkpoint.digest(
            args, kwargs, found[phase]["start"], cut, smc, getattr(keys, phase), phase
        )
        if done is not None and (b := _load_basin(done, run_digest)) is not None:
            say("phase_free_energies: the %s basin, finished before, from %s", phase, done,
                enabled=progress)  # fmt: skip
            rows[phase], aG[phase] = b, float(b.mode["aG"])
            continue
        say("phase_free_energies: SMC evidence of the %s basin", phase, enabled=progress)
        try:
            b = basin_evidence(
                model, model_args=args, model_kwargs=kwargs, start=found[phase]["start"],
                replicates=smc["replicates"], key=getattr(keys, phase), var="aG", boundary=cut,
                side="above" if phase == "strong" else "below", progress=progress,
                checkpoint=checkpoints[phase], **moves,
            )  # fmt: skip
        except NoBasin as err:  # this start fell into the other phase: one phase at this level
            rows[phase], aG[phase] = None, err.value
            continue
        if done is not None:
            _save_basin(done, b, run_digest)
        rows[phase], aG[phase] = b, float(b.mode["aG"])
    return rows, aG


def _free_energy_table(rows, aG) -> xr.Dataset:
    """The per-phase table of :func:`phase_free_energies` and its SMC and Laplace deltas."""

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
    return ds


def phase_free_energies(
    task,
    hyper=None,
    tokens=None,
    level: str = "kernel",
    *,
    smc_options: dict | None = None,
    seed: int | None = None,
    key=None,
    progress: bool = True,
    checkpoint=None,
    **fields,
) -> xr.Dataset:
    """The evidence of each softmax phase at one level, and Delta F beside Level 2's.

    Parameters
    ----------
    task, hyper, tokens, level, **fields
        A :class:`LevelProblem` (``task``, alone), or its fields: ``task, hyper, tokens, level``
        and the keywords ``embeddings``, ``d_model``, ``include_logdet`` (its docstring says what
        each means). ``include_logdet`` also sets the Level-2 reference ``delta_F_level2``: at
        Level 1 and the network the like-for-like reference is ``include_logdet=True``. It is
        recorded in ``attrs["include_logdet"]``.
    smc_options : dict, optional
        The SMC settings of :func:`~bayes_attn.inference.basins.basin_evidence`, apart from the
        model's options (:data:`SMC_OPTIONS` has them with their defaults): ``replicates``
        independent runs of ``num_particles``; ``num_mcmc_steps``, ``max_mcmc_steps``,
        ``mixing_target``: the adaptive moves (None for :func:`~bayes_attn.inference.run_smc`'s
        defaults); ``batch_size``: particles per ``lax.map`` batch. The old form, these as
        keywords, warns (``DeprecationWarning``).
    seed, key
        A seed or a PRNG key (not both; seed 0 when neither), split into one key per basin
        (:func:`free_energy_keys`), so that the basins' SMC errors are independent.
    progress : bool
        Say each stage on stderr before it starts, with the cost of a tempering step, and log
        every tempering step (:mod:`bayes_attn.progress`). At Level 1 and the network a basin
        takes minutes to hours on a laptop CPU (docs/validation.md).
    checkpoint : str or path, optional
        A prefix for the basins' SMC checkpoints, ``PREFIX.weak`` and ``PREFIX.strong``
        (:func:`basin_checkpoints`): each basin's run writes its state after every tempering step
        and, rerun with the same arguments after a kill, resumes from it and ends bit for bit as
        an uninterrupted run (:mod:`bayes_attn.inference.smc_checkpoint`). A finished basin's
        evidence is kept in ``PREFIX.<phase>.done.npz`` (with a digest of its arguments: the
        model's arguments, the start, the boundary, the SMC options and the key), so a rerun
        reads it instead of running that basin again; these files are removed when the call
        returns.

    Returns
    -------
    xarray.Dataset
        Over ``phase`` = weak, strong (the basins found from the uniform and the copy start, each
        the side of this level's phase boundary (:func:`level_modes`) its mode is on; where both
        starts reach the same mode there is one phase and the evidences are nan):
        ``aG`` at the mode, ``potential`` there, ``log_Z_laplace``, ``log_Z_smc`` (mean over
        replicates) and ``log_Z_smc_se``, ``tempering_steps`` (mean), ``distance`` (of the mode's
        aG from the boundary, which delimits the basins). Scalars: ``distinct`` (both phases
        exist; else the deltas are nan), ``delta_F`` and ``delta_F_se`` (SMC), ``delta_F_laplace``,
        ``delta_F_level2`` (exact, :func:`~bayes_attn.theory.modes` with ``include_logdet``, at
        the same P and chi), ``delta_U`` (the difference of the potentials at the modes). The
        attrs record the level, P, the preset, the boundary, ``include_logdet``, the SMC options
        and the seed (-1 and ``key_data`` for a key).
    """
    from bayes_attn.theory.modes import modes

    problem, legacy = _problem(task, hyper, tokens, level, fields)
    task, hyper, include_logdet = problem.task, problem.hyper, problem.include_logdet
    smc = _smc_options(smc_options, legacy)
    checkpoints = basin_checkpoints(checkpoint)
    rng, seed, key_attrs = resolve_key(key, seed)
    P, (model, args, kwargs), found, cut = problem.modes("phase_free_energies" if progress else "")
    keys = free_energy_keys(rng)
    rows, aG = _basins(model, args, kwargs, found, cut, smc, keys, progress, checkpoints)
    ds = _free_energy_table(rows, aG)
    for path in checkpoints.values():
        if path is not None:
            Path(f"{path}.done.npz").unlink(missing_ok=True)
    m = modes(task, hyper, P, "softmax", include_logdet=include_logdet)
    ds["delta_F_level2"] = float(m.delta_F) if (m.phase == "strong").any() else math.nan
    ds.attrs.update(
        level=problem.level,
        P=P,
        **preset_attrs(task, hyper),
        boundary_aG=cut,
        include_logdet=int(include_logdet),
        dim=next((r.dim for r in rows.values() if r is not None), 0),  # 0: no evidence run
        **{k: v for k, v in smc.items() if v is not None},
        seed=seed,
        **key_attrs,
        description="Delta F = F_strong - F_weak = log Z_weak - log Z_strong",
    )
    return ds


def start_occupancy(
    task,
    hyper=None,
    tokens=None,
    level: str = "kernel",
    *,
    settings: NUTSSettings | None = None,
    seed: int = 0,
    progress: bool = True,
    progress_bar: bool | None = None,
    **changes,
) -> tuple[PhaseOccupancy, object]:
    """NUTS with half the chains from the uniform start and half from the copy start.

    ``task, hyper, tokens, level`` and the keywords ``embeddings``, ``d_model``,
    ``include_logdet``: a :class:`LevelProblem`, or its fields, as :func:`level_modes` takes them.
    The chains start at the modes that :func:`level_modes` reaches from the two starts. Returns
    ``(occupancy, idata)``: the per-chain phase table and verdict of
    :func:`~bayes_attn.analysis.phase_occupancy` (boundary: this level's, from
    :func:`level_modes`; the Level-2 one where only one mode was found), and the draws. Where both basins are deep, chains stay where they start and the verdict is
    "not mixing"; a chain started in a shallow basin may leave it in warm-up (measured at
    Level 1 near a spinodal, docs/validation.md).

    ``settings, **changes``: the fields of :class:`~bayes_attn.inference.nuts.NUTSSettings` (its
    docstring lists them), changed from :data:`OCCUPANCY_NUTS` (8 chains of 200 warm-up + 200
    draws; at least 2 chains, half from each start); ``changes`` may also hold the problem's
    keywords.
    ``progress`` says each stage on stderr before it starts, the NUTS run with its cost
    estimated from one timed gradient (:mod:`bayes_attn.progress`); NUTS runs without its own
    bar (``progress_bar=True``, deprecated, still shows it). At Level 1 with P = 42 and 4 chains
    of 100 + 100 draws it takes minutes.
    """
    from bayes_attn.inference import run_nuts
    from bayes_attn.inference.nuts import announce_cost

    nuts_bar = renamed("progress_bar", progress_bar, "progress", False)  # the old NUTS bar
    problem, changes = _problem(task, hyper, tokens, level, changes)
    nuts = with_changes(
        OCCUPANCY_NUTS if settings is None else settings, NUTSSettings, changes,
        where="start_occupancy",
    ).checked()  # fmt: skip
    num_chains = check_int("num_chains", nuts.num_chains, 2)
    P, (model, args, kwargs), found, cut = problem.modes("start_occupancy" if progress else "")
    starts = {phase: found[phase]["start"] for phase in PHASES}
    if not math.isfinite(cut):
        cut = phase_boundary(problem.task, problem.hyper, P, include_logdet=problem.include_logdet)
    half = num_chains // 2
    init = {
        name: jnp.stack(
            [jnp.asarray(starts["weak"][name])] * (num_chains - half)
            + [jnp.asarray(starts["strong"][name])] * half
        )
        for name in starts["weak"]
    }
    if progress:  # NUTS's cost line, without its bar
        pot = flat_potential(model, args, kwargs)
        announce_cost(pot, nuts.metric, num_chains, nuts.num_warmup, nuts.num_samples,
                      who="start_occupancy: NUTS,")  # fmt: skip
    idata = run_nuts(model, model_args=args, model_kwargs=kwargs, settings=nuts, seed=seed,
                     progress=nuts_bar, init_params=init)  # fmt: skip
    occ = phase_occupancy(idata, "aG", boundary=cut)
    return occ, idata


def _ensemble_starts(task, hyper, P, embeddings, members: int, seed: int) -> dict:
    """The starting weights of :func:`ensemble_occupancy`'s ``2 members`` members: the frozen
    embeddings, W_G at the uniform start for the first half and at the copy start for the
    second, and a prior draw of W_O each (from ``seed``)."""
    from bayes_attn.models.network import init_params

    W_emb, pos = (jnp.asarray(e) for e in embeddings)
    d = W_emb.shape[0]
    starts = phase_starts(task, hyper, P, "network", embeddings=embeddings)
    n = 2 * members
    keys = jax.random.split(jax.random.key(seed), n)
    W_O = jnp.stack([init_params(k, task, hyper, d)["W_O"] for k in keys])
    W_G = jnp.stack([starts["weak"]["W_G"]] * members + [starts["strong"]["W_G"]] * members)
    return {
        "W_emb": jnp.broadcast_to(W_emb, (n, *W_emb.shape)),
        "p": jnp.broadcast_to(pos, (n, *pos.shape)),
        "W_G": W_G,
        "W_O": W_O,
    }


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
    progress: bool = False,
    progress_bar: bool | None = None,
) -> xr.Dataset:
    """Adam ensembles on one dataset with frozen ``embeddings``, half from each start.

    Members ``0 .. members - 1`` start uniform (W_G = 0) and ``members .. 2 members - 1`` from the
    copy start, each with a prior draw of W_O. Returns a Dataset over ``member``: ``start``,
    the final ``aG`` and ``phase`` (by the Level-2 boundary at this P), and the final ``objective``
    per token; attrs hold the fraction of members in the strong phase per start. The phase
    boundary is the network posterior's own (:func:`level_modes` at ``level="network"``).
    ``progress``: Adam's bar (``progress_bar``, its old name, is deprecated).
    """
    from bayes_attn.inference import train_adam

    progress = renamed("progress_bar", progress_bar, "progress", progress)
    members = check_int("members", members, 1)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    P = tokens.shape[0]
    init = _ensemble_starts(task, hyper, P, embeddings, members, seed)
    d, n = init["W_emb"].shape[1], 2 * members
    ds = train_adam(
        task, hyper, "softmax", d, P, members=n, seed=seed,
        tokens=jnp.broadcast_to(tokens, (n, *tokens.shape)), lr=lr, max_steps=max_steps,
        patience=max_steps, train_embeddings=False, init=init, progress=progress,
    )  # fmt: skip
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
