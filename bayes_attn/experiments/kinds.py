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
from bayes_attn.inference.adam import WARMUP_FRACTION, WARMUP_START, AdamSettings
from bayes_attn.inference.llc import run_llc
from bayes_attn.inference.nuts import run_nuts
from bayes_attn.inference.sgld import run_sgld
from bayes_attn.inference.umbrella import UmbrellaSettings


@dataclasses.dataclass(frozen=True)
class Kind:
    """One sweep kind.

    Attributes
    ----------
    point : callable or str
        ``point(cfg, pt, task, hyper) -> {name: (extra dims, array)}`` at the grid point ``pt``
        (a dict of activation, L, V, P, seed), or its ``"module:function"``.
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
        ``{variable: (units, text)}`` for the variables this kind adds beyond ``DESCRIPTIONS``
        (or its ``"module:NAME"``); they become the file's ``units`` and ``description`` attrs.
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
#: the umbrella options of a landscape sweep; their defaults are the level's UmbrellaSettings
UMBRELLA_OPTIONS = ("num_warmup", "num_samples", "num_chains", "refine", "max_windows")

# Settings each kind accepts, with their defaults (``SweepConfig.options`` overrides them). The
# samplers' and the trainer's come from their signatures and from AdamSettings; the rest (the
# level, the widths, the ensemble's size) are the sweep's own.
DEFAULTS = {
    "theory": {},
    "nuts": dict(
        level="reduced",
        **signature_defaults(run_nuts, *_CHAINS),
        d_model=16,
        include_logdet=False,
    ),
    "sgld": dict(
        level="reduced",
        **signature_defaults(run_sgld, *_CHAINS),
        d_model=16,
        **signature_defaults(run_sgld, "step_size"),
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
        **signature_defaults(
            run_llc,
            "sampler",
            "num_chains",
            "num_draws",
            "step_size",
            "gamma",
            "include_prior",
            "nbeta",
        ),
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
        descriptions=_S + "DESCRIPTIONS",
    ),
    "precursors": Kind(
        _S + "precursors_point",
        _S + "precursors_defaults",
        "none (theory); nuts",
        real_P=True,
        descriptions=_S + "DESCRIPTIONS",
    ),
    "hysteresis": Kind(
        _S + "hysteresis_point",
        _S + "HYSTERESIS",
        "adam (warm-started); sgld",
        check=_S + "check_hysteresis",
        descriptions=_S + "DESCRIPTIONS",
    ),
    "level1": Kind(_S + "level1_point", _S + "LEVEL1", "none (L-BFGS, exact Level 1)"),
    "delta_f": Kind(_S + "delta_f_point", _S + "DELTA_F", "smc", real_P=True),
    # the coexistence and linear-landscape studies (bayes_attn.experiments.studies_coexistence)
    "coexistence_modes": Kind(
        _C + "modes_point",
        _C + "MODES",
        "none (Level-2 quadrature; Level-1 mode finder)",
        check=_C + "check_pool",
        descriptions=_C + "DESCRIPTIONS",
    ),  # fmt: skip
    "occupancy": Kind(
        _C + "occupancy_point",
        _C + "OCCUPANCY",
        "nuts (Level 1); adam (network)",
        check=_C + "check_pool",
        descriptions=_C + "DESCRIPTIONS",
    ),  # fmt: skip
    "landscape_linear": Kind(
        _C + "landscape_linear_point",
        _C + "landscape_linear_defaults",
        "umbrella",
        check=_C + "check_landscape_linear",
        descriptions=_C + "DESCRIPTIONS",
    ),  # fmt: skip
    # the LLC studies (bayes_attn.experiments.llc_studies)
    "llc_table1": Kind(
        _L + "table1_point",
        _L + "TABLE1_DEFAULTS",
        "llc (exact nuts, sgld)",
        check=_L + "check_table1",
        descriptions=_L + "DESCRIPTIONS",
    ),  # fmt: skip
    "llc_phases": Kind(
        _L + "phases_point",
        _L + "PHASES_DEFAULTS",
        "llc ladders (exact nuts)",
        check=_L + "check_phases",
        descriptions=_L + "DESCRIPTIONS",
    ),  # fmt: skip
    # the induction head (bayes_attn.experiments.induction)
    "induction": Kind(
        _I + "induction_point",
        _I + "INDUCTION_DEFAULTS",
        "none (trust-region MAP of the two-layer kernel limit, two starts)",
        check=_I + "check_induction",
        descriptions=_I + "DESCRIPTIONS",
    ),  # fmt: skip
}


DESCRIPTIONS = {
    "done": ("1", "the grid point has finished"),
    "c1": ("1", "uniform-pooling order parameter (linear attention)"),
    "cG": ("1", "copy order parameter (linear attention)"),
    "a1": ("1", "uniform-pooling order parameter (softmax attention)"),
    "aG": ("1", "copy order parameter (softmax attention)"),
    "loss": ("1", "theory loss per token at the global saddle, 1/2 |y - f|^2"),
    "action": ("nats / chi", "action per unit chi at the global saddle"),
    "n_minima": ("1", "number of local minima of the reduced action"),
    "meta_q": (
        "1",
        "copy order parameter (cG or aG) of the lowest metastable minimum (linear: in the Z2 "
        "image c1 + cG >= 0, where the anti-aligned minimum has c1 < 0)",
    ),
    "meta_loss": ("1", "theory loss per token at the lowest metastable minimum"),
    "second_order": ("sequences", "linear: second-order transition P*"),
    "crossover": ("sequences", "linear: crossover, max d cG / d log P"),
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
}
