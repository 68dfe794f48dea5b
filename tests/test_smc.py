"""Adaptive tempered SMC (BlackJAX) and the phase-occupancy diagnostic.

Everything runs at run_smc's defaults unless a test says otherwise: 4 runs x 1000 particles, moves
until the particles' correlation with their start is <= 0.05 (2-200 moves per tempering step),
target ESS 0.9. Seed 0 everywhere (seed 1 for the Gamma kernel), fixed, not searched.

Error budget. Evidences pass within 4 se + 0.1 nats, se = the across-runs standard error that
run_smc reports; the 0.1 covers a bias common to all runs that their spread cannot show. Measured
over seeds 0-3 (docs/validation.md, "Tempered SMC evidence against exact evidences"):

* Conjugate Gaussian, 1-D (mu ~ N(0, 2^2), 20 draws y ~ N(mu, 1)): errors -0.010 ... +0.002 (RWM),
  -0.004 ... +0.018 (HMC), se 0.004-0.030. Posterior mean within 5 sd/sqrt(4000), sd within 8%.
* Improper base on a constrained support (x ~ ImproperUniform(positive), factor = Gamma(k=3, 1)
  kernel; Z = Gamma(3) = 2): errors -0.035 ... +0.017, se 0.009-0.014; mean of x within
  5 sd/sqrt(4000).
* Conjugate Gaussian in 10 dimensions: errors -0.023 ... +0.013, se 0.015-0.055 (the earlier
  defaults: -0.11 ... +0.18).
* AR(5) regression, 6 coefficients + noise scale: errors -0.136 ... +0.024, se 0.021-0.042, mean
  -0.052 (the earlier defaults, one run of 2000 particles with 10 moves per step: -7.2 ... -2.2).
  Seed 2 is 6.5 se off; the floor covers it (-0.136 < 4 x 0.021 + 0.1).
* Gaussian regression, 150 coefficients, 50 rows (HMC, diagonal metric): errors -0.029 ... +0.065,
  se 0.030-0.068; 4.4 moves per tempering step on average at seed 0 (34.3 before the HMC step's
  ceiling and jitter).
* Softmax order parameters at the paper preset (sigma^2 = 30), ``include_logdet=False``: the
  strong-phase fraction's standard error is pooled over the runs, each the larger of the binomial
  with n_eff = min(N, ess_final) and the Chan-Lai genealogy estimate; tolerance 4 SE + 0.01
  (resampling allowance). Measured at seed 0: 0.1510 +- 0.0058 (exact 0.1494), 0.5145 +- 0.0080
  (0.5), 0.7887 +- 0.0067 (0.7930) at P_cross - 0.39, P_cross, P_cross + 0.30. With the earlier
  defaults the seed-to-seed sd over 12 seeds was 0.0136, 0.0077, 0.010 against SEs of 0.0127,
  0.0080, 0.0091 (measured at sigma^2 = 131.8, where these P are P_cross - 1.7 and + 1.3; Level 2
  depends on P / sigma^2 only). The log evidence against an independent trapezoid rule: errors
  -0.010, +0.012, +0.013 (se 0.021-0.031).
* Linear Z2 images at P = 570: fraction with c1 > 0 within 4 genealogy SEs of 1/2 (module test).
* NUTS, 8 chains started 4 + 4 in the two phases at P_cross, 200 warm-up + 300 draws: chains stay
  in (at most one hops during warm-up) -> "not mixing" by the stuck-chain rule.

Runtime on one (shared) CPU core: 5-20 s per run_smc call for the 1-D and 10-D models, ~35 s for
the AR(5) regression (about 94 moves per step over 50 steps), of which ~5 s is XLA compilation.
"""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints
from numpyro.infer.util import potential_energy
from scipy import integrate, special, stats

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn.analysis import diagnose
from bayes_attn.analysis.phases import phase_boundary, phase_occupancy
from bayes_attn.inference import run_nuts
from bayes_attn.inference.potential import split_log_density
from bayes_attn.inference.smc import SMCWarning, run_smc, tempering_steps
from bayes_attn.models import kernel_limit_model, network_model, order_param_model
from bayes_attn.theory.modes import phase_weights, weight_crossing

N = 1000  # run_smc's default particles per run
RUNS = 4  # and runs


@pytest.fixture(scope="module")
def preset():
    return ba.CopyTask.paper(), ba.Hyper.paper()


@pytest.fixture(scope="module")
def p_cross(preset):
    return weight_crossing(*preset).P_cross


_smc_cache = {}


def _smc_softmax(preset, P, seed=0):
    """One SMC run per (P, seed), shared between tests."""
    key = (float(P), seed)
    if key not in _smc_cache:
        task, hyper = preset
        _smc_cache[key] = run_smc(
            order_param_model, model_args=(task, hyper, P, "softmax"), seed=seed
        )
    return _smc_cache[key]


# --------------------------------------------------------------------------------------------------
# 1. Exact evidence


def gaussian_model(y, tau, sigma):
    mu = numpyro.sample("mu", dist.Normal(0.0, tau))
    numpyro.deterministic("mu2", mu**2)
    numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def _within(a, exact, floor=0.1):
    """The evidence budget of this module: |log Z - exact| < 4 se + floor."""
    est, se = a["log_evidence"], a["log_evidence_se"]
    assert abs(est - exact) < 4 * se + floor, (est, se, exact)


@pytest.mark.parametrize("kernel", ["rwm", "hmc"])
def test_conjugate_gaussian_evidence_and_posterior(kernel):
    y = np.random.default_rng(0).normal(1.5, 1.0, size=20)
    tau, sigma, n = 2.0, 1.0, y.size
    exact = stats.multivariate_normal(np.zeros(n), sigma**2 * np.eye(n) + tau**2).logpdf(y)
    post_var = 1.0 / (1.0 / tau**2 + n / sigma**2)
    post_mean = post_var * y.sum() / sigma**2
    idata = run_smc(gaussian_model, model_args=(jnp.asarray(y), tau, sigma), seed=0, kernel=kernel)
    a = idata.posterior.attrs
    assert a["sampler"] == "smc" and a["kernel"] == kernel and a["num_runs"] == RUNS
    _within(a, exact)
    mu = idata.posterior["mu"].values
    assert mu.shape == (RUNS, N)
    assert abs(mu.mean() - post_mean) < 5 * math.sqrt(post_var / (RUNS * N))
    assert abs(mu.std() / math.sqrt(post_var) - 1.0) < 0.08
    np.testing.assert_allclose(idata.posterior["mu2"].values, mu**2)
    # the per-step record: one schedule per run, ending at 1, increments summing to each run's log Z
    steps = tempering_steps(idata)
    assert len(steps) == int(np.sum(a["num_tempering_steps"]))
    for r, g in steps.groupby("run"):
        lam = g["lambda"].to_numpy()
        assert lam[-1] == 1.0 and np.all(np.diff(lam) > 0)
        assert len(g) == a["num_tempering_steps"][r]
        assert np.isclose(g.log_evidence_increment.sum(), a["log_evidence_runs"][r])
        assert (g.num_moves >= a["num_mcmc_steps"]).all()
        assert (g.num_moves <= a["max_mcmc_steps"]).all()
    runs = np.asarray(a["log_evidence_runs"])
    assert np.isclose(a["log_evidence"], np.logaddexp.reduce(runs) - math.log(RUNS))
    assert np.isclose(a["log_evidence_se"], runs.std(ddof=1) / math.sqrt(RUNS))
    assert np.asarray(a["num_eve_lineages"]).shape == (RUNS,)


GAUSS10 = dict(D=10, n=5, tau=3.0)


def gaussian10_model(y):
    D, tau = GAUSS10["D"], GAUSS10["tau"]
    mu = numpyro.sample("mu", dist.Normal(0.0, tau).expand((D,)).to_event(1))
    numpyro.sample("y", dist.Normal(mu, 1.0).expand(y.shape).to_event(2), obs=y)


def gaussian10_data():
    """y_ij = mu_j + e_ij (i < 5, j < 10), mu_j ~ N(0, 3^2), e ~ N(0, 1), and its exact log Z: per
    coordinate the five observations are jointly N(0, 9 J + I), so log Z is a sum of ten 5-variate
    normal log densities."""
    D, n, tau = GAUSS10["D"], GAUSS10["n"], GAUSS10["tau"]
    rng = np.random.default_rng(0)
    y = rng.normal(0.0, tau, D) + rng.normal(size=(n, D))
    cov = tau**2 * np.ones((n, n)) + np.eye(n)
    exact = sum(stats.multivariate_normal(np.zeros(n), cov).logpdf(y[:, j]) for j in range(D))
    return y, exact


@pytest.mark.slow  # over 20 s on 2 cores: the default suite's 10-minute budget
def test_conjugate_gaussian_in_10_dimensions_at_the_defaults():
    """The model of :func:`gaussian10_data` with RWM moves (10 dimensions)."""
    D, n, tau = GAUSS10["D"], GAUSS10["n"], GAUSS10["tau"]
    y, exact = gaussian10_data()
    idata = run_smc(gaussian10_model, model_args=(jnp.asarray(y),), seed=0)
    a = idata.posterior.attrs
    assert a["kernel"] == "rwm"
    _within(a, exact)
    post_var = 1.0 / (1.0 / tau**2 + n)
    mu = idata.posterior["mu"].values.reshape(-1, D)
    np.testing.assert_allclose(mu.mean(0), post_var * y.sum(0), atol=5 * math.sqrt(post_var / N))


def _wide_regression(D=150, n=50, tau=2.0, sigma=0.5):
    """y = X b + e with b ~ N(0, tau^2 I_D), 50 rows for 150 coefficients whose columns' scales
    spread over e^+-2 (so most directions feel only the prior and the rest spread in scale, as at
    Level 1); the exact log Z is log N(y; 0, sigma^2 I + tau^2 X X^T)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, D)) * np.exp(rng.normal(size=D))[None] / math.sqrt(D)
    y = X @ rng.normal(0.0, tau, D) + sigma * rng.normal(size=n)
    cov = sigma**2 * np.eye(n) + tau**2 * X @ X.T
    return X, y, tau, sigma, stats.multivariate_normal(np.zeros(n), cov).logpdf(y)


def wide_regression_model(X, y, tau, sigma):
    b = numpyro.sample("b", dist.Normal(0.0, tau).expand((X.shape[1],)).to_event(1))
    numpyro.sample("y", dist.Normal(X @ b, sigma).to_event(1), obs=y)


@pytest.mark.slow  # over 20 s on 2 cores: the default suite's 10-minute budget
def test_wide_regression_with_hmc_at_the_defaults():
    """150 dimensions: HMC moves with the cloud's diagonal as the metric (1000 particles < 10 d),
    the path that Level 1 and the network take. The evidence within the budget, and the moves per
    tempering step few: measured 4.4 on average (at most 12) at seed 0. Before the step ceiling
    and jitter (module docstring, "The mutation") the acceptance rule grew the step until the
    8-step trajectory neared a half period and the same run took 34.3 moves per step on average,
    200 at most; the bound of 10 fails on that resonance (the evidence itself came out right,
    +0.03 +- 0.06, only 6 times slower)."""
    X, y, tau, sigma, exact = _wide_regression()
    idata = run_smc(wide_regression_model, model_args=(jnp.asarray(X), jnp.asarray(y), tau, sigma),
                    seed=0)  # fmt: skip
    a = idata.posterior.attrs
    assert a["kernel"] == "hmc" and a["dense_metric"] == 0
    _within(a, exact)
    assert np.mean(a["num_moves"]) < 10, np.mean(a["num_moves"])
    assert np.max(a["move_scale"]) <= math.pi / 2 / 8 * (1 + 1e-12)
    assert "move_scale" in tempering_steps(idata).columns


# --------------------------------------------------------------------------------------------------
# A Bayesian AR(5) regression with unknown noise scale (7 parameters)

TAU_REG, SCALE_REG = 10.0, 2.5


def _ar5_data(seed=0, T=200, sigma=0.5):
    """An AR(5) series (fixed coefficients, noise sd 0.5) and its design: intercept + 5 lags."""
    rng = np.random.default_rng(seed)
    phi, c = np.array([0.5, -0.3, 0.2, 0.1, -0.1]), 0.3
    x = np.zeros(T + 50)
    for t in range(5, T + 50):
        x[t] = c + phi @ x[t - 5 : t][::-1] + sigma * rng.normal()
    x = x[50:]
    X = np.column_stack([np.ones(T - 5)] + [x[5 - k : T - k] for k in range(1, 6)])
    return X, x[5:]


def regression_model(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, TAU_REG).expand((X.shape[1],)).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfCauchy(SCALE_REG))
    numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)


def _regression_log_z(X, y):
    """log Z of :func:`regression_model`: closed form in beta, 1-D quadrature in sigma.

    With beta ~ N(0, tau^2 I_p) and y | beta, sigma ~ N(X beta, sigma^2 I_n), integrating beta
    out leaves y | sigma ~ N(0, sigma^2 I_n + tau^2 X X^T). With A = X^T X + (sigma^2 / tau^2) I_p,
    the matrix determinant lemma and Woodbury's identity give

        det(sigma^2 I + tau^2 X X^T) = sigma^(2 (n - p)) tau^(2 p) det A,
        y^T (sigma^2 I + tau^2 X X^T)^-1 y = (y^T y - y^T X A^-1 X^T y) / sigma^2,

    so log p(y | sigma) = -(1/2) [n log 2 pi + 2 (n - p) log sigma + 2 p log tau + log det A
    + (y^T y - y^T X A^-1 X^T y) / sigma^2]. Then Z = int_0^inf p(sigma) p(y | sigma) dsigma with
    the HalfCauchy(2.5) density p(sigma) = 2 / (pi 2.5 (1 + (sigma / 2.5)^2)), integrated in
    t = log sigma (Jacobian e^t) by scipy ``quad`` around the peak, in three pieces.
    """
    n, p = X.shape
    XtX, Xty, yty = X.T @ X, X.T @ y, y @ y

    def log_f(t):
        s = math.exp(t)
        L = np.linalg.cholesky(XtX + (s / TAU_REG) ** 2 * np.eye(p))
        b = np.linalg.solve(L, Xty)
        logdet = 2 * (n - p) * t + 2 * p * math.log(TAU_REG) + 2 * np.sum(np.log(np.diag(L)))
        log_lik = -0.5 * (n * math.log(2 * math.pi) + logdet + (yty - b @ b) / s**2)
        log_prior = math.log(2 / (math.pi * SCALE_REG)) - math.log1p((s / SCALE_REG) ** 2)
        return log_lik + log_prior + t

    grid = np.linspace(-8.0, 4.0, 2401)
    vals = np.array([log_f(t) for t in grid])
    t0, top = grid[np.argmax(vals)], vals.max()
    pieces = [(-30.0, t0 - 3.0), (t0 - 3.0, t0 + 3.0), (t0 + 3.0, 30.0)]
    mass = sum(
        integrate.quad(lambda t: math.exp(log_f(t) - top), a, b, epsabs=0, epsrel=1e-11, limit=200)[
            0
        ]
        for a, b in pieces
    )
    return top + math.log(mass)


@pytest.mark.slow  # about 2 min of CPU; the conjugate Gaussians check the evidence in the default run
def test_regression_evidence_at_the_defaults():
    """The 7-parameter AR(5) regression that the earlier defaults (2000 particles, 10 RWM moves per
    step, target ESS 0.5) got 2.2-7.2 nats too low (module docstring)."""
    X, y = _ar5_data()
    exact = _regression_log_z(X, y)
    idata = run_smc(regression_model, model_args=(jnp.asarray(X), jnp.asarray(y)), seed=0)
    a = idata.posterior.attrs
    assert a["kernel"] == "rwm" and idata.posterior["beta"].shape == (RUNS, N, 6)
    _within(a, exact)
    assert (np.asarray(a["num_eve_lineages"]) >= a["min_lineages"]).all()


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_starved_moves_warn_and_diagnose_reports_the_smc_fields():
    """One move per tempering step and 200 particles: the particles collapse onto one or two
    lineages and the runs disagree by tens of nats; both warnings fire, and diagnose prints the
    evidence with its per-run lineages and tempering steps."""
    X, y = _ar5_data()
    with pytest.warns(SMCWarning) as record:
        idata = run_smc(
            regression_model,
            model_args=(jnp.asarray(X), jnp.asarray(y)),
            num_particles=200,
            num_mcmc_steps=1,
            max_mcmc_steps=1,
            target_ess=0.5,
            seed=0,
        )
    messages = [str(r.message) for r in record]
    assert any("initial particles" in m and "lineages" in m for m in messages), messages
    assert any("runs disagree" in m for m in messages), messages
    a = idata.posterior.attrs
    assert (np.asarray(a["num_moves"]) == 1).all()
    assert np.asarray(a["num_eve_lineages"]).min() < a["min_lineages"]
    d = diagnose(idata, var_names=["sigma"])
    assert not d.ok and sum(w.startswith("smc:") for w in d.warnings) == 2
    assert d.smc["log_evidence"] == a["log_evidence"]
    runs = d.smc["runs"]
    assert len(runs) == RUNS
    np.testing.assert_array_equal(runs.eve_lineages, a["num_eve_lineages"])
    np.testing.assert_array_equal(runs.tempering_steps, a["num_tempering_steps"])
    np.testing.assert_allclose(runs.particle_ess, a["ess_final"])
    text = str(d)
    assert "SMC: log evidence" in text and "eve_lineages" in text and "tempering_steps" in text
    # a healthy run has no SMC warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", SMCWarning)
        ok = run_smc(gaussian_model, model_args=(jnp.asarray([0.3, -0.2, 1.1]), 2.0, 1.0), seed=0)
    assert (
        diagnose(ok, var_names=["mu"]).smc["runs"].eve_lineages.min()
        >= ok.posterior.attrs["min_lineages"]
    )


def gamma_kernel_model(k):
    x = numpyro.sample("x", dist.ImproperUniform(constraints.positive, (), ()))
    numpyro.factor("kernel", (k - 1.0) * jnp.log(x) - x)


def test_improper_base_on_constrained_support_gives_exact_evidence():
    """The Normal reference in unconstrained space, with the log-Jacobian in the target."""
    idata = run_smc(gamma_kernel_model, model_args=(3.0,), seed=1)
    _within(idata.posterior.attrs, math.log(special.gamma(3.0)))
    assert idata.posterior.attrs["improper_sites"] == "x"
    x = idata.posterior["x"].values
    assert abs(x.mean() - 3.0) < 5 * math.sqrt(3.0 / (RUNS * N))


def test_split_log_density_equals_numpyro_potential(preset):
    """log_joint = -potential_energy for all three levels; the reference is the proper prior."""
    task, hyper = preset
    small = ba.CopyTask(4, 3)
    tokens = small.sample(jax.random.key(1), 6)
    cases = [
        (order_param_model, (task, hyper, 1212.7, "softmax"), {"aG"}),
        (order_param_model, (task, hyper, 300.0, "linear"), {"c1", "cG"}),
        (kernel_limit_model, (small, hyper, tokens, "softmax"), set()),
        (network_model, (small, hyper, tokens, "linear", 3), set()),
    ]
    for model, args, improper_sites in cases:
        split = split_log_density(model, args)
        assert set(split.improper) == improper_sites
        u = {n: jnp.full(shape, 0.1) for n, shape in split.shapes.items()}
        log_ref, log_joint = jax.jit(split.log_parts)(u)
        pot = jax.jit(lambda u: potential_energy(model, args, {}, u))(u)
        assert abs(float(log_joint) + float(pot)) < 1e-9 * (1 + abs(float(log_joint)))
        if not improper_sites:  # proper prior: the reference is the prior, a Normal on every entry
            prior = sum(
                float(jnp.sum(dist.Normal(0.0, s).log_prob(u[n])))
                for n, s in _prior_stds(model, args).items()
            )
            assert abs(float(log_ref) - prior) < 1e-9 * (1 + abs(prior))
        else:  # the Normal(0, 10) reference on each improper site
            ref = sum(float(jnp.sum(dist.Normal(0.0, 10.0).log_prob(u[n]))) for n in improper_sites)
            assert abs(float(log_ref) - ref) < 1e-12
        draws = jax.jit(jax.vmap(split.draw_reference))(jax.random.split(jax.random.key(0), 4))
        assert {n: v.shape[1:] for n, v in draws.items()} == split.shapes


def _prior_stds(model, args):
    from bayes_attn.models.network import prior_scales

    hyper = args[1]
    if model is kernel_limit_model:
        return {"M": math.sqrt(hyper.g_w / hyper.chi)}
    return prior_scales(hyper, args[4])


# --------------------------------------------------------------------------------------------------
# 2. Phase weights at the first-order transition


def _log_z_quadrature(task, hyper, P):
    """log int exp(-chi s(cG)) dcG by the trapezoid rule on a fine grid (independent of modes())."""
    from bayes_attn.theory.action import action_softmax, scales

    c = np.linspace(-0.5, 3.0, 70001)  # both modes (cG 0.37, 1.71; sd ~0.04) and far tails
    ld = -hyper.chi * np.asarray(action_softmax(jnp.asarray(c), P, scales(task, hyper)))
    top = ld.max()
    return top + math.log(np.trapezoid(np.exp(ld - top), c))


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("below", marks=pytest.mark.slow),
        "cross",
        pytest.param("above", marks=pytest.mark.slow),
    ],
)
def test_smc_phase_fraction_matches_exact_weight(preset, p_cross, where):
    task, hyper = preset
    P = {"below": p_cross - 0.39, "cross": p_cross, "above": p_cross + 0.30}[where]
    w = float(phase_weights(task, hyper, [P]).strong_weight.values[0])
    assert {"below": 0.10 < w < 0.30, "cross": abs(w - 0.5) < 1e-9, "above": 0.70 < w < 0.90}[where]
    idata = _smc_softmax(preset, P)
    occ = phase_occupancy(idata)
    assert occ.verdict == "independent draws"
    assert abs(occ.fraction - w) < 4 * occ.se + 0.01, (P, occ.fraction, w, occ.se)
    # the evidence is the normaliser of the same density
    _within(idata.posterior.attrs, _log_z_quadrature(task, hyper, P))


@pytest.mark.slow
def test_smc_splits_linear_z2_images_evenly_within_the_genealogy_error(preset):
    """Above the linear P* the two Z2 images carry exactly half the mass each. In 2-D the image
    proportion picks up resampling noise along the path (seed-to-seed sd 0.025 at P = 570, twice
    the binomial 0.011); the Chan-Lai error over lambda = 0 ancestors (0.031-0.037) covers it."""
    task, hyper = preset
    idata = run_smc(order_param_model, model_args=(task, hyper, 570.0, "linear"), seed=0)
    occ = phase_occupancy(idata, var="c1", boundary=0.0)
    assert occ.verdict == "independent draws"
    assert occ.se > 1.5 * math.sqrt(0.25 / (RUNS * N))
    assert abs(occ.fraction - 0.5) < 4 * occ.se
    assert np.asarray(idata.posterior.attrs["num_eve_lineages"]).min() > 50


def test_phase_boundary_is_the_density_minimum_between_the_modes(preset, p_cross):
    task, hyper = preset
    pw = phase_weights(task, hyper, [p_cross])
    aG_w, aG_s = float(pw.aG_weak[0]), float(pw.aG_strong[0])
    b = phase_boundary(task, hyper, p_cross)
    assert aG_w < b < aG_s
    # the log-density (in cG, no Jacobian) is flat there and lower than at both modes
    from bayes_attn.theory.action import action_softmax, scales

    sc = scales(task, hyper)
    s = jax.jit(lambda c: action_softmax(c, p_cross, sc))
    cb, cw, cs = (float(ba.algebra.softmax_logit(a, task.L)) for a in (b, aG_w, aG_s))
    assert abs(float(jax.grad(s)(cb))) < 1e-6
    assert float(s(cb)) > max(float(s(cw)), float(s(cs)))
    assert phase_boundary(task, hyper, p_cross, var="cG") == pytest.approx(cb, abs=1e-9)
    # outside the coexistence region the boundary is that of the nearest spinodal's neighbourhood
    assert aG_w < phase_boundary(task, hyper, 2000.0) < 25.0


# --------------------------------------------------------------------------------------------------
# 3. NUTS chains stuck in their phases are flagged; SMC passes


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_nuts_started_in_both_phases_is_not_mixing_while_smc_passes(preset, p_cross):
    task, hyper = preset
    pw = phase_weights(task, hyper, [p_cross])
    aG_w, aG_s = float(pw.aG_weak[0]), float(pw.aG_strong[0])
    aG0 = jnp.array([aG_w] * 4 + [aG_s] * 4)
    idata = run_nuts(
        order_param_model,
        model_args=(task, hyper, p_cross, "softmax"),
        num_chains=8,
        num_warmup=200,
        num_samples=300,
        init_params={"aG": aG0},  # constrained, as every sampler takes it
        progress=False,
    )
    occ = phase_occupancy(idata)
    assert occ.verdict == "not mixing" and not occ.ok, str(occ)
    assert math.isnan(occ.se)
    smc = phase_occupancy(_smc_softmax(preset, p_cross))
    assert smc.ok and smc.verdict == "independent draws"
    assert abs(smc.fraction - 0.5) < 4 * smc.se + 0.01


# --------------------------------------------------------------------------------------------------
# The verdict rule on synthetic chains (explicit boundary, no theory needed)


def _idata(x):
    return az.from_dict({"posterior": {"aG": np.asarray(x, dtype=float)}})


def _two_state_chains(rng, n_chains, n_draws, a, b):
    """Two-state Markov chains (a: 0 -> 1, b: 1 -> 0 per step), started from stationarity."""
    out = np.empty((n_chains, n_draws), dtype=int)
    state = (rng.random(n_chains) < a / (a + b)).astype(int)
    for t in range(n_draws):
        out[:, t] = state
        u = rng.random(n_chains)
        state = np.where(state == 0, (u < a).astype(int), (u >= b).astype(int))
    return out * 3.0 + 0.3  # aG 0.3 (weak) or 3.3 (strong)


def test_occupancy_verdicts_on_synthetic_chains():
    rng = np.random.default_rng(3)
    mixing = phase_occupancy(_idata(_two_state_chains(rng, 4, 4000, 0.02, 0.03)), boundary=1.8)
    assert mixing.verdict == "mixing", str(mixing)
    assert abs(mixing.tau - (2 - 0.05) / 0.05) < 0.35 * 39  # the Markov value, 39
    assert abs(mixing.fraction - 0.4) < 4 * mixing.se
    # slow switching: every chain switches, but the fractions disagree beyond their ESS
    slow = _two_state_chains(rng, 4, 4000, 0.02, 0.03)
    slow[:2, :] = np.where(np.arange(4000) < 3800, 0.3, slow[:2, :])  # two chains held weak longer
    assert phase_occupancy(_idata(slow), boundary=1.8).verdict == "not mixing"
    # stuck: no switches at all
    stuck = np.concatenate([np.full((3, 500), 0.3), np.full((3, 500), 3.3)])
    occ = phase_occupancy(_idata(stuck), boundary=1.8)
    assert occ.verdict == "not mixing" and occ.tau == math.inf
    assert list(occ.table["strong_fraction"]) == [0, 0, 0, 1, 1, 1]
    single = phase_occupancy(_idata(np.full((2, 100), 0.3)), boundary=1.8)
    assert single.verdict == "single phase" and single.fraction == 0.0 and single.ok


def test_smc_inference_data_round_trips(preset, tmp_path):
    idata = _smc_softmax(preset, 275.6)
    assert {"aG", "a1", "cG"} <= set(idata.posterior.data_vars)
    assert idata.posterior.sizes == {"chain": RUNS, "draw": N}
    assert "lp" in idata.sample_stats
    a = idata.posterior.attrs
    assert a["level"] == "reduced" and a["P"] == 275.6 and a["L"] == 25
    path = tmp_path / "smc.nc"
    az.to_netcdf(idata, path)
    back = az.from_netcdf(path)
    assert back.posterior.attrs["log_evidence"] == a["log_evidence"]
    np.testing.assert_array_equal(
        back.posterior.attrs["tempering_schedule"], a["tempering_schedule"]
    )
    pd_back, pd_now = tempering_steps(back), tempering_steps(idata)
    assert pd_back.equals(pd_now)
    np.testing.assert_array_equal(back.posterior.aG.values, idata.posterior.aG.values)
    np.testing.assert_array_equal(back.sample_stats.eve.values, idata.sample_stats.eve.values)


@pytest.mark.slow
def test_smc_runs_on_kernel_limit_model_with_hmc():
    """Level 1 (proper Normal prior on M + factor 'evidence'): HMC moves, batched particles."""
    task = ba.CopyTask(4, 3)
    hyper = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=1.0)
    tokens = task.sample(jax.random.key(0), 20)
    idata = run_smc(
        kernel_limit_model,
        model_args=(task, hyper, tokens, "softmax"),
        num_particles=256,
        num_runs=2,
        batch_size=64,
        seed=0,
    )
    a = idata.posterior.attrs
    assert a["kernel"] == "hmc" and a["improper_sites"] == "" and a["dense_metric"] == 0
    assert idata.posterior["M"].shape == (2, 256, 7, 7)
    assert {"aG", "token_residual"} <= set(idata.posterior.data_vars)
    assert np.isfinite(a["log_evidence"])
    assert "tokens" in idata.observed_data
