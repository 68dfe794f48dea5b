"""The paper protocol, shrunk: it runs end to end, stores what it promises, and reads TOML configs."""

import numpy as np
import pytest

import bayes_attn as ba
from bayes_attn.experiments.protocol import ProtocolConfig, run_protocol

TINY = dict(
    L=6, V=3, members=2, num_test=10, d_model=8, max_steps=200, sgld_warmup=5, sgld_samples=5
)


@pytest.mark.parametrize(
    "activations, Ps, level1",
    [
        (("linear",), (100,), False),
        pytest.param(("linear", "softmax"), (2, 100), True, marks=pytest.mark.slow),
    ],
)
def test_quick_protocol_end_to_end(tmp_path, activations, Ps, level1):
    cfg = ProtocolConfig.quick(activations=activations, Ps=Ps, level1=level1, **TINY)
    hyper = ba.Hyper.paper().replace(sigma2=5.0)
    ds, seconds = run_protocol(cfg, hyper, progress=False)
    sizes = {"activation": len(activations), "P": len(Ps), "member": 2, "query": 6, "key": 6}
    assert dict(ds.sizes) == sizes
    names = ["adam_c1", "adam_cG", "sgld_c1", "sgld_cG", "theory_c1", "theory_cG"]
    for v in names + (["level1_c1", "level1_cG"] if level1 else []):
        assert np.all(np.isfinite(ds[v].values)), v
    assert set(seconds) == {"adam", "sgld", "theory"} and all(s > 0 for s in seconds.values())
    # linear network values are folded onto the theory's Z2 branch
    lin = ds.sel(activation="linear")
    assert np.all(lin.adam_c1 + lin.adam_cG >= 0)
    path = tmp_path / "protocol.nc"
    ds.to_netcdf(path, engine="h5netcdf")


def test_config_from_toml(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("[protocol]\nPs = [10, 20]\nd_model = 64\n")
    cfg = ProtocolConfig.from_toml(f)
    assert cfg.Ps == (10, 20) and cfg.d_model == 64 and cfg.members == 10
    f.write_text("[protocol]\nlearning_rate = 1.0\n")
    with pytest.raises(ValueError, match="learning_rate"):
        ProtocolConfig.from_toml(f)
    with pytest.raises(ValueError, match="P"):
        ProtocolConfig(Ps=(0, 10))
    assert ProtocolConfig.paper().Ps == (
        1,
        10,
        20,
        60,
        100,
        200,
        250,
        275,
        300,
        400,
        500,
        600,
        700,
        800,
    )


def test_sgld_step_rule_on_a_quadratic():
    """U(z) = z^T H z / 2 with known eigenvalues: the rule gives min(5e-4 / d, 0.1 / lambda_max)
    (power iteration on a spectrum with a gap of 2x converges to 1e-9 in 40 steps)."""
    import jax.numpy as jnp

    from bayes_attn.inference.members import sgld_step_size

    eig = jnp.array([1.0, 3.0, 50.0, 400.0, 800.0])
    Q = jnp.linalg.qr(jnp.arange(25.0).reshape(5, 5) ** 1.5 + jnp.eye(5))[0]
    H = [Q @ jnp.diag(eig * s) @ Q.T for s in (1.0, 1e3)]  # a soft member and a stiff one

    def U(m, z):
        return 0.5 * z @ jnp.where(m == 0, H[0], H[1]) @ z

    z = jnp.ones((2, 5))
    assert sgld_step_size(U, z, 8) == pytest.approx(0.1 / 8e5, rel=1e-9)  # the stiffest member
    assert sgld_step_size(U, z[:1], 8) == 5e-4 / 8  # soft: 0.1 / 800 > 5e-4 / 8, the cap holds


def test_default_sgld_step_keeps_stiff_networks_finite():
    """sigma^2 = 5 at P = 100 (L = 6, V = 3, width 8): the data term is stiff (lambda_max ~ P / sigma^2),
    and the old fixed step 5e-4 / d diverged for softmax; the curvature rule keeps every draw finite,
    with a step below 0.1 / lambda_max recorded per member."""
    cfg = ProtocolConfig.quick(activations=("softmax",), Ps=(100,), level1=False, **TINY)
    ds, _ = run_protocol(cfg, ba.Hyper.paper().replace(sigma2=0.5), progress=False)
    assert np.all(np.isfinite(ds.sgld_train_loss.values))
    assert float(ds.sgld_train_loss.max()) < 1.0
    assert np.all(ds.sgld_step.values <= 5e-4 / 8)
