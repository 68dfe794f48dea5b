"""What a new user meets first (issue 46): every command with its own defaults, every README
line as written, and ``--P`` checked before any work by every command that takes it.

The defaults are checked up to the work (which is replaced by a stop): the work itself at the
defaults is run by the slow tests and by hand (the issue's audit table). The README's lines run
for real: the CLI line in the default run (a few seconds), the Python example in the slow run.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from bayes_attn.cli import main

README = Path(__file__).parents[1] / "README.md"


def cli(capsys, *argv):
    code = main(["-q", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


class _Stop(Exception):
    """Raised where the work would start: the arguments got that far."""


@pytest.fixture
def stop_work(monkeypatch):
    """Every command's work replaced by a recorder that stops: {command: its keyword arguments}."""
    import bayes_attn.analysis.report as report
    import bayes_attn.experiments.landscape as landscape
    import bayes_attn.experiments.llc as llc
    import bayes_attn.experiments.runs as runs
    import bayes_attn.plotting.figures as figures

    seen = {}

    def recorder(name):
        def stop(*args, **kwargs):
            seen[name] = (args, kwargs)
            raise _Stop

        return stop

    for module, attr, name in [(runs, "sample_posterior", "sample"),
                               (runs, "train_ensemble", "train"),
                               (llc, "llc_point", "llc"),
                               (landscape, "landscape_on_hosts", "landscape"),
                               (figures, "make_figures", "figures"),
                               (report, "theory_report", "theory")]:  # fmt: skip
        monkeypatch.setattr(module, attr, recorder(name))
    return seen


# --------------------------------------------------------------------------------------------------
# 1. Every command with no options


@pytest.mark.parametrize("command", ["theory", "sample", "train", "llc", "landscape", "figures"])
def test_every_command_gets_to_its_work_with_its_own_defaults(command, stop_work, tmp_path,
                                                              monkeypatch):  # fmt: skip
    """``bayes-attn COMMAND`` with no options passes its own checks (before: ``llc`` refused its
    own default width, "d_model must be an integer >= 30, got 16")."""
    monkeypatch.chdir(tmp_path)  # the default --out is in the working folder
    with pytest.raises(_Stop):
        main(["-q", command])
    assert command in stop_work


@pytest.mark.parametrize(
    "argv, needle",
    [(["sweep"], "--kind"), (["diagnose"], "PATH")],
)
def test_commands_with_a_required_argument_say_so_in_one_line(argv, needle, capsys, stop_work):
    code, _, err = cli(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


# --------------------------------------------------------------------------------------------------
# 2. --P is checked before any work, in one line naming --P


@pytest.mark.parametrize(
    "argv, needle",
    [
        # before: accepted, and NUTS ran at a P whose reduced action has lost its digits
        (["sample", "--level", "reduced", "--P", "1e15"], "P must be <= 9.6e+09"),
        # before: XLA aborted with a C++ stack trace, exit 134
        (["sample", "--level", "kernel", "--P", "1e9"], "at level kernel"),
        (["sample", "--level", "network", "--P", "1e9"], "at level network (d_model=16)"),
        (["train", "--P", "1000000000"], "at level network (d_model=256)"),
        (["llc", "--P", "1000000000"], "at level network (d_model=30)"),
        (["llc", "--level", "kernel", "--P", "100000000"], "at level kernel"),
        # before: refused by the library after the log line ("nuts on the kernel model ...")
        (["sample", "--level", "kernel", "--P", "272.5"], "whole number"),
        (["sample", "--level", "network", "--P", "272.5"], "whole number"),
        (["llc", "--P", "272.5"], "272.5"),
        (["train", "--P", "272.5"], "272.5"),
    ],
)
def test_P_is_checked_before_any_work(argv, needle, capsys, stop_work, tmp_path):
    code, out, err = cli(capsys, *argv, "--out", tmp_path / "x.nc")
    assert code == 2 and out == "" and not stop_work, err
    assert len(err.strip().splitlines()) == 1 and "--P" in err and needle in err, err
    assert not (tmp_path / "x.nc").exists()


def test_a_P_that_fits_is_passed_on(stop_work, tmp_path):
    """The check hands on what it accepts: P = 300 at every level."""
    for argv in (["sample", "--level", "kernel"], ["sample", "--level", "network"], ["train"],
                 ["llc"]):  # fmt: skip
        with pytest.raises(_Stop):
            main(["-q", *argv, "--P", "300", "--out", str(tmp_path / "x.nc")])
    args, kwargs = stop_work["sample"]
    assert args[3] == 300.0  # sample hands on its float P
    assert stop_work["train"][0][4] == 300 and stop_work["llc"][0][3] == 300


# --------------------------------------------------------------------------------------------------
# 3. The README's lines as written


def _readme() -> str:
    return README.read_text()


def _cli_examples() -> list[tuple[str, str]]:
    """(command line, what the README says it prints) for every ``$ bayes-attn`` block."""
    blocks = re.findall(r"```\n\$ (bayes-attn [^\n]*)\n(.*?)```", _readme(), flags=re.S)
    assert blocks, "the README shows no command line"
    return blocks


def _python_example() -> tuple[str, str]:
    """(the code, what the README says it prints) of the ```python block and the block after."""
    m = re.search(r"```python\n(.*?)```\n\n```\n(.*?)```", _readme(), flags=re.S)
    assert m, "the README shows no Python example with its output"
    return m.group(1), m.group(2)


def test_readme_command_line_prints_what_the_readme_shows(capsys):
    for line, shown in _cli_examples():
        argv = line.split()[1:]
        code, out, err = cli(capsys, *[a for a in argv if a != "-q"])
        assert code == 0, err
        lines = [s.rstrip() for s in out.strip().splitlines()]
        assert lines == shown.strip().splitlines(), (line, out)


@pytest.mark.slow  # tempered SMC at Level 2: ~30 s of CPU, compilation included
def test_readme_python_example_prints_what_the_readme_shows(capsys):
    code, shown = _python_example()
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    out = capsys.readouterr().out
    lines = [s.rstrip() for s in out.strip().splitlines()]  # pandas pads its index line
    assert lines == shown.strip().splitlines(), out


def test_readme_token_example_prints_what_the_readme_shows():
    """The ``>>>`` lines of the Zipf example; the README's comment beside the output is the
    law's exact frequencies, which the sampled ones match to 0.005."""
    m = re.search(r"```python\n(>>> .*?)```", _readme(), flags=re.S)
    lines = m.group(1).splitlines()
    code = [s[4:] for s in lines if s.startswith(">>> ")]
    shown = [s for s in lines if not s.startswith(">>> ")][0]
    scope: dict = {}
    exec("\n".join(code[:-1]), scope)  # noqa: S102
    got = eval(code[-1], scope)  # noqa: S307
    printed, comment = shown.split("#")
    assert repr(got) == printed.strip()
    exact = [float(x) for x in re.findall(r"0\.\d+", comment)]
    np.testing.assert_allclose(got, exact, atol=0.005)


def test_readme_is_short_and_links_resolve():
    """At most about 150 lines (issue 46), no internal history, and every relative link names a
    file of the repository."""
    text = _readme()
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\bissue \d+|\bafter issue\b|this session", text, flags=re.I)
    root = README.parent
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (root / target).exists(), target


def test_llc_says_it_resumes_from_a_kept_checkpoint(stop_work, tmp_path, capsys):
    """A rerun after Ctrl-C says which checkpoint it resumes from (before: nothing said so; the
    bar only started further on)."""
    out = tmp_path / "llc.nc"
    (tmp_path / "llc_nuts.ckpt.npz").write_bytes(b"")
    with pytest.raises(_Stop):
        main(["llc", "--out", str(out)])  # INFO lines on stderr
    said = [s for s in capsys.readouterr().err.splitlines() if "resuming from" in s]
    assert len(said) == 1 and said[0].endswith(
        f"llc: resuming from {tmp_path / 'llc_nuts.ckpt.npz'}"
    )


# --------------------------------------------------------------------------------------------------
# 4. Ctrl-C stops a command within seconds, even inside a compiled program


@pytest.mark.slow  # a subprocess that imports JAX and compiles NUTS: ~20 s on 2 cores
def test_ctrl_c_stops_sample_inside_its_warm_up(tmp_path):
    """A real SIGINT to ``bayes-attn sample`` while its warm-up (one compiled program of 4 x
    20000 NUTS steps at Level 1, minutes long) runs: the process leaves with status 130 within
    10 s (measured: ~1 s on an idle machine). Before, the interrupt waited for the program to end,
    and when it reached Python inside JAX's garbage-collection callback it was printed and lost:
    the run went on for over 5 minutes."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    # Python's own Ctrl-C handler, even where this process was started with SIGINT ignored
    # (a background job of a script), which a child would inherit
    entry = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "from bayes_attn.cli import run; run()")  # fmt: skip
    argv = [sys.executable, "-c", entry, "sample", "--level", "kernel", "--P", "100",
            "--warmup", "20000", "--samples", "10", "--out", str(tmp_path / "s.nc")]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    seen = []
    reader = threading.Thread(target=lambda: seen.extend(iter(lambda: proc.stderr.read(1), "")))
    reader.start()
    try:
        while "run_nuts:   0%" not in "".join(seen):  # the bar: the warm-up has started
            assert proc.poll() is None, "".join(seen)  # the process ended before its warm-up
            time.sleep(0.2)
        time.sleep(3.0)
        t = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        took = time.perf_counter() - t
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join()
    err = "".join(seen)
    assert proc.returncode == 130 and took < 10.0, (proc.returncode, took, err[-2000:])
    assert "aborted" in err and "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "s.nc").exists()
