"""The structured-token study (issue 42 part 3, bayes_attn.experiments.tokens_study): its configs
run end to end at their quick size, the equal-action search reproduces the uniform level1 study's
number, and the token-only predictor's loss is exact."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bayes_attn
from bayes_attn.experiments import tokens_study as ts
from bayes_attn.experiments.sweep import SweepConfig, load_sweep, read_sweep_table, run_sweep
from bayes_attn.task import Hyper
from bayes_attn.tokens import Markov, Zipf

CONFIGS = Path(bayes_attn.__file__).parent / "configs"
SCRIPTS = Path(__file__).parents[1] / "docs" / "scripts"


def _quick(name):
    return SweepConfig.from_dict(read_sweep_table(CONFIGS / name, quick=True))


def test_token_only_loss_is_exact():
    """Against a direct Monte Carlo of the reversed chain's prediction (10^5 sequences; the loss
    is a mean of bounded terms in [0, 1], so 5 standard errors is < 0.004)."""
    import jax

    V, L = 4, 6
    source = Markov(alpha=0.3, seed=1)
    exact = ts.token_only_loss(source, V, L)
    T = source.matrix(V)
    pi = np.linalg.matrix_power(T, 200)[0]
    R = pi[None, :] * T.T / pi[:, None]
    ahead = np.linalg.matrix_power(T, L - 1)
    x = np.asarray(source.sample(jax.random.key(0), 100_000, L, V))
    y = np.eye(V)[np.roll(x, 1, axis=1)]  # y[a] = x[a-1 mod L]
    f = R[x]
    f[:, 0] = ahead[x[:, 0]]
    terms = 0.5 * ((y - f) ** 2).sum(-1).mean(-1)
    se = terms.std() / np.sqrt(terms.size)
    assert abs(terms.mean() - exact["token_only"]) < 5 * se
    assert exact["token_only"] < exact["unigram"]
    iid = ts.token_only_loss(Zipf(1.0), V, L)
    assert iid["token_only"] == pytest.approx(iid["unigram"], abs=1e-15)


def test_check_refuses_bad_options():
    with pytest.raises(ValueError, match="measure must be one of"):
        SweepConfig(kind="tokens", P=(100,), options={"measure": "nope"})
    with pytest.raises(ValueError, match="sources must be a non-empty list"):
        SweepConfig(kind="tokens", P=(100,), options={"sources": "zipf:s=1"})
    with pytest.raises(ValueError, match="tokens: s must be"):
        SweepConfig(kind="tokens", P=(100,), options={"sources": ["zipf:s=-1"]})
    with pytest.raises(ValueError, match="P: a pstar sweep has one P"):
        SweepConfig(kind="tokens", P=(100, 200))
    with pytest.raises(ValueError, match="gram_width"):
        SweepConfig(kind="tokens", P=(100,), options={"gram_width": 16})
    with pytest.raises(ValueError, match="activation: the crossover measure is linear only"):
        SweepConfig(kind="tokens", P=(100,), options={"measure": "crossover"})
    with pytest.raises(ValueError, match="pool: P = 200"):
        SweepConfig(kind="tokens", P=(200,), options={"measure": "competitor", "pool": 100})


def test_steepest_slope_and_the_crossover_search_on_a_known_path(monkeypatch):
    """The search's logic on a path whose crossover is known: cG = 2 / (1 + (P / 300)^(-3))
    (steepest in log P at P = 300) stands in for the Level-1 MAP. From P0 = 100 the coarse walk
    must climb (three steps of 1.5), the fine grid (steps of 1.5^(1/4), 10.7%) and the parabola put
    the crossover within 0.5% of 300 (the parabola's error on this grid; the largest slope's
    midpoint alone is 3.3% off, at 290), and the same estimator on 400 dense points agrees to 1e-4."""
    q = lambda P: 2.0 / (1.0 + (P / 300.0) ** -3.0)  # noqa: E731
    monkeypatch.setattr(
        ts, "_linear_map", lambda task, hyper, tokens, near: {"cG": q(len(tokens)), "M": None}
    )
    r = ts.crossover_point(None, None, np.zeros((1500, 1)), P0=100, max_evals=14)
    assert r["crossover"] == pytest.approx(300, rel=5e-3)
    assert r["lo"] <= r["crossover"] <= r["hi"] and r["hi"] / r["lo"] < 1.15
    assert r["evals"] <= 14 and np.isfinite(r["path_P"]).sum() == r["evals"]
    assert r["path_cG"][: r["evals"]] == pytest.approx(q(r["path_P"][: r["evals"]]))
    dense = np.geomspace(100, 900, 400)
    assert ts.steepest_slope(dense, q(dense))["crossover"] == pytest.approx(300, rel=1e-4)
    assert ts.steepest_slope(dense, q(dense))["slope"] == pytest.approx(1.5, rel=1e-4)  # 3 * 2 / 4
    # the steepest slope at the pool's end: no crossover in range
    edge = ts.crossover_point(None, None, np.zeros((320, 1)), P0=100, max_evals=14)
    assert np.isnan(edge["crossover"])


@pytest.mark.slow
def test_crossover_point_against_level2_and_its_own_maps():
    """A small case (L = 6, V = 3, sigma^2 = 5, dataset 0, pool 200): the Level-1 MAP's crossover
    lies within 10% of Level 2's 33.87 (the Level-1 and Level-2 points differ by O(1/P) on one
    dataset, 35.26 here), and the path's cG at two P equals a cold Level-1 MAP from the default
    start (the continuation found the global minimum). About 3 min on a loaded core."""
    from bayes_attn import algebra
    from bayes_attn.theory.level1 import level1_map

    hyper = Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=5.0)
    task = ts._task(6, 3, "uniform")
    pool = ts._pool(task, 0, 200)
    r = ts.crossover_point(task, hyper, pool, P0=34)
    assert r["crossover"] == pytest.approx(33.87, rel=0.1)
    assert r["lo"] <= r["crossover"] <= r["hi"]
    for P, cG in list(zip(r["path_P"], r["path_cG"], strict=True))[2:4]:
        m = level1_map(task, hyper, pool[: int(P)], "linear")
        assert float(algebra.z2_sign(m.c1, m.cG)) * m.cG == pytest.approx(cG, abs=1e-6)


@pytest.mark.parametrize("threshold", [150.5, 274.5, 275.5, 276.5, 281.5, 400.5])
@pytest.mark.parametrize("jump", [1.0, 100.0, 1e4])
def test_equal_action_search_narrows_to_a_new_p_every_time(monkeypatch, threshold, jump):
    """The bracket's narrowing never rounds a probe back onto an end (where it evaluated nothing
    new and spun for ever: chain 1 of alpha = 10 on Table 1). A step gap, +jump below the
    threshold and -1 above (a secant that lands next to the lower end), is bracketed to at most 2
    sequences (the search's floor) around the threshold, each P evaluated once."""
    calls = []

    def pair(task, hyper, tokens, gram, aG_split):
        P = int(tokens.shape[0])
        calls.append(P)
        return {"P": P, "gap": jump if P < threshold else -1.0, "aG": 0.0}

    monkeypatch.setattr(ts, "_pair", pair)
    r = ts.equal_action_point(None, None, np.zeros((1500, 3)), rtol=0.001, max_evals=40)
    assert len(calls) == len(set(calls)) == r["evals"] < 40
    assert r["lo"] < threshold < r["hi"] <= r["lo"] + 2


@pytest.mark.slow
def test_equal_action_point_reproduces_the_level1_study():
    """Uniform tokens, Table 1, dataset 0: docs/validation.md's level1_transition table has the
    equal-action P 268.9 on the nested datasets of key 0 (grid of 4, linear interpolation); the
    search brackets it to 1% and interpolates the same gap (about 2 min)."""
    task = ts._task(25, 5, "uniform")
    r = ts.equal_action_point(task, Hyper.paper(), ts._pool(task, 0, 320))
    assert r["lo"] <= r["pstar"] <= r["hi"] and r["hi"] - r["lo"] <= 3
    assert r["pstar"] == pytest.approx(268.9, abs=0.6)
    assert r["aG_lo"] < 1.0 < 2.0 < r["aG_hi"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tokens_zipf.toml", "tokens_competitor.toml"])
def test_tokens_config_runs(tmp_path, name):
    cfg = _quick(name)
    ds = run_sweep(cfg, tmp_path / "t.nc", progress=False)
    assert ds["done"].all()
    back = load_sweep(tmp_path / "t.nc")
    assert back.attrs["kind"] == "tokens"
    if cfg.options["measure"] == "pstar":
        assert "source" in back.pstar.dims and back.pstar.attrs["units"] == "sequences"
        soft = back.pstar.sel(activation="softmax").values
        assert np.isfinite(soft).all()
        lin = back.pstar.sel(activation="linear").values
        assert np.isfinite(lin).all() and (lin < soft).all()
    else:
        assert np.isfinite(back.action).all() and back.action.sizes["start"] == 3
        assert (back.loss_token_only < back.loss_unigram).all()
    # the study's reader tabulates the file (and draws it, outside docs/figures)
    run = subprocess.run([sys.executable, str(SCRIPTS / "tokens_study.py"), str(tmp_path / "t.nc"),
                          f"--figure={tmp_path / 'f.png'}"], cwd=SCRIPTS, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "|" in run.stdout
