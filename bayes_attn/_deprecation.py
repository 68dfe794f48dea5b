"""Names that moved: a module-level ``__getattr__`` that finds them at their new home and warns.

    __getattr__ = moved(__name__, {"split_log_density": "bayes_attn.inference.potential"})

``from old.module import split_log_density`` then still works for one release and warns with a
``DeprecationWarning`` that names the new home (the list is in CHANGELOG.md).
"""

from __future__ import annotations

import importlib
import warnings


def moved(module: str, names: dict[str, str]):
    """A module ``__getattr__`` for ``names`` (old name -> ``"new.module"`` or
    ``"new.module:new_name"``)."""

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        target, _, new_name = names[name].partition(":")
        new_name = new_name or name
        warnings.warn(
            f"{module}.{name} has moved to {target}.{new_name}; the old name will be removed in "
            "the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(target), new_name)

    return __getattr__
