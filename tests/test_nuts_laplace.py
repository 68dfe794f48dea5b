"""``run_nuts(..., metric="laplace")``: the mode, its Laplace covariance as a dense metric, chains
started from the Laplace approximation; and the cost every NUTS run announces first.

Error budget: a correlated Gaussian in 5 dimensions whose mean and covariance are known exactly;
2 chains x 500 draws; every mean and sd within 4 Monte Carlo standard errors (ArviZ's mcse_mean,
mcse_sd) of the exact value. With 10 comparisons a correct sampler fails by chance with probability
~1e-3. Fixed seeds.
"""

import logging

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from bayes_attn import _arviz as az
from bayes_attn.inference import run_nuts
from bayes_attn.inference.members import laplace_metric, member_nuts
from bayes_attn.inference.nuts import laplace_start

K = 5
_A = np.random.default_rng(1).normal(size=(K, K))
COV = _A @ _A.T / K + 0.02 * np.eye(K)  # strongly correlated: condition number ~ 10^3
MU = np.linspace(-2.0, 3.0, K)


def gaussian(mu, cov):
    numpyro.sample("x", dist.MultivariateNormal(jnp.asarray(mu), jnp.asarray(cov)))


def test_laplace_start_of_a_gaussian_is_its_mean_and_covariance():
    lap = laplace_start(gaussian, (MU, COV), start={"x": np.zeros(K)}, num_chains=3)
    assert lap.mode.converged
    np.testing.assert_allclose(lap.mode.x, MU, atol=1e-6)
    np.testing.assert_allclose(lap.inverse_mass_matrix, COV, rtol=1e-6, atol=1e-9)
    assert lap.chain_starts["x"].shape == (3, K)
    # the same metric as member_nuts' (one owner: hmc.laplace_metric, re-exported by members)
    pot_metric = laplace_metric(
        lambda x: dist.MultivariateNormal(jnp.asarray(MU), jnp.asarray(COV)).log_prob(x), MU
    )
    np.testing.assert_allclose(lap.inverse_mass_matrix, pot_metric, rtol=1e-8)
    # the default start: NumPyro's initial value, then the same mode
    lap = laplace_start(gaussian, (MU, COV))
    np.testing.assert_allclose(lap.mode.x, MU, atol=1e-6)
    assert lap.chain_starts["x"].shape == (K,)


def test_laplace_metric_samples_a_correlated_gaussian_with_short_trees():
    """The Laplace metric whitens the Gaussian: the draws have the exact moments (4 MCSE), and
    the trees are shorter than with the adapted diagonal metric on the same budget (measured
    with BlackJAX's NUTS: mean depth 2.47 against 3.35, i.e. ~6 against ~10 gradients per draw;
    each a mean over 1000 transitions. NumPyro's NUTS gave 2.54 against 3.30)."""
    kw = dict(model_args=(MU, COV), num_chains=2, num_warmup=150, num_samples=500, seed=0)
    lap = run_nuts(gaussian, metric="laplace", progress=False, **kw)
    assert lap.posterior.attrs["metric"] == "laplace" and lap.posterior.attrs["mode_converged"]
    x = lap.posterior["x"].values.reshape(-1, K)
    summ = az.summary(lap, var_names=["x"], kind="all", round_to="none")
    sd = np.sqrt(np.diag(COV))
    for i in range(K):
        row = summ.iloc[i]
        assert abs(row["mean"] - MU[i]) < 4 * row["mcse_mean"], (i, row, MU[i])
        assert abs(row["sd"] - sd[i]) < 4 * row["mcse_sd"], (i, row, sd[i])
    assert x.shape == (1000, K)
    adapt = run_nuts(gaussian, progress=False, **kw)
    assert adapt.posterior.attrs["metric"] == "adapt"
    depth_lap = float(lap.sample_stats.tree_depth.mean())
    depth_adapt = float(adapt.sample_stats.tree_depth.mean())
    assert depth_lap < 3.0 and depth_lap < depth_adapt - 0.3, (depth_lap, depth_adapt)


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_run_nuts_announces_its_cost_first(caplog):
    with caplog.at_level(logging.INFO, logger="bayes_attn"):
        for metric in ("adapt", "laplace"):
            run_nuts(gaussian, model_args=(MU, COV), num_chains=1, num_warmup=5,
                     num_samples=5, metric=metric, progress=True)  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if "run_nuts:" in r.getMessage()]
    assert len(lines) == 2, lines
    assert all("1 chains x (5 warm-up + 5) draws in 5 dimensions" in ln for ln in lines)
    assert all("about" in ln and "ms per gradient" in ln for ln in lines)
    assert "7 to 1023 gradients per draw" in lines[0]
    assert "3 to 31 gradients per draw, after the mode and its 5 x 5 Hessian" in lines[1]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bayes_attn"):
        run_nuts(gaussian, model_args=(MU, COV), num_chains=1, num_warmup=5, num_samples=5,
                 progress=False)  # fmt: skip
    assert "run_nuts:" not in caplog.text


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_draws_do_not_depend_on_the_chunks_and_the_old_flag_warns(monkeypatch):
    """run_nuts scans the draws in compiled chunks between the bar's updates; every transition
    has its own key, so the chunks change nothing. ``lp`` is the log density at each draw.
    ``progress_bar=`` is the old name of ``progress=``: it still works and warns."""
    from scipy import stats

    from bayes_attn.inference import nuts

    kw = dict(model_args=(MU, COV), num_chains=2, num_warmup=10, num_samples=6, seed=4)
    one = run_nuts(gaussian, progress=False, **kw)
    monkeypatch.setattr(nuts, "CHUNK", 3)
    with pytest.warns(DeprecationWarning, match="progress="):
        chunked = run_nuts(gaussian, progress_bar=False, **kw)
    np.testing.assert_array_equal(one.posterior["x"].values, chunked.posterior["x"].values)
    names = {"lp", "energy", "acceptance_rate", "diverging", "n_steps", "tree_depth", "step_size"}
    assert names <= set(one.sample_stats.data_vars)
    x = one.posterior["x"].values
    lp = stats.multivariate_normal(MU, COV).logpdf(x.reshape(-1, K)).reshape(x.shape[:2])
    np.testing.assert_allclose(one.sample_stats["lp"].values, lp, rtol=1e-10)


def test_member_nuts_announces_its_cost_when_asked(caplog):
    import jax

    def logdensity(x, mu):
        return -0.5 * jnp.sum((x - mu) ** 2)

    mus = np.zeros((2, 3))
    with caplog.at_level(logging.INFO, logger="bayes_attn"):
        member_nuts(logdensity, lambda x, mu: x, mus, (mus,), key=jax.random.key(0),
                    num_adapt=5, num_burn=2, num_draws=3, progress=True)  # fmt: skip
    assert "member_nuts: 2 members x 5 draws in 3 dimensions" in caplog.text
    assert "about" in caplog.text


def test_run_nuts_checks_metric_and_start():
    with pytest.raises(ValueError, match="metric must be one of"):
        run_nuts(gaussian, model_args=(MU, COV), metric="dense", progress=False)
    with pytest.raises(ValueError, match="start: only used with metric='laplace'"):
        run_nuts(gaussian, model_args=(MU, COV), start={"x": MU}, progress=False)


@pytest.mark.slow  # over 20 s on 2 cores: the default suite's 10-minute budget
def test_the_readme_d10000_call_runs_at_a_small_size():
    """The guide's frozen-embedding block (docs/guide.md: Level 1 with the embeddings' Gram, the
    Laplace metric started from the exact MAP), the same calls at L = 8, V = 3, d = 200; the guide
    uses the metric (its default call took 45 min at d = 10^4)."""
    from pathlib import Path

    import jax

    import bayes_attn as ba
    from bayes_attn import algebra, theory
    from bayes_attn.models import init_embeddings, kernel_limit_model

    readme = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text()
    start = readme.index("W_emb, p = init_embeddings")
    block = readme[start : readme.index("```", start)]
    assert "run_nuts(kernel_limit_model" in block and 'model_kwargs={"gram": g}' in block
    assert 'metric="laplace"' in block and 'start={"M": m.M}' in block
    task, hyper = ba.CopyTask(L=8, V=3), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(0), 60)
    W_emb, p = init_embeddings(jax.random.key(2), task, hyper, 200)
    g = algebra.embedding_gram(W_emb, p)
    m = theory.level1_map(task, hyper, tokens, "softmax", gram=g)
    idata = run_nuts(kernel_limit_model, model_args=(task, hyper, tokens, "softmax"),
                     model_kwargs={"gram": g}, metric="laplace", start={"M": m.M},
                     num_chains=2, num_warmup=20, num_samples=20, progress=False)  # fmt: skip
    assert idata.posterior.attrs["metric"] == "laplace"
    assert np.isfinite(idata.posterior["aG"].values).all()
    assert int(idata.sample_stats.diverging.sum()) == 0
