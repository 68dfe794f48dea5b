"""Checkpoints and progress of tempered SMC (issue 29, items 13 and 14).

A run is "killed" by raising from the checkpoint writer right after it wrote the file (after
tempering step 3, and in the rerun after the rejuvenation at lambda = 1); rerun with the same
arguments it must end bit for bit where an uninterrupted run ends: the same draws, eves, log
joints and per-step records, the same evidence. These are exact comparisons, no error budget.

Cost: one 1-D conjugate Gaussian (RWM, 2 runs x 100 particles, 6 tempering steps) run three
times with tempering (the first with progress on), once from the rejuvenated checkpoint, and a few
refused reruns that stop before any tempering step; a basin evidence killed and resumed; most of
the time is XLA compilation (about 10 s per run on one core).
"""

import contextlib
import io
import logging

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from bayes_attn.inference import run_smc, smc_checkpoint
from bayes_attn.inference.smc_checkpoint import REJUVENATED, TEMPERING

Y = jnp.asarray([0.3, -0.2, 1.1, 0.7])
SMC = dict(num_particles=100, num_runs=2)


def gaussian_model(y, tau):
    mu = numpyro.sample("mu", dist.Normal(0.0, tau))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


class Killed(Exception):
    """Stands in for the kill: raised right after the checkpoint named ``stage`` was written."""


@contextlib.contextmanager
def killed_after(monkeypatch, stage: str, count: int = 1):
    """Make the ``count``-th checkpoint write of ``stage`` raise :class:`Killed` after writing."""
    save = smc_checkpoint.Checkpoint.save
    seen = []

    def save_then_die(self, saved):
        save(self, saved)
        seen.append(saved.stage)
        if seen.count(stage) == count and saved.stage == stage:
            raise Killed(stage)

    with monkeypatch.context() as m:
        m.setattr(smc_checkpoint.Checkpoint, "save", save_then_die)
        yield seen


@contextlib.contextmanager
def captured():
    """The ``bayes_attn`` log records (DEBUG and up) and stderr (the tqdm bar)."""
    logger = logging.getLogger("bayes_attn")
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            yield records, err
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _run(path, tau=2.0, **kw):
    return run_smc(gaussian_model, model_args=(Y, tau), checkpoint=path, **{**SMC, "seed": 0, **kw})


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """An uninterrupted run (with progress); a run killed after step 3; refused reruns with other arguments; the
    rerun, killed after the rejuvenation; the last rerun, with progress."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("ckpt") / "run.ckpt"
    with captured() as (records, err):  # progress on: it must not change the draws
        out = {"path": path, "reference": _run(path, progress=True)}
    out["fresh_log"] = [(r.levelno, r.getMessage()) for r in records]
    out["fresh_stderr"] = err.getvalue()
    out["removed_after_reference"] = not path.exists()
    with pytest.raises(Killed), killed_after(mp, TEMPERING, 3):
        _run(path)
    out["after_kill"] = dict(np.load(path, allow_pickle=False))
    out["refusals"] = {}
    for name, kw in {
        "seed": {"seed": 1},
        "kernel": {"kernel": "hmc"},
        "settings": {"num_particles": 120},
        "moves": {"mixing_target": 0.1},
        "model_args": {"tau": 2.5},
    }.items():
        with pytest.raises(ValueError) as err:
            _run(path, **kw)
        out["refusals"][name] = str(err.value)
    with pytest.raises(Killed), killed_after(mp, REJUVENATED) as seen:
        _run(path)
    out["stages_on_resume"] = list(seen)
    with captured() as (records, err):
        out["resumed"] = _run(path, progress=True)
    out["log"] = [(r.levelno, r.getMessage()) for r in records]
    out["stderr"] = err.getvalue()
    out["removed_after_resume"] = not path.exists()
    out["leftovers"] = sorted(p.name for p in path.parent.iterdir())
    return out


def test_a_killed_run_resumes_to_the_uninterrupted_result(story):
    ref, res = story["reference"], story["resumed"]
    assert story["after_kill"]["stage"] == TEMPERING
    np.testing.assert_array_equal(story["after_kill"]["records/count"], [3, 3])
    # the rerun went on from step 3 (one save per remaining step) and was killed after the
    # rejuvenation; the last rerun only shuffled and converted the rejuvenated draws
    n_steps = int(np.max(ref.posterior.attrs["num_tempering_steps"]))
    assert story["stages_on_resume"] == [TEMPERING] * (n_steps - 3) + [REJUVENATED]
    np.testing.assert_array_equal(res.posterior.mu.values, ref.posterior.mu.values)
    for v in ("lp", "eve"):
        np.testing.assert_array_equal(res.sample_stats[v].values, ref.sample_stats[v].values)
    a, b = ref.posterior.attrs, res.posterior.attrs
    skip = {"wall_time_s", "created", "created_at"}
    assert set(a) == set(b)
    for k in set(a) - skip:
        np.testing.assert_array_equal(np.asarray(b[k]), np.asarray(a[k]), err_msg=k)
    assert story["removed_after_reference"] and story["removed_after_resume"]
    assert story["leftovers"] == [], story["leftovers"]


def test_a_checkpoint_of_other_arguments_is_refused(story):
    refusals = story["refusals"]
    for message in refusals.values():
        assert message.startswith("checkpoint: ") and "other arguments" in message, message
    assert "seed or key" in refusals["seed"] and "settings" not in refusals["seed"]
    for name in ("settings", "kernel", "moves"):
        assert "settings" in refusals[name] and "model" not in refusals[name], refusals[name]
    assert "model_args" in refusals["model_args"] and "density" in refusals["model_args"]


def test_progress_is_one_bar_over_lambda_with_steps_at_debug(story):
    info = [m for level, m in story["log"] if level == logging.INFO]
    debug = [m for level, m in story["log"] if level == logging.DEBUG]
    assert any(m.startswith("run_smc: resuming from checkpoint") for m in info), info
    assert any("ms per gradient" in m for m in info)  # the cost, announced first
    assert not any("smc step" in m for m in info)
    # resumed after the rejuvenation: no tempering step to report, no rejuvenation to announce
    assert debug == [] and not any("rejuvenation at lambda = 1 took" in m for m in info)
    assert "lambda 1.0000" in story["stderr"]


def test_progress_of_a_fresh_run_reports_each_step_and_the_rejuvenation(story):
    """The per-step lines at DEBUG, the rejuvenation announced with its cost and reported."""
    info = [m for level, m in story["fresh_log"] if level == logging.INFO]
    debug = [m for level, m in story["fresh_log"] if level == logging.DEBUG]
    n_steps = int(np.max(story["reference"].posterior.attrs["num_tempering_steps"]))
    assert len(debug) == n_steps and all(m.startswith("smc step ") for m in debug), debug
    assert debug[0].startswith("smc step 1: lambda = [")
    start = [m for m in info if m.startswith("run_smc: the rejuvenation at lambda = 1 (")]
    assert len(start) == 1 and "ms per gradient" in start[0], info
    done = [m for m in info if m.startswith("run_smc: the rejuvenation at lambda = 1 took")]
    assert len(done) == 1 and "moves = [" in done[0], info
    bar = story["fresh_stderr"]
    assert "run_smc:" in bar and "lambda 1.0000" in bar and "step 1," in bar


def test_checkpoint_path_is_checked_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="checkpoint: the directory .* does not exist"):
        _run(tmp_path / "missing" / "run.ckpt")
    with pytest.raises(ValueError, match="checkpoint: .* is a directory"):
        _run(tmp_path)
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint: .* is not a readable checkpoint"):
        _run(junk)


def _basin_model(y):
    x = numpyro.sample("x", dist.Normal(0.0, 1.5).expand((2,)).to_event(1))
    numpyro.sample("y", dist.Normal(x, 0.8).to_event(1), obs=y)


def test_basin_evidence_passes_its_checkpoint_to_run_smc(tmp_path, monkeypatch):
    """Killed after its SMC run's first tempering step, a basin evidence rerun resumes there: the
    rerun writes only the rejuvenated checkpoint, and removes the file at the end."""
    from bayes_attn.inference import basin_evidence

    path = tmp_path / "basin.ckpt"
    kw = dict(model_args=(jnp.asarray([0.4, -1.0]),), start={"x": jnp.zeros(2)},
              num_particles=64, checkpoint=path)  # fmt: skip
    with pytest.raises(Killed), killed_after(monkeypatch, TEMPERING):
        basin_evidence(_basin_model, **kw)
    assert str(np.load(path)["stage"]) == TEMPERING
    with killed_after(monkeypatch, "none") as seen:
        b = basin_evidence(_basin_model, **kw)
    assert seen == [REJUVENATED] and not path.exists()
    assert (b.num_tempering_steps == 1).all() and np.isfinite(b.log_Z_smc).all()
