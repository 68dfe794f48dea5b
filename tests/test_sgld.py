"""SGLD: exact stationary moments on a conjugate Gaussian, agreement with NUTS on the reduced posterior,
and the NumPyro/ArviZ plumbing (vectorised chains, warm starts, full-data postprocessing).

Error budgets. On the Gaussian, the potential is U(mu) = lam (mu - m)^2 / 2 + const and one SGLD step
is the AR(1) recursion mu' - m = a (mu - m) + eps eta + sqrt(2 eps T) xi with a = 1 - eps lam and eta
the zero-mean minibatch gradient noise (additive: the coefficient of mu in the minibatch gradient is
lam whatever the batch). Its stationary law has mean m and variance
(2 eps T + eps^2 Var eta) / (1 - a^2), which for full batches is T v / (1 - eps / (2 v)), v = 1 / lam:
the discretisation bias is in the variance only, and known exactly. Every estimate is compared with
its exact value within 4 Monte Carlo standard errors (ArviZ's mcse, autocorrelation included), so a
correct sampler fails a given comparison with probability ~1e-4. Against NUTS, the budget adds the two
MCSEs in quadrature and the O(eps) bias (below).
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn.inference import run_nuts
from bayes_attn.inference.sgld import SGLD, polynomial_decay, run_sgld
from bayes_attn.models import network_model, order_param_model
from bayes_attn.theory import action as act

N, S, TAU = 1000, 1.0, 10.0
Y = jnp.asarray(np.random.default_rng(0).normal(1.0, S, N))
LAM = 1 / TAU**2 + N / S**2  # posterior precision of mu
V = 1 / LAM  # posterior variance
M = float(jnp.sum(Y)) / S**2 / LAM  # posterior mean


def _gaussian_model(y, batch_size=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, TAU))
    with numpyro.plate("data", y.shape[0], subsample_size=batch_size) as idx:
        numpyro.sample("y", dist.Normal(mu, S), obs=y[idx])


def _run_gaussian(step_size, temperature=1.0, batch_size=None, num_samples=20_000) -> MCMC:
    """4 chains, started at the posterior mean, 500 warm-up steps (>> 1 / (eps lam))."""
    mcmc = MCMC(
        SGLD(_gaussian_model, step_size, temperature),
        num_warmup=500,
        num_samples=num_samples,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(
        jax.random.key(0),
        Y,
        batch_size,
        init_params={"mu": jnp.full(4, M)},
        extra_fields=("potential_energy",),
    )
    return mcmc


def _ula_variance(eps, temperature=1.0, grad_noise_var=0.0):
    """Stationary variance of the AR(1) recursion of the module docstring."""
    a = 1 - eps * LAM
    return (2 * eps * temperature + eps**2 * grad_noise_var) / (1 - a**2)


def _moments(mcmc):
    """Mean and variance about the exact mean, with their MCSEs."""
    mu = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"])
    w = (mu - M) ** 2
    return mu.mean(), az.mcse(mu, method="mean"), w.mean(), az.mcse(w, method="mean")


def test_full_batch_sgld_has_the_ar1_drift():
    """The lag-1 autocorrelation of the chain is the AR(1) coefficient a = 1 - eps lam of the
    module docstring: it checks the kernel's drift (gradient and step), not only its variance.
    At eps = 0.4 v, a = 0.6; the estimate from 4 x 20000 draws has se ~ sqrt((1 - a^2) / n)
    ~ 0.003, and the budget is 4 se."""
    eps = 0.4 * V
    mu = np.asarray(_run_gaussian(eps).get_samples(group_by_chain=True)["mu"]) - M
    r1 = np.mean([np.corrcoef(c[:-1], c[1:])[0, 1] for c in mu])
    a = 1 - eps * LAM
    se = np.sqrt((1 - a**2) / mu.size)
    assert abs(r1 - a) < 4 * se, (r1, a, se)


def test_full_batch_sgld_has_the_exact_discrete_time_variance():
    """Full batches (deterministic gradient): at eps = 0.4 v, eps / 4 and (eps / 4, T = 1/4) the
    mean is m and the variance T v / (1 - eps / (2 v)), each within 4 MCSE. The O(eps) bias is
    resolved: at eps it is 25 % of v, and the continuum value v is > 4 MCSE away; at eps / 4 it
    has shrunk (5.3 % predicted)."""
    eps = 0.4 * V
    var = {}
    for step, temperature in ((eps, 1.0), (eps / 4, 1.0), (eps / 4, 0.25)):
        mean, se_mean, var[step, temperature], se_var = _moments(_run_gaussian(step, temperature))
        exact = _ula_variance(step, temperature)
        assert abs(mean - M) < 4 * se_mean, (step, temperature, mean, M, se_mean)
        assert abs(var[step, temperature] - exact) < 4 * se_var, (
            step,
            temperature,
            var[step, temperature],
            exact,
            se_var,
        )
        if step == eps:
            assert var[step, temperature] - V > 4 * se_var  # the bias is resolved
    assert abs(var[eps / 4, 1.0] - V) < var[eps, 1.0] - V


def test_minibatch_sgld_subsamples_with_fresh_indices_and_the_right_scale():
    """b = 50 of N = 1000 at eps = 0.1 v. Drawn without replacement and scaled by N / b, the
    gradient noise has Var eta = (N / (b s^2))^2 b (N - b) / (N - 1) var(y), which doubles the
    stationary variance here: the sampled variance matches the prediction with it (4 MCSE) and not
    the full-batch one (4 chains x 5000 draws: ESS ~ 2000, MCSE ~ 3 % of a 50 % difference). The
    recorded potential is unbiased for the full-data potential (mean of the difference within
    4 MCSE) and its spread over fresh batches is the without-replacement one (to 5 %; the sd
    estimate from 20000 independent batches is good to ~0.5 %, the drift of mu moves it < 1 %)."""
    b, eps = 50, 0.1 * V
    grad_noise_var = (N / (b * S**2)) ** 2 * b * (N - b) / (N - 1) * float(jnp.var(Y))
    mcmc = _run_gaussian(eps, batch_size=b, num_samples=5000)
    mean, se_mean, var, se_var = _moments(mcmc)
    assert abs(mean - M) < 4 * se_mean, (mean, M, se_mean)
    exact = _ula_variance(eps, grad_noise_var=grad_noise_var)
    assert abs(var - exact) < 4 * se_var, (var, exact, se_var)
    assert abs(var - _ula_variance(eps)) > 4 * se_var

    mu = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"])
    pe = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["potential_energy"])
    y = np.asarray(Y)
    full = (
        mu**2 / (2 * TAU**2)
        + 0.5 * np.log(2 * np.pi * TAU**2)
        + (N * (y.mean() - mu) ** 2 + np.sum((y - y.mean()) ** 2)) / (2 * S**2)
        + 0.5 * N * np.log(2 * np.pi * S**2)
    )
    diff = pe - full
    assert abs(diff.mean()) < 4 * az.mcse(diff, method="mean"), (diff.mean(), diff.std())
    sd_pred = (N / b) * np.sqrt(b * (N - b) / (N - 1) * np.var((y - M) ** 2 / (2 * S**2)))
    assert abs(diff.std() / sd_pred - 1) < 0.05, (diff.std(), sd_pred)


def _scale_model(y, batch_size=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, TAU))
    sigma = numpyro.sample("sigma", dist.LogNormal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0], subsample_size=batch_size) as idx:
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y[idx])
    numpyro.deterministic("ybar", jnp.mean(y[idx]))


def test_vectorized_chains_warm_start_schedule_and_arviz():
    """A batch of keys, constrained warm starts with a chain axis (sigma > 0: starting from the
    unconstrained values instead would put sigma at exp(0.5) etc.), a Welling-Teh schedule recorded
    as ``step_size``, and full-data postprocessing: the deterministic mean of the plate's data is
    the mean of all 100 points although the likelihood sees 10, and ArviZ's log likelihood and
    observed data cover all 100. The first draw is one step of eps = 1e-6 from the start: a move
    of ~1e-3 (noise sqrt(2 eps), drift eps |grad U| < 1e-3), against a tolerance of 1e-2."""
    y = Y[:100]
    init = {"mu": jnp.array([0.5, 1.0, 1.5]), "sigma": jnp.array([0.5, 1.0, 2.0])}
    schedule = polynomial_decay(1e-6, t0=5.0)
    mcmc = MCMC(
        SGLD(_scale_model, schedule),
        num_warmup=0,
        num_samples=20,
        num_chains=3,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(
        jax.random.split(jax.random.key(1), 3),
        y,
        10,
        init_params=init,
        extra_fields=("potential_energy", "grad_norm", "step_size"),
    )
    post = mcmc.get_samples(group_by_chain=True)
    for k in init:
        np.testing.assert_allclose(post[k][:, 0], init[k], atol=1e-2)
    np.testing.assert_allclose(post["ybar"], float(jnp.mean(y)), rtol=1e-12)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    np.testing.assert_allclose(
        extra["step_size"], np.broadcast_to(schedule(np.arange(20)), (3, 20))
    )
    np.testing.assert_allclose(schedule(5.0), 1e-6 * 2**-0.55)
    assert np.all(np.isfinite(extra["potential_energy"])) and np.all(extra["grad_norm"] > 0)
    np.testing.assert_array_equal(mcmc.last_state.i, [20, 20, 20])

    idata = az.from_numpyro(mcmc, log_likelihood=True)
    assert idata.log_likelihood["y"].shape == (3, 20, 100)
    np.testing.assert_array_equal(idata.observed_data["y"], y)
    assert {"lp", "grad_norm", "step_size"} <= set(idata.sample_stats.data_vars)
    summ = az.summary(idata, var_names=["mu", "sigma"], round_to="none")
    np.testing.assert_allclose(summ["mean"], [post["mu"].mean(), post["sigma"].mean()])


# slow: test_full_batch_sgld_has_the_exact_discrete_time_variance checks SGLD's law exactly and
# test_run_sgld_draws_are_numpyros_mcmc_draws_to_the_bit the run_sgld path
@pytest.mark.slow
def test_reduced_posterior_matches_nuts(paper):
    """Linear reduced model at P = 11.4 (< P* = 22.76: unimodal at 0, see test_nuts_reduced), near
    Gaussian with precision chi * Hessian of the action at 0, eigenvalues lam_k = 390, 721.
    eps = 0.1 / lam_max; on a Gaussian, ULA keeps the mean and inflates the sd along direction k by
    1 / sqrt(1 - eps lam_k / 2) - 1 <= 2.6 %; we allow bias = 2 x (eps lam_max / 4) x sd for means
    and sds (non-Gaussian margin), plus 4 x the two MCSEs in quadrature. SGLD: 4 chains x 20000
    draws; NUTS: 4 chains x 1000 draws."""
    task, hyper = paper
    sc = act.scales(task, hyper)
    hess = jax.jit(jax.hessian(lambda c: hyper.chi * act.action_linear(c, 11.4, sc)))(jnp.zeros(2))
    lam_max = np.linalg.eigvalsh(np.asarray(hess)).max()
    eps = 0.1 / lam_max
    sgld = run_sgld(
        order_param_model,
        model_args=(task, hyper, 11.4, "linear"),
        step_size=eps,
        num_warmup=500,
        num_samples=20000,
        init_params={"c1": jnp.zeros(4), "cG": jnp.zeros(4)},
        progress=False,
    )
    nuts = run_nuts(
        order_param_model,
        model_args=(task, hyper, 11.4, "linear"),
        num_warmup=300,
        num_samples=1000,
        seed=1,
        progress_bar=False,
    )
    kw = dict(var_names=["c1", "cG"], kind="all", round_to="none")
    s, n = az.summary(sgld, **kw), az.summary(nuts, **kw)
    for v in ("c1", "cG"):
        bias = 2 * eps * lam_max / 4 * n.loc[v, "sd"]
        for stat in ("mean", "sd"):
            se = np.hypot(s.loc[v, f"mcse_{stat}"], n.loc[v, f"mcse_{stat}"])
            assert abs(s.loc[v, stat] - n.loc[v, stat]) < 4 * se + bias, (
                v,
                stat,
                s.loc[v],
                n.loc[v],
            )
    assert {"potential_energy", "grad_norm", "step_size"} <= set(sgld.sample_stats.data_vars)
    assert sgld.posterior.attrs["level"] == "reduced"


@pytest.mark.slow
def test_network_model_smoke():
    """Minibatches of 3 of 8 sequences: the posterior has the order parameters, the log likelihood
    covers all 8 sequences, the tokens are the observed data."""
    task, hyper = ba.CopyTask(L=4, V=2), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(0), 8)
    idata = run_sgld(
        network_model,
        model_args=(task, hyper, tokens, "linear", 4),
        model_kwargs={"batch_size": 3},
        num_chains=2,
        num_warmup=5,
        num_samples=10,
        step_size=0.0001,
        progress=False,
    )
    for v in ("c1", "cG"):
        assert idata.posterior[v].shape == (2, 10)
        assert np.all(np.isfinite(idata.posterior[v]))
    ll = idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "sequence") and ll.shape == (2, 10, 8)
    assert np.all(np.isfinite(ll))
    np.testing.assert_array_equal(idata.observed_data["tokens"], tokens)
    assert {"potential_energy", "grad_norm", "step_size"} <= set(idata.sample_stats.data_vars)
    assert idata.posterior.attrs["level"] == "network"


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="step_size"):
        SGLD(_gaussian_model, step_size=0.0)
    with pytest.raises(ValueError, match="step_size"):
        SGLD(_gaussian_model, step_size=lambda t: -1e-3)
    with pytest.raises(ValueError, match="temperature"):
        SGLD(_gaussian_model, temperature=-1.0)
    with pytest.raises(ValueError, match="temperature"):
        SGLD(_gaussian_model, temperature=float("nan"))
    with pytest.raises(ValueError, match="gamma"):
        polynomial_decay(1e-3, t0=10.0, gamma=0.3)
    with pytest.raises(ValueError, match="init_params"):
        run_sgld(
            _gaussian_model,
            model_args=(Y,),
            num_chains=1,
            num_warmup=0,
            num_samples=1,
            init_params={"nu": 0.0},
            progress=False,
        )


@pytest.mark.parametrize(
    "chains, warm, samples, thin, kw",
    [(2, 3, 7, 2, {"batch_size": 4}), pytest.param(1, 2, 3, 1, {}, marks=pytest.mark.slow)],
)
def test_run_sgld_draws_are_numpyros_mcmc_draws_to_the_bit(chains, warm, samples, thin, kw):
    """run_sgld steps its own compiled loop and post-processes only the kept draws; its draws,
    order parameters and potential energies equal NumPyro's MCMC with the same kernel and key
    exactly (float64), minibatch, warm-up and thinning included.

    The latent draws and energies are compared to the bit. The deterministic sites (the order
    parameters) are recomputed from those draws by a separately compiled program, whose fusion
    can differ in the last bit from one CPU to another (CI saw a one-ulp difference in aG), so
    they are compared to 1e-12 relative."""
    task, hyper = ba.CopyTask(8, 3), ba.Hyper.paper()
    tokens = task.sample(jax.random.key(1), 12)
    args = (task, hyper, tokens, "softmax", 12)
    idata = run_sgld(
        network_model, model_args=args, model_kwargs=kw, num_chains=chains, num_warmup=warm,
        num_samples=samples, thinning=thin, progress=False, seed=3,
    )  # fmt: skip
    mcmc = MCMC(
        SGLD(network_model, 1e-4, 1.0), num_warmup=warm, num_samples=samples,
        num_chains=chains, thinning=thin, chain_method="vectorized", progress_bar=False,
    )  # fmt: skip
    mcmc.run(jax.random.key(3), *args, extra_fields=("potential_energy",), **kw)
    sites = {}  # the sites' types, by an abstract trace (an eager one compiles every op)
    jax.eval_shape(lambda: sites.update(numpyro.handlers.trace(
        numpyro.handlers.seed(network_model, 0)).get_trace(*args, **kw)))  # fmt: skip
    for name, value in mcmc.get_samples(group_by_chain=True).items():
        got, want = idata.posterior[name].values, np.asarray(value)
        if sites[name]["type"] == "deterministic":
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=name)
        else:
            assert np.array_equal(got, want), name
    energy = mcmc.get_extra_fields(group_by_chain=True)["potential_energy"]
    assert np.array_equal(idata.sample_stats["potential_energy"].values, np.asarray(energy))


def test_run_sgld_float32():
    task, hyper = ba.CopyTask(8, 3), ba.Hyper.paper()
    args = (task, hyper, task.sample(jax.random.key(1), 12), "softmax", 12)
    idata = run_sgld(
        network_model, model_args=args, num_chains=2, num_warmup=3, num_samples=4,
        progress=False, dtype="float32",
    )  # fmt: skip
    assert (
        idata.posterior["W_G"].dtype == np.float32 and idata.posterior.attrs["dtype"] == "float32"
    )
    assert np.all(np.isfinite(idata.posterior["aG"].values))
    assert jnp.zeros(()).dtype == jnp.float64  # the 64-bit mode is back on
    with pytest.raises(ValueError, match="dtype"):
        run_sgld(network_model, model_args=args, dtype="float16")


def _two_site_model(y):
    """mu as in ``_gaussian_model`` and an independent (2, 3) site x ~ N(0, 4 v) without data."""
    numpyro.sample("x", dist.Normal(0.0, 2 * V**0.5).expand((2, 3)).to_event(2))
    _gaussian_model(y)


@pytest.mark.parametrize(
    "options",
    [
        {"fused": True, "noise_dtype": "float32"},
        {"fused": True},
        pytest.param({"noise_dtype": "float32"}, marks=pytest.mark.slow),
    ],
)
def test_fast_step_options_keep_the_exact_discrete_time_law(options):
    """The options of SGLDSettings that speed the step (site-by-site update, float32 noise) keep
    the chain's stationary law: on two independent Gaussian sites (mu, v = 1 / lam; x, six
    coordinates of variance 4 v) at eps = 0.4 v, the mean and the variance about the exact mean
    of each site match the exact ULA values T v / (1 - eps / (2 v)) within 4 MCSE (the six x
    coordinates pooled as independent chains): 4 comparisons, each failing a correct sampler with
    probability ~6e-5. The fused update is the default's up to rounding: the first 50 steps of a
    default run agree with it to 1e-10 relative."""
    eps = 0.4 * V
    run = dict(model_args=(Y,), num_chains=4, num_warmup=500, step_size=eps, seed=0,
               init_params={"mu": jnp.full(4, M), "x": jnp.zeros((4, 2, 3))}, progress=False)  # fmt: skip
    post = run_sgld(_two_site_model, num_samples=20_000, **run, **options).posterior
    assert post.attrs.get("fused", 0) == options.get("fused", 0)
    mu = post["mu"].values
    x = np.moveaxis(post["x"].values, 1, -1).reshape(-1, post.sizes["draw"])  # (4 * 6, draw)
    for name, draws, v in (("mu", mu - M, V), ("x", x, 4 * V)):
        exact = v / (1 - eps / (2 * v))  # _ula_variance's, at T = 1
        assert abs(draws.mean()) < 4 * az.mcse(draws, method="mean"), name
        sq = draws**2
        assert abs(sq.mean() - exact) < 4 * az.mcse(sq, method="mean"), (name, sq.mean(), exact)
    if options.get("noise_dtype") is None:
        short = {**run, "num_warmup": 0, "num_samples": 50}
        want = run_sgld(_two_site_model, **short).posterior
        got = run_sgld(_two_site_model, **short, **options).posterior
        for k in ("mu", "x"):
            np.testing.assert_allclose(got[k].values, want[k].values, rtol=1e-10, atol=1e-14)


def test_fast_step_options_default_off_and_are_validated():
    """SGLDSettings holds the options' defaults (off: the draws stay NumPyro MCMC's, above)."""
    import inspect

    from bayes_attn.inference.sgld import SGLDSettings

    params = inspect.signature(run_sgld).parameters  # the options: settings= or **changes
    for name in ("fused", "noise_dtype"):
        assert name not in params and getattr(SGLDSettings(), name) in (False, None)
    with pytest.raises(ValueError, match="noise_dtype"):
        run_sgld(_gaussian_model, model_args=(Y,), noise_dtype="float16", progress=False)


@pytest.mark.slow
def test_a_fixed_diagonal_preconditioner_keeps_the_exact_discrete_time_law():
    """SGLDSettings.preconditioner, a fixed diagonal G: the step z - eps G grad U + sqrt(2 eps G) xi
    is ULA in the coordinates G^(-1/2) z, so on the two independent Gaussian sites (mu of variance
    v; x, six coordinates of variance 4 v, G = 4 v for each) at eps = 0.4 (eps G h = 0.4 for
    mu, 0.1 for x) the stationary variance is exactly v / (1 - eps G h / 2) per site: the mean
    and the variance about the exact mean match within 4 MCSE (4 comparisons, each failing a
    correct sampler with probability ~6e-5). The same eps without G is 400 times past the
    plain step's stability bound (eps lam = 400 > 2) and diverges. A bad G names the option."""
    from bayes_attn._validation import SamplerDiverged

    eps, G = 0.4, {"mu": V, "x": np.full((2, 3), 4 * V)}
    run = dict(model_args=(Y,), num_chains=4, num_warmup=200, step_size=eps, seed=0,
               init_params={"mu": jnp.full(4, M), "x": jnp.zeros((4, 2, 3))}, progress=False)  # fmt: skip
    post = run_sgld(_two_site_model, num_samples=4000, preconditioner=G, **run).posterior
    assert post.attrs["preconditioner"] == "diagonal"
    mu = post["mu"].values
    x = np.moveaxis(post["x"].values, 1, -1).reshape(-1, post.sizes["draw"])  # (4 * 6, draw)
    for name, draws, v, g in (("mu", mu - M, V, V), ("x", x, 4 * V, 4 * V)):
        exact = v / (1 - eps * g / v / 2)
        assert abs(draws.mean()) < 4 * az.mcse(draws, method="mean"), name
        sq = draws**2
        assert abs(sq.mean() - exact) < 4 * az.mcse(sq, method="mean"), (name, sq.mean(), exact)
    with pytest.raises(SamplerDiverged):
        run_sgld(_two_site_model, num_samples=50, **run)
    with pytest.raises(ValueError, match="preconditioner"):
        run_sgld(_two_site_model, num_samples=10, preconditioner={"w": 1.0}, **run)


def test_the_preconditioned_step_is_the_langevin_step_in_whitened_coordinates():
    """The move with a fixed diagonal G is z - eps G grad U + sqrt(2 eps G) xi site by site (a
    scalar G broadcast over its site, a site left out at G = 1), with the plain step's noise
    draw, to rounding; a G that is not finite and > 0, or not a dict, is refused naming it. (The
    stationary law it implies is checked under -m slow, above.)"""
    from bayes_attn.inference.sgld import SGLDState

    z = {"mu": jnp.asarray(0.3), "x": jnp.arange(6.0).reshape(2, 3)}
    g = {"mu": jnp.asarray(2.0), "x": -jnp.ones((2, 3))}
    state = SGLDState(0, z, g, 0.0, 0.0, 0.0, jax.random.key(1))
    eps, key = 0.01, jax.random.key(2)
    plain, moved = jax.jit(
        lambda s: [
            SGLD(_two_site_model, eps, preconditioner=G)._move(s, eps, key)
            for G in (None, {"x": 4.0})
        ]  # fmt: skip
    )(state)
    xi_x = (plain["x"] - z["x"] + eps * g["x"]) / np.sqrt(2 * eps)  # the plain step's noise
    np.testing.assert_allclose(moved["mu"], plain["mu"], rtol=1e-14)
    np.testing.assert_allclose(
        moved["x"], z["x"] - 4 * eps * g["x"] + np.sqrt(2 * eps * 4) * xi_x, rtol=1e-12
    )
    for bad in ({"mu": -1.0}, {"mu": np.nan}, {"x": np.zeros((2, 3))}, [1.0]):
        with pytest.raises(ValueError, match="preconditioner"):
            SGLD(_two_site_model, eps, preconditioner=bad)


def test_site_preconditioner_whitens_sites_of_known_curvature():
    """On independent Gaussian sites a (sd 0.01) and b (sd 10), curvatures 1e4 and 1e-2 (a
    condition number of 1e6), site_preconditioner's G is 1 / each site's curvature and its step
    0.1 / 1: the whitened Hessian is I (power iteration exact here, to 1e-8)."""
    from bayes_attn.inference.potential import flat_potential
    from bayes_attn.inference.sgld_precondition import site_preconditioner

    def model():
        numpyro.sample("a", dist.Normal(0.0, 0.01).expand((3,)).to_event(1))
        numpyro.sample("b", dist.Normal(0.0, 10.0).expand((2,)).to_event(1))

    G, step = site_preconditioner(flat_potential(model), jnp.ones(5), iters=2)
    assert G["a"] == pytest.approx(1e-4, rel=1e-8) and G["b"] == pytest.approx(100, rel=1e-8)
    assert step == pytest.approx(0.1, rel=1e-8)
