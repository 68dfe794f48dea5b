"""The edges of umbrella sampling and ``bayes-attn landscape`` that a new user meets (issue 46),
and the one home of their settings, writes and merges (issue 44).

Each test fails without its fix. The models are tiny (a two-dimensional mixture, Level 2's one
dimension) and the draws few: the numbers are not checked against exact values here
(tests/test_umbrella.py does that), only what the edges do.
"""

from __future__ import annotations

import math
import signal
import threading
import time
import warnings

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints

import bayes_attn as ba
from bayes_attn.analysis.free_energy import free_energy_profile, landscape_text, profile_verdict
from bayes_attn.inference import umbrella, umbrella_plan, umbrella_store, umbrella_windows
from bayes_attn.inference.umbrella import CoverageWarning, UmbrellaSettings, run_umbrella

SEP = 2.0


def _mixture():
    """Two Gaussian modes at x0 = -2 and +2 (sd 0.4, weights 0.8 and 0.2); q = x0."""
    log_w = jnp.log(jnp.array([0.8, 0.2]))
    locs = jnp.array([[-SEP, 0.0], [SEP, 0.0]])

    def model():
        x = numpyro.sample("x", dist.ImproperUniform(constraints.real_vector, (), (2,)))
        comp = dist.Normal(locs, 0.4).to_event(1).log_prob(x)
        numpyro.factor("mixture", jnp.logaddexp(log_w[0] + comp[0], log_w[1] + comp[1]))
        numpyro.deterministic("q", x[0])

    return model


#: the interrupted runs of section 3 and the cost lines' run (and the windows' programs of
#: :func:`one_basin`: its 8 starts relaxed and its chains, one compilation each for all of them)
_RESUME = dict(starts=[{"x": np.array([-SEP, 0.0])}, {"x": np.array([SEP, 0.0])}],
               centres=np.linspace(-3, 3, 8), num_warmup=10, num_samples=20, num_chains=1,
               refine=0, seed=3, batch=1)  # fmt: skip


@pytest.fixture(scope="module")
def one_basin():
    """A short run from one start (one basin found), 8 windows over both modes: too few draws
    to be trusted. Returns (idata, the warnings it raised). The windows' programs are those of
    :data:`_RESUME` (its centres, warm-up, draws, chains and batch: one compilation for both)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        one_start = {"starts": _RESUME["starts"][:1], "seed": 5}
        idata = run_umbrella(_mixture(), "q", **{**_RESUME, **one_start})
    return idata, caught


# --------------------------------------------------------------------------------------------------
# 1. The default placement finds every phase; one basin warns


def test_default_placement_spans_both_level2_phases():
    """Table 1 at P = 276 without starts: the windows reach from below the weak mode (aG ~ 0.4)
    to above the strong one (~ 3.7); before, they sat on the strong phase alone (3.08-4.57)."""
    from bayes_attn.models.order_params import order_param_model

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    plan = umbrella.plan_windows(
        order_param_model, "aG", model_args=(task, hyper, 276.0, "softmax")
    )
    assert plan.mode_q.size == 2
    assert plan.mode_q[0] < 0.6 and plan.mode_q[1] > 3.0
    assert plan.centres[0] < plan.mode_q[0] and plan.centres[-1] > plan.mode_q[1]


def test_default_starts_know_the_kernel_and_network_models():
    """Level 1 and a network with frozen embeddings get a start in each phase (the weak one at
    M = 0); another model gets NumPyro's initial values from several keys."""
    import jax

    from bayes_attn.models.levels import model_with_data, seed_embeddings

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    model, args, kwargs = model_with_data("kernel", task, hyper, 40, "softmax", seed=0)
    starts = umbrella_plan._phase_starts(model, args, kwargs)
    assert len(starts) == 2 and float(jnp.abs(starts[0]["M"]).max()) == 0.0
    assert float(jnp.abs(starts[1]["M"]).max()) > 0.0
    emb = seed_embeddings(task, hyper, 32, seed=0)
    model, args, kwargs = model_with_data("network", task, hyper, 40, "softmax", embeddings=emb)
    starts = umbrella_plan._phase_starts(model, args, kwargs)
    assert len(starts) == 2 and set(starts[0]) == {"W_G", "W_O"}
    assert umbrella_plan._phase_starts(_mixture(), (), {}) is None
    pot = umbrella_plan.potential.flat_potential(_mixture(), (), {})
    generic = umbrella_plan._default_starts(_mixture(), pot, jax.random.key(0))
    assert len(generic) == umbrella_plan.GENERIC_STARTS


def test_one_basin_warns_and_says_so_in_the_attrs(one_basin):
    idata, caught = one_basin
    assert any(issubclass(w.category, CoverageWarning) for w in caught), [str(w) for w in caught]
    a = idata.posterior.attrs
    assert int(a["basins_found"]) == 1 and "one basin" in a["coverage"]
    prof = free_energy_profile(idata)
    assert "warning: the windows cover one basin only" in landscape_text(prof)


def test_empty_bins_do_not_make_every_standard_error_nan(one_basin):
    """A bin no draw falls in (here the last, beyond every window) is F = inf; the other bins
    keep their standard errors (before, pymbar's log of an all-zero observable made them all
    nan)."""
    idata, _ = one_basin
    q = idata.posterior.q.values
    edges = np.append(np.linspace(q.min(), q.max() + 1e-9, 21), q.max() + 1.0)
    prof = free_energy_profile(idata, edges)
    assert np.isinf(prof.F.values[-1])
    assert np.isfinite(prof.F_se.values[:-1]).sum() >= 15
    assert "bin(s) empty" in landscape_text(prof)


# --------------------------------------------------------------------------------------------------
# 2. One verdict, printed where the number is; the landscape command exits on it


def test_verdict_is_one_judge_for_diagnose_and_landscape(one_basin, tmp_path, monkeypatch, capsys):
    from bayes_attn.cli import main
    from bayes_attn.experiments import landscape as ls

    idata, _ = one_basin
    prof = free_energy_profile(idata)
    const = idata.constant_data
    for name in ("r_hat", "ess_bulk", "acceptance"):
        prof[name] = ("window", const[name].values)
    verdict = profile_verdict(prof)
    assert not verdict.trusted and any("overlap" in f for f in verdict.failures)
    text = landscape_text(prof)
    assert "verdict: NOT to be trusted" in text and "F = -log p(q)" in text

    def fake(task, hyper, P, level, activation, out, process, **opts):
        ls.write_landscape(idata, out)
        return idata

    monkeypatch.setattr(ls, "landscape_on_hosts", fake)
    out = tmp_path / "l.nc"
    argv = ["-q", "landscape", "--level", "reduced", "--out", str(out)]
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert "verdict: NOT to be trusted" in printed.out and "--allow-untrusted" in printed.err
    assert main([*argv, "--allow-untrusted"]) == 0
    landscape_out = capsys.readouterr().out
    assert main(["-q", "diagnose", str(out), "--plots", str(tmp_path)]) == 0
    diagnose_out = capsys.readouterr().out
    verdict_line = [s for s in landscape_out.splitlines() if s.startswith("verdict:")]
    assert verdict_line and verdict_line[0] in diagnose_out.splitlines()


def test_level2_line_prints_numbers(one_basin):
    idata, _ = one_basin
    prof = free_energy_profile(idata, divide=0.0)
    prof["F_level2"] = prof.F + 0.1
    line = [s for s in landscape_text(prof).splitlines() if s.startswith("Level 2")][0]
    assert "largest |F - F_level2| 0.10 nats" in line and "Delta F" in line


# --------------------------------------------------------------------------------------------------
# 3. Ctrl-C stops within a second; a rerun resumes the finished windows


def test_interruptible_stops_the_caller_within_a_second():
    # Python's own Ctrl-C handler, as in a user's process (a pytest-xdist worker ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, lambda: signal.raise_signal(signal.SIGINT))
    t = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            umbrella.interruptible(time.sleep, 5.0)  # a compiled program that would run 5 s
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t < 3.0
    # the worker left running makes the process leave at exit with status 130; this one ends
    # here, so that pytest's own status stands
    assert len(umbrella_store._IN_FLIGHT) == 1
    for worker in umbrella_store._IN_FLIGHT:
        worker.join()
    umbrella_store._IN_FLIGHT.clear()


#: the compiled calls that are not a sampling call of windows
_NOT_SAMPLING = (umbrella_windows._relax, umbrella_windows._compile)


def _stop_after(n: int, monkeypatch) -> list:
    """Make the windows' compiled calls stop (as by Ctrl-C) at the ``n + 1``-th sampling call;
    returns the list of the calls made."""
    real, calls = umbrella_windows.interruptible, []

    def stop(fn, *args):
        if fn not in _NOT_SAMPLING:
            calls.append(fn)
            if len(calls) > n:
                raise KeyboardInterrupt
        return real(fn, *args)

    monkeypatch.setattr(umbrella_windows, "interruptible", stop)
    return calls


def _interrupted(ckpt, monkeypatch) -> None:
    """Run :data:`_RESUME` with a checkpoint, stopped (as by Ctrl-C) after 3 of its 8 windows (one
    compiled call each)."""
    _stop_after(3, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_umbrella(_mixture(), "q", checkpoint=ckpt, **_RESUME)
    monkeypatch.undo()


def test_interrupted_run_keeps_its_finished_windows(tmp_path, monkeypatch):
    """The windows finished before the interrupt are in the file; a run with another seed
    refuses it before sampling."""
    import xarray as xr

    ckpt = tmp_path / "w.nc"
    _interrupted(ckpt, monkeypatch)
    with xr.open_dataset(ckpt, engine="h5netcdf") as kept:
        assert kept.sizes["slot"] == 3 and sorted(kept.window.values) == [0, 1, 2]
        assert kept["relaxed_x0_0"].shape == (8, 2)  # every window's relaxed start, kept too
    with pytest.raises(ValueError, match="checkpoint"):
        run_umbrella(_mixture(), "q", checkpoint=ckpt, **{**_RESUME, "seed": 4})


def test_resumed_run_does_not_find_the_modes_again(tmp_path, monkeypatch):
    """The plan of the windows (the modes, their Hessians, the centres) is kept under the run's
    fingerprint: a rerun goes straight to the windows (before, it found the modes again, 4.6 min
    at Level 1 under load)."""
    ckpt = tmp_path / "w.nc"
    _interrupted(ckpt, monkeypatch)

    def found_again(*args, **kwargs):
        raise AssertionError("the modes were found again")

    def stop(*args):  # reached the windows' chains: stop before compiling them
        raise KeyboardInterrupt

    monkeypatch.setattr(umbrella_plan, "_modes", found_again)
    monkeypatch.setattr(umbrella_windows, "_compile", stop)
    with pytest.raises(KeyboardInterrupt):
        run_umbrella(_mixture(), "q", checkpoint=ckpt, **_RESUME)


def test_a_finished_result_is_read_back_not_run_again(tmp_path, monkeypatch, logged_run):
    """Every result carries its run's fingerprint; ``finished=`` a file holding the result of a
    run with the same arguments reads it back without sampling (a committed profile outlives a
    lost checkpoint), and one made with other arguments is run anew."""
    from bayes_attn.experiments.landscape import write_landscape

    run, first = _RESUME, logged_run[0]
    digest = first.posterior.attrs["fingerprint"]
    assert len(digest) == 64
    path = tmp_path / "kernel_P1_q_d0.nc"
    write_landscape(first, path)

    def sampled(*args, **kwargs):
        raise AssertionError("sampled again")

    monkeypatch.setattr(umbrella_windows, "_compile", sampled)
    monkeypatch.setattr(umbrella_plan, "_modes", sampled)
    again = run_umbrella(_mixture(), "q", finished=path, **run)
    np.testing.assert_array_equal(again.posterior["q"], first.posterior["q"])
    with pytest.raises(AssertionError, match="sampled again"):
        run_umbrella(_mixture(), "q", finished=path, **{**run, "seed": 4})


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_level2_landscape_keeps_its_finished_windows(tmp_path, monkeypatch):
    """At Level 2 the windows are vectorised together, at most CALL_WINDOWS to a compiled call:
    Ctrl-C after the first call keeps its windows, and a rerun runs only the rest (before, one
    call ran every window, and an interrupt kept none)."""
    from bayes_attn.experiments.landscape import run_landscape

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    opts = dict(centres=np.linspace(0.3, 3.9, 12), num_warmup=5, num_samples=8, num_chains=1,
                refine=0, progress=False, checkpoint=tmp_path / "l.windows.nc")  # fmt: skip
    _stop_after(1, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_landscape(task, hyper, 276, "reduced", **opts)
    monkeypatch.undo()
    import xarray as xr

    with xr.open_dataset(opts["checkpoint"], engine="h5netcdf") as kept:
        assert sorted(kept.window.values) == list(range(umbrella_windows.CALL_WINDOWS))
        assert kept["plan_centres"].size == 12
    calls = _stop_after(99, monkeypatch)
    idata = run_landscape(task, hyper, 276, "reduced", **opts)
    assert len(calls) == 1 and idata.posterior.sizes["window"] == 12


@pytest.fixture(scope="module")
def logged_run():
    """:data:`_RESUME` run whole with ``progress``: (its result, the lines it logged)."""
    import logging

    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    log, keep = logging.getLogger("bayes_attn"), Keep(logging.INFO)
    level, every = log.level, umbrella_windows.PROGRESS_SECONDS
    log.addHandler(keep)
    log.setLevel(logging.INFO)
    umbrella_windows.PROGRESS_SECONDS = 0.0  # a line after every transition inside a window
    try:
        idata = run_umbrella(_mixture(), "q", progress=True, **_RESUME)
    finally:
        log.removeHandler(keep)
        log.setLevel(level)
        umbrella_windows.PROGRESS_SECONDS = every
    return idata, lines


def test_cost_is_measured_after_the_first_call(logged_run):
    """After the first compiled call the run says the gradients per draw it measured and the
    time left from the calls' own sampling time, one figure (before: only the start's range of
    3 to 255 gradients per draw, which spans two orders of magnitude); and a line as each chain
    ends. The windows' starts are relaxed by :func:`one_basin`'s program (the chains' program
    differs: it calls back to the host as each chain ends)."""
    lines = logged_run[1]
    measured = [m for m in lines if "gradients per draw measured" in m]
    assert len(measured) == 7, lines  # after every call of the eight but the last
    assert len([m for m in lines if "chain " in m and "done (window" in m]) == 8, lines
    assert " to " not in measured[0].split("about ")[1] and "load" in measured[0]


def test_a_running_window_says_where_it_is(logged_run):
    """Inside a window's chain, a line at most every ``PROGRESS_SECONDS`` (0 here: after every
    transition but the last, which the chain's own line reports): the window, its centre, the
    transition of all (warm-up counted), the leapfrogs a transition and the time in it."""
    lines = [m for m in logged_run[1] if ": transition " in m]
    total = _RESUME["num_warmup"] + _RESUME["num_samples"]
    for k in range(len(_RESUME["centres"])):
        mine = [m for m in lines if m.startswith(f"umbrella: window {k} at ")]
        steps = [int(m.split("transition ")[1].split(" of")[0]) for m in mine]
        assert steps == list(range(1, total)), mine
        assert all(f"of {total} ({_RESUME['num_warmup']} warm-up)" in m for m in mine)
        assert all("leapfrogs a transition" in m and "in this window" in m for m in mine)


@pytest.mark.slow  # three NUTS programs compiled: ~1.5 min on a loaded 2-core machine
def test_interrupted_run_resumes_to_the_same_draws(tmp_path, monkeypatch):
    """The rerun runs only the 5 windows left, without relaxing the starts again, and equals
    the uninterrupted run draw for draw."""
    ckpt = tmp_path / "w.nc"
    _interrupted(ckpt, monkeypatch)
    real, calls = umbrella_windows.interruptible, []

    def counted(fn, *args):
        calls.append(fn)
        return real(fn, *args)

    monkeypatch.setattr(umbrella_windows, "interruptible", counted)
    resumed = run_umbrella(_mixture(), "q", checkpoint=ckpt, **_RESUME)
    assert len([c for c in calls if c not in _NOT_SAMPLING]) == 5
    assert umbrella_windows._relax not in calls
    monkeypatch.undo()
    whole = run_umbrella(_mixture(), "q", **_RESUME)
    np.testing.assert_array_equal(resumed.posterior.q.values, whole.posterior.q.values)
    np.testing.assert_array_equal(resumed.sample_stats.step_size.values,
                                  whole.sample_stats.step_size.values)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# 4. Bad input is refused before any work, naming its option


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["--level", "kernel", "--P", "1e15"], "--P"),
        (["--level", "kernel", "--P", "1e9"], "--P"),
        (["--level", "reduced", "--P", "1e15"], "--P"),
        (["--level", "kernel", "--P", "272.5"], "--P"),
        (["--level", "reduced", "--centres", "0:inf:5"], "--centres"),
    ],
)
def test_cli_refuses_bad_input_before_work(argv, hint, capsys, tmp_path):
    from bayes_attn.cli import main

    t = time.perf_counter()
    assert main(["-q", "landscape", *argv, "--out", str(tmp_path / "x.nc")]) == 2
    assert time.perf_counter() - t < 10.0
    assert hint in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


def test_profile_refuses_a_nan_divide(one_basin):
    idata, _ = one_basin
    with pytest.raises(ValueError, match="divide"):
        free_energy_profile(idata, divide=math.nan)
    with pytest.raises(ValueError, match="divides"):
        free_energy_profile(idata, divides=[0.0, math.inf])


def test_landscape_P_bounds():
    from bayes_attn.experiments.landscape import check_landscape_P

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    assert check_landscape_P(task, hyper, 272.5, "reduced") == 272.5  # the theory's P is real
    assert check_landscape_P(task, hyper, 272.0, "kernel") == 272
    with pytest.raises(ValueError, match="whole number"):
        check_landscape_P(task, hyper, 272.5, "kernel")


# --------------------------------------------------------------------------------------------------
# 5. The figure says what it shows and where not to trust it


def test_profile_figure(one_basin, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from bayes_attn.plotting.plots import landscape_profile

    idata, _ = one_basin
    prof = free_energy_profile(idata, np.linspace(-2.6, -1.4, 13))  # bins narrower than windows
    prof.attrs["landscape_level"] = "reduced"
    prof["overlap_next"].values[2] = 0.0  # one gap between windows 2 and 3
    fig = landscape_profile(prof)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(s.startswith("Level-2 posterior, umbrella + MBAR") for s in labels), labels
    assert any("do not overlap" in s for s in labels), labels
    lo, hi = ax.get_xlim()
    assert lo <= prof.centre.values.min() and hi >= prof.centre.values.max()
    from matplotlib.container import ErrorbarContainer  # F's points carry ±1 s.e. bars

    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1 and bars[0].has_yerr and "s.e." in bars[0].get_label()
    fig.savefig(tmp_path / "profile.png")


# --------------------------------------------------------------------------------------------------
# 6. One home for the settings, the atomic write and the merge


def test_umbrella_settings_are_the_one_home():
    import inspect

    from bayes_attn.cli import cli
    from bayes_attn.experiments.sweep import DEFAULTS, SweepConfig

    # run_umbrella takes settings= plus the fields as keywords; no default is copied into it
    sig = inspect.signature(run_umbrella).parameters
    assert sig["settings"].default is None and sig["changes"].kind is sig["changes"].VAR_KEYWORD
    assert not set(UmbrellaSettings().options()) & set(sig)
    assert umbrella.umbrella_settings() == UmbrellaSettings()
    assert umbrella.umbrella_settings(num_samples=7).num_samples == 7
    with pytest.raises(TypeError, match="num_sample"):
        umbrella.umbrella_settings(num_sample=7)
    kernel = UmbrellaSettings.for_level("kernel").options()
    assert all(DEFAULTS["landscape"][k] == kernel[k] for k in
               ("num_warmup", "num_samples", "num_chains", "refine", "max_windows"))  # fmt: skip
    cfg = SweepConfig(kind="landscape", P=(276,), activation=("softmax",), seed=(0,),
                      options={"level": "reduced", "num_samples": 300})  # fmt: skip
    reduced = UmbrellaSettings.for_level("reduced")
    assert cfg.options["num_warmup"] == reduced.num_warmup and cfg.options["num_samples"] == 300
    options = {p.name: p for p in cli.commands["landscape"].params}
    assert all(options[n].default is None for n in ("warmup", "samples", "chains", "windows"))


def test_landscape_writes_and_merges_through_io(one_basin, tmp_path, monkeypatch):
    from bayes_attn import io
    from bayes_attn.experiments import landscape as ls
    from bayes_attn.inference.umbrella import merge_umbrella

    assert ls.write_atomic is io.write_atomic
    idata, _ = one_basin
    ls.write_landscape(idata, tmp_path / "a" / "l.nc")
    assert (tmp_path / "a" / "l.nc").exists() and len(list((tmp_path / "a").iterdir())) == 1
    seen = []
    real = io.concat_disjoint
    monkeypatch.setattr(io, "concat_disjoint", lambda *a, **k: seen.append(a[1]) or real(*a, **k))
    merged = merge_umbrella([idata])
    assert seen and set(seen) == {"window"}
    np.testing.assert_array_equal(merged.posterior.q.values, idata.posterior.q.values)
    with pytest.raises(ValueError, match="overlap"):
        merge_umbrella([idata, idata])


def test_result_is_built_by_convert_finish_and_merges_with_tokens(monkeypatch):
    """The windows' result goes through the one result builder (convert.finish: the record in
    every group, the tokens as observed_data), and merge_umbrella takes a group without windows
    (the tokens) from the first share."""
    from bayes_attn.inference.record import RunRecord
    from bayes_attn.models.levels import model_with_data

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    model, args, kwargs = model_with_data("kernel", task, hyper, 6, "softmax", seed=0)
    rng = np.random.default_rng(0)
    W, C, D = 4, 2, 10
    chains = umbrella_windows._Chains(
        {"aG": rng.normal(size=(W, C, D))}, rng.uniform(size=(W, C, D)),
        np.full((W, C, D), 3), np.zeros((W, C, D), bool), np.full((W, C), 0.3),
        rng.normal(size=(W, C, 5)), np.ones(W),
    )  # fmt: skip
    seen = []
    real = umbrella.finish
    monkeypatch.setattr(umbrella, "finish", lambda *a: seen.append(a[1]) or real(*a))
    record = RunRecord("umbrella", 0, C, 1, D, settings={"cv": "aG", "planned_windows": W})
    call = (model, args, kwargs)
    parts = [umbrella._to_idata(chains, np.arange(float(W)), "aG", record, call, np.arange(W))]
    assert seen == [record]
    idata = parts[0]
    assert idata.observed_data.tokens.shape == (6, task.L)
    assert idata.constant_data.attrs["sampler"] == "umbrella"
    assert idata.observed_data.attrs["cv"] == "aG"
    half = [idata.isel(window=slice(0, 2)), idata.isel(window=slice(2, 4))]
    merged = umbrella.merge_umbrella(half)
    np.testing.assert_array_equal(merged.posterior.aG.values, idata.posterior.aG.values)
    np.testing.assert_array_equal(
        merged.observed_data.tokens.values, idata.observed_data.tokens.values
    )


@pytest.mark.slow  # three Level-2 programs compiled: ~1.5 min on a loaded 2-core machine
def test_level2_landscape_resumes_to_the_same_draws(tmp_path, monkeypatch):
    """A Level-2 landscape interrupted after its first compiled call and run again equals the
    uninterrupted run draw for draw (each window's draws do not depend on its call)."""
    from bayes_attn.experiments.landscape import run_landscape

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    opts = dict(centres=np.linspace(0.3, 3.9, 12), num_warmup=20, num_samples=30, refine=0,
                progress=False)  # fmt: skip
    ckpt = tmp_path / "l.windows.nc"
    _stop_after(1, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_landscape(task, hyper, 276, "reduced", checkpoint=ckpt, **opts)
    monkeypatch.undo()
    resumed = run_landscape(task, hyper, 276, "reduced", checkpoint=ckpt, **opts)
    whole = run_landscape(task, hyper, 276, "reduced", **opts)
    for name in whole.posterior.data_vars:
        np.testing.assert_array_equal(resumed.posterior[name].values, whole.posterior[name].values)
    np.testing.assert_array_equal(resumed.sample_stats.step_size.values,
                                  whole.sample_stats.step_size.values)  # fmt: skip


@pytest.mark.slow  # the command's own defaults at Level 2: 48 windows x 2 chains, minutes
def test_landscape_reduced_defaults_pass_their_verdict(tmp_path, capsys):
    """``bayes-attn landscape --level reduced`` with no other option (Table 1, P = 272) gives a
    profile whose verdict passes, and exits 0 (2026-12-06: neighbour overlap 0.171, window R-hat
    <= 1.019, ESS >= 267; before: overlap 0.009, ESS 11, and exit 0 all the same)."""
    from bayes_attn.cli import main

    code = main(["-q", "landscape", "--level", "reduced", "--out", str(tmp_path / "l.nc")])
    out = capsys.readouterr().out
    assert code == 0 and "verdict: to be trusted" in out, out


def test_a_landscape_sweep_point_keeps_its_windows_in_the_point_folder(tmp_path, monkeypatch):
    """In a sweep, a landscape point runs with a checkpoint in its point folder (OUT.points/...),
    so an interrupted sweep resumes the point's finished windows (the checkpoint's resume is
    test_level2_landscape_resumes_to_the_same_draws)."""
    from bayes_attn.experiments import landscape as ls
    from bayes_attn.experiments.sweep import SweepConfig, point_progress, run_sweep

    seen = {}

    def stop(*args, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(ls, "run_landscape", stop)
    cfg = SweepConfig(kind="landscape", P=(276,), activation=("softmax",), seed=(0,),
                      options={"level": "reduced"})  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, tmp_path / "s.nc", progress=False)
    ckpt = seen["checkpoint"]
    assert ckpt.name == "windows.nc" and ckpt.parent.parent == tmp_path / "s.nc.points"
    assert ckpt.parent.is_dir() and seen["progress"] is False
    # the sweep's progress reaches the point (a line per window for hour-long points), and only
    # inside the sweep (experiments.sweep.point_progress)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, tmp_path / "s.nc", progress=True)
    assert seen["progress"] is True and point_progress() is False


def test_one_phase_softmax_starts_from_zero_and_the_map():
    """Where the softmax transition is not first order (L = 8, V = 3: one phase), the windows
    start from zero and the Level-1 MAP (Level 2: its global saddle), instead of refusing
    (before: "there are no two phases", and configs/induction_profile_onelayer.toml could not
    run)."""
    from bayes_attn.experiments.landscape import _starts, landscape_model
    from bayes_attn.theory import global_saddle
    from bayes_attn.theory.level1 import level1_map

    task, hyper, P = ba.CopyTask(8, 3), ba.Hyper.paper(), 100
    model, args, kwargs = landscape_model(task, hyper, P, "kernel", "softmax", seed=0)
    zero, mode = _starts(task, hyper, P, "kernel", "softmax", args, kwargs)
    np.testing.assert_array_equal(zero["M"], 0.0)
    np.testing.assert_allclose(mode["M"], level1_map(task, hyper, args[2], "softmax").M)
    (red,) = _starts(task, hyper, P, "reduced", "softmax", (), {})
    assert float(red["aG"]) == pytest.approx(global_saddle(task, hyper, 100.0, "softmax").aG)
    # the umbrella's default placement falls back to NumPyro's starts there
    assert umbrella_plan._phase_starts(model, args, kwargs) is None
