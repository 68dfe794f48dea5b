"""``run_nuts(..., checkpoint=PATH)``: a run stopped by Ctrl-C goes on from its file and gives the
draws of a run that was never stopped, bit for bit (every transition has its own key, so the
chunks a checkpoint needs do not change the draws); a file made with other arguments is refused.
Deterministic: no error budget."""

import logging

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import bayes_attn.inference.llc_checkpoint as ckpt
from bayes_attn.inference import run_nuts

K = 3
COV = np.array([[1.0, 0.6, 0.0], [0.6, 1.0, 0.3], [0.0, 0.3, 0.5]])


def gaussian(cov):
    numpyro.sample("x", dist.MultivariateNormal(jnp.zeros(K), jnp.asarray(cov)))


def _stopped_after(monkeypatch, saves: int):
    """Every chunk writes the checkpoint; Ctrl-C after the ``saves``-th write. Returns a call
    that gives the real writer back."""
    save, calls = ckpt.save, []

    def save_then_stop(*args):
        save(*args)
        calls.append(1)
        if len(calls) == saves:
            raise KeyboardInterrupt

    monkeypatch.setattr(ckpt, "save", save_then_stop)
    monkeypatch.setattr(ckpt, "CHECKPOINT_SECONDS", 0.0)
    return lambda: monkeypatch.setattr(ckpt, "save", save)


# the adapted metric (its warm-up's state has a diagonal metric) in the slow run: 22 s on two busy
# cores; the same Keeper and template resume the Laplace metric's run by default
@pytest.mark.parametrize(
    ("metric", "saves"), [("laplace", 2), pytest.param("adapt", 1, marks=pytest.mark.slow)]
)
def test_a_stopped_run_resumes_bit_for_bit(tmp_path, monkeypatch, caplog, metric, saves):
    """Stopped after the warm-up's save and one chunk of draws (Laplace metric) or right after
    the warm-up (adapted metric), then the same call: the uninterrupted run's draws and stats,
    the Laplace start's record, a cost line that says it resumes, and no file left behind."""
    call = dict(model_args=(COV,), num_chains=2, num_warmup=20, num_samples=40, seed=5,
                metric=metric, progress=False)  # fmt: skip
    whole = run_nuts(gaussian, **call)
    path = tmp_path / "sub" / "nuts.npz"  # its folder is made
    restore = _stopped_after(monkeypatch, saves)
    with pytest.raises(KeyboardInterrupt):
        run_nuts(gaussian, checkpoint=path, **call)
    restore()
    assert path.exists()
    with pytest.raises(ValueError, match="checkpoint: .* other arguments"):
        run_nuts(gaussian, checkpoint=path, **{**call, "seed": 6})
    with caplog.at_level(logging.INFO, logger="bayes_attn"):  # the cost line knows it resumes
        resumed = run_nuts(gaussian, checkpoint=path, **{**call, "progress": True})
    cost = [r.getMessage() for r in caplog.records if "gradients per draw" in r.getMessage()]
    assert len(cost) == 1 and "resumed from its checkpoint" in cost[0], cost
    assert "Hessian" not in cost[0]
    assert not path.exists()
    np.testing.assert_array_equal(resumed.posterior["x"], whole.posterior["x"])
    for name in ("lp", "acceptance_rate", "n_steps", "diverging", "step_size"):
        np.testing.assert_array_equal(resumed.sample_stats[name], whole.sample_stats[name])
    if metric == "laplace":
        assert resumed.posterior.attrs["mode_potential"] == pytest.approx(
            whole.posterior.attrs["mode_potential"], rel=1e-12
        )


def test_an_unwritable_checkpoint_is_refused_before_any_work(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="checkpoint"):
            run_nuts(gaussian, model_args=(COV,), num_samples=5, num_warmup=5, progress=False,
                     checkpoint=locked / "nuts.npz")  # fmt: skip
    finally:
        locked.chmod(0o700)
