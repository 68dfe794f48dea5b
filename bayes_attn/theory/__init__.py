"""The order-parameter theory: reduced actions, saddle points and phase boundaries (float64).

References
----------
Paper Sec. 3; docs/theory.md §2-8 for our derivation.
"""

from bayes_attn.theory import induction_action
from bayes_attn.theory.action import (
    Scales,
    action_linear,
    action_softmax,
    data_ek,
    data_exact,
    evidence_exact,
    logdet_ek,
    logdet_exact,
    loss_per_token,
    prior_linear,
    prior_softmax,
    scales,
)
from bayes_attn.theory.boundaries import (
    PhaseBoundaries,
    critical_end_point,
    phase_boundaries,
    second_order_closed_form,
    second_order_leading,
)
from bayes_attn.theory.diagram import phase_diagram
from bayes_attn.theory.landscape import landscape
from bayes_attn.theory.level1 import Level1Map, level1_action, level1_fit, level1_map
from bayes_attn.theory.modes import (
    WeightCrossing,
    inside_window,
    modes,
    phase_boundary,
    phase_weights,
    softmax_log_density,
    weight_crossing,
)
from bayes_attn.theory.profile import reduced_profile
from bayes_attn.theory.saddles import Saddle, global_saddle, saddles
from bayes_attn.theory.structured import (
    TokenScales,
    action_general,
    second_order_general,
    token_scales,
)

__all__ = [
    "Level1Map",
    "PhaseBoundaries",
    "Saddle",
    "Scales",
    "TokenScales",
    "WeightCrossing",
    "action_general",
    "action_linear",
    "action_softmax",
    "critical_end_point",
    "data_ek",
    "data_exact",
    "evidence_exact",
    "global_saddle",
    "induction_action",
    "inside_window",
    "landscape",
    "level1_action",
    "level1_fit",
    "level1_map",
    "logdet_ek",
    "logdet_exact",
    "loss_per_token",
    "modes",
    "phase_boundaries",
    "phase_boundary",
    "phase_diagram",
    "phase_weights",
    "prior_linear",
    "prior_softmax",
    "reduced_profile",
    "saddles",
    "scales",
    "second_order_closed_form",
    "second_order_general",
    "second_order_leading",
    "softmax_log_density",
    "token_scales",
    "weight_crossing",
]
