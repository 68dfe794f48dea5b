"""``phase_boundaries(..., activation)`` computes one activation's boundaries only (issue 44: the
CLI and the sweep points ask for one), equal bit for bit to those of the full call."""

import dataclasses
import math

import pytest

from bayes_attn.models._sites import BOUNDARY_ACTIVATION
from bayes_attn.theory import phase_boundaries


def _nan(v) -> bool:
    if isinstance(v, dict):
        return all(math.isnan(x) for x in v.values())
    if isinstance(v, tuple):
        return all(math.isnan(x) for x in v)
    return math.isnan(v)


@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_one_activation_equals_the_full_call(paper, activation):
    full = dataclasses.asdict(phase_boundaries(*paper))
    one = dataclasses.asdict(phase_boundaries(*paper, activation))
    for field, owner in BOUNDARY_ACTIVATION.items():
        if owner == activation:
            assert one[field] == full[field], field
        else:
            assert _nan(one[field]), field


def test_bad_activation_is_refused(paper):
    with pytest.raises(ValueError, match="activation"):
        phase_boundaries(*paper, "tanh")
