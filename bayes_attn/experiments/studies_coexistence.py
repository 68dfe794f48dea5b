"""The coexistence and landscape studies of docs/validation.md as sweep kinds (registered in
``KINDS`` of :mod:`bayes_attn.experiments.kinds`; configs ``bayes_attn/configs/*.toml``).

Each runs as ``bayes-attn sweep --config bayes_attn/configs/STUDY.toml --out FILE``, and its
``docs/scripts`` reader only tabulates the file:

- ``coexistence_modes``: the Level-2 phases (exact) and the Level-1 modes reached from the uniform
  and the copy start (:func:`bayes_attn.experiments.coexistence.level_modes`) on the point's nested
  dataset, with their potentials and Level 1's own divide (``coexistence_modes.toml``);
- ``occupancy``: NUTS at Level 1 with half the chains from each start's mode
  (:func:`~bayes_attn.experiments.coexistence.start_occupancy`) and Adam members of the network
  with orthonormal frozen embeddings from both starts
  (:func:`~bayes_attn.experiments.coexistence.ensemble_occupancy`) (``coexistence_occupancy.toml``);
- ``landscape_linear``: F(cG) of linear attention at Level 1 on a protocol member's dataset and
  the Gram of its embeddings at ``gram_width`` (the exact posterior of that network with frozen
  embeddings), windows from cG = ``lowest`` to ``past`` beyond the MAP (``landscape_linear.toml``).

The grid's seed is the dataset's (the nested pool's key; for ``landscape_linear`` the protocol's
seed); the samplers' own seed is the option ``sampler_seed``.
"""

from __future__ import annotations

import math

import numpy as np

from bayes_attn.analysis.phases import VERDICTS
from bayes_attn.experiments.points import pool_tokens
from bayes_attn.inference.umbrella import UmbrellaSettings

__all__ = ["landscape_linear_point", "modes_point", "occupancy_point"]

#: the phases of the extra dim ``phase``, in order
PHASES = ("weak", "strong")


def check_pool(cfg, options: dict) -> dict:
    """Softmax only, and every P within the nested pool."""
    if tuple(cfg.activation) != ("softmax",):
        raise ValueError(f"activation: this sweep is of softmax's phases; list only softmax, "
                         f"got {list(cfg.activation)}")  # fmt: skip
    if not 1 <= max(cfg.P) <= options["pool"]:
        raise ValueError(f"pool: the nested pool ({options['pool']}) must hold every P "
                         f"(max {max(cfg.P)})")  # fmt: skip
    return options


# --------------------------------------------------------------------------------------------------
# coexistence_modes: the modes of each level from both starts

MODES = dict(pool=60)  # the nested pool: the first P of task.sample(key(seed), pool)


def modes_point(cfg, pt, task, hyper):
    """Level 2's aG per phase (nan where absent) and Delta F (log-determinant included), and the
    Level-1 mode's aG and potential U from each start (dims ("phase",): weak = the uniform
    start, strong = the copy start), with Level 1's divide (nan where both reach one mode)."""
    from bayes_attn.experiments.coexistence import level_modes
    from bayes_attn.theory import modes

    tokens = pool_tokens(task, pt, cfg.options["pool"])
    m = modes(task, hyper, float(pt["P"]), "softmax", include_logdet=True)
    phases = [str(p) for p in m.phase.values]
    level2 = np.array([float(m.aG.values[phases.index(p)]) if p in phases else np.nan
                       for p in PHASES])  # fmt: skip
    found, divide = level_modes(task, hyper, tokens, "kernel")
    return {
        "level2_aG": (("phase",), level2),
        "level2_delta_F": ((), float(m.delta_F) if "strong" in phases else np.nan),
        "level1_aG": (("phase",), np.array([found[p]["aG"] for p in PHASES])),
        "level1_U": (("phase",), np.array([float(found[p]["U"]) for p in PHASES])),
        "level1_divide": ((), float(divide)),
    }


# --------------------------------------------------------------------------------------------------
# occupancy: NUTS and Adam from both starts

OCCUPANCY = dict(
    pool=60,
    num_chains=4,  # NUTS at Level 1: half from each start's mode
    num_warmup=100,
    num_samples=100,
    members=2,  # Adam at the network: members from each start
    d_model=32,  # the network's width, embeddings frozen at an orthonormal draw
    lr=1e-2,
    max_steps=400,
    sampler_seed=0,  # NUTS's, Adam's and the embeddings' seed (the dataset's is the grid's)
)

_CHAIN_COLUMNS = ("n_draws", "n_strong", "strong_fraction", "n_switches", "ess")


def occupancy_point(cfg, pt, task, hyper):
    """NUTS's per-chain occupancy (dims ("chain",)), its pooled strong fraction, boundary and
    verdict (an index into ``VERDICTS``); each Adam member's start (0 uniform, 1 copy), final
    aG, phase (1 strong) and objective per token (dims ("member",)) and the network's divide."""
    from bayes_attn.experiments.coexistence import ensemble_occupancy, start_occupancy
    from bayes_attn.experiments.hysteresis import orthonormal_start

    o, seed = cfg.options, cfg.options["sampler_seed"]
    tokens = pool_tokens(task, pt, o["pool"])
    occ, _ = start_occupancy(task, hyper, tokens, "kernel", num_chains=o["num_chains"],
                             num_warmup=o["num_warmup"], num_samples=o["num_samples"],
                             seed=seed, progress=False)  # fmt: skip
    out = {f"nuts_{c}": (("chain",), occ.table[c].to_numpy(float)) for c in _CHAIN_COLUMNS}
    out.update(nuts_fraction=((), float(occ.fraction)), nuts_boundary=((), float(occ.boundary)),
               nuts_verdict=((), float(VERDICTS.index(occ.verdict))))  # fmt: skip
    draw = orthonormal_start(task, hyper, o["d_model"], 1, seed=seed)
    ens = ensemble_occupancy(task, hyper, tokens, (draw["W_emb"][0], draw["p"][0]),
                             members=o["members"], lr=o["lr"], max_steps=o["max_steps"],
                             seed=seed)  # fmt: skip
    out.update(
        adam_start=(("member",), (ens.start.values == "copy").astype(float)),
        adam_aG=(("member",), ens.aG.values.astype(float)),
        adam_strong=(("member",), (ens.phase.values == "strong").astype(float)),
        adam_objective=(("member",), ens.objective.values.astype(float)),
        adam_boundary=((), float(ens.attrs["boundary_aG"])),
    )
    return out


# --------------------------------------------------------------------------------------------------
# landscape_linear: F(cG) on a protocol member's dataset and Gram


def landscape_linear_defaults() -> dict:
    """The member, the Gram's width, the windows (``windows`` from cG = ``lowest`` to ``past``
    beyond the MAP), the profiles' folder and the kernel level's umbrella settings."""
    from bayes_attn.experiments.kinds import UMBRELLA_OPTIONS

    umbrella = UmbrellaSettings.for_level("kernel").options(*UMBRELLA_OPTIONS)
    return dict(member=0, gram_width=10_000, windows=32, lowest=-0.1, past=0.5, profiles="",
                sampler_seed=0, **umbrella)  # fmt: skip


def check_landscape_linear(cfg, options: dict) -> dict:
    if tuple(cfg.activation) != ("linear",):
        raise ValueError("activation: a landscape_linear sweep is of linear's cG; list only linear")
    return options


def linear_profile(cfg, pt, task, hyper):
    """(umbrella result, MAP cG) of the point: F(cG) on protocol member ``member``'s dataset and
    Gram (``ProtocolConfig`` at its defaults, the grid's L, V, seed and tokens)."""
    from bayes_attn.experiments.frozen import member_grams
    from bayes_attn.experiments.landscape import run_landscape
    from bayes_attn.experiments.protocol import ProtocolConfig, member_datasets
    from bayes_attn.theory.level1 import level1_map

    o = dict(cfg.options)
    pc = ProtocolConfig.of(L=pt["L"], V=pt["V"], seed=pt["seed"], tokens=cfg.tokens)
    P, m = int(pt["P"]), o.pop("member")
    tokens = member_datasets(pc, "linear", P)[m]
    gram = member_grams(pc, hyper, "linear", P, o.pop("gram_width"))[m]
    cG = abs(float(level1_map(task, hyper, tokens, "linear", gram=gram).cG))
    centres = np.linspace(o.pop("lowest"), cG + o.pop("past"), o.pop("windows"))
    for name in ("profiles", "sampler_seed"):
        o.pop(name)
    idata = run_landscape(task, hyper, P, "kernel", "linear", tokens=tokens, gram=gram,
                          centres=centres, seed=cfg.options["sampler_seed"], progress=False,
                          **o)  # fmt: skip
    return idata, cG


def landscape_linear_point(cfg, pt, task, hyper):
    """The minima of F(cG) (the lowest first), its mean, Level 2's minimum on the same bins, the
    MAP's cG and F - F_min there, the smallest overlap and the largest R-hat."""
    from bayes_attn import _arviz as az
    from bayes_attn.analysis.free_energy import landscape_report, profile_mean

    idata, cG = linear_profile(cfg, pt, task, hyper)
    o = cfg.options
    if o["profiles"]:  # the whole profile, for docs/scripts/landscape_figure.py
        from pathlib import Path

        from bayes_attn.experiments.landscape import write_landscape

        for g in az.groups(idata):
            idata[g].attrs.update(map_cG=cG, member=o["member"])
        name = f"linear_P{pt['P']:g}_m{o['member']}_g{o['gram_width']}.nc"
        write_landscape(idata, Path(o["profiles"]) / name)
    prof = landscape_report(idata)
    F = prof.F.values - np.nanmin(prof.F.values)
    q2 = math.nan
    if "F_level2" in prof:
        q2 = float(prof.q[int(np.nanargmin(prof.F_level2.values))])
    return {
        "cG_minimum": ((), float(prof.q[int(np.nanargmin(F))])),
        "n_profile_minima": ((), float(prof.q_minimum.size)),
        "profile_mean": ((), float(profile_mean(prof))),
        "level2_minimum": ((), q2),
        "map_cG": ((), cG),
        "F_at_map": ((), float(np.interp(cG, prof.q.values, F))),
        "min_overlap": ((), float(prof.min_overlap_next)),
        "max_r_hat": ((), float(np.nanmax(prof.r_hat.values))),
    }
