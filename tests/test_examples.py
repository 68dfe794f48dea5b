"""Every example runs end to end as a subprocess, with tiny settings, so that none can rot."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_demo_docstring_says_what_make_demo_runs():
    """``make demo`` runs ``bayes-attn theory`` and ``bayes-attn figures --quick``, not
    examples/demo.py; the example's docstring must not call itself the main job of ``make demo``."""
    import ast

    recipe = (ROOT / "Makefile").read_text().split("\ndemo:")[1].split("\n\n")[0]
    assert "bayes-attn theory" in recipe and "figures --quick" in recipe
    assert "examples/demo.py" not in recipe
    doc = ast.get_docstring(ast.parse((ROOT / "examples" / "demo.py").read_text()))
    assert "main job" not in doc and doc.startswith("A tour of the theory")
    assert "bayes-attn theory" in doc and "figures --quick" in doc


@pytest.mark.slow  # its theory is covered by test_cli.py and test_boundaries.py
def test_demo_writes_every_file(tmp_path):
    out = tmp_path / "demo"
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "softmax, first order P*" in res.stdout
    for name in (
        "order_parameters.png",
        "action_landscape.png",
        "theory_linear.nc",
        "theory_softmax.nc",
    ):
        assert (out / name).stat().st_size > 1000, name
    import xarray as xr

    ds = xr.open_dataset(out / "theory_softmax.nc", engine="h5netcdf")
    assert {"aG", "a1", "loss", "action"} <= set(ds.data_vars)


def _run_quick(example: str, out: pathlib.Path) -> subprocess.CompletedProcess:
    """Run ``examples/<example>`` with ``--quick``; assert it exits cleanly."""
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env={"MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res


@pytest.mark.slow  # about a minute of CPU: the example end to end
def test_reduced_posterior_example(tmp_path):
    out = tmp_path / "rp"
    res = _run_quick("reduced_posterior.py", out)
    assert "the two Z2 images" in res.stdout  # above P* the Z2 images are reported, not hidden
    for name in ("variance_c1.png", "posterior_P9.png", "pair_P57.png"):  # --quick: P = 9, 23, 57
        assert (out / name).stat().st_size > 1000, name


@pytest.mark.slow  # about a minute of CPU: the example end to end
def test_multimodal_softmax_example(tmp_path):
    out = tmp_path / "mm"
    res = _run_quick("multimodal_softmax.py", out)
    assert "not mixing" in res.stdout  # NUTS started in both phases is flagged, not hidden
    assert "Level-2 loop: up-jump" in res.stdout
    for name in ("posterior_aG.png", "traces.png", "phase_weights.png", "hysteresis_loop.png"):
        assert (out / name).stat().st_size > 1000, name
