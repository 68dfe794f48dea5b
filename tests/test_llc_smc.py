"""The LLC by tempered SMC (inference.llc_smc) and the exploration check (analysis.llc_exploration).

Exact values. The normal crossings K(w) = w_1^(2a) w_2^(2b) on the box [-1, 1]², uniform prior,
γ = 0, ``include_prior``: λ(t) = t E_t[K] by the 1-D reduction (the inner integral in closed form
by the regularised incomplete gamma function P(s, c), s = 1/(2a):
∫_0^1 e^{-c x^{2a}} dx = Γ(s) P(s, c) / (2a c^s), ∫_0^1 c x^{2a} e^{-c x^{2a}} dx =
Γ(1 + s) P(1 + s, c) / (2a c^s), at c = t y^{2b}, then adaptive quadrature over y), checked
against a 2-D Gauss-Legendre rule in x = s³ (test_quadrature_two_ways). The quadratic with the
Gaussian base: λ(t) = ½ Σ t a_i / (t a_i + γ) and log Z(t) = Σ ½ log(2π / (t a_i + γ)).

Error budget. The SMC error is the spread of independent runs: se = sd(λ̂_r) / √R with R = 16
runs of 1000 particles (R = 8 in the quick checks), so z = (λ̂ - exact) / se is Student-t with
R - 1 dof: E[z²] = (R - 1)/(R - 3) = 1.15 at R = 16, and |z| >= 4 has probability 1.2e-3 per
case (5e-3 at R = 8). The slow check asks, over 16 fixed cases, for mean z² <= 2 and every
|z| < 4 (the issue's criterion): a correct sampler fails it with probability about 5% (1.8% from
the largest |z|; about 3% from the mean z², whose sd over 16 cases is 0.46). Seeds are the
case's index; they were not chosen. The moves stop at run_llc_smc's mixing target 0.2
(docs/validation.md has the table at run_smc's 0.05 too, same seeds, and at fresh seeds).
"""

import math
import time

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import integrate, special

from bayes_attn.analysis.llc import llc_estimate
from bayes_attn.analysis.llc_exploration import llc_exploration
from bayes_attn.inference.llc import run_llc
from bayes_attn.inference.llc_smc import genealogy_variance, run_llc_smc
from bayes_attn.inference.smc_kernel import _mean_log_likelihood


def crossing(a=1, b=1):
    w = numpyro.sample("w", dist.Uniform(-1.0, 1.0).expand((2,)).to_event(1))
    numpyro.factor("loss", -(w[0] ** (2 * a)) * w[1] ** (2 * b))  # n = 1: L_n = K


def crossing_exact(a, b, t):
    """t E_t[K] for K = x^(2a) y^(2b), uniform on [-1, 1]² (module docstring)."""
    s = 1.0 / (2 * a)

    def inner(c, shift):  # Γ(shift + s) P(shift + s, c) / (2a c^s)
        if c < 1e-12:
            return c / (2 * a + 1) if shift else 1.0 - c / (2 * a + 1)
        return special.gamma(shift + s) * special.gammainc(shift + s, c) * s * c**-s

    kink = [t ** (-1 / (2 * b))] if t > 1 else None
    opts = {"limit": 500, "epsabs": 0.0, "epsrel": 1e-10, "points": kink}
    z = integrate.quad(lambda y: inner(t * y ** (2 * b), 0), 0, 1, **opts)[0]
    m = integrate.quad(lambda y: inner(t * y ** (2 * b), 1), 0, 1, **opts)[0]
    return m / z


def _crossing_exact_2d(a, b, t, k=1000):
    x, w = np.polynomial.legendre.leggauss(k)
    s, ws = (x + 1) / 2, w / 2
    u, wu = s**3, 3 * s**2 * ws  # x = s³ resolves the arms near 0
    K = u[:, None] ** (2 * a) * u[None, :] ** (2 * b)
    weight = wu[:, None] * wu[None, :] * np.exp(-t * K)
    return float(np.sum(t * K * weight) / np.sum(weight))


def test_quadrature_two_ways():
    assert crossing_exact(1, 1, 1000.0) == pytest.approx(0.38728, abs=5e-6)  # the value
    for a, b, t in [(1, 1, 1000.0), (1, 2, 100.0), (2, 3, 10000.0)]:
        assert crossing_exact(a, b, t) == pytest.approx(_crossing_exact_2d(a, b, t), abs=1e-8)


def test_mean_log_likelihood_is_read_off_the_weights():
    rng = np.random.default_rng(0)
    ell = rng.normal(-50.0, 8.0, 500)
    delta = 0.013
    lw = delta * ell
    w = np.exp(lw - np.logaddexp.reduce(lw))
    inc = np.logaddexp.reduce(lw) - math.log(ell.size)
    got = float(_mean_log_likelihood(jnp.asarray(w), inc, delta))
    assert got == pytest.approx(float(np.sum(w * ell)), rel=1e-10)
    assert math.isnan(float(_mean_log_likelihood(jnp.asarray(w), inc, 0.0)))


def test_genealogy_variance_of_independent_lineages_is_the_iid_variance():
    f = np.random.default_rng(1).normal(size=4000)
    assert genealogy_variance(f, np.arange(f.size)) == pytest.approx(np.var(f) / f.size)


A = np.array([1.0, 4.0, 0.25])
NBETA, GAMMA = 50.0, 10.0


def quadratic(n=100):
    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand((3,)).to_event(1))
    numpyro.factor("loss", -n * 0.5 * jnp.sum(jnp.asarray(A) * w**2))


def test_gaussian_base_gives_the_llc_and_log_z_at_every_temperature():
    """The quadratic from the localization N(0, 1/γ): λ̂ at nβ within 4 se, and on the way λ̂(t)
    and log Z(t) at every tempering step of every run against their closed forms."""
    R, N = 8, 400
    idata = run_llc_smc(
        quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA, num_particles=N, num_runs=R,
        seed=0,
    )  # fmt: skip
    est = llc_estimate(idata)
    exact = 0.5 * np.sum(NBETA * A / (NBETA * A + GAMMA))
    assert est.se_method == "runs" and est.exploration.ok, est.summary()
    assert abs(est.llc_mean - exact) < 4 * est.mcse, (est.summary(), exact)
    a = idata.posterior.attrs
    assert a["exact_path"] == 1 and a["reference"] == "localization"
    t = np.asarray(a["path_nbeta"])
    lam_t = 0.5 * np.sum(t[:, None] * A / (t[:, None] * A + GAMMA), axis=1)
    # one run's weighted mean at one step: sd of t L_n under p_t over √(N/2) (ESS >= 0.9 N before
    # the resampling's duplicates); 5 of them
    sd = np.sqrt(0.5 * np.sum((t[:, None] * A / (t[:, None] * A + GAMMA)) ** 2, axis=1))
    assert np.all(np.abs(np.asarray(a["path_llc"]) - lam_t) < 5 * sd / math.sqrt(N / 2))
    log_z = 0.5 * np.sum(np.log(2 * np.pi / (t[:, None] * A + GAMMA)), axis=1)
    assert np.all(np.abs(np.asarray(a["path_log_z"]) - log_z) < 0.1)
    assert a["log_evidence"] == pytest.approx(log_z[-1], abs=4 * a["log_evidence_se"] + 0.01)


def test_smc_on_a_crossing_matches_quadrature_through_run_llc():
    """run_llc(sampler="smc") on w_1² w_2⁴ at nβ = 200: 8 runs of 500 particles, within 4 se."""
    exact = crossing_exact(1, 2, 200.0)
    idata = run_llc(
        crossing, jnp.zeros(2), model_kwargs={"a": 1, "b": 2}, n=1, sampler="smc", nbeta=200.0,
        gamma=0.0, include_prior=True, num_chains=8, num_draws=500, seed=0,
    )  # fmt: skip
    est = llc_estimate(idata)
    assert idata.posterior.attrs["reference"] == "prior"
    assert abs(est.llc_mean - exact) < 4 * est.mcse, (est.summary(), exact)
    assert est.exploration.ok, est.summary()


@pytest.mark.slow  # ~18 s; the default run keeps the check's pass (SMC above) and its parts
def test_exploration_flags_nuts_on_the_crossing_and_passes_the_quadratic():
    """NUTS started at w* on w_1² w_2² at nβ = 1000 (the issue's case, 500 draws) fails the
    check of |w - w*|; NUTS on the quadratic passes it."""
    idata = run_llc(
        crossing, jnp.zeros(2), n=1, sampler="nuts", nbeta=1000.0, gamma=0.0, include_prior=True,
        num_chains=4, num_draws=500, num_burnin=200, seed=0,
    )  # fmt: skip
    est = llc_estimate(idata)
    assert not est.exploration.ok, est.summary()
    assert "WARNING" in est.summary()
    quad = run_llc(
        quadratic, jnp.zeros(3), n=100, sampler="nuts", nbeta=NBETA, gamma=GAMMA, num_chains=4,
        num_draws=500, num_burnin=200, seed=0,
    )  # fmt: skip
    x = llc_exploration(quad)
    assert x.ok and x.rhat_distance < 1.01, x


# --------------------------------------------------------------------------------------------------
# The coverage check (slow): 16 crossings, nβ from 10² to 10⁴

CASES = [
    (a, b, t)
    for (a, b) in [(1, 1), (1, 2), (2, 2), (1, 3), (2, 3)]
    for t in (100.0, 1000.0, 10000.0)
] + [(1, 1, 3000.0)]


@pytest.mark.slow
def test_smc_error_bars_cover_on_the_normal_crossings():
    zs = []
    for i, (a, b, t) in enumerate(CASES):
        t0 = time.perf_counter()
        exact = crossing_exact(a, b, t)
        idata = run_llc_smc(
            crossing, jnp.zeros(2), model_kwargs={"a": a, "b": b}, n=1, nbeta=t, gamma=0.0,
            include_prior=True, num_particles=1000, num_runs=16, seed=i,
        )  # fmt: skip
        est = llc_estimate(idata)
        z = (est.llc_mean - exact) / est.mcse
        zs.append(z)
        at = idata.posterior.attrs
        print(
            f"SMC a={a} b={b} nβ={t:g}: exact {exact:.5f}, λ̂ {est.llc_mean:.5f} ± {est.mcse:.5f},"
            f" z {z:+.2f}, steps {int(np.median(at['num_tempering_steps']))}, moves/run "
            f"{at['total_moves'] / 16:.0f}, ok {est.exploration.ok}, "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    zs = np.array(zs)
    print(f"mean z² {np.mean(zs**2):.2f}, max |z| {np.max(np.abs(zs)):.2f}")
    assert np.mean(zs**2) <= 2.0 and np.all(np.abs(zs) < 4), zs


@pytest.mark.slow
def test_exploration_flags_the_nuts_runs_that_lean():
    """NUTS as the issue ran it (4 chains x 3000 draws, 500 warm-up, started at w*) on the same
    cases: every run whose |z| (against its own MCSE) reaches 3 is flagged by the check."""
    missed, zs, flagged = [], [], []
    for i, (a, b, t) in enumerate(CASES):
        exact = crossing_exact(a, b, t)
        idata = run_llc(
            crossing, jnp.zeros(2), model_kwargs={"a": a, "b": b}, n=1, sampler="nuts", nbeta=t,
            gamma=0.0, include_prior=True, num_chains=4, num_draws=3000, num_burnin=500, seed=i,
        )  # fmt: skip
        est = llc_estimate(idata)
        z = (est.llc_mean - exact) / est.mcse
        x = est.exploration
        zs.append(z)
        flagged.append(not x.ok)
        print(
            f"NUTS a={a} b={b} nβ={t:g}: λ̂ {est.llc_mean:.5f} ± {est.mcse:.5f}, z {z:+.2f}, "
            f"R-hat {est.rhat:.3f}, |w-w*|: R-hat {x.rhat_distance:.3f} ESS {x.ess_distance:.0f}"
            f"/{x.ess_tail_distance:.0f}, flagged {not x.ok}",
            flush=True,
        )
        if abs(z) >= 3 and x.ok:
            missed.append((a, b, t, z))
    zs = np.array(zs)
    print(f"NUTS mean z² {np.mean(zs**2):.2f}, max |z| {np.max(np.abs(zs)):.2f}, flagged "
          f"{sum(flagged)}/{len(flagged)}")  # fmt: skip
    assert not missed, missed


#: the LLC study's exact NUTS values at d = 256 (docs/validation.md, "λ̂ against P at Table 1";
#: ``llc_table1_d256.nc``): λ̂ and its MCSE
TABLE1_EXACT = {("linear", 10): (0.4454, 0.026), ("softmax", 10): (7.776, 0.004)}


@pytest.mark.slow  # ~30 s of CPU a point (the MAP, the compilation, 8 x 200 particles); 282 s both, loaded
@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_smc_holds_the_exact_nuts_line_at_table1(activation):
    """Issue 45, point 4: tempered SMC on the whitened Level-1 target of the LLC study (frozen
    embeddings, d = 256, L = 25, V = 5, P = 10, w* the exact MAP, nβ = P / log P, γ = 100), R = 8
    runs of 200 particles, against the study's exact NUTS value: z = (λ̂ - exact) / hypot(se,
    MCSE) with se = sd(λ̂_r) / √8 is about Student-t on 7 dof, |z| >= 4 with probability 5e-3.
    Seed 0, not chosen (docs/validation.md, "The Table-1 check", has the numbers)."""
    from bayes_attn.experiments.llc import llc_problem
    from bayes_attn.task import CopyTask, Hyper

    model, args, kw, w_star, _ = llc_problem(
        "network", CopyTask(25, 5, "uniform"), Hyper.paper(), 10, activation, d_model=256, seed=0
    )
    run = run_llc_smc(model, w_star, model_args=args, model_kwargs=kw, gamma=100.0, frozen=True,
                      num_particles=200, num_runs=8, seed=0)  # fmt: skip
    llc_runs = np.asarray(run.posterior.attrs["llc_runs"])
    se = llc_runs.std(ddof=1) / math.sqrt(llc_runs.size)
    exact, mcse = TABLE1_EXACT[(activation, 10)]
    z = (llc_runs.mean() - exact) / math.hypot(se, mcse)
    assert abs(z) < 4, (llc_runs, se, exact, mcse)
