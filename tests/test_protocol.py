"""The paper protocol, shrunk: it runs end to end, stores what it promises, and reads TOML configs."""

import numpy as np
import pytest

import bayes_attn as ba
from bayes_attn.analysis.protocol import ProtocolConfig, run_protocol

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
