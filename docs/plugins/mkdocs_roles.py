"""A Griffe extension for the docs site (mkdocs.yml): the package's docstrings cross-reference
with Sphinx roles (:func:`name`, :class:`~pkg.Name`, :mod:`...`, :meth:`...`, :attr:`...`,
:data:`...`; also ``title <target>``), which Markdown does not know. Each role becomes an mkdocs-autorefs cross-reference
to the object's canonical path, resolved as Sphinx resolves it: relative to the object whose
docstring holds it (its class, its module, the modules above), then from the package root.

- A target inside the package that is public becomes ``[`name`][full.path]``: mkdocs-autorefs
  fails the strict build when that object is not rendered in the API reference.
- A private target (a name with a leading underscore) or one outside the package (numpy, jax, the
  standard library) stays code, unlinked.
- A bare name out of scope resolves to the one object of that name in the package, if unique.
- A target that resolves nowhere becomes ``[`name`][name]``, which fails the strict build: a broken
  cross-reference in a docstring is a build error.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|obj|exc|const):`(~?)([^`]+)`")
TITLED = re.compile(r"(.*?)\s*<([\w.]+)>", re.S)  # :meth:`title <target>`
PACKAGE = "bayes_attn"
EXTERNAL = ("numpy", "np", "jax", "jnp", "numpyro", "arviz", "az", "xarray", "xr", "scipy",
            "matplotlib", "optax", "blackjax", "pymbar", "click", "typing", "collections",
            "dataclasses", "pathlib", "logging", "os", "functools", "h5netcdf", "tqdm")  # fmt: skip


def _lookup(root: griffe.Module, path: str):
    """The object at a dotted path below the package root, following aliases; None if absent."""
    parts = path.split(".")
    if parts[0] != root.name:
        return None
    obj = root
    try:
        for part in parts[1:]:
            obj = obj.members[part]
            if obj.is_alias:
                obj = obj.final_target
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    return obj


def _index(root: griffe.Module) -> dict[str, set[str]]:
    """Every object defined in the package, by its name: name -> canonical paths."""
    out: dict[str, set[str]] = {}

    def visit(obj):
        for name, member in obj.members.items():
            if member.is_alias:
                continue
            out.setdefault(name, set()).add(member.path)
            if member.is_module or member.is_class:
                visit(member)

    visit(root)
    return out


def _resolve(root: griffe.Module, where: griffe.Object, target: str, index) -> str | None:
    """The canonical path of ``target`` as seen from ``where``, or None. A bare name that is not
    in scope resolves to the one object of that name in the package, if there is only one."""
    target = target.lstrip(".")
    scopes = []
    obj: Any = where
    while obj is not None:
        scopes.append(obj.path)
        obj = obj.parent
    for scope in [*scopes, ""]:
        full = f"{scope}.{target}" if scope else target
        found = _lookup(root, full)
        if found is not None:
            return found.path
    if "." not in target and len(index.get(target, ())) == 1:
        return next(iter(index[target]))
    return None


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring of the package into autorefs cross-references."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        seen: set[int] = set()
        index = _index(pkg)

        def visit(obj):
            if id(obj) in seen or obj.is_alias:
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(
                    lambda m: self._link(pkg, obj, m, index), obj.docstring.value
                )
            for member in obj.members.values():
                visit(member)

        visit(pkg)

    @staticmethod
    def _link(root, obj, match, index) -> str:
        tilde, content = match.groups()
        titled = TITLED.fullmatch(content.strip())
        if titled:
            title, target = " ".join(titled.group(1).split()), titled.group(2)
        else:
            title, target = None, re.sub(r"\s+", "", content)  # a target broken over two lines
        call = "()" if target.endswith("()") else ""
        target = target.removesuffix("()")
        shown = title or (target.rsplit(".", 1)[-1] if tilde else target) + call
        if target.split(".")[0] in EXTERNAL:
            return f"`{shown}`"
        full = _resolve(root, obj, target, index)
        if full is None:
            return f"[`{shown}`][{target}]"  # unresolved: the strict build fails on it
        if any(part.startswith("_") for part in full.split(".")):
            return f"`{shown}`"
        return f"[`{shown}`][{full}]"
