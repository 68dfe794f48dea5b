"""The wheel is complete: built from the checkout and installed into a fresh environment outside
it, ``bayes-attn figures`` runs, and the figure and protocol configs ship inside the package."""

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny_figures.py"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv holding only the wheel (no editable install); the dependencies come from
    this environment's site-packages, added by a .pth file."""
    tmp = tmp_path_factory.mktemp("wheel")
    run = dict(check=True, capture_output=True, text=True, timeout=600)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
         "-w", str(tmp / "dist"), str(ROOT)],
        **run,
    )  # fmt: skip
    (tmp / "build.log").write_text(built.stdout + built.stderr)
    (wheel,) = (tmp / "dist").glob("bayes_attn-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], **run)
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
        **run,
    )  # fmt: skip
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], **run
    ).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv, tmp


def _shared_jax_cache() -> dict:
    """The environment of a subprocess that shares the suite's persistent JAX cache
    (tests/conftest.py): the figure's programs compiled by the in-process figure tests are read
    back, bit for bit (the cache key holds the program without its file locations), not
    compiled again (16 s of CPU -> 7 s for ``phase_weights``)."""
    import os

    import jax

    return {
        **os.environ,
        "JAX_COMPILATION_CACHE_DIR": jax.config.jax_compilation_cache_dir,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def test_the_wheel_ships_the_configs_and_runs_figures(installed):
    venv, tmp = installed
    run = dict(capture_output=True, text=True, timeout=600, cwd=tmp)  # outside the checkout
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import bayes_attn, bayes_attn.plotting.figures as f; print(bayes_attn.__file__); "
         "print(f.find_config_file())"],
        **run,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr[-2000:]
    module, configs = where.stdout.split()
    assert str(venv) in module and str(ROOT) not in module  # the wheel, not the checkout
    assert Path(configs).is_file() and str(venv) in configs
    assert {p.name for p in Path(configs).parent.glob("*.toml")} >= {
        "protocol_paper.toml", "protocol_quick.toml", "protocol_widths.toml",
    }  # fmt: skip
    res = subprocess.run(
        [str(venv / "bin" / "bayes-attn"), "-q", "figures", "--configs", str(TINY), "--only",
         "phase_weights", "--out", str(tmp / "figs")],
        env=_shared_jax_cache(), **run,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp / "figs" / "phase_weights.png").stat().st_size > 10_000


def test_the_wheel_is_mit_licensed_without_a_build_warning(installed):
    """pyproject's license is the SPDX string (setuptools >= 77): the wheel's metadata carries
    ``License-Expression: MIT``, ships LICENSE, and the build says nothing deprecated (the old
    ``license = { text = ... }`` table gave a SetuptoolsDeprecationWarning on every build)."""
    import zipfile

    _, tmp = installed
    log = (tmp / "build.log").read_text()
    assert "SetuptoolsDeprecationWarning" not in log, log[-3000:]
    (wheel,) = (tmp / "dist").glob("bayes_attn-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Copyright (c) 2026 bayes-attn developers" in (ROOT / "LICENSE").read_text()
