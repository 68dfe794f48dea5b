"""The arrows between the package's layers point one way (docs/architecture.md): a module imports
only from its own layer or the layers below it, at module level or inside a function."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "bayes_attn"

LAYERS = [
    {"_validation", "_deprecation", "_arviz", "progress", "distributed", "io", "keys"},
    {"task", "algebra", "tokens", "induction"},
    {"theory"},
    {"models"},
    {"inference"},
    {"analysis"},
    {"experiments"},
    {"plotting", "configs"},
    {"cli", "__init__", "__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _layer(module: str) -> int:
    parts = module.split(".")
    return RANK[parts[1] if len(parts) > 1 else "__init__"]


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "bayes_attn":
                for alias in node.names:  # a subpackage, or a name of the base (CopyTask, ...)
                    name = alias.name if alias.name in RANK else "task"
                    yield f"bayes_attn.{name}", node.lineno
            elif node.module.startswith("bayes_attn."):
                yield node.module, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bayes_attn."):
                    yield alias.name, node.lineno


def test_every_import_points_down():
    wrong = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        if module == "bayes_attn":  # the package's namespace re-exports the base layer only
            here = RANK["task"]
        else:
            here = _layer(module)
        for target, line in _imports(path):
            if target == "bayes_attn":
                continue
            if _layer(target) > here:
                wrong.append(f"{module}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_computing_layers_import_without_matplotlib():
    """Only ``plotting/`` (and the CLI's plotting commands) need matplotlib; ArviZ, which imports it,
    is imported on first use (``bayes_attn._arviz``)."""
    import subprocess
    import sys

    code = (
        "import sys; import bayes_attn, bayes_attn.inference, bayes_attn.experiments; "
        "from bayes_attn.analysis import diagnose; "
        "print(sorted(m for m in ('matplotlib', 'arviz') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
