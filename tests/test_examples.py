"""Every example runs end to end as a subprocess, with tiny settings, so that none can rot."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def test_reduced_posterior_example(tmp_path):
    out = tmp_path / "rp"
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "reduced_posterior.py"),
            "--quick",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={"MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "chains disagree" in res.stdout  # above P* the Z2 images are reported, not hidden
    for name in ("variance_c1.png", "posterior_P40.png", "pair_P250.png"):
        assert (out / name).stat().st_size > 1000, name


def test_multimodal_softmax_example(tmp_path):
    out = tmp_path / "mm"
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "multimodal_softmax.py"),
            "--quick",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={"MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "not mixing" in res.stdout  # NUTS started in both phases is flagged, not hidden
    for name in ("posterior_aG.png", "traces.png", "phase_weights.png"):
        assert (out / name).stat().st_size > 1000, name
