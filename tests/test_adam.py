"""Adam ensembles: the objective is the model's posterior, training finds the phases, early stopping
stops, and the loss filter tells a planted stationary point from the global minimum.

The tiny task (L = 6, V = 3, sigma^2 = 5, chi = 30) has its linear transition at P* = 4.0 and its
crossover at P = 34 (Level 2): at P = 200 the saddle is (c1, cG) = (0.095, 1.87), at P = 1 it is (0, 0).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from numpyro.infer.util import log_density

import bayes_attn as ba
from bayes_attn.analysis import classify_minima, ensemble_summary
from bayes_attn.inference import train_adam
from bayes_attn.inference.adam import adam_optimizer, lr_schedule
from bayes_attn.models import init_params, neg_log_posterior, network_model

TASK = ba.CopyTask(L=6, V=3)
HYPER = ba.Hyper.paper().replace(sigma2=5.0)
FAST = dict(members=3, lr=1e-2, max_steps=1500, chunk=100, patience=100, progress_bar=False)


@pytest.mark.parametrize("factorized", [False, True])
def test_objective_is_the_models_negative_log_posterior(factorized):
    """U(theta) + log p(theta, y) is the same constant at two parameter points (to 1e-9)."""
    d = 8
    tok = TASK.sample(jax.random.key(0), 5)
    args = (TASK, HYPER, tok, "softmax", d)
    gaps = []
    for k in (1, 2):
        prm = init_params(jax.random.key(k), TASK, HYPER, d, factorized)
        logp, _ = log_density(network_model, args, {"factorized": factorized}, prm)
        gaps.append(float(neg_log_posterior(prm, tok, HYPER, "softmax") + logp))
    assert abs(gaps[0] - gaps[1]) < 1e-9 * abs(gaps[0])


def test_far_above_and_far_below_the_transition():
    """Thresholds: at P = 200 the best member copies, |cG| > 1 and |cG| > 5 |c1| (Level 2: 1.87 vs
    0.095); at P = 1 every member ends at c1 = cG = 0 to 1e-3 (the prior pulls W_G to zero)."""
    above = classify_minima(train_adam(TASK, HYPER, "linear", 16, 200, **FAST))
    final = above.isel(step=-1)
    lowest = float(final.train_loss.min())  # classify_minima's rule, rtol 0.05, done by hand
    np.testing.assert_array_equal(above.global_min, final.train_loss <= lowest * 1.05)
    best = final.where(above.global_min, drop=True)
    assert np.all(np.abs(best.cG) > 1.0) and np.all(np.abs(best.cG) > 5 * np.abs(best.c1))
    below = train_adam(TASK, HYPER, "linear", 16, 1, **FAST).isel(step=-1)
    assert np.all(np.abs(below.c1) < 1e-3) and np.all(np.abs(below.cG) < 1e-3)
    assert set(above.data_vars) >= {
        "train_loss",
        "test_loss",
        "objective",
        "token_residual",
        "A_bar",
    }


def test_early_stopping_stops():
    ds = train_adam(TASK, HYPER, "softmax", 8, 3, **{**FAST, "min_delta": 1e-6, "max_steps": 5000})
    assert np.all(ds.stopped_at.values >= 0)
    assert int(ds.step[-1]) < 5000
    # training ends when the last member stops; a member that stopped earlier no longer moves
    first = int(ds.stopped_at.argmin())
    tail = ds.train_loss.isel(member=first).sel(step=ds.step > int(ds.stopped_at[first]) + 1)
    assert tail.size >= 1 and float(np.ptp(tail.values)) == 0.0


def test_filter_flags_a_planted_stationary_point():
    """Member 0 starts at W_G = W_O = 0: every gradient of the likelihood vanishes there, so Adam
    stays in the disordered phase (train loss 1/2 per token) while the others copy. The filter marks
    exactly that member, and the filtered summary excludes it."""
    keys = jax.random.split(jax.random.key(5), 3)
    init = jax.vmap(lambda k: init_params(k, TASK, HYPER, 16))(keys)
    init = {n: w.at[0].set(0.0) if n in ("W_G", "W_O") else w for n, w in init.items()}
    ds = classify_minima(train_adam(TASK, HYPER, "linear", 16, 200, init=init, **FAST))
    final = ds.train_loss.isel(step=-1).values
    assert final[0] == pytest.approx(0.5, abs=1e-12)
    assert not bool(ds.global_min[0])
    assert bool(ds.global_min[int(np.argmin(final))])
    summary = ensemble_summary(ds)
    assert int(summary.n_members.sel(selection="filtered")) == int(ds.global_min.sum())
    assert float(summary.train_loss_mean.sel(selection="filtered")) < 0.5


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="P"):
        train_adam(TASK, HYPER, "linear", 4, 0)
    with pytest.raises(ValueError, match="lr"):
        train_adam(TASK, HYPER, "linear", 4, 2, lr=-1.0)
    with pytest.raises(ValueError, match="activation"):
        train_adam(TASK, HYPER, "relu", 4, 2)
    with pytest.raises(ValueError, match="tokens"):
        train_adam(TASK, HYPER, "linear", 4, 2, members=1, tokens=jnp.zeros((1, 3, 6), int))


def test_lr_schedules_warm_up_then_decay_to_the_end_fraction():
    """Default: a constant float (the optimiser as before); cosine and exponential decays ramp up
    over the warm-up, then fall monotonically to end_fraction * lr and stay there."""
    assert lr_schedule(1e-2) == 1e-2
    assert float(lr_schedule(1e-2, 10, 1e-6)(100)) == pytest.approx(1e-2)
    for decay in ("cosine", "exponential"):
        s = lr_schedule(1e-2, 10, 1e-6, decay, 100, 1e-2)
        assert float(s(0)) == pytest.approx(1e-6)
        assert float(s(10)) == pytest.approx(1e-2)
        vals = np.array([float(s(i)) for i in range(10, 111)])
        assert np.all(np.diff(vals) <= 0)
        assert float(s(110)) == pytest.approx(1e-4, rel=1e-4)
        assert float(s(1000)) == pytest.approx(1e-4, rel=1e-4)
    with pytest.raises(ValueError, match="decay"):
        lr_schedule(1e-2, decay="linear")


def test_default_optimizer_is_plain_adam():
    """decay="constant" without warm-up leaves the optimiser as it was: the same updates as
    optax.adam(lr), step for step; a cosine decay gives smaller updates once the lr has fallen."""
    x = {"w": jnp.linspace(-1.0, 1.0, 5)}
    ref, new = optax.adam(1e-2), adam_optimizer(1e-2, patience=10)
    cos = adam_optimizer(1e-2, patience=10, decay="cosine", decay_steps=4)
    s_ref, s_new, s_cos = ref.init(x), new.init(x), cos.init(x)
    for _ in range(6):
        g = jax.tree.map(lambda w: w**3 + 0.1, x)
        u_ref, s_ref = ref.update(g, s_ref, x)
        u_new, s_new = new.update(g, s_new, x, value=1.0)
        u_cos, s_cos = cos.update(g, s_cos, x, value=1.0)
        np.testing.assert_array_equal(u_new["w"], u_ref["w"])
        x = optax.apply_updates(x, u_ref)
    assert float(jnp.max(jnp.abs(u_cos["w"]))) < 0.02 * float(jnp.max(jnp.abs(u_ref["w"])))
