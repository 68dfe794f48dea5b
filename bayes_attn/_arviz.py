"""ArviZ, imported on first use.

``import arviz`` imports matplotlib (arviz 0.23 builds its plotting namespace at import), so a
module that only needs ``az.summary`` or ``az.from_numpyro`` would pull a plotting library into
every import of the package. Modules outside ``plotting/`` write ``from bayes_attn import _arviz as
az`` instead: ``az.summary`` then imports arviz at the first call, and ``import bayes_attn.analysis``
or ``bayes_attn.inference`` stays free of matplotlib (``tests/test_layers.py``).
"""

from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    import arviz

    return getattr(arviz, name)
