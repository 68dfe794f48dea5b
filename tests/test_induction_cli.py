"""``bayes-attn map --task induction``: the induction head's MAP from the command line (issue 43,
part 5), its file read back by ``diagnose``, and bad input refused in one line before any work."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_attn.cli import main

TINY = ["--L", "5", "--V", "2", "--P", "20", "--num-test", "50", "--maxiter", "20"]


def cli(capsys, *argv):
    code = main(["-q", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


# both under -m slow (the kernel 14.8 s of compilation in the default run of 2026-12-07): the same
# kind and sweep writer run end to end in test_induction_maps.py's config test, and diagnose reads
# a sweep file in test_cli.py::test_train_sweep_and_diagnose; the map command's own checks are below
@pytest.mark.slow
@pytest.mark.parametrize("model", ["kernel", "network"])
def test_map_writes_a_sweep_file_that_diagnose_reads(model, tmp_path, capsys):
    """Both models at a tiny size: exit 0, a finished sweep file with the scores and the
    provenance (kind, source, versions), and ``diagnose`` prints its table."""
    from bayes_attn.experiments.sweep import load_sweep

    out = tmp_path / f"{model}.nc"
    # the kernel's point is the MAP of test_induction_maps' config at its [quick] size (L = 4,
    # V = 2, P = 20, softmax, 100 held-out sequences, 30 iterations): one compiled program
    quick = ["--L", "4", "--V", "2", "--P", "20", "--num-test", "100", "--maxiter", "30"]
    code, text, err = cli(capsys, "map", "--task", "induction", "--model", model, "--d-model", 40,
                          *(quick if model == "kernel" else TINY), "--out", out)  # fmt: skip
    assert code == 0, err
    assert "1 of 1 points done" in text and "copy1" in text
    ds = load_sweep(out)
    assert bool(ds["done"].all())
    assert np.isfinite(ds["loss"]).all() and np.isfinite(ds["induction2"]).all()
    assert ds.attrs["kind"] == {"kernel": "induction", "network": "induction_frozen"}[model]
    assert "bayes_attn_version" in ds.attrs and "start=uniform" in ds.attrs["tokens"]
    code, text, err = cli(capsys, "diagnose", out)
    assert code == 0, err
    assert "copy1" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--tokens", "uniform"], "tokens"),
        (["--P", "0"], "P must be"),
        (["--seed", "-1"], "seed"),
        (["--chi", "-1"], "chi"),
        (["--sigma2", "0"], "sigma2"),
        (["--V", "1"], "--V"),
        (["--model", "mlp"], "--model"),
        (["--task", "copy"], "--task"),
        (["--maxiter", "0"], "--maxiter"),
        (["--d-model", "0", "--model", "network"], "--d-model"),
    ],
)
def test_bad_input_is_one_line_naming_the_parameter_before_any_work(argv, needle, tmp_path,
                                                                   capsys):  # fmt: skip
    out = tmp_path / "x.nc"
    code, _, err = cli(capsys, "map", *argv, "--out", out)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not out.exists()
