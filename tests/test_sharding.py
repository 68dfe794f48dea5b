"""Scaling out on one host: the memory estimate, the automatic grouping of members that do not fit
at once, and the sharding helpers. train_adam split over two devices is checked in
tests/test_distributed.py, whose processes have two CPU devices each
(``XLA_FLAGS=--xla_force_host_platform_device_count=2`` must be set before JAX is imported, so
that needs a subprocess); the protocol's SGLD stage on two devices is a slow test here.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

from bayes_attn.experiments.protocol import ProtocolConfig, _sgld_stage
from bayes_attn.inference import estimate_bytes, members_per_group, memory_limit, sharded_map
from bayes_attn.inference.adam import _chunk_program, adam_optimizer
from bayes_attn.inference.memory import format_bytes, parse_bytes
from bayes_attn.inference.sharding import member_mesh, pad_leading, unpad_leading
from bayes_attn.models.network import init_params

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))
import _scaling_case as case  # noqa: E402

TASK, HYPER = case.task_and_hyper()
P = case.PS[1]
TOL = dict(rtol=1e-9, atol=1e-12)  # float64; the two layouts differ by rounding at most
SGLD_CFG = ProtocolConfig.quick(
    L=TASK.L, V=TASK.V, members=3, d_model=case.D_MODEL, sgld_warmup=3, sgld_samples=4, batch_size=6
)


def _sgld(ds):
    """The protocol's SGLD stage from the ensemble's final parameters."""
    tokens = jax.random.randint(jax.random.key(7), (3, P, TASK.L), 0, TASK.V)
    test = TASK.sample(jax.random.key(8), 5)
    params = {n: jnp.asarray(ds[n].values) for n in ("W_emb", "p", "W_G", "W_O")}
    return _sgld_stage(SGLD_CFG, TASK, HYPER, "softmax", tokens, test, params, jax.random.key(9))


TWO_DEVICES = textwrap.dedent(
    f"""
    import sys
    import numpy as np
    sys.path.insert(0, {str(TESTS)!r})
    import test_sharding as t
    import jax, jax.numpy as jnp
    from bayes_attn.inference import sharded_map

    assert len(jax.local_devices()) == 2, jax.local_devices()
    # five entries over two devices: padded to six, the padding dropped
    out = jax.jit(lambda x: sharded_map(lambda v, c: v * c + 1, x, 2.0))(jnp.arange(5.0))
    assert out.shape == (5,) and np.allclose(out, 2 * np.arange(5.0) + 1), out
    ds = t.case.baseline(t.P)
    np.savez(sys.argv[1] + "/sgld.npz", **t._sgld(ds))
    """
)


@pytest.mark.slow
def test_sgld_stage_on_two_devices_matches_one_device(tmp_path):
    """The protocol's SGLD stage under sharded_map over two CPU devices (three members: padded to
    four) gives the one-device values to 1e-9. (train_adam on two devices is checked in
    tests/test_distributed.py, whose processes have two devices each.)"""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", TWO_DEVICES, str(tmp_path)],
        env=env,
        cwd=TESTS.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ref_sgld = _sgld(case.baseline(P))  # runs while the subprocess does
    log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log
    got = np.load(tmp_path / "sgld.npz")
    for k, v in ref_sgld.items():
        np.testing.assert_allclose(got[k], v, **TOL, err_msg=k)


def test_memory_limit_groups_the_members_with_the_same_results():
    """A limit with room for one member: three groups of one, each member's keys those of the whole
    ensemble, and records of members that stopped early carried to the last step."""
    limit = estimate_bytes(TASK, case.D_MODEL, P, 1, batch_size=6, num_test=8)
    assert estimate_bytes(TASK, case.D_MODEL, P, 3, batch_size=6, num_test=8) > limit
    one = jax.local_devices()[:1]
    grouped = case.train(P, devices=one, memory_limit=limit, return_params=True)
    assert grouped.attrs["member_groups"] == 3
    ref = case.baseline(P)
    assert ref.attrs["member_groups"] == 1
    xr.testing.assert_allclose(grouped, ref, **TOL)


def test_one_member_too_big_raises_naming_d_model(monkeypatch):
    monkeypatch.setenv("BAYES_ATTN_MEMORY_LIMIT", "1kB")
    with pytest.raises(
        MemoryError, match=r"d_model=6.*estimated [0-9.]+ KiB.*memory limit of 1000 B"
    ):
        case.train(P)
    with pytest.raises(MemoryError, match="d_model=4096.*GiB"):
        members_per_group(TASK, 4096, P, 10, limit=parse_bytes("1GiB"))


def test_limits_and_units(monkeypatch):
    assert parse_bytes("2GB") == 2 * 10**9 and parse_bytes("1.5 GiB") == 3 * 2**29
    assert parse_bytes("512M") == 512 * 10**6 and parse_bytes(8e9) == 8 * 10**9
    assert format_bytes(3 * 2**29) == "1.50 GiB" and format_bytes(12) == "12 B"
    for bad in ("lots", "2XB", "-1GB", 0, True):
        with pytest.raises(ValueError, match="memory_limit"):
            parse_bytes(bad)
    monkeypatch.delenv("BAYES_ATTN_MEMORY_LIMIT", raising=False)
    assert memory_limit() is None  # the CPU reports no bytes_limit
    monkeypatch.setenv("BAYES_ATTN_MEMORY_LIMIT", "3MiB")
    assert memory_limit() == 3 * 2**20
    assert memory_limit(memory_limit="1GB") == 10**9  # the argument wins
    monkeypatch.setenv("BAYES_ATTN_MEMORY_LIMIT", "much")
    with pytest.raises(ValueError, match="BAYES_ATTN_MEMORY_LIMIT"):
        memory_limit()
    big = estimate_bytes(TASK, 64, P, 7)
    assert members_per_group(TASK, 64, P, 7, limit=None) == 7
    assert members_per_group(TASK, 64, P, 7, limit=big) == 7
    fit = members_per_group(TASK, 64, P, 7, limit=big // 2, n_devices=2)
    assert fit % 2 == 0 and 2 <= fit < 7
    with pytest.raises(ValueError, match="d_model"):
        estimate_bytes(TASK, 0, P, 1)


def test_padding_helpers():
    keys = jax.random.split(jax.random.key(0), 3)
    tree = {"k": keys, "x": jnp.arange(3.0)}
    padded, n = pad_leading(tree, 2)
    assert n == 3 and padded["x"].tolist() == [0.0, 1.0, 2.0, 2.0]
    assert jnp.all(jax.random.key_data(padded["k"][3]) == jax.random.key_data(keys[2]))
    assert unpad_leading(padded, n)["x"].shape == (3,)
    with pytest.raises(ValueError, match="leading"):
        pad_leading({"a": jnp.ones(2), "b": jnp.ones(3)}, 2)
    with pytest.raises(ValueError, match="devices"):
        member_mesh([])
    # one device: plain lax.map
    out = jax.jit(lambda x: sharded_map(lambda v: v**2, x, mesh=member_mesh()))(jnp.arange(3.0))
    assert out.tolist() == [0.0, 1.0, 4.0]


@pytest.mark.parametrize(
    "d_model, P_, factorized, batch_size",
    [(64, 4, True, None), (4, 300, False, 100)],
    ids=["parameters", "sequences"],
)
def test_estimate_bounds_the_compiled_chunk(d_model, P_, factorized, batch_size):
    """The resident state is exact (nbytes of params and Adam state, 3 floats per parameter), and
    the whole estimate lies between 1x and 2x of XLA's memory_analysis() of the compiled chunk
    (arguments + outputs + temporaries), for a chunk dominated by the d^2 parameters and for one
    dominated by the per-sequence activations."""
    members, num_test = 3, 20
    opt = adam_optimizer(1e-3, patience=10)
    params = jax.eval_shape(
        lambda k: jax.vmap(lambda k: init_params(k, TASK, HYPER, d_model, factorized))(
            jax.random.split(k, members)
        ),
        jax.random.key(0),
    )
    opt_state = jax.eval_shape(jax.vmap(opt.init), params)
    state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves((params, opt_state)))
    n_params = sum(x.size for x in jax.tree.leaves(params)) // members
    scalars = state_bytes - 3 * 8 * n_params * members  # Adam's count, early stopping's state
    assert 0 <= scalars <= 64 * members
    est = estimate_bytes(
        TASK, d_model, P_, members, factorized=factorized, batch_size=batch_size, num_test=num_test
    )
    prog = _chunk_program(
        opt, HYPER, "softmax", P_, TASK.L, batch_size, member_mesh(jax.local_devices()[:1])
    )
    keys = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), (members, 10)))
    tok = jax.ShapeDtypeStruct((members, P_, TASK.L), jnp.int32)
    test = jax.ShapeDtypeStruct((num_test, TASK.L), jnp.int32)
    mem = prog.lower(params, opt_state, keys, tok, {}, test).compile().memory_analysis()
    measured = (
        mem.argument_size_in_bytes
        + mem.output_size_in_bytes
        + mem.temp_size_in_bytes
        - mem.alias_size_in_bytes
    )
    assert measured <= est <= 2 * measured, (est, measured)
