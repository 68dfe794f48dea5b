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


def renamed(old: str, old_value, new: str, new_value, stacklevel: int = 3):
    """The value of a keyword argument renamed from ``old`` to ``new``: ``new_value`` unless the
    caller passed ``old`` (``old_value`` not None), which then wins and warns with a
    ``DeprecationWarning`` naming the new keyword. For example the one progress flag::

        def run_x(..., progress: bool = True, progress_bar: bool | None = None):
            progress = renamed("progress_bar", progress_bar, "progress", progress)
    """
    if old_value is None:
        return new_value
    warnings.warn(
        f"the keyword {old}= is now {new}=; the old name will be removed in the next release",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return old_value
