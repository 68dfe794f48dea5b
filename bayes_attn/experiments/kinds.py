"""The sweep kinds: what a sweep can compute at a grid point, registered in one place (``KINDS``).

A kind is a :class:`Kind`: its point function ``(cfg, point, task, hyper) -> {name: (dims, array)}``
(the same names at every point), its options with their defaults, the sampler its provenance names,
whether P may be any positive number, and an optional check of the options. The point function, the
defaults and the check may be given as ``"module:attribute"`` strings, imported when the kind is
first used, so a study module can register its kinds here without an import cycle (it may import
:mod:`bayes_attn.experiments.sweep`). To add a kind, add one line to ``KINDS``; its options then
appear in ``SweepConfig.options``, ``bayes-attn sweep --kind`` and the provenance of its files.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable

from bayes_attn.analysis.ensembles import classify_minima
from bayes_attn.analysis.phases import VERDICTS
from bayes_attn.inference.adam import WARMUP_FRACTION, WARMUP_START, AdamSettings
from bayes_attn.inference.llc import LLCSettings
from bayes_attn.inference.nuts import NUTSSettings
from bayes_attn.inference.sgld import SGLDSettings
from bayes_attn.inference.umbrella import UmbrellaSettings


@dataclasses.dataclass(frozen=True)
class Kind:
    """One sweep kind.

    Attributes
    ----------
    point : callable or str
        ``point(cfg, pt, task, hyper) -> {name: (extra dims, array)}`` at the grid point ``pt``
        (a dict of activation, L, V, P, seed), or its ``"module:function"``; an entry
        ``(extra dims, array, {dim: coordinate})`` labels those dims (default: their index).
    defaults : dict, callable or str
        The options the kind accepts, with their defaults (a zero-argument function returning
        them, or its ``"module:name"``, which may also name a dict).
    sampler : str
        What computes a point, as the file's provenance names it.
    real_P : bool
        P may be any positive number (a theory or a model's scale), not only a dataset's size.
    check : callable, str or None
        ``check(cfg, options) -> options``: refuse bad options (raise naming them) or fill in
        defaults that depend on other options; ``cfg.options`` holds the user's options only.
    descriptions : dict or str
        ``{variable: (units, text)}`` (or its ``"module:NAME"``) for the variables whose
        meaning in this kind differs from ``DESCRIPTIONS``, the one table of the variables every
        kind writes; they become the file's ``units`` and ``description`` attrs.
    """

    point: Callable | str
    defaults: dict | Callable | str
    sampler: str
    real_P: bool = False
    check: Callable | str | None = None
    descriptions: dict | str = dataclasses.field(default_factory=dict)


def resolve(obj):
    """``obj``, or the attribute a ``"module:attribute"`` string names."""
    if not isinstance(obj, str):
        return obj
    module, _, name = obj.partition(":")
    return getattr(importlib.import_module(module), name)


def kind_spec(name: str) -> Kind:
    """The registered :class:`Kind` ``name``; an unknown name raises listing the known ones."""
    if name not in KINDS:
        raise ValueError(f"kind must be one of {tuple(KINDS)}, got {name!r}")
    return KINDS[name]


def kind_defaults(name: str) -> dict:
    """The options of the kind ``name`` with their defaults."""
    defaults = resolve(kind_spec(name).defaults)
    return dict(defaults() if callable(defaults) else defaults)


def signature_defaults(fn, *names) -> dict:
    """The defaults of ``fn``'s parameters ``names``, read from its signature (their one home)."""
    params = inspect.signature(fn).parameters
    return {name: params[name].default for name in names}


_ADAM = AdamSettings()
_CHAINS = ("num_chains", "num_warmup", "num_samples")
#: the options of an ``llc`` point that are :class:`~bayes_attn.inference.llc.LLCSettings` fields
_LLC_OPTIONS = tuple("sampler num_chains num_draws step_size gamma include_prior nbeta".split())
#: the umbrella options of a landscape sweep; their defaults are the level's UmbrellaSettings
UMBRELLA_OPTIONS = ("num_warmup", "num_samples", "num_chains", "refine", "max_windows")

# Settings each kind accepts, with their defaults (``SweepConfig.options`` overrides them). The
# samplers' and the trainer's come from their settings dataclasses; the rest (the
# level, the widths, the ensemble's size) are the sweep's own.
DEFAULTS = {
    "theory": {},
    "nuts": dict(
        level="reduced",
        **{k: getattr(NUTSSettings(), k) for k in _CHAINS},  # run_nuts's defaults
        d_model=16,
        include_logdet=False,
    ),
    "sgld": dict(
        level="reduced",
        **{k: getattr(SGLDSettings(), k) for k in _CHAINS},  # run_sgld's defaults
        d_model=16,
        step_size=SGLDSettings().step_size,
        batch_size=None,
        include_logdet=False,
    ),
    "adam": dict(
        d_model=64,
        members=4,
        lr=_ADAM.lr,
        max_steps=_ADAM.max_steps,
        patience=_ADAM.patience,
        warmup_fraction=WARMUP_FRACTION,
        warmup_init=WARMUP_START,  # relative: the warm-up starts at lr * warmup_init
        num_test=_ADAM.num_test,
        **signature_defaults(classify_minima, "rtol"),
    ),
    "protocol": None,  # the fields of ProtocolConfig, filled in lazily (import cycle)
    "llc": dict(
        level="network",
        d_model=None,  # V + L, the narrowest frozen-embedding network (experiments.llc)
        num_burnin="auto",  # 5/(εγ): a point's λ̂ is biased low without it (run_llc)
        **{k: getattr(LLCSettings(), k) for k in _LLC_OPTIONS},  # run_llc's defaults
        batch_size=None,
        exact=False,
    ),
    "landscape": dict(
        level="kernel",
        # the default level's; a point at another level takes that level's (SweepConfig)
        **UmbrellaSettings.for_level("kernel").options(*UMBRELLA_OPTIONS),
        gram_width=0,  # 0: g = I
        include_logdet=True,
        pool=0,  # > 0: the dataset is the first P of task.sample(key(seed), pool) (nested in P)
        centres=[],  # the windows' centres, the same at every P (empty: placed from the modes)
        profiles="",  # a folder: each point's umbrella result is also written there
    ),
}


_P = "bayes_attn.experiments.points:"  # the built-in kinds' point functions and checks
_S = "bayes_attn.experiments.studies:"  # the studies' (bayes_attn/configs/*.toml)
_L = "bayes_attn.experiments.llc_studies:"  # the LLC studies'
_C = "bayes_attn.experiments.studies_coexistence:"  # coexistence, linear landscape
_I = "bayes_attn.experiments.induction:"  # the induction head's
_T = "bayes_attn.experiments.induction_training:"  # the induction network's training curves
_IP = "bayes_attn.experiments.induction_posterior:"  # its posterior beyond the MAP
_K = "bayes_attn.experiments.tokens_study:"  # the structured-token study's

#: Every sweep kind, name -> Kind: the one place where kinds are registered.
KINDS: dict[str, Kind] = {
    "theory": Kind(
        _P + "theory_point", {}, "none (theory)", real_P=True, check=_P + "check_theory"
    ),
    "nuts": Kind(_P + "nuts_point", DEFAULTS["nuts"], "nuts", real_P=True),
    "sgld": Kind(_P + "sgld_point", DEFAULTS["sgld"], "sgld", real_P=True),
    "adam": Kind(_P + "adam_point", DEFAULTS["adam"], "adam"),
    "protocol": Kind(_P + "protocol_point", _P + "protocol_defaults", "adam, then sgld"),
    "llc": Kind(_P + "llc_point", DEFAULTS["llc"], "llc", check=_P + "check_llc"),
    "landscape": Kind(
        _P + "landscape_point",
        DEFAULTS["landscape"],
        "umbrella",
        real_P=True,
        check=_P + "check_landscape",
    ),  # fmt: skip
    # the studies (bayes_attn.experiments.studies)
    "frozen": Kind(
        _S + "frozen_point",
        _S + "frozen_defaults",
        "none (exact MAP; nuts)",
    ),
    "precursors": Kind(
        _S + "precursors_point",
        _S + "precursors_defaults",
        "none (theory); nuts",
        real_P=True,
    ),
    "hysteresis": Kind(
        _S + "hysteresis_point",
        _S + "HYSTERESIS",
        "adam (warm-started); sgld",
        check=_S + "check_hysteresis",
    ),
    "level1": Kind(_S + "level1_point", _S + "LEVEL1", "none (L-BFGS, exact Level 1)"),
    "delta_f": Kind(_S + "delta_f_point", _S + "DELTA_F", "smc", real_P=True),
    # the coexistence and linear-landscape studies (bayes_attn.experiments.studies_coexistence)
    "coexistence_modes": Kind(
        _C + "modes_point",
        _C + "MODES",
        "none (Level-2 quadrature; Level-1 mode finder)",
        check=_C + "check_pool",
    ),  # fmt: skip
    "occupancy": Kind(
        _C + "occupancy_point",
        _C + "OCCUPANCY",
        "nuts (Level 1); adam (network)",
        check=_C + "check_pool",
    ),  # fmt: skip
    "landscape_linear": Kind(
        _C + "landscape_linear_point",
        _C + "landscape_linear_defaults",
        "umbrella",
        check=_C + "check_landscape_linear",
    ),  # fmt: skip
    # the LLC studies (bayes_attn.experiments.llc_studies)
    "llc_table1": Kind(
        _L + "table1_point",
        _L + "TABLE1_DEFAULTS",
        "llc (exact nuts, sgld)",
        check=_L + "check_table1",
    ),  # fmt: skip
    "llc_phases": Kind(
        _L + "phases_point",
        _L + "PHASES_DEFAULTS",
        "llc ladders (exact nuts)",
        check=_L + "check_phases",
    ),  # fmt: skip
    "llc_calibration": Kind(
        _L + "calibration_point",
        _L + "CALIBRATION_DEFAULTS",
        "llc (calibrate_llc: sgld ladder; exact nuts)",
        check=_L + "check_calibration",
    ),  # fmt: skip
    "tokens": Kind(
        _K + "tokens_point",
        _K + "TOKENS_DEFAULTS",
        "none (L-BFGS, exact Level 1)",
        check=_K + "check_tokens_study",
        descriptions=_K + "DESCRIPTIONS",
    ),  # fmt: skip  (structured tokens, issue 42 part 3)
    # the induction head (bayes_attn.experiments.induction)
    "induction": Kind(
        _I + "induction_point",
        _I + "INDUCTION_DEFAULTS",
        "none (L-BFGS MAP of the two-layer kernel limit, three starts (two before the session of "
        "2026-12-07 midday); trust-krylov before 2026-12-07)",
        check=_I + "check_induction",
        descriptions=_I + "DESCRIPTIONS",
    ),  # fmt: skip
    "induction_frozen": Kind(
        _I + "induction_point",
        _I + "INDUCTION_FROZEN_DEFAULTS",
        "none (trust-region MAP of the two-layer network, frozen embeddings, three starts)",
        check=_I + "check_induction",
        descriptions=_I + "DESCRIPTIONS",
    ),
    "induction_training": Kind(
        _T + "training_point",
        _T + "TRAINING_DEFAULTS",
        "adam (two-layer network)",
        check=_T + "check_training",
        descriptions=_T + "DESCRIPTIONS",
    ),  # fmt: skip
    "induction_sgld": Kind(
        _T + "sgld_point",
        _T + "SGLD_DEFAULTS",
        "sgld (two-layer network from an Adam start; readout integrated out by default)",
        check=_T + "check_sgld",
    ),  # fmt: skip
    "induction_posterior": Kind(
        _IP + "posterior_point",
        _IP + "POSTERIOR_DEFAULTS",
        "nuts (two-layer kernel limit from its MAP)",
        check=_IP + "check_posterior",
    ),  # fmt: skip
    "induction_profile": Kind(
        _IP + "profile_point",
        _IP + "PROFILE_DEFAULTS",
        "umbrella (two-layer kernel limit)",
        check=_IP + "check_profile",
    ),  # fmt: skip
    "induction_llc": Kind(
        _IP + "llc_point",
        _IP + "LLC_DEFAULTS",
        "llc (exact two-layer target, readout integrated)",
        check=_IP + "check_llc",
    ),  # fmt: skip
    "induction_closure": Kind(
        "bayes_attn.experiments.induction_closure:closure_point",
        "bayes_attn.experiments.induction_closure:CLOSURE_DEFAULTS",
        "none (L-BFGS over the extended families and the token-symmetric forms)",
        check="bayes_attn.experiments.induction_closure:check_closure",
    ),  # fmt: skip
    "induction_symmetry": Kind(
        "bayes_attn.experiments.induction_symmetry:symmetry_point",
        "bayes_attn.experiments.induction_symmetry:SYMMETRY_DEFAULTS",
        "none (trust-region MAPs of the two-layer kernel limit from named starts)",
        check="bayes_attn.experiments.induction_symmetry:check_symmetry",
        descriptions="bayes_attn.experiments.induction_symmetry:DESCRIPTIONS",
    ),  # fmt: skip
}


#: the induction head's scores (:data:`bayes_attn.induction.SCORES`),
#: in words
_SCORES = {
    "uniform1": "layer 1's uniform score",
    "copy1": "layer 1's copy (previous-token) score",
    "induction2": "layer 2's induction score",
    "induction2_excess": "layer 2's induction score over its share",
    "uniform2": "layer 2's uniform score",
}


def _score_descriptions(score: str, what: str) -> dict:
    """The five statistics of one score that an ``induction_posterior`` sweep writes."""
    return {
        f"{score}_map": ("1", f"{what} at the MAP, held out"),
        f"{score}_mean": ("1", f"posterior mean of {what} (held out, predictive draws)"),
        f"{score}_sd": ("1", f"posterior sd of {what} (held out, predictive draws)"),
        f"{score}_rhat": ("1", f"R-hat of {what} (training set, every draw)"),
        f"{score}_ess": ("draws", f"bulk ESS of {what} (training set, every draw)"),
    }


#: ``{variable: (units, text)}`` of every variable a sweep kind writes (the studies' included):
#: the one table the files' ``units`` and ``description`` attrs come from
#: (``Kind.descriptions`` overrides a name whose meaning in a kind differs)
DESCRIPTIONS = {
    "done": ("1", "the grid point has finished"),
    "c1": ("1", "uniform-pooling order parameter (linear attention)"),
    "cG": ("1", "copy order parameter (linear attention)"),
    "a1": ("1", "uniform-pooling order parameter (softmax attention)"),
    "aG": ("1", "copy order parameter (softmax attention)"),
    "loss": ("1", "theory loss per token at the global saddle, 1/2 |y - f|^2"),
    "action": (
        "nats / chi",
        "action per unit chi at the global saddle (tokens: Level 1's, at its minimum)",
    ),
    "n_minima": ("1", "number of local minima of the reduced action"),
    "meta_q": (
        "1",
        "copy order parameter (cG or aG) of the lowest metastable minimum (linear: in the Z2 "
        "image c1 + cG >= 0, where the anti-aligned minimum has c1 < 0)",
    ),
    "meta_loss": ("1", "theory loss per token at the lowest metastable minimum"),
    "second_order": ("sequences", "linear: second-order transition P*"),
    "crossover": (
        "sequences",
        "linear: crossover, max d cG / d log P (tokens: of the Level-1 MAP)",
    ),
    "first_order": ("sequences", "softmax: first-order P* (equal action)"),
    "spinodal_lower": ("sequences", "softmax: the strong-copy minimum appears"),
    "spinodal_upper": ("sequences", "softmax: the weak-copy minimum vanishes"),
    "divergences": ("1", "divergent transitions after warm-up, all chains"),
    "train_loss": ("1", "final train loss per token"),
    "test_loss": ("1", "final held-out loss per token"),
    "global_min": ("1", "member reached the ensemble's lowest loss (classify_minima), 1 or 0"),
    "steps": ("steps", "Adam steps taken (early stopping)"),
    "A_bar": ("1", "final mean attention pattern on held-out sequences (linear: Z2-folded)"),
    "step": ("1", "SGLD step size (min(5e-4 / d_model, 0.1 / largest Hessian eigenvalue))"),
    "llc_mean": ("1", "local learning coefficient nβ (E[L_n] - L_n(w*)) at the exact MAP w*"),
    "llc_std": ("1", "spread of the chains' LLC estimates (devinterp's llc/std)"),
    "llc_mcse": ("1", "Monte Carlo standard error of llc_mean (from the ESS)"),
    "llc_ess": ("1", "effective sample size of the per-draw LLC"),
    "llc_rhat": ("1", "R-hat of the per-draw LLC across chains started around w*"),
    "acceptance": ("1", "mean exact full-batch MALA acceptance of the sampler's steps"),
    "init_loss": ("nats / sequence", "L_n(w*), mean negative log likelihood per sequence"),
    "grad_norm": ("1", "|grad L_n(w*)| (w* is a prior-regularised MAP, not critical for L_n)"),
    "nbeta": ("1", "the inverse temperature nβ times n"),
    "exact_llc": ("1", "the exact LLC of the frozen-embedding network (W_O integrated out, NUTS)"),
    "exact_mcse": ("1", "Monte Carlo standard error of exact_llc"),
    "delta_F": ("nats", "F_strong - F_weak across the divide (umbrella sampling + MBAR)"),
    "delta_F_se": ("nats", "standard error of delta_F (MBAR, draws subsampled)"),
    "divide": ("1", "aG of the divide: the highest point of F(aG) between its outer minima"),
    "aG_weak": ("1", "aG at the lowest-aG minimum of F(aG)"),
    "aG_strong": ("1", "aG at the highest-aG minimum of F(aG) (nan with one minimum)"),
    "n_profile_minima": ("1", "number of minima of F(aG) (profile_minima, 1 nat deep)"),
    "barrier_weak": ("nats", "F at the barrier above the weak minimum"),
    "barrier_strong": ("nats", "F at the barrier above the strong minimum"),
    "min_overlap": ("1", "smallest MBAR overlap of neighbouring windows"),
    "max_r_hat": ("1", "largest per-window R-hat of aG"),
    # the studies' (frozen, precursors, hysteresis: bayes_attn.experiments.studies)
    "exact_c1": ("1", "held-out c1 (a1) of the member's exact MAP (linear: Z2-folded)"),
    "exact_cG": ("1", "held-out cG (aG) of the member's exact MAP (linear: Z2-folded)"),
    "exact_global_min": ("1", "the member's MAP passes the loss filter (classify_minima), 1 or 0"),
    "var_laplace": ("1", "variance of the order parameter by Laplace at the global saddle"),
    "var_exact": ("1", "variance of the order parameter by quadrature"),
    "var_nuts": ("1", "variance of the order parameter by NUTS (nan where not run)"),
    "mcse_nuts": ("1", "Monte Carlo standard error of var_nuts"),
    "q1": ("1", "final c1 (a1) of the member after Adam at this rung of the loop"),
    "qG": ("1", "final cG (aG) of the member after Adam at this rung of the loop"),
    # llc_table1, llc_phases (bayes_attn.experiments.llc_studies)
    "exact_llc_mean": ("1", "exact LLC of the frozen-embedding network (W_O integrated out)"),
    "sgld_llc_mean": ("1", "LLC by SGLD on the network's weights (nan with exact_only)"),
    "centre": ("1", "the phase's centre: 0 the joint MAP, 1 the gate's mode, 2 its start"),
    "free_energy": ("nats", "F(n) of the phase, localized at its centre"),
    "free_energy_basin": ("nats", "F(n) of the phase's basin, the localization taken away"),
    # llc_calibration (experiments.llc_studies.calibration_point: experiments.llc.calibrate_llc)
    "llc": ("1", "LLC estimate at this nβ and step (the mean over the seeds' runs)"),
    "mcse": ("1", "Monte Carlo standard error of the LLC estimate"),
    "rhat": ("1", "R-hat of the per-draw LLC across chains"),
    "step_size": ("1", "Langevin step size ε"),
    "passes": ("1", "the step passes: acceptance high enough and stable under halving, 1 or 0"),
    "chosen": ("1", "the largest step that passes at this nβ (nan: none)"),
    "llc_extrapolated": ("1", "2 llc(ε/2) - llc(ε): the first-order step bias removed"),
    "llc_extrapolated_se": ("1", "standard error of llc_extrapolated"),
    "exact_seconds": ("s", "wall time of the exact LLC runs"),
    "calibration_seconds": ("s", "wall time of the calibration ladder"),
    # coexistence_modes, occupancy, landscape_linear (bayes_attn.experiments.studies_coexistence)
    "level2_aG": ("1", "aG of the Level-2 phase (exact; nan where it does not exist)"),
    "level2_delta_F": ("nats", "Level 2's F_strong - F_weak (log-determinant; nan: one phase)"),
    "level1_aG": ("1", "aG of the Level-1 mode from its start (weak: uniform; strong: copy)"),
    "level1_U": ("nats", "potential at the Level-1 mode from the phase's start"),
    "level1_divide": ("1", "aG of Level 1's divide between its modes (nan: one mode)"),
    "nuts_n_draws": ("draws", "the chain's draws"),
    "nuts_n_strong": ("draws", "the chain's draws above the divide"),
    "nuts_strong_fraction": ("1", "the chain's fraction of draws above the divide"),
    "nuts_n_switches": ("1", "the chain's changes of phase between draws"),
    "nuts_ess": ("draws", "effective draws of the chain's phase indicator"),
    "nuts_fraction": ("1", "pooled fraction of NUTS draws in the strong phase"),
    "nuts_boundary": ("1", "aG of the divide NUTS's draws are split at (Level 1's own)"),
    "nuts_verdict": ("1", "phase_occupancy's verdict, an index into " + ", ".join(VERDICTS)),
    "adam_start": ("1", "the member's start: 0 uniform, 1 copy"),
    "adam_aG": ("1", "the member's final aG"),
    "adam_strong": ("1", "the member ends above the network's divide, 1 or 0"),
    "adam_objective": ("1", "the member's final objective per token"),
    "adam_boundary": ("1", "aG of the network posterior's divide (level_modes)"),
    "cG_minimum": ("1", "cG at the lowest point of F(cG)"),
    "profile_mean": ("1", "mean of cG under the profile"),
    "level2_minimum": ("1", "cG at the minimum of Level 2's F(cG) on the same bins"),
    "map_cG": ("1", "|cG| of the Level-1 MAP (L-BFGS) on the member's dataset and Gram"),
    "F_at_map": ("nats", "F(cG) - min F at the MAP's cG"),
    # induction_posterior, induction_profile, induction_llc (experiments.induction_posterior)
    **{k: v for s, what in _SCORES.items() for k, v in _score_descriptions(s, what).items()},
    "loss_predictive": ("1", "held-out loss per token of the posterior-predictive mean"),
    "loss_draws": ("1", "mean over the draws of each draw's held-out loss per token"),
    "loss_map": ("1", "held-out loss per token of the MAP's posterior-mean readout"),
    "loss_bigram": ("1", "held-out loss of the Dirichlet bigram (Bayes-optimal, uniform start)"),
    "loss_unigram": ("1", "held-out loss of the smoothed in-context unigram"),
    "loss_uniform": ("1", "held-out loss of 1/V"),
    "kl_bigram": ("nats", "mean KL(bigram || the model's clipped output), held out"),
    "kl_unigram": ("nats", "mean KL(unigram || the model's clipped output), held out"),
    "kl_uniform": ("nats", "mean KL(uniform || the model's clipped output), held out"),
    "leapfrogs": ("gradients", "mean leapfrog steps per NUTS draw"),
    "seconds": ("s", "wall time of the grid point (induction_symmetry: of the run)"),
    "q_weak": ("1", "the profiled site at the lowest-q minimum of F(q)"),
    "q_strong": ("1", "the profiled site at the highest-q minimum of F(q) (nan: one minimum)"),
    "windows": ("1", "umbrella windows run"),
    "q_divide": ("1", "the profiled site at the highest point of F(q) between its outer minima"),
    "nuts_acceptance": ("1", "mean NUTS acceptance of the draws"),
    "llc_step": ("1", "the Langevin step of the LLC's sampler (nan for NUTS)"),
    # induction, induction_frozen, induction_training (experiments.induction, .induction_training)
    "U_zero": ("nats", "potential at the mode found from the start near zero (no head formed)"),
    "U_circuit": ("nats", "potential at the mode found from the hand-built induction circuit"),
    "U_weak_circuit": ("nats", "potential at the mode found from the circuit at weak_beta"),
    "start_won": (
        "1",
        "the start whose mode has the lowest potential (the MAP): 0 zero, 1 circuit, 2 weak",
    ),
    "converged": (
        "1",
        "the kept mode (induction_symmetry: the run's) met the gradient tolerance, 1 or 0",
    ),
    "uniform1": ("1", "layer 1: L x mean attention off the previous-token line (causal)"),
    "copy1": ("1", "layer 1: L x (mean previous-token attention - uniform1 / L)"),
    "induction2": ("1", "layer 2: attention mass on the positions after earlier x[a]"),
    "induction2_excess": ("1", "induction2 minus the share of such positions (0: uniform)"),
    "uniform2": ("1", "layer 2: L x mean attention off the induction matches"),
    # the induction kind's store_maps (experiments.induction.map_reading)
    "M1": ("1", "layer 1's bilinear form at the MAP or the run's mode (n x n, n = V + L features)"),
    "M2": ("1", "layer 2's bilinear form at the MAP or the run's mode (2n x 2n, over [h0, h1])"),
    "A1_mean": ("1", "layer 1's attention at the MAP, mean over the held-out sequences"),
    "A2_mean": ("1", "layer 2's attention at the MAP, mean over the held-out sequences"),
    "A1_example": ("1", "layer 1's attention at the MAP on held-out sequence 0"),
    "A2_example": ("1", "layer 2's attention at the MAP on held-out sequence 0"),
    "tokens_example": ("1", "the tokens of held-out sequence 0"),
    "train_step": ("steps", "Adam steps done at each record (the chunk dim)"),
    "entry_step": ("steps", "first record below the uniform-unigram midpoint loss"),
    "jump_step": ("steps", "first record below the unigram-bigram midpoint loss (nan: none)"),
    "plateau_steps": ("steps", "jump_step - entry_step (nan: no jump)"),
    # tokens (bayes_attn.experiments.tokens_study)
    "pstar": ("sequences", "softmax: the Level-1 MAP's equal-action P; linear: its second-order P"),
    "lo": ("sequences", "the largest P evaluated below P* (the bracket's lower end)"),
    "hi": ("sequences", "the smallest P evaluated above P* (the bracket's upper end)"),
    "aG_lo": ("1", "aG of the global Level-1 MAP at the bracket's lower end"),
    "aG_hi": ("1", "aG of the global Level-1 MAP at the bracket's upper end"),
    "evals": ("1", "number of P at which the Level-1 MAPs were computed"),
    "q": ("1", "aG (softmax) or Z2-folded cG (linear) of the minimum reached from the start"),
    "copy_weight": ("1", "mean attention on the previous position (the copy route)"),
    "self_weight": ("1", "mean attention on the current position (the token-only route)"),
    "loss_token_only": ("1", "exact expected loss of the best predictor from the current token"),
    # induction_closure (bayes_attn.experiments.induction_closure)
    "U_map": (
        "nats",
        "potential of the study's MAP on the real dataset (the lower of its two starts)",
    ),
    "map_from_file": ("1", "the study's MAP was read from the maps file (else recomputed), 1 or 0"),
    "U_family": ("nats", "the exact potential minimised over the family (P = N)"),
    "family_size": ("1", "the family's number of coordinates"),
    "family_starts": ("1", "L-BFGS starts (zero, previous optimum, MAP's projection)"),
    "copy1_family": ("1", "layer 1's copy score at the family's minimum, on the training set"),
    "excess_family": ("1", "layer 2's induction2_excess at the family's minimum, training set"),
    "family_seconds": ("s", "wall time of the family's minimisation"),
    "U_sym_start": ("nats", "potential at the symmetrised MAP"),
    "U_sym": ("nats", "the potential minimised over the token-symmetric forms (nan: not run)"),
    "sym_grad_norm": ("1", "norm of the symmetric gradient at that minimum"),
    "sym_steps": ("1", "L-BFGS steps of the symmetric minimum"),
    "off_symmetric1": (
        "1",
        "share of |M1|^2 off the token-symmetric forms (closure: at the MAP; symmetry: at the run's mode)",
    ),
    "off_symmetric2": (
        "1",
        "share of |M2|^2 off the token-symmetric forms (closure: at the MAP; symmetry: at the run's mode)",
    ),
    # induction_symmetry (bayes_attn.experiments.induction_symmetry)
    "U": ("nats", "potential at the run's mode (on its data)"),
    "perm_dU": ("nats", "max over token relabellings p of |U(p(M)) - U(M)| at the run's mode"),
    "P_data": ("sequences", "the run's dataset size (sym: V! ceil(P / V!))"),
    "distance": ("1", "|M_run - M_other| / |M_run|, both layers (nan: other data)"),
    "distance_relabelled": ("1", "the least such distance over relabellings of M_other"),
    "distance_map": ("1", "|M_run - M_MAP| / |M_run| to the study's MAP (real data; else nan)"),
    "hessian_low": ("1", "lowest eigenvalues of the Hessian on the asymmetric forms, sym:floor"),
    "hessian_high": ("1", "largest eigenvalue of that block"),
    "asymmetric_dim": ("1", "dimension of the token-asymmetric forms"),
    "hessian_seconds": ("s", "wall time of the Hessian"),
    # tokens (crossover) (bayes_attn.experiments.tokens_study)
    "crossover_lo": ("sequences", "lower end of the fine interval of the largest d cG / d log P"),
    "crossover_hi": ("sequences", "upper end of the fine interval of the largest d cG / d log P"),
    "slope": ("1", "the largest d cG / d log P of the Level-1 MAP's path (its parabola's top)"),
    "path_P": ("sequences", "the P at which the crossover search computed the MAP (nan: unused)"),
    "path_cG": ("1", "the Level-1 MAP's Z2-folded cG at path_P"),
}
