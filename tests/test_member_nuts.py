"""NUTS over an ensemble of posteriors (``inference.members.member_nuts``) against exact answers:
Gaussian members whose means and covariance are known in closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_attn.inference.members import laplace_metric, member_nuts

K = 6
_A = np.random.default_rng(0).normal(size=(K, K))
COV = _A @ _A.T / K + 0.05 * np.eye(K)  # correlated, condition number ~ 10^2
PREC = np.linalg.inv(COV)
MUS = np.array([np.linspace(-1, 1, K) * s for s in (1.0, 2.0, -3.0)])  # three members


def _logdensity(x, mu):
    r = x - mu
    return -0.5 * r @ (jnp.asarray(PREC) @ r)


def test_laplace_metric_of_a_gaussian_is_its_covariance():
    """At any point the Hessian of a Gaussian's negative log density is its precision, so the
    Laplace metric is the covariance; chunks that do not divide the dimension included."""
    for chunk in (1, 4, K):
        S = laplace_metric(_logdensity, jnp.ones(K), (jnp.asarray(MUS[0]),), chunk=chunk)
        np.testing.assert_allclose(S, COV, rtol=1e-10, atol=1e-12)


def test_member_nuts_samples_each_members_own_posterior():
    """Each member's chain samples its own Gaussian: means within 4 MCSE of the exact ones
    (MCSE = sd / sqrt(ESS), ArviZ's ESS of each coordinate), sds within 4 of their standard errors
    (sd / sqrt(2 ESS2), ESS2 that of the squared deviation: NUTS draws are often antithetic for the
    mean and not for the second moment). Starts 1 sd off the mean; fixed seed; 3 members x 400
    draws."""
    from bayes_attn import _arviz as az

    starts = MUS + np.sqrt(np.diag(COV))
    run = member_nuts(_logdensity, lambda x, mu: x, starts, (MUS,), key=jax.random.key(0),
                      num_adapt=50, num_burn=20, num_draws=400)  # fmt: skip
    draws = run["draws"]
    assert draws.shape == (3, 400, K) and run["leapfrogs"].shape == (3, 420)
    np.testing.assert_allclose(run["inverse_mass_matrix"], COV, rtol=1e-8)  # the Laplace metric
    sd_exact = np.sqrt(np.diag(COV))
    for m in range(3):
        ess = np.asarray([float(az.ess(draws[m, :, i][None])) for i in range(K)])
        r2 = (draws[m] - draws[m].mean(0)) ** 2
        ess2 = np.asarray([float(az.ess(r2[:, i][None])) for i in range(K)])
        assert np.all(ess > 50) and np.all(ess2 > 50), (ess, ess2)
        z_mean = (draws[m].mean(0) - MUS[m]) / (sd_exact / np.sqrt(ess))
        z_sd = (draws[m].std(0) - sd_exact) / (sd_exact / np.sqrt(2 * ess2))
        assert np.all(np.abs(z_mean) < 4), (m, z_mean)
        assert np.all(np.abs(z_sd) < 4), (m, z_sd)


def test_member_nuts_checks_its_arguments():
    with pytest.raises(ValueError, match="positions"):
        member_nuts(_logdensity, lambda x, mu: x, MUS[0], (MUS,), key=jax.random.key(0))
    with pytest.raises(ValueError, match="num_draws"):
        member_nuts(_logdensity, lambda x, mu: x, MUS, (MUS,), key=jax.random.key(0), num_draws=0)
    with pytest.raises(ValueError, match="target_accept"):
        member_nuts(_logdensity, lambda x, mu: x, MUS, (MUS,), key=jax.random.key(0),
                    target_accept=1.5)  # fmt: skip
