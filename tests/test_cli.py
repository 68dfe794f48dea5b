"""The `bayes-attn` command line: every subcommand runs, writes what it says, and bad input gets one
line on stderr with exit status 2. Commands run in-process through ``main(argv)``."""

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayes_attn import _arviz as az
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
    assert not (tmp_path / "post.nc.nuts-checkpoint.npz").exists()  # kept while it runs
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
    assert code == 0 and "sample_stats" in az.groups(az.from_netcdf(sgld))


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


def test_fold_and_the_plots_diagnose_promises(capsys, tmp_path):
    """--fold in sample and diagnose; a sweep file gets its curves; a one-record Adam history
    still draws its points; the trace plot has a title with the run and labelled axes."""
    import matplotlib

    matplotlib.use("Agg")
    from bayes_attn.plotting import plots

    post = tmp_path / "post.nc"  # test_sample_then_diagnose's run (P = 400 > P*): one program
    argv = ["sample", "--P", "400", "--chains", "2", "--warmup", "100", "--samples", "100"]
    code, out, _ = run(capsys, *argv, "--fold", "--out", post)
    assert code == 0 and "folded onto one Z2 image, c1 + cG >= 0" in out
    assert out.splitlines()[0].startswith("nuts, level reduced, linear, P=400")
    code, out, _ = run(capsys, "diagnose", post, "--fold")
    assert code == 0 and "folded onto one Z2 image" in out
    fig = plots.trace(az.from_netcdf(post), ["c1", "cG"])
    assert fig._suptitle.get_text() == "nuts, linear, level reduced, P = 400"
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)

    adam = tmp_path / "adam.nc"
    argv = ["train", "--L", "6", "--V", "3", "--P", "20", "--d-model", "8", "--members", "2"]
    code, _, _ = run(capsys, *argv, "--max-steps", "50", "--out", adam)
    ds = xr.open_dataset(adam, engine="h5netcdf")
    assert code == 0 and ds.sizes["step"] == 1  # one record: a line would draw nothing
    lines = plots.adam_loss(ds).axes[0].get_lines()
    assert len(lines) == 2 and all(ln.get_marker() == "o" for ln in lines)

    sweep = tmp_path / "sweep.nc"
    argv = ["sweep", "--kind", "theory", "--P", "50,400", "--out", sweep]
    assert run(capsys, *argv)[0] == 0
    code, out, _ = run(capsys, "diagnose", sweep, "--plots", tmp_path / "p")
    assert code == 0 and (tmp_path / "p" / "sweep_curves.png").stat().st_size > 10_000
    assert out.splitlines()[0].startswith("none (theory), level reduced")
    fig = plots.sweep_curves(xr.open_dataset(sweep, engine="h5netcdf"))
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]
    words = [re.sub(r"\$[^$]*\$", "", t) for t in labels]  # mathtext such as $\hat c_G$ aside
    assert labels and not any("_" in t for t in words), labels  # words, not code names


@pytest.mark.slow  # every figure end to end (minutes); `make demo` runs the real quick config
def test_figures_builds_every_file(capsys, tmp_path):
    code, out, _ = run(capsys, "figures", "--configs", TINY_FIGURES, "--out", tmp_path)
    assert code == 0, out
    for name in ("fig1", "fig3", "fig4", "posterior", "phase_weights"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000, name
    assert (tmp_path / "protocol.nc").exists() and (tmp_path / "phase_weights.nc").exists()


def test_figure_builders_take_the_preset_from_the_config(tmp_path):
    """A config's own hyperparameters move the figure: the phase weights are drawn around the
    first-order P* of sigma^2 = 131.8 (1212.7), not Table 1's (276.0)."""
    import matplotlib

    matplotlib.use("Agg")
    import bayes_attn as ba
    from bayes_attn import theory
    from bayes_attn.plotting.figures import make_figures

    def config(quick=False):
        return dict(figure="phase_weights", span=0.01, num=5, hyper={"sigma2": 131.8})

    make_figures({"phase_weights": config}, tmp_path, progress=False)
    w = xr.open_dataset(tmp_path / "phase_weights.nc", engine="h5netcdf")
    hyper = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=131.8)
    P_star = theory.phase_boundaries(ba.CopyTask.paper(), hyper).first_order
    assert float(w.P[2]) == pytest.approx(P_star, rel=1e-12) and P_star > 1000


@pytest.mark.slow
def test_figures_quick_produces_every_file(capsys, tmp_path):
    """The real bayes_attn/configs/figures.py at --quick (what `make demo` runs; minutes)."""
    code, out, _ = run(capsys, "figures", "--quick", "--out", tmp_path)
    assert code == 0, out
    for name in ("fig1", "fig3", "fig4", "posterior", "phase_weights"):
        assert (tmp_path / f"{name}.png").exists(), name


def test_installed_entry_point():
    exe = shutil.which("bayes-attn", path=str(Path(sys.executable).parent))
    assert exe is not None, "bayes-attn is not installed beside this Python"
    proc = subprocess.run([exe, "theory", "--L", "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("bayes-attn: error: L must be")
    for module in ("bayes_attn", "bayes_attn.cli"):  # python -m, the same command line
        argv = [sys.executable, "-m", module, "theory", "--L", "1"]
        proc = subprocess.run(argv, capture_output=True, text=True)
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
    from bayes_attn.experiments.sweep import load_sweep

    grid = ["sweep", "--kind", "theory", "--P", "50,400,2000", "--activation", "linear"]
    outs = _two_processes(grid, tmp_path / "multi.nc")
    assert "merged 2 parts" in outs[0][0]
    assert main(["-q", *grid, "--out", str(tmp_path / "single.nc")]) == 0
    multi, single = load_sweep(tmp_path / "multi.nc"), load_sweep(tmp_path / "single.nc")
    for ds in (multi, single):  # when each file was made (to the second) is not a result
        ds.attrs.pop("created")
    xr.testing.assert_identical(multi, single)


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


# --------------------------------------------------------------------------------------------------
# The edges (issue 16): --out, --var, the order of checks and log, -q/-v, help, sweep's --kind,
# theory --activation.


@pytest.fixture
def no_work(monkeypatch):
    """Every command's work fails the test if it starts: the checks must come first."""
    import bayes_attn.experiments.sweep as sweep
    import bayes_attn.inference as inference
    import bayes_attn.plotting.figures as figures

    def started(*args, **kwargs):
        raise AssertionError("the work started before the arguments were checked")

    for module, name in [
        (inference, "run_nuts"),
        (inference, "run_sgld"),
        (inference, "run_smc"),
        (inference, "train_adam"),
        (sweep, "run_sweep"),
        (figures, "make_figures"),
    ]:
        monkeypatch.setattr(module, name, started)


COMMANDS_WITH_OUT = {
    "sample": ["sample"],
    "train": ["train", "--P", "10"],
    "sweep": ["sweep", "--kind", "theory", "--P", "50"],
}


def _one_line_naming_out(code, err):
    assert code == 2, err
    assert "--out" in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("bayes-attn: error: ") and "Traceback" not in err


@pytest.mark.parametrize("command", sorted(COMMANDS_WITH_OUT))
@pytest.mark.parametrize("where", ["under a file", "in a missing folder", "a folder"])
def test_out_file_is_checked_before_any_work(capsys, tmp_path, no_work, command, where):
    (tmp_path / "file.txt").write_text("not a folder")
    out = {
        "under a file": tmp_path / "file.txt" / "x.nc",
        "in a missing folder": tmp_path / "missing" / "x.nc",
        "a folder": tmp_path,
    }[where]
    code, _, err = run(capsys, *COMMANDS_WITH_OUT[command], "--out", out)
    _one_line_naming_out(code, err)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("where", ["a file", "under a file", "in a missing folder"])
def test_figures_out_folder_is_checked_before_any_work(capsys, tmp_path, no_work, where):
    (tmp_path / "file.txt").write_text("not a folder")
    out = {
        "a file": tmp_path / "file.txt",
        "under a file": tmp_path / "file.txt" / "figs",
        "in a missing folder": tmp_path / "missing" / "figs",
    }[where]
    code, _, err = run(capsys, "figures", "--configs", TINY_FIGURES, "--out", out)
    _one_line_naming_out(code, err)


def test_unwritable_out_is_refused_before_any_work(capsys, tmp_path, no_work, monkeypatch):
    """Tests run as root, where chmod does not stop a write (root passes every permission check),
    so an unwritable folder and file are simulated: the check asks os.access, which says no here
    for the folder ``ro`` and the file ``ro.nc``, as it would for a non-root user after chmod."""
    import os

    (tmp_path / "ro").mkdir()
    (tmp_path / "ro.nc").write_bytes(b"")
    denied = {tmp_path / "ro", tmp_path / "ro.nc"}
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode, **kw: Path(p) not in denied and real_access(p, mode, **kw)
    )
    for argv in [
        [*COMMANDS_WITH_OUT["sample"], "--out", tmp_path / "ro" / "x.nc"],
        [*COMMANDS_WITH_OUT["train"], "--out", tmp_path / "ro.nc"],
        [*COMMANDS_WITH_OUT["sweep"], "--out", tmp_path / "ro" / "x.nc"],
        ["figures", "--configs", TINY_FIGURES, "--out", tmp_path / "ro"],
        ["figures", "--configs", TINY_FIGURES, "--out", tmp_path / "ro" / "figs"],
    ]:
        code, _, err = run(capsys, *argv)
        _one_line_naming_out(code, err)
        assert "writ" in err, err


def test_diagnose_unknown_variable_lists_the_valid_ones(capsys, tmp_path):
    rng = np.random.default_rng(0)
    post = tmp_path / "post.nc"
    draws = {"c1": rng.normal(size=(2, 20)), "cG": rng.normal(size=(2, 20))}
    az.to_netcdf(az.from_dict({"posterior": draws}), post)
    code, _, err = run(capsys, "diagnose", post, "--var", "zz")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--var" in err and "'zz'" in err and "valid: c1, cG" in err
    code, out, _ = run(capsys, "diagnose", post, "--var", "cG")
    assert code == 0 and "cG" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--P", "0"], "P must be a positive finite number"),
        (["--P", "nan"], "P must be a positive finite number"),
        (["--sampler", "sgld", "--step-size", "-1"], "step_size must be"),
    ],
)
def test_sample_checks_its_numbers_before_the_log_line(capsys, tmp_path, no_work, argv, needle):
    code = main(["sample", *argv, "--out", str(tmp_path / "x.nc")])  # INFO: the log line would show
    _, err = capsys.readouterr()
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "model" not in err, err


def _fake_sweep(monkeypatch):
    """run_sweep replaced by a recorder of its config and progress flag (no work done)."""
    import bayes_attn.experiments.sweep as sweep

    seen = {}

    def fake(cfg, path, progress=True, **kwargs):
        seen.update(cfg=cfg, progress=progress)
        return xr.Dataset({"done": ("point", np.ones(1, bool))})

    monkeypatch.setattr(sweep, "run_sweep", fake)
    return seen


@pytest.mark.parametrize(
    "before, after, level, progress",
    [
        ([], [], logging.INFO, True),
        (["-q"], [], logging.WARNING, False),
        ([], ["-q"], logging.WARNING, False),
        ([], ["--quiet"], logging.WARNING, False),
        (["-v"], [], logging.DEBUG, True),
        ([], ["-v"], logging.DEBUG, True),
        ([], ["--verbose", "-q"], logging.WARNING, False),
    ],
)
def test_quiet_and_verbose_go_before_or_after_the_subcommand(
    capsys, tmp_path, monkeypatch, before, after, level, progress
):
    import bayes_attn.analysis.report as report

    seen = _fake_sweep(monkeypatch)
    argv = [*before, "sweep", "--kind", "theory", "--P", "50", *after]
    assert main([*argv, "--out", str(tmp_path / "s.nc")]) == 0, capsys.readouterr().err
    assert logging.getLogger("bayes_attn").level == level and seen["progress"] is progress
    # the flags are read before the command's work: its report (the theory, 17 s of compiling on
    # a fresh clone) is test_theory_table_and_json's, not needed here
    monkeypatch.setattr(report, "theory_report", lambda *args: seen.setdefault("theory", args))
    monkeypatch.setattr(report, "theory_text", lambda got: "")
    assert main([*before, "theory", "--P", "50", "--activation", "linear", *after]) == 0
    assert seen["theory"][2] == (50.0,)  # the command ran, with its options
    assert logging.getLogger("bayes_attn").level == level


def _root_context():
    import click

    from bayes_attn.cli import cli

    return click.Context(cli, info_name="bayes-attn", **cli.context_settings)


def test_every_option_has_help_and_shows_its_default_one_way():
    import click

    from bayes_attn import CopyTask, Hyper
    from bayes_attn.cli import cli

    root = _root_context()
    commands = [(cli, root)] + [
        (cmd, click.Context(cmd, info_name=name, parent=root)) for name, cmd in cli.commands.items()
    ]
    assert {c.name for c, _ in commands} >= {"theory", "sample", "train", "sweep", "figures"}
    for cmd, ctx in commands:
        for opt in cmd.params:
            if not isinstance(opt, click.Option):
                continue
            where = f"{cmd.name} {opt.opts[0]}"
            assert opt.help and opt.help.strip(), f"{where} has no help"
            # defaults are shown by click (show_default), never written into the help by hand
            assert not opt.help.rstrip().endswith("]") and "default" not in opt.help, where
            record = opt.get_help_record(ctx)[1]
            if opt.default not in (None, ()) and not (opt.is_flag or opt.multiple):
                assert "default: " in record, f"{where} does not show its default: {record}"
    # the preset's overrides (default None: the preset) show the preset's values
    task, hyper = CopyTask.paper(), Hyper.paper()
    shown = {p.name: p.show_default for p in cli.commands["theory"].params}
    assert shown["L"] == str(task.L) and shown["V"] == str(task.V)
    for name in ("chi", "g_w", "g_o", "sigma2"):
        assert float(shown[name]) == getattr(hyper, name), name


def test_sweep_kind_is_required_unless_the_config_sets_it(capsys, tmp_path, monkeypatch):
    import click

    from bayes_attn.cli import cli

    sweep = cli.commands["sweep"]
    ctx = click.Context(sweep, info_name="sweep", parent=_root_context())
    for opt in sweep.params:
        if opt.name in ("kind", "P"):
            assert "[required unless --config sets it]" in opt.get_help_record(ctx)[1]
    seen = _fake_sweep(monkeypatch)
    out = tmp_path / "s.nc"
    cfg = tmp_path / "nokind.toml"
    cfg.write_text('[sweep]\nP = [50.0]\nactivation = ["softmax"]\n')
    code, _, err = run(capsys, "sweep", "--config", cfg, "--out", out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "does not set kind" in err and "--kind" in err and "Traceback" not in err
    code, _, err = run(capsys, "sweep", "--config", cfg, "--kind", "theory", "--out", out)
    assert code == 0, err
    assert seen["cfg"].kind == "theory" and seen["cfg"].activation == ("softmax",)
    assert seen["cfg"].P == (50.0,)
    # an option given on the command line overrides the file; defaults do not
    code, _, err = run(
        capsys, "sweep", "--config", cfg, "--kind", "theory", "--P", "400", "--out", out
    )
    assert code == 0 and seen["cfg"].P == (400.0,) and seen["cfg"].activation == ("softmax",)
    code, _, err = run(capsys, "sweep", "--kind", "theory", "--out", out)
    assert code == 2 and "missing --P" in err and len(err.strip().splitlines()) == 1


LINEAR_BOUNDARIES = {
    "second_order",
    "second_order_closed_form",
    "second_order_leading",
    "crossover",
}


@pytest.mark.parametrize("activation, other", [("linear", "softmax"), ("softmax", "linear")])
def test_theory_shows_only_the_boundaries_of_its_activation(capsys, activation, other):
    code, out, _ = run(capsys, "theory", "--P", "50", "--activation", activation)
    assert code == 0 and f"{activation}, " in out and other not in out, out
    code, out, _ = run(capsys, "theory", "--P", "50", "--activation", activation, "--json")
    report = json.loads(out)
    expected = LINEAR_BOUNDARIES if activation == "linear" else {"first_order", "spinodals"}
    assert set(report["boundaries"]) == expected
    assert {s["activation"] for s in report["saddles"]} == {activation}
    code, out, _ = run(capsys, "theory", "--P", "50", "--json")
    assert set(json.loads(out)["boundaries"]) == LINEAR_BOUNDARIES | {"first_order", "spinodals"}


def test_smc_step_lines_go_to_stderr(capsys, tmp_path):
    argv = ["sample", "--sampler", "smc", "--activation", "softmax", "--P", "276"]
    # 200 particles: the program of test_sample_then_diagnose's SMC run
    code = main([*argv, "--particles", "200", "--out", str(tmp_path / "s.nc")])
    out, err = capsys.readouterr()
    assert code == 0
    # one progress bar over lambda at INFO (the per-step lines are at DEBUG, -v)
    assert "lambda 1.0000" in err and "step 1," in err
    assert "run_smc:" in err and "ms per gradient" in err
    assert "lambda 1.0000" not in out and "run_smc:" not in out
    assert out.splitlines()[0].startswith("smc, level reduced, softmax, P=276")


# --------------------------------------------------------------------------------------------------
# What a new user ran into (issue 29) and one source of settings (issue 26)


def test_no_arguments_prints_the_usage_and_the_subcommands(capsys):
    code = main([])
    out, err = capsys.readouterr()
    assert code == 0 and not err.strip(), err
    assert out.startswith("Usage: bayes-attn") and "error" not in out
    for name in ("theory", "sample", "train", "sweep", "figures", "diagnose"):
        assert f"  {name}" in out, name


def test_a_read_only_out_is_refused_even_as_root(capsys, tmp_path, no_work):
    """Root passes every os.access check; the mode bits still say read-only, and a file or a
    folder made read-only is not replaced or written into."""
    import os

    ro = tmp_path / "ro.nc"
    ro.write_bytes(b"keep me")
    ro.chmod(0o444)
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        for argv in (
            [*COMMANDS_WITH_OUT["train"], "--out", ro],
            [*COMMANDS_WITH_OUT["sweep"], "--out", ro],
            [*COMMANDS_WITH_OUT["sample"], "--out", folder / "x.nc"],
            ["figures", "--configs", TINY_FIGURES, "--out", folder],
        ):
            code, _, err = run(capsys, *argv)
            _one_line_naming_out(code, err)
            assert "writ" in err, err
        assert ro.read_bytes() == b"keep me"
        code, _, err = run(capsys, *COMMANDS_WITH_OUT["train"], "--out", ro)
        assert "-r--r--r--" in err, err  # the mode says why
    finally:
        folder.chmod(0o755)
        os.chmod(ro, 0o644)


def test_P_beyond_the_float64_range_is_refused_before_any_work(capsys, monkeypatch, no_work):
    """theory.saddles finds nothing at P = 1e12 (the data term's 1 - fit has lost its digits; at
    Table 1 the saddles are accurate to 1e-8 up to 1e11): refused in one line, naming the largest
    P, by the library and by theory and sweep before any work."""
    import bayes_attn as ba
    from bayes_attn import theory

    monkeypatch.setattr(theory, "phase_boundaries", lambda *a: pytest.fail("work started"))
    for argv in (["theory", "--P", "50,1e12"], ["sweep", "--kind", "theory", "--P", "1e12"]):
        code, _, err = run(capsys, *argv, *(["--out", "x.nc"] if argv[0] == "sweep" else []))
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "P must be <= 9.6e+09 at L=25, sigma^2=30" in err and "got 1e+12" in err, err
    with pytest.raises(ValueError, match=r"P must be <= 9.6e\+09"):
        theory.saddles(ba.CopyTask.paper(), ba.Hyper.paper(), 1e12, "linear")


def test_a_misnamed_sweep_table_is_named(capsys, tmp_path, no_work):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweeps]\nkind = "theory"\nP = [50.0]\n')
    code, _, err = run(capsys, "sweep", "--config", cfg, "--out", tmp_path / "s.nc")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no [sweep] table (it has [sweeps])" in err


def test_option_defaults_are_read_from_their_homes():
    """The CLI holds no default of a sampler or of the trainer: each is read (in
    ``cli._defaults``, when first needed) from its settings dataclass, which the samplers'
    signatures read too, and --help shows it."""
    import inspect

    import click

    from bayes_attn.cli import _defaults, cli
    from bayes_attn.inference import run_llc, run_nuts, run_sgld, run_smc
    from bayes_attn.inference.adam import AdamSettings
    from bayes_attn.inference.llc import LLCSettings
    from bayes_attn.inference.nuts import NUTSSettings
    from bayes_attn.inference.sgld import SGLDSettings
    from bayes_attn.inference.smc import SMCSettings

    def defaults(command):
        ctx = click.Context(cli.commands[command], info_name=command, parent=_root_context())
        return {p.name: p.get_default(ctx) for p in cli.commands[command].params}

    sample, train, llc = defaults("sample"), defaults("train"), defaults("llc")
    nuts, sgld, smc, adam, lsettings = (NUTSSettings(), SGLDSettings(), SMCSettings(),
                                        AdamSettings(), LLCSettings())  # fmt: skip
    for option, field in [("chains", "num_chains"), ("warmup", "num_warmup"),
                          ("samples", "num_samples")]:  # fmt: skip
        assert sample[option] == getattr(nuts, field), option
    assert sample["step_size"] == sgld.step_size
    assert sample["particles"] == smc.num_particles
    # the samplers' defaults are their settings' alone (settings= or **changes)
    for fn, field in [(run_nuts, "num_chains"), (run_sgld, "step_size"),
                      (run_smc, "num_particles")]:  # fmt: skip
        assert field not in inspect.signature(fn).parameters, fn
    assert (train["lr"], train["max_steps"], train["patience"]) == (
        adam.lr, adam.max_steps, adam.patience,
    )  # fmt: skip
    from bayes_attn.inference.llc import COMMAND_SETTINGS  # llc's own: NUTS, Laplace metric

    for option, field in [("sampler", "sampler"), ("draws", "num_draws"),
                          ("step_size", "step_size"), ("gamma", "gamma")]:  # fmt: skip
        assert llc[option] == getattr(COMMAND_SETTINGS, field), option
        # run_llc's defaults are LLCSettings' alone (settings= or **changes)
        assert hasattr(lsettings, field) and field not in inspect.signature(run_llc).parameters
    # each is a Default naming its home (or None: chosen by the command, as llc's --chains by
    # its sampler), not a value copied into the command line
    for command in ("sample", "train", "llc"):
        for p in cli.commands[command].params:
            if p.name in ("chains", "warmup", "samples", "step_size", "particles", "lr",
                          "max_steps", "patience", "draws", "gamma", "burnin", "d_model"):  # fmt: skip
                assert p.default is None or isinstance(p.default, _defaults.Default), p.name


def test_sweep_kinds_are_the_sweeps_own():
    """--kind accepts every kind the sweep runs (read from its KINDS, not copied here)."""
    import click

    from bayes_attn.cli import cli
    from bayes_attn.experiments.sweep import KINDS

    (kind,) = [p for p in cli.commands["sweep"].params if p.name == "kind"]
    assert isinstance(kind.type, click.Choice) and tuple(kind.type.choices) == tuple(KINDS)
    ctx = click.Context(cli.commands["sweep"], info_name="sweep", parent=_root_context())
    assert all(kind.type.convert(k, kind, ctx) == k for k in KINDS)


def test_shared_options_are_declared_once():
    """The preset, --seed and --out read the same in every command that has them."""
    import click

    from bayes_attn.cli import cli

    def records(name):
        ctx = click.Context(cli.commands[name], info_name=name, parent=_root_context())
        return {p.name: p.get_help_record(ctx) for p in cli.commands[name].params}

    preset = ("L", "V", "tokens", "chi", "g_w", "g_o", "sigma2")
    commands = ("theory", "sample", "llc", "train", "landscape")
    first = records(commands[0])
    for name in commands[1:]:
        rec = records(name)
        assert {k: rec[k] for k in preset} == {k: first[k] for k in preset}, name
        assert rec["seed"][0] == "--seed INTEGER RANGE" and rec["out"][0] == "--out FILE", name


def test_a_killed_smc_sample_resumes_from_its_checkpoint(capsys, tmp_path, monkeypatch):
    """`sample --sampler smc --out F` keeps its checkpoint at F.smc-checkpoint; killed (Ctrl-C
    right after the checkpoint of tempering step 3 was written) and rerun with the same arguments,
    it resumes and writes bit for bit the file of an uninterrupted run. Exact comparisons."""
    from bayes_attn.inference import smc_checkpoint

    argv = ["sample", "--sampler", "smc", "--activation", "softmax", "--P", "276"]
    argv += ["--particles", "200", "--seed", "3"]  # the program of the other `sample` SMC runs
    whole, part = tmp_path / "whole.nc", tmp_path / "part.nc"
    assert run(capsys, *argv, "--out", whole)[0] == 0
    assert not (tmp_path / "whole.nc.smc-checkpoint").exists()  # removed when the run completes
    save, seen = smc_checkpoint.Checkpoint.save, []

    def save_then_die(self, saved):
        save(self, saved)
        seen.append(saved.stage)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(smc_checkpoint.Checkpoint, "save", save_then_die)
        code, _, _ = run(capsys, *argv, "--out", part)
    assert code != 0 and not part.exists()
    ckpt = tmp_path / "part.nc.smc-checkpoint"
    assert ckpt.exists()
    resumed = []
    monkeypatch.setattr(
        smc_checkpoint.Checkpoint, "load", _spy(smc_checkpoint.Checkpoint.load, resumed)
    )
    assert run(capsys, *argv, "--out", part)[0] == 0
    assert resumed and resumed[0] is not None and not ckpt.exists()
    a, b = az.from_netcdf(whole), az.from_netcdf(part)
    for v in a.posterior.data_vars:
        np.testing.assert_array_equal(a.posterior[v].values, b.posterior[v].values)
    assert a.posterior.attrs["log_evidence"] == b.posterior.attrs["log_evidence"]
    np.testing.assert_array_equal(
        a.posterior.attrs["tempering_schedule"], b.posterior.attrs["tempering_schedule"]
    )


def _spy(method, calls):
    def spy(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        calls.append(out)
        return out

    return spy
