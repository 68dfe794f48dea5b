"""The `bayes-attn` command line: every subcommand runs, writes what it says, and bad input gets one
line on stderr with exit status 2. Commands run in-process through ``main(argv)``."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest
import xarray as xr

from bayes_attn.cli import main

TINY_FIGURES = Path(__file__).parent / "data" / "tiny_figures.py"


def run(capsys, *argv):
    code = main(["--quiet", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_theory_table_and_json(capsys):
    code, out, _ = run(capsys, "theory", "--P", "50,400", "--activation", "linear")
    assert code == 0
    assert "second-order P*" in out and "linear attention" in out
    code, out, _ = run(capsys, "theory", "--P", "2000", "--json", "--chi", "40")
    assert code == 0
    report = json.loads(out)
    assert report["preset"]["chi"] == 40.0 and report["preset"]["L"] == 25
    assert {s["activation"] for s in report["saddles"]} == {"linear", "softmax"}
    assert report["boundaries"]["second_order"] > 0


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["theory", "--L", "1"], "L must be an integer >= 2"),
        (["theory", "--sigma2", "0"], "sigma2"),
        (["theory", "--P", "-5"], "P must be"),
        (["theory", "--activation", "relu"], "--activation"),
        (["sample", "--level", "deep"], "--level"),
        (["train", "--P", "0"], "--P"),
        (["sweep", "--out", "x.nc"], "--config FILE, or --kind and --P"),
        (["diagnose", "no-such-file.nc"], "no-such-file.nc"),
        (["thoery"], "No such command"),
        (["figures", "--only", "fig9", "--configs", str(TINY_FIGURES)], "unknown figures"),
    ],
)
def test_bad_input_is_one_line_and_status_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_sample_then_diagnose(capsys, tmp_path):
    post = tmp_path / "post.nc"
    argv = ["sample", "--P", "400", "--chains", "2", "--warmup", "100", "--samples", "100"]
    code, out, _ = run(capsys, *argv, "--out", post)
    assert code == 0 and post.exists()
    assert "r_hat" in out and "cG" in out
    assert float(az.from_netcdf(post).posterior.attrs["P"]) == 400.0
    code, out, _ = run(capsys, "diagnose", post, "--plots", tmp_path / "plots")
    assert code == 0 and (tmp_path / "plots" / "post_trace.png").exists()
    assert (tmp_path / "plots" / "post_posterior.png").exists()
    smc = tmp_path / "smc.nc"
    argv = ["sample", "--sampler", "smc", "--activation", "softmax", "--P", "276", "--particles"]
    code, out, _ = run(capsys, *argv, "200", "--out", smc)
    assert code == 0 and "log evidence" in out and smc.exists()
    sgld = tmp_path / "sgld.nc"
    argv = ["sample", "--sampler", "sgld", "--chains", "2", "--warmup", "50", "--samples", "50"]
    code, out, _ = run(capsys, *argv, "--step-size", "1e-3", "--out", sgld)
    assert code == 0 and "sample_stats" in az.from_netcdf(sgld).groups()


def test_train_sweep_and_diagnose(capsys, tmp_path):
    adam = tmp_path / "adam.nc"
    argv = ["train", "--L", "6", "--V", "3", "--P", "50", "--d-model", "8", "--members", "2"]
    code, out, _ = run(capsys, *argv, "--max-steps", "50", "--out", adam)
    assert code == 0 and "train_loss_mean" in out
    assert xr.open_dataset(adam, engine="h5netcdf").sizes["member"] == 2
    code, out, _ = run(capsys, "diagnose", adam)
    assert code == 0 and (tmp_path / "adam_loss.png").exists()

    sweep = tmp_path / "sweep.nc"
    argv = ["sweep", "--kind", "theory", "--P", "50,400", "--activation", "linear"]
    code, out, _ = run(capsys, *argv, "--out", sweep)
    assert code == 0 and "2 of 2 points done" in out
    code, out, _ = run(capsys, *argv, "--out", sweep)  # resumes: nothing left to do
    assert code == 0 and "2 of 2 points done" in out
    code, out, err = run(capsys, *argv[:-2], "--activation", "softmax", "--out", sweep)
    assert code == 2 and "different config" in err
    code, out, _ = run(capsys, "diagnose", sweep)
    assert code == 0 and "theory sweep: 2 of 2 points done" in out and "cG" in out
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('[sweep]\nkind = "theory"\nP = [50.0]\nactivation = ["softmax"]\n')
    code, out, _ = run(capsys, "sweep", "--config", cfg, "--out", tmp_path / "toml.nc")
    assert code == 0 and "1 of 1 points done" in out


def test_figures_builds_every_file(capsys, tmp_path):
    code, out, _ = run(capsys, "figures", "--configs", TINY_FIGURES, "--out", tmp_path)
    assert code == 0, out
    for name in ("fig1", "fig3", "fig4", "posterior", "phase_weights"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000, name
    assert (tmp_path / "protocol.nc").exists() and (tmp_path / "phase_weights.nc").exists()


@pytest.mark.slow
def test_figures_quick_produces_every_file(capsys, tmp_path):
    """The real configs/figures.py at --quick (what `make demo` runs; minutes)."""
    code, out, _ = run(capsys, "figures", "--quick", "--out", tmp_path)
    assert code == 0, out
    for name in ("fig1", "fig3", "fig4", "posterior", "phase_weights"):
        assert (tmp_path / f"{name}.png").exists(), name


def test_installed_entry_point():
    exe = shutil.which("bayes-attn", path=str(Path(sys.executable).parent))
    assert exe is not None, "bayes-attn is not installed beside this Python"
    proc = subprocess.run([exe, "theory", "--L", "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("bayes-attn: error: L must be")


def _two_processes(argv, out):
    """Run ``bayes-attn ARGV --out OUT`` as processes 0 and 1 of a jax.distributed job on
    127.0.0.1; returns their (stdout, stderr)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = str(Path(sys.executable).parent / "bayes-attn")
    procs = [
        subprocess.Popen(
            [exe, "-q", *argv, "--out", str(out), "--coordinator", f"127.0.0.1:{port}"]
            + ["--num-processes", "2", "--process-id", str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    return outs


@pytest.mark.slow  # tests/test_distributed.py covers two processes in the default run
def test_two_process_sweep_merges_to_the_single_process_file(tmp_path):
    """Two `bayes-attn sweep` processes, each on its share of the points, merged by process 0."""
    from bayes_attn.analysis.sweep import load_sweep

    grid = ["sweep", "--kind", "theory", "--P", "50,400,2000", "--activation", "linear"]
    outs = _two_processes(grid, tmp_path / "multi.nc")
    assert "merged 2 parts" in outs[0][0]
    assert main(["-q", *grid, "--out", str(tmp_path / "single.nc")]) == 0
    xr.testing.assert_identical(
        load_sweep(tmp_path / "multi.nc"), load_sweep(tmp_path / "single.nc")
    )


@pytest.mark.slow  # tests/test_distributed.py covers two processes in the default run
def test_two_process_train_merges_to_the_single_process_ensemble(tmp_path):
    """`bayes-attn train` over two processes: each trains its share of the members (with the data,
    weights and keys of a one-process run); process 0 merges the shares."""
    argv = ["train", "--L", "6", "--V", "3", "--P", "40", "--d-model", "8", "--members", "3"]
    argv += ["--max-steps", "200", "--patience", "5"]  # early stopping at different steps
    _two_processes(argv, tmp_path / "multi.nc")
    assert main(["-q", *argv, "--out", str(tmp_path / "single.nc")]) == 0
    a = xr.open_dataset(tmp_path / "multi.nc", engine="h5netcdf").load()
    b = xr.open_dataset(tmp_path / "single.nc", engine="h5netcdf").load()
    assert a.sizes == b.sizes and list(a.member.values) == [0, 1, 2]
    for name in ("train_loss", "objective", "cG", "stopped_at", "global_min"):
        np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-9, err_msg=name)
