"""The paper protocol, shrunk: it runs end to end, stores what it promises, and reads TOML configs."""

import dataclasses

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


def test_protocol_keys_are_named_and_independent_per_point():
    """Every key the protocol draws has a name (held-out set; per point: data, Adam, SGLD, NUTS), a
    point's keys depend on its values only, and no two points or purposes share a key: in
    particular (seed 0, P = 200) and (seed 1, P = 100) no longer share Adam's initial weights, as
    they did when Adam's seed was ``seed + j``. Independence is checked on 4096 normal draws per
    key: every pairwise correlation below 4 / sqrt(4096) = 0.0625 (4 sd of a null correlation)."""
    import jax

    from bayes_attn.experiments.protocol import (
        PointKeys,
        ProtocolKeys,
        held_out,
        member_datasets,
        protocol_keys,
    )

    assert ProtocolKeys._fields == ("held_out", "points")
    assert PointKeys._fields == ("data", "adam", "sgld", "nuts")
    keys = protocol_keys(0)
    points = [("linear", 100), ("linear", 200), ("softmax", 100)]
    named = [keys.held_out] + [k for a, P in points for k in keys.point(a, P)]
    named.append(protocol_keys(1).point("linear", 100).adam)
    data = np.stack([np.asarray(jax.random.key_data(k)).ravel() for k in named])
    assert len({tuple(d) for d in data}) == len(named)
    draws = np.stack([np.asarray(jax.random.normal(k, (4096,))) for k in named])
    corr = np.corrcoef(draws) - np.eye(len(named))
    assert np.abs(corr).max() < 4 / np.sqrt(4096)
    # values, not grid positions: the same point in two grids draws the same data
    a = ProtocolConfig.quick(Ps=(100,), **TINY)
    b = ProtocolConfig.quick(Ps=(20, 100), activations=("softmax", "linear"), **TINY)
    np.testing.assert_array_equal(
        member_datasets(a, "linear", 100), member_datasets(b, "linear", 100)
    )
    np.testing.assert_array_equal(held_out(a), held_out(b))
    assert protocol_keys(key=jax.random.key(0)).point("linear", 100).adam is not None
    with pytest.raises(ValueError, match="activation"):
        keys.point("relu", 100)
    with pytest.raises(ValueError, match="P"):
        keys.point("linear", 0)


def test_protocol_point_takes_values_and_the_index_form_warns(monkeypatch):
    """``protocol_point(cfg, hyper, "linear", 100)`` draws the point's datasets and Adam key; the
    old ``(i, j)`` form reaches the same point with a DeprecationWarning. Adam is stubbed: it
    records what it was given and stops the point (the whole point runs in the end-to-end test)."""
    import jax

    from bayes_attn.experiments import protocol

    seen = []

    class Stop(Exception):
        pass

    def stub(task, hyper, act, d_model, P, *, tokens, key, **kw):
        seen.append((act, P, np.asarray(tokens), np.asarray(jax.random.key_data(key))))
        raise Stop

    monkeypatch.setattr(protocol, "train_adam", stub)
    cfg = ProtocolConfig.quick(activations=("linear",), Ps=(20, 100), **TINY)
    hyper = ba.Hyper.paper()
    with pytest.raises(Stop):
        protocol.protocol_point(cfg, hyper, "linear", 100)
    with pytest.warns(DeprecationWarning, match="activation, P"):
        with pytest.raises(Stop):
            protocol.protocol_point(cfg, hyper, 0, 1)
    (a1, P1, tok1, key1), (a2, P2, tok2, key2) = seen
    assert (a1, P1) == (a2, P2) == ("linear", 100) and tok1.shape == (2, 100, 6)
    np.testing.assert_array_equal(tok1, tok2)
    np.testing.assert_array_equal(tok1, protocol.member_datasets(cfg, "linear", 100))
    np.testing.assert_array_equal(key1, key2)
    adam = protocol.protocol_keys(cfg.seed).point("linear", 100).adam
    np.testing.assert_array_equal(key1, jax.random.key_data(adam))


def test_config_holds_an_adam_settings_and_reads_the_old_flat_keys(tmp_path):
    """ProtocolConfig holds an AdamSettings (issue 44), not copies of its fields: flat keys (the
    old fields) and a [protocol.adam] table both go into it; the warm-up is AdamSettings'; the
    flat view (attrs, sweep options) keeps the old names and order; every shipped config loads."""
    from pathlib import Path

    from bayes_attn.experiments.protocol import PROTOCOL_ADAM
    from bayes_attn.inference.adam import AdamSettings

    cfg = ProtocolConfig.quick(lr=3e-3, max_steps=40, num_test=7)
    assert cfg.adam == AdamSettings(
        lr=3e-3, max_steps=40, num_test=7, decay="cosine", train_embeddings=False
    )
    assert cfg.adam_for("softmax") == cfg.adam.with_warmup("softmax", 0.1, 1e-4)
    assert cfg.adam_for("linear").warmup_steps == 0
    assert ProtocolConfig.paper().adam == PROTOCOL_ADAM
    flat = cfg.flat()
    assert list(flat)[:8] == [
        "L",
        "V",
        "tokens",
        "Ps",
        "members",
        "num_test",
        "d_model",
        "activations",
    ]
    assert (flat["lr"], flat["max_steps"], flat["num_test"]) == (3e-3, 40, 7)
    assert ProtocolConfig.of(**{k: v for k, v in flat.items()}) == cfg
    f = tmp_path / "a.toml"
    f.write_text("[protocol]\nPs = [10]\n[protocol.adam]\nlr = 0.003\nmax_steps = 50\n")
    assert ProtocolConfig.from_toml(f).adam == dataclasses.replace(
        PROTOCOL_ADAM, lr=0.003, max_steps=50
    )
    with pytest.raises(TypeError, match="bogus"):
        ProtocolConfig.of(adam={"bogus": 1})
    with pytest.raises(ValueError, match="factorized"):
        ProtocolConfig.of(adam={"factorized": True})
    configs = Path(ba.__file__).parent / "configs"
    for toml in sorted(configs.glob("protocol_*.toml")):
        assert isinstance(ProtocolConfig.from_toml(toml).adam, AdamSettings), toml.name
