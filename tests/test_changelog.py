"""CHANGELOG.md lists every name that moved: each re-export made by ``_deprecation.moved``, with
its new home, and the deprecated functions that warn in their own body."""

import importlib
import pkgutil
from pathlib import Path

import bayes_attn

ROOT = Path(__file__).resolve().parents[1]


def _moved_names():
    """(old, new) for every ``__getattr__ = _deprecation.moved(...)`` in the package."""
    out = []
    for info in pkgutil.walk_packages(bayes_attn.__path__, "bayes_attn."):
        if info.name.endswith(".cli"):
            continue
        mod = importlib.import_module(info.name)
        getter = mod.__dict__.get("__getattr__")
        cells = [c.cell_contents for c in (getattr(getter, "__closure__", None) or ())]
        for names in (c for c in cells if isinstance(c, dict)):
            for old, new in names.items():
                target, _, new_name = new.partition(":")
                out.append((f"{info.name}.{old}", f"{target}.{new_name or old}"))
    return out


def test_changelog_lists_every_moved_name():
    text = (ROOT / "CHANGELOG.md").read_text()
    moved = _moved_names()
    assert ("bayes_attn.inference.smc.split_log_density",
            "bayes_attn.inference.potential.split_log_density") in moved  # fmt: skip
    for old, new in moved:
        assert f"| `{old}` | `{new}` |" in text, (old, new)
    # deprecated in their own body (not through _deprecation.moved)
    for row in ("`bayes_attn.inference.basins.find_mode` | `bayes_attn.inference.potential.find_mode`",
                "`run_smc(max_steps=...)`", "`unconstrained_init`"):  # fmt: skip
        assert row in text, row


def test_docs_have_no_placeholders():
    """No literal placeholder (``HISTORY_NUMBERS`` stood in docs/validation.md where the history
    test's numbers belong), nor TODO / TBD / FIXME, in the README or the docs."""
    import re

    pattern = re.compile(r"\b[A-Z]+_NUMBERS\b|\bTODO\b|\bTBD\b|\bFIXME\b")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found = pattern.findall(path.read_text())
        assert not found, (path.name, found)
