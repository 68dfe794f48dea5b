"""Figures. Each function takes computed data (xarray objects, dataclasses) and returns a Figure.

Nothing here computes theory: pass what :mod:`bayes_attn.theory` returned. This module is the one
face of the plots; the bodies live by concept, one import away:

* :mod:`bayes_attn.plotting.transition`: the paper's transition figures
  (:func:`~bayes_attn.plotting.transition.attention_and_loss`,
  :func:`~bayes_attn.plotting.transition.order_parameter_transition`, ``broken_at``,
  ``BOUNDARY_WORDS``, ``END_POINT_CAPTION``);
* :mod:`bayes_attn.plotting.posteriors`: posteriors and theory across P (``posterior_panel``,
  ``posteriors_across``, ``phase_weight_curve``, ``order_parameters``, ``action_landscapes``,
  ``hysteresis_loop``, ``precursors``);
* :mod:`bayes_attn.plotting.runs`: the plots of ``bayes-attn diagnose`` (``run_title``,
  ``trace``, ``adam_loss``, ``sweep_curves``, ``llc_calibration``, ``landscape_profile``);
* :mod:`bayes_attn.plotting.studies`: the study figures of docs/validation.md, which the scripts
  of ``docs/scripts/`` draw (``llc_against_P``, ``llc_phases_profile``, ``free_energy_scan``,
  ``linear_profiles``, ``tokens_pstar``, ``pstar_scaling``, ``protocol_widths``,
  ``frozen_protocol``);
* :mod:`bayes_attn.plotting.induction`: the induction-head study figures (``induction_across_P``,
  ``induction_beyond_map``, ``induction_profiles``, ``induction_patterns``,
  ``induction_training``, ``induction_training_llc``).
"""

from __future__ import annotations

from bayes_attn.plotting.induction import (
    induction_across_P,
    induction_beyond_map,
    induction_patterns,
    induction_profiles,
    induction_training,
    induction_training_llc,
)
from bayes_attn.plotting.posteriors import (
    action_landscapes,
    hysteresis_loop,
    order_parameters,
    phase_weight_curve,
    posterior_panel,
    posteriors_across,
    precursors,
)
from bayes_attn.plotting.runs import (
    adam_loss,
    landscape_profile,
    llc_calibration,
    run_title,
    sweep_curves,
    trace,
)
from bayes_attn.plotting.studies import (
    free_energy_scan,
    frozen_protocol,
    linear_profiles,
    llc_against_P,
    llc_phases_profile,
    protocol_widths,
    pstar_scaling,
    tokens_pstar,
)
from bayes_attn.plotting.transition import (
    BOUNDARY_WORDS,
    END_POINT_CAPTION,
    attention_and_loss,
    broken_at,
    order_parameter_transition,
)

__all__ = [
    "BOUNDARY_WORDS",
    "END_POINT_CAPTION",
    "action_landscapes",
    "adam_loss",
    "attention_and_loss",
    "broken_at",
    "free_energy_scan",
    "frozen_protocol",
    "linear_profiles",
    "llc_against_P",
    "llc_phases_profile",
    "hysteresis_loop",
    "induction_across_P",
    "induction_beyond_map",
    "induction_profiles",
    "induction_patterns",
    "induction_training",
    "induction_training_llc",
    "landscape_profile",
    "llc_calibration",
    "order_parameter_transition",
    "order_parameters",
    "phase_weight_curve",
    "posterior_panel",
    "posteriors_across",
    "precursors",
    "protocol_widths",
    "pstar_scaling",
    "run_title",
    "sweep_curves",
    "tokens_pstar",
    "trace",
]
