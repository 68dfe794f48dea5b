"""Deprecated: the mode census moved to :mod:`bayes_attn.theory.modes`.

``import bayes_attn.analysis.modes`` and ``from bayes_attn.analysis.modes import modes`` still work
for one release and warn with a ``DeprecationWarning`` that names the new home.
"""

import warnings

from bayes_attn import _deprecation

warnings.warn(
    "bayes_attn.analysis.modes has moved to bayes_attn.theory.modes; the old module will be "
    "removed in the next release",
    DeprecationWarning,
    stacklevel=2,
)

__getattr__ = _deprecation.moved(
    __name__,
    {
        name: "bayes_attn.theory.modes"
        for name in ("WeightCrossing", "modes", "phase_weights", "weight_crossing")
    },
)
