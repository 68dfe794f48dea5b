"""The NumPyro bridge (bayes_attn.inference.potential): one owner of model -> flat potential."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy

import bayes_attn as ba
from bayes_attn.inference import potential
from bayes_attn.models import kernel_limit_model, order_param_model

TASK, HYPER = ba.CopyTask.paper(), ba.Hyper.paper()


def gaussian_model(mu, prec):
    x = numpyro.sample("x", dist.Normal(0.0, 10.0).expand((mu.shape[0],)).to_event(1))
    numpyro.factor("lik", -0.5 * (x - mu) @ prec @ (x - mu))
    numpyro.deterministic("s", jnp.sum(x))


def test_flat_potential_is_numpyros_potential_energy():
    small = ba.CopyTask(4, 3)
    tokens = small.sample(jax.random.key(1), 6)
    for model, args in [
        (order_param_model, (TASK, HYPER, 276.0, "softmax")),
        (order_param_model, (TASK, HYPER, 300.0, "linear")),
        (kernel_limit_model, (small, HYPER, tokens, "softmax")),
    ]:
        pot = potential.flat_potential(model, args)
        x = jnp.linspace(-0.3, 0.4, pot.dim)
        u = pot.unravel(x)
        expected = potential_energy(model, args, {}, u)
        assert abs(float(pot.U(x)) - float(expected)) < 1e-10 * (1 + abs(float(expected)))
        np.testing.assert_allclose(pot.ravel(u), x)
        assert float(pot.log_density(x)) == -float(pot.U(x))


def test_sites_unconstrain_and_scalar_site():
    args = (TASK, HYPER, 276.0, "softmax")
    pot = potential.flat_potential(order_param_model, args)
    x = pot.unconstrain({"aG": 3.0})
    sites = pot.sites(x)
    assert abs(float(sites["aG"]) - 3.0) < 1e-12
    q = pot.scalar_site("aG")
    assert abs(float(jax.jit(q)(x)) - 3.0) < 1e-12
    assert float(jax.grad(q)(x)[0]) != 0.0
    with pytest.raises(ValueError, match="'zz' is not a latent or deterministic site"):
        pot.scalar_site("zz")
    with pytest.raises(ValueError, match="start: no value"):
        pot.unconstrain({})
    with pytest.raises(ValueError, match="start: no latent site"):
        pot.unconstrain({"aG": 1.0, "zz": 1.0})


def test_find_mode_and_hessian_on_a_gaussian():
    mu = jnp.array([1.0, -2.0, 0.5])
    A = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 4.0]])
    mode = potential.find_mode(gaussian_model, start={"x": jnp.zeros(3)}, model_args=(mu, A))
    prior_prec = np.eye(3) / 100.0
    exact = np.linalg.solve(A + prior_prec, A @ np.asarray(mu))
    np.testing.assert_allclose(mode.x, exact, atol=1e-6)
    assert mode.converged
    assert abs(float(mode.sites()["s"]) - exact.sum()) < 1e-6
    H = potential.hessian(mode.potential.U, mode.x, chunk=2)
    np.testing.assert_allclose(H, A + prior_prec, atol=1e-10)


def test_deprecated_homes_warn_and_agree():
    args = (TASK, HYPER, 276.0, "softmax")
    with pytest.warns(DeprecationWarning, match="potential"):
        from bayes_attn.inference.smc import split_log_density
    assert split_log_density is potential.split_log_density
    from bayes_attn.inference.basins import find_mode

    with pytest.warns(DeprecationWarning, match="potential.find_mode"):
        x, U, unravel, fn, ok = find_mode(order_param_model, *args, start={"aG": 0.5})
    new = potential.find_mode(order_param_model, start={"aG": 0.5}, model_args=args)
    np.testing.assert_array_equal(x, new.x)
    assert U == new.U and ok == new.converged


def test_potential_inside_another_model_is_hidden():
    """Evaluating a potential inside an enclosing model leaves only the outer sites in its trace."""
    pot = potential.flat_potential(order_param_model, (TASK, HYPER, 276.0, "softmax"))

    def outer():
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand((1,)).to_event(1))
        numpyro.factor("w", -pot.U(z))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = numpyro.handlers.trace(numpyro.handlers.seed(outer, 0)).get_trace()
    assert set(tr) == {"z", "w"}
