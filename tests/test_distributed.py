"""Several processes: two CPU processes on 127.0.0.1 register with ``jax.distributed``, each
trains its share of a sweep over P on its own two local devices (members sharded, in two groups
because of a memory limit), and writes a NetCDF file; the merged files equal a one-process,
one-device run. Plus the share and merge logic on their own.
"""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayes_attn.distributed import initialize_distributed, merge_netcdf, process_share

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))
import _scaling_case as case  # noqa: E402

TOL = dict(rtol=1e-9, atol=1e-12)  # float64; the layouts differ by rounding at most

WORKER = textwrap.dedent(
    f"""
    import sys
    sys.path.insert(0, {str(TESTS)!r})
    # the whole package first: nothing in it may start the JAX backend at import
    import bayes_attn.plotting.figures, bayes_attn.experiments.protocol, bayes_attn.experiments.sweep
    import bayes_attn.cli, bayes_attn.inference, bayes_attn.theory
    from bayes_attn.distributed import initialize_distributed, process_share

    info = initialize_distributed(initialization_timeout=120)  # from the BAYES_ATTN_* variables

    import jax
    import xarray as xr
    import _scaling_case as case
    from bayes_attn.inference import estimate_bytes

    assert jax.process_count() == 2 and jax.process_index() == info.process_id
    assert len(jax.local_devices()) == 2, jax.local_devices()
    task, _ = case.task_and_hyper()
    out = sys.argv[1]
    points = []
    for P in process_share(case.PS, info.process_id, info.num_processes):
        # room for one member per device: two groups of two, the second one padded
        limit = estimate_bytes(task, case.D_MODEL, P, 1, batch_size=6, num_test=8)
        ds = case.train(P, memory_limit=limit, return_params=True)
        assert ds.attrs["devices"] == 2 and ds.attrs["member_groups"] == 2, ds.attrs
        ds.to_netcdf(f"{{out}}/full-P{{P}}.nc", engine="h5netcdf")
        points.append(case.sweep_point(ds))
    xr.concat(points, "P").to_netcdf(f"{{out}}/part-{{info.process_id}}.nc", engine="h5netcdf")
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # over 20 s on 2 cores: the default suite's 10-minute budget
def test_two_processes_match_one_process(tmp_path):
    port = _free_port()
    procs = []
    for pid in range(2):
        env = {
            **os.environ,
            "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
            "JAX_PLATFORMS": "cpu",
            "BAYES_ATTN_COORDINATOR": f"127.0.0.1:{port}",
            "BAYES_ATTN_NUM_PROCESSES": "2",
            "BAYES_ATTN_PROCESS_ID": str(pid),
        }
        env.pop("BAYES_ATTN_MEMORY_LIMIT", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(tmp_path)],
                env=env,
                cwd=TESTS.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        ref = {P: case.baseline(P) for P in case.PS}  # one process, one device, one group
        logs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log
    parts = sorted(tmp_path.glob("part-*.nc"))
    assert len(parts) == 2
    merged = merge_netcdf(parts, "P", tmp_path / "all.nc", expected=case.PS)
    expected = xr.concat([case.sweep_point(ref[P]) for P in case.PS], "P")
    xr.testing.assert_allclose(merged, expected, **TOL)
    for P in case.PS:  # the whole training traces too
        with xr.open_dataset(tmp_path / f"full-P{P}.nc", engine="h5netcdf") as ds:
            xr.testing.assert_allclose(ds.load(), ref[P], **TOL)
    # the members stopped at different steps, so the grouped runs padded their records
    assert len(np.unique(ref[case.PS[1]].stopped_at.values)) > 1


IMPORT_ALL = """
import importlib, pkgutil, sys
import bayes_attn
from jax._src import xla_bridge
names = [m.name for m in pkgutil.walk_packages(bayes_attn.__path__, "bayes_attn.")]
for name in names:
    importlib.import_module(name)
    assert not xla_bridge.backends_are_initialized(), name
print(len(names))
"""


def test_nothing_is_computed_at_import():
    """Every module imports without starting the JAX backend (which would make
    initialize_distributed fail when it is not called first)."""
    res = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert int(res.stdout) > 30


def test_shares_partition_the_items():
    items = list(range(7))
    for interleave in (False, True):
        shares = [process_share(items, i, 3, interleave=interleave) for i in range(3)]
        assert sorted(sum(shares, [])) == items
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert process_share(items, 1, 3) == [3, 4]
    assert process_share(items, 1, 3, interleave=True) == [1, 4]
    assert process_share([1, 2], 3, 4) == []
    assert process_share(items) == items  # one process
    with pytest.raises(ValueError, match="process_id"):
        process_share(items, 3, 3)


def test_initialize_is_a_no_op_for_one_process(monkeypatch):
    for var in ("BAYES_ATTN_COORDINATOR", "BAYES_ATTN_NUM_PROCESSES", "BAYES_ATTN_PROCESS_ID"):
        monkeypatch.delenv(var, raising=False)
    assert initialize_distributed().num_processes == 1
    assert initialize_distributed(num_processes=1).process_id == 0
    with pytest.raises(ValueError, match="process_id"):
        initialize_distributed(num_processes=2)
    with pytest.raises(ValueError, match=r"process_id must lie in \[0, num_processes\)"):
        initialize_distributed("127.0.0.1:1", 2, 2)
    with pytest.raises(ValueError, match="coordinator"):
        initialize_distributed("nohost", 2, 0)
    monkeypatch.setenv("BAYES_ATTN_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match="BAYES_ATTN_NUM_PROCESSES"):
        initialize_distributed()


def test_merge_checks_overlaps_and_gaps(tmp_path):
    def part(name, Ps):
        ds = xr.Dataset({"x": (("P", "member"), np.outer(Ps, [1.0, 2.0]))}, coords={"P": Ps})
        ds.to_netcdf(tmp_path / name, engine="h5netcdf")
        return tmp_path / name

    a, b, c = part("a.nc", [30, 10]), part("b.nc", [20]), part("c.nc", [20, 40])
    merged = merge_netcdf([a, b], "P", expected=[10, 20, 30])
    assert merged.P.values.tolist() == [10, 20, 30]
    np.testing.assert_array_equal(merged.x.values[:, 1], [20.0, 40.0, 60.0])
    with pytest.raises(ValueError, match=r"overlap.*\[20\]"):
        merge_netcdf([a, b, c], "P")
    with pytest.raises(ValueError, match=r"gap.*missing.*\[40\]"):
        merge_netcdf([a, b], "P", expected=[10, 20, 30, 40])
    with pytest.raises(ValueError, match="coordinate 'member'"):
        merge_netcdf([a], "member")


# --------------------------------------------------------------------------------------------------
# Claims: independent processes share the items of one output


def _dead_pid() -> int:
    """The id of a process of this host that has ended."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def test_a_claim_is_held_once_and_a_live_one_is_respected(tmp_path):
    from bayes_attn.distributed import Claim

    mine, theirs = Claim(tmp_path / "point"), Claim(tmp_path / "point")
    assert mine.acquire() and not theirs.acquire()  # this process is alive: its claim holds
    assert mine.holder()["pid"] == os.getpid()
    mine.release()
    assert not (tmp_path / "point").exists()
    assert theirs.acquire()
    theirs.release()


@pytest.mark.parametrize("who", ["a dead process of this host", "a silent process elsewhere"])
def test_a_stale_claim_is_taken_over(tmp_path, who):
    """A claim of a process that has ended (same host: its pid is gone), or one not touched for
    longer than the timeout (another host, whose processes cannot be asked), is taken over; a
    recent claim from another host is not."""
    import json
    import socket as sk

    from bayes_attn.distributed import Claim

    path = tmp_path / "point"
    if who.startswith("a dead"):
        path.write_text(json.dumps({"host": sk.gethostname(), "pid": _dead_pid(), "token": "x"}))
    else:
        path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "token": "x"}))
        assert not Claim(path, timeout=60).acquire()  # recent: still theirs
        os.utime(path, (os.path.getmtime(path) - 120,) * 2)
    claim = Claim(path, timeout=60)
    assert claim.acquire()
    assert json.loads(path.read_text())["pid"] == os.getpid()
    claim.release()
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_a_held_claim_has_a_heartbeat(tmp_path):
    import time

    from bayes_attn.distributed import Claim

    claim = Claim(tmp_path / "point", timeout=0.6)  # touched every 0.1 s
    assert claim.acquire()
    time.sleep(1.0)
    assert claim.holder()["age"] < 0.6 and not Claim(tmp_path / "point", timeout=0.6).acquire()
    claim.release()


def test_gather_parts_of_one_process_is_the_result(tmp_path):
    from bayes_attn.distributed import ProcessInfo, gather_parts, part_paths

    ds = xr.Dataset({"x": ("member", np.arange(3.0))})
    assert gather_parts(ds, tmp_path / "out.nc", ProcessInfo(0, 1, None), merge=None) is ds
    assert [p.name for p in part_paths(tmp_path / "out.nc", 2)] == [
        "out.nc.part-0-of-2.nc", "out.nc.part-1-of-2.nc",
    ]  # fmt: skip
