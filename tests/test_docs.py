"""The docs site's sources are consistent (cheap checks; the real check is `make docs`, which builds
the site with mkdocs --strict and runs the tutorials): every tutorial is a jupytext percent-format
notebook listed in mkdocs.yml's nav, every nav entry exists, and every public module of the package
is rendered in the API reference (docs/reference/)."""

import ast
import pkgutil
import re
from pathlib import Path

import bayes_attn

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_paths():
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:") : text.index("\nvalidation:")]
    return re.findall(r":\s*([\w/.-]+\.(?:md|py))\s*$", nav, flags=re.M)


def test_every_nav_entry_exists():
    paths = _nav_paths()
    assert "index.md" in paths and "theory.md" in paths
    for path in paths:
        assert (DOCS / path).is_file(), path


def test_every_tutorial_is_in_the_nav_and_a_percent_notebook():
    tutorials = sorted((DOCS / "tutorials").glob("*.py"))
    assert len(tutorials) >= 4
    nav = _nav_paths()
    for path in tutorials:
        rel = path.relative_to(DOCS).as_posix()
        assert rel in nav, f"{rel} is not in mkdocs.yml's nav"
        text = path.read_text()
        assert text.startswith("# ---\n# jupyter:\n") and "format_name: percent" in text, rel
        assert text.count("\n# %% [markdown]") >= 2 and re.search(r"^# %%$", text, re.M), rel
        ast.parse(text, filename=str(path))  # the code cells together are valid Python
        assert "run time of this notebook" in text, rel


def test_every_public_module_is_in_the_api_reference():
    rendered = set()
    for page in (DOCS / "reference").glob("*.md"):
        rendered |= set(re.findall(r"^::: ([\w.]+)", page.read_text(), flags=re.M))
    public = {"bayes_attn"}
    for info in pkgutil.walk_packages(bayes_attn.__path__, "bayes_attn."):
        if (
            not any(part.startswith("_") for part in info.name.split("."))
            and info.name != "bayes_attn.cli"
        ):
            public.add(info.name)
    assert not public - rendered, f"not in docs/reference/: {sorted(public - rendered)}"
