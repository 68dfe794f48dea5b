"""Token sources (bayes_attn.tokens): the uniform default draws exactly what the package drew before
sources existed; every other source draws its law; specs, attrs and configs round-trip; bad input
is one line naming the parameter.

Statistical checks use fixed seeds, so each is deterministic; the error budget says how often it
would fail if the seed were random and the sampler right: a chi-square test at p > 1e-4 (a 1e-4
false-alarm rate), or z-scores within 5 standard errors (about 6e-7 per score).
"""

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from scipy import stats

import bayes_attn as ba
from bayes_attn.cli import main
from bayes_attn.task import preset_attrs, preset_from_attrs
from bayes_attn.tokens import (
    InContextMarkov,
    Markov,
    Uniform,
    Zipf,
    check_uniform,
    parse_tokens,
    stationary,
)

# Computed with the code before token sources (an untouched checkout, `task.sample` being
# `jax.random.randint(key, (P, L), 0, V, dtype=int32)`): draws, the protocol's data draws and one
# protocol point of the quick preset shrunk (REF_PROTOCOL), value for value.
REF = json.loads((Path(__file__).parent / "data" / "uniform_reference.json").read_text())
REF_PROTOCOL = dict(
    Ps=(20,), members=2, d_model=8, max_steps=30, patience=30, sgld_warmup=3, sgld_samples=4,
    num_test=8, L=6, V=3,
)  # fmt: skip
P_ALARM = 1e-4  # chi-square tests: the p-value must exceed this
Z_MAX = 5.0  # z tests: every score within this many standard errors

SOURCES = [
    Uniform(),
    Zipf(1.0),
    Zipf(0.0),
    Markov.dirichlet(0.3, seed=2),
    Markov([[0.9, 0.1, 0.0], [0.2, 0.5, 0.3], [0.25, 0.25, 0.5]]),
    InContextMarkov(1.0),
    InContextMarkov(0.5, doubly_stochastic=True),
]


# --------------------------------------------------------------------------------------------------
# The uniform default, bit for bit


def test_uniform_draws_are_the_old_randint_draws():
    task = ba.CopyTask(25, 5)
    assert task.tokens == Uniform() and task == ba.CopyTask(25, 5, Uniform())
    np.testing.assert_array_equal(task.sample(jax.random.key(0), 3), REF["draws_25_5_key0_P3"])
    got = ba.CopyTask(7, 11).sample(jax.random.key(123), 2)
    np.testing.assert_array_equal(got, REF["draws_7_11_key123_P2"])
    assert got.dtype == np.int32
    key = jax.random.key(9)  # and it is randint itself, whatever the shape
    np.testing.assert_array_equal(
        ba.CopyTask(13, 4).sample(key, 17), jax.random.randint(key, (17, 13), 0, 4, dtype="int32")
    )


def test_protocol_and_model_data_are_the_old_draws():
    from bayes_attn.experiments.protocol import ProtocolConfig, held_out, member_datasets
    from bayes_attn.models.levels import model_with_data

    cfg = ProtocolConfig.quick(**REF_PROTOCOL)
    assert cfg.tokens == "uniform"
    np.testing.assert_array_equal(held_out(cfg), REF["held_out"])
    np.testing.assert_array_equal(
        member_datasets(cfg, "linear", 20), REF["member_datasets_linear_20"]
    )
    _, args, _ = model_with_data("kernel", ba.CopyTask(5, 4), ba.Hyper.paper(), 6, "linear", seed=3)
    np.testing.assert_array_equal(args[2], REF["model_with_data_kernel_5_4_P6_seed3"])


@pytest.mark.slow
def test_a_protocol_point_is_unchanged_bit_for_bit():
    """About a minute on a loaded 2-core machine (Adam and SGLD compile), hence slow."""
    from bayes_attn.experiments.protocol import ProtocolConfig, protocol_point

    cfg = ProtocolConfig.quick(**REF_PROTOCOL)
    out, _ = protocol_point(cfg, ba.Hyper.paper(), "linear", 20)
    ref = REF["protocol_point"]
    for k, v in out.items():
        if k == "adam_A_bar":
            assert float(np.asarray(v).sum()) == ref["adam_A_bar_sum"][0]
            continue
        np.testing.assert_array_equal(np.asarray(v, dtype=float).ravel(), ref[k], err_msg=k)


# --------------------------------------------------------------------------------------------------
# Each source draws its law


# One shape for the per-sequence checks (long sequences, so that every sequence's transition
# counts are large), one for the start laws (many sequences): few compilations.
LONG = dict(P=30, L=3000, V=3)
MANY = dict(P=20000, L=2, V=3)
T3 = np.array([[0.9, 0.1, 0.0], [0.2, 0.5, 0.3], [0.25, 0.25, 0.5]])


@pytest.fixture(scope="module", params=[False, True], ids=["dirichlet", "doubly"])
def icl_long(request):
    src = InContextMarkov(1.0) if not request.param else InContextMarkov(0.5, True)
    x, T = src.sample_with_chains(jax.random.key(6), **LONG)
    return request.param, np.asarray(x), np.asarray(T)


@pytest.mark.parametrize("source", SOURCES, ids=str)
def test_every_source_draws_int32_tokens_in_range(source):
    x = ba.CopyTask(LONG["L"], 3, source).sample(jax.random.key(1), LONG["P"])
    assert x.shape == (LONG["P"], LONG["L"]) and x.dtype == np.int32
    assert int(x.min()) >= 0 and int(x.max()) < 3
    again = ba.CopyTask(LONG["L"], 3, source).sample(jax.random.key(1), LONG["P"])
    np.testing.assert_array_equal(x, again)  # a key gives the same draw


def test_zipf_frequencies_chi_square():
    V, s = 6, 1.3
    x = np.asarray(Zipf(s).sample(jax.random.key(2), 100, 1000, V)).ravel()  # 1e5 tokens
    p = np.arange(1, V + 1) ** -s
    p /= p.sum()
    counts = np.bincount(x, minlength=V)
    assert stats.chisquare(counts, x.size * p).pvalue > P_ALARM
    flat = np.bincount(np.asarray(Zipf(0).sample(jax.random.key(3), 100, 1000, V)).ravel())
    assert stats.chisquare(flat).pvalue > P_ALARM  # s = 0 is uniform
    assert Zipf(0).uniform_law and not Zipf(1).uniform_law


def _transition_z(tokens, T):
    """z-scores of the counts of every transition i -> j against n_i T_ij (binomial errors),
    over entries with T_ij in (0, 1); and the count of transitions T forbids."""
    x = np.asarray(tokens)
    V = T.shape[0]
    n = np.zeros((V, V))
    np.add.at(n, (x[:, :-1].ravel(), x[:, 1:].ravel()), 1)
    rows = n.sum(1, keepdims=True)
    var = rows * T * (1 - T)
    inside = var > 0
    z = (n - rows * T)[inside] / np.sqrt(var[inside])
    return z, n[T == 0].sum()


def test_markov_transitions_and_stationary_start():
    src = Markov(T3)
    z, forbidden = _transition_z(src.sample(jax.random.key(4), **LONG), T3)
    assert np.abs(z).max() < Z_MAX and forbidden == 0
    pi = np.asarray(stationary(T3))
    np.testing.assert_allclose(pi @ T3, pi, atol=1e-14)
    x = np.asarray(src.sample(jax.random.key(5), **MANY))
    for position in (0, 1):  # the start is stationary, so is every position
        counts = np.bincount(x[:, position], minlength=3)
        assert stats.chisquare(counts, x.shape[0] * pi).pvalue > P_ALARM


def test_markov_from_a_seed_is_one_fixed_chain():
    src = Markov.dirichlet(0.3, seed=2)
    A, B = src.matrix(3), Markov.dirichlet(0.3, seed=2).matrix(3)
    np.testing.assert_array_equal(A, B)
    assert not np.allclose(A, Markov.dirichlet(0.3, seed=3).matrix(3))
    np.testing.assert_allclose(A.sum(1), 1.0, atol=1e-12)
    x, T = src.sample_with_chains(jax.random.key(5), **LONG)
    np.testing.assert_array_equal(T, A)
    z, forbidden = _transition_z(x, A)
    assert np.abs(z).max() < Z_MAX and forbidden == 0


def test_in_context_chains_each_sequence_follows_its_own_matrix(icl_long):
    doubly, x, T = icl_long
    P, V = LONG["P"], LONG["V"]
    assert T.shape == (P, V, V)
    np.testing.assert_allclose(T.sum(-1), 1.0, atol=1e-12)
    if doubly:  # so the uniform law, the start, is stationary
        np.testing.assert_allclose(T.sum(-2), 1.0, atol=1e-12)
        starts = np.bincount(x[:, 0], minlength=V)
        assert starts.min() > 0
    assert not np.allclose(T[0], T[1])  # every sequence has its own chain
    zs = [_transition_z(x[p : p + 1], T[p]) for p in range(P)]
    assert max(np.abs(z).max(initial=0.0) for z, _ in zs) < Z_MAX
    assert sum(f for _, f in zs) == 0
    # pooled chi-square of every sequence's transitions against its own matrix, both tails
    chi2 = sum(np.sum(z**2) for z, _ in zs)
    dof = sum(z.size for z, _ in zs)
    assert stats.chi2.sf(chi2, dof) > P_ALARM and stats.chi2.cdf(chi2, dof) > P_ALARM


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.3, 2.5])
def test_the_vectorised_gamma_draws_are_gamma(alpha):
    """The Dirichlet rows' Gamma draws (Marsaglia-Tsang in vectorised rounds): Kolmogorov-Smirnov
    at p > 1e-4 on 2e5 draws. Slow: each alpha compiles its rejection rounds (10 s when loaded)."""
    from bayes_attn.tokens import _log_gamma

    g = np.exp(np.asarray(_log_gamma(jax.random.key(11), alpha, (400, 500))))
    assert stats.kstest(g.ravel(), stats.gamma(alpha).cdf).pvalue > P_ALARM


def test_in_context_start_is_each_chains_stationary_law():
    x, T = InContextMarkov(1.0).sample_with_chains(jax.random.key(7), **MANY)
    pi = np.asarray(stationary(T))  # (P, V)
    np.testing.assert_allclose(np.einsum("pi,pij->pj", pi, np.asarray(T)), pi, atol=1e-12)
    first = np.eye(MANY["V"])[np.asarray(x[:, 0])]
    z = (first - pi).sum(0) / np.sqrt((pi * (1 - pi)).sum(0))
    assert np.abs(z).max() < Z_MAX
    assert np.abs(pi - 1 / MANY["V"]).max() > 0.1  # the chains' laws spread around uniform


# --------------------------------------------------------------------------------------------------
# Round trips, equality and hashing


@pytest.mark.parametrize("source", SOURCES, ids=str)
def test_spec_round_trip(source):
    assert parse_tokens(str(source)) == source
    assert hash(parse_tokens(str(source))) == hash(source)
    assert "\n" not in str(source)


def test_specs_as_written_on_the_command_line():
    assert parse_tokens("zipf:s=1") == Zipf(1.0) and str(Zipf(1.0)) == "zipf:s=1"
    assert parse_tokens("markov:alpha=0.3,seed=2") == Markov.dirichlet(0.3, 2)
    assert parse_tokens("markov:alpha=0.3") == Markov.dirichlet(0.3, 0)
    assert parse_tokens("icl-markov:alpha=1") == InContextMarkov(1.0)
    assert parse_tokens(" ICL-Markov : alpha = 1 , doubly_stochastic = true ") == InContextMarkov(
        1.0, True
    )
    assert parse_tokens("markov:transition=[[0.5,0.5],[1,0]]") == Markov(((0.5, 0.5), (1.0, 0.0)))
    assert parse_tokens("uniform") == parse_tokens(None) == Uniform()
    assert parse_tokens({"source": "zipf", "s": 2}) == Zipf(2.0)


@pytest.mark.parametrize("source", SOURCES, ids=str)
def test_attrs_round_trip(source):
    task, hyper = ba.CopyTask(7, 3, source), ba.Hyper.paper().replace(chi=12.5)
    attrs = preset_attrs(task, hyper)
    assert attrs["tokens"] == str(source)
    attrs = {k: np.asarray(v) if not isinstance(v, str) else v for k, v in attrs.items()}
    assert preset_from_attrs(attrs) == (task, hyper)


def test_old_attrs_without_tokens_read_as_uniform():
    attrs = {"L": 25, "V": 5, "chi": 30.0, "g_w": 1.0, "g_o": 1.0, "sigma2": 30.0}
    assert preset_from_attrs(attrs) == (ba.CopyTask(25, 5), ba.Hyper.paper())
    with pytest.raises(ValueError, match="sigma2"):
        preset_from_attrs({k: v for k, v in attrs.items() if k != "sigma2"})


def test_equality_hashing_and_jit_static():
    a, b = ba.CopyTask(6, 3, Zipf(1)), ba.CopyTask(6, 3, "zipf:s=1")
    assert a == b and hash(a) == hash(b)
    assert a != ba.CopyTask(6, 3) and a != ba.CopyTask(6, 3, Zipf(2))
    m = ba.CopyTask(3, 3, Markov([[0.5, 0.5, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]]))
    assert len({a, b, m, ba.CopyTask(6, 3)}) == 3

    @jax.jit
    def draw(key):
        return m.sample(key, 4)

    f = jax.jit(lambda key, task: task.sample(key, 4), static_argnums=1)
    np.testing.assert_array_equal(f(jax.random.key(0), m), draw(jax.random.key(0)))


def test_protocol_config_toml_and_sweep_carry_the_source(tmp_path):
    from bayes_attn.experiments.protocol import ProtocolConfig
    from bayes_attn.experiments.sweep import SweepConfig, protocol_sweep

    f = tmp_path / "p.toml"
    f.write_text('[protocol]\npreset = "quick"\ntokens = "zipf:s=1"\n')
    cfg = ProtocolConfig.from_toml(f)
    assert cfg.tokens == "zipf:s=1" and cfg.task().tokens == Zipf(1.0)
    f.write_text('[protocol]\ntokens = { source = "icl-markov", alpha = 0.5 }\n')
    assert ProtocolConfig.from_toml(f).task().tokens == InContextMarkov(0.5)
    sweep = protocol_sweep(cfg)
    assert sweep.tokens == "zipf:s=1" and "tokens" not in sweep.options
    assert SweepConfig.from_json(sweep.to_json()) == sweep
    old = json.loads(sweep.to_json())
    old.pop("tokens")  # a sweep file written before token sources
    assert SweepConfig.from_dict(old).tokens == "uniform"


def test_protocol_data_come_from_the_configs_source():
    from bayes_attn.experiments.protocol import ProtocolConfig, member_datasets, protocol_keys

    cfg = ProtocolConfig.quick(**{**REF_PROTOCOL, "tokens": "zipf:s=1"})
    got = np.asarray(member_datasets(cfg, "linear", 20))
    keys = jax.random.split(protocol_keys(cfg.seed).point("linear", 20).data, cfg.members)
    want = [ba.CopyTask(6, 3, Zipf(1)).sample(k, 20) for k in keys]
    np.testing.assert_array_equal(got, np.stack(want))  # vmapped as drawn one by one
    assert not np.array_equal(got, REF["member_datasets_linear_20"])


def test_protocol_skips_level2_columns_for_other_tokens():
    from bayes_attn.experiments.protocol import level2_saddle

    with pytest.warns(UserWarning, match="tokens: zipf:s=1 is not uniform"):
        assert level2_saddle(ba.CopyTask(6, 3, Zipf(1)), ba.Hyper.paper(), 20, "linear") is None


# --------------------------------------------------------------------------------------------------
# Bad input: one ValueError naming the parameter


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda: Zipf(-1), "s must be"),
        (lambda: Zipf(float("nan")), "s must be"),
        (lambda: InContextMarkov(0), "alpha must be"),
        (lambda: InContextMarkov(-2), "alpha must be"),
        (lambda: InContextMarkov(float("nan")), "alpha must be"),
        (lambda: Markov.dirichlet(0), "alpha must be"),
        (lambda: Markov.dirichlet(float("nan")), "alpha must be"),
        (lambda: Markov.dirichlet(1.0, seed=-1), "seed must be"),
        (lambda: Markov([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]), "transition must be a V x V"),
        (lambda: Markov([[1.5, -0.5], [0.5, 0.5]]), "transition must be non-negative"),
        (lambda: Markov([[0.5, 0.5 + 1e-8], [0.5, 0.5]]), "transition rows must sum to 1"),
        (lambda: Markov([[0.5, float("nan")], [0.5, 0.5]]), "transition must be finite"),
        (lambda: Markov(), "needs transition, or alpha"),
        (lambda: parse_tokens("gauss:s=1"), "unknown source 'gauss'"),
        (lambda: parse_tokens("zipf:q=1"), "unknown key 'q'"),
        (lambda: parse_tokens("zipf:s"), "not key=value"),
        (lambda: parse_tokens("zipf:s=abc"), "s has the value"),
        (lambda: ba.CopyTask(5, 5, Markov([[0.5, 0.5], [0.5, 0.5]])), "V = 5"),
        (lambda: check_uniform(Zipf(1)), "uniform tokens only; got zipf:s=1"),
    ],
)
def test_bad_input_names_the_parameter(make, needle):
    with pytest.raises(ValueError, match="tokens") as err:
        make()
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_within_tolerance_rows_are_accepted():
    Markov([[0.5, 0.5 + 5e-10], [0.5, 0.5]])


def test_level2_refuses_other_tokens():
    from bayes_attn.models.levels import model_with_data
    from bayes_attn.theory import global_saddle

    task = ba.CopyTask(6, 3, "zipf:s=1")
    with pytest.raises(ValueError, match="tokens: the reduced .Level-2. theory .* got zipf:s=1"):
        global_saddle(task, ba.Hyper.paper(), 20, "linear")
    model, args, kw = model_with_data("reduced", task, ba.Hyper.paper(), 20, "linear", seed=0)
    with pytest.raises(ValueError, match="tokens"):
        model(*args, **kw)


# --------------------------------------------------------------------------------------------------
# The command line


def _run(capsys, *argv):
    code = main(["--quiet", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["sample", "--tokens", "zipf:s=-1"], "s must be"),
        (["sample", "--tokens", "zipf:s=nan"], "s must be"),
        (["sample", "--tokens", "icl-markov:alpha=0"], "alpha must be"),
        (["sample", "--tokens", "markov:alpha=-1,seed=2"], "alpha must be"),
        (["sample", "--tokens", "markov:transition=[[0.5,0.6],[0.5,0.5]]", "--V", "2"], "sum to 1"),
        (["sample", "--tokens", "markov:transition=[[0.5,0.5],[0.5,0.5]]"], "V = 5"),
        (["sample", "--tokens", "poisson"], "unknown source"),
        (["sample", "--tokens", "zipf:t=1"], "unknown key"),
        (["sample", "--tokens", "zipf:s=1"], "uniform tokens only"),  # the default level: reduced
        (["theory", "--tokens", "icl-markov:alpha=1"], "uniform tokens only"),
        (["train", "--tokens", "zipf:s=-2"], "s must be"),
        (["sweep", "--kind", "theory", "--P", "10", "--tokens", "zipf:s=1"], "uniform tokens"),
        (["sweep", "--kind", "adam", "--P", "10", "--tokens", "zipf:s=-1"], "s must be"),
    ],
)
def test_cli_bad_tokens_is_one_line_and_status_2(capsys, tmp_path, argv, needle):
    out = [] if argv[0] == "theory" else ["--out", tmp_path / "x.nc"]
    code, _, err = _run(capsys, *argv, *out)
    assert code == 2, err
    assert "tokens" in err and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.nc").exists()


@pytest.mark.slow
def test_cli_sample_kernel_with_tokens_end_to_end(capsys, tmp_path):
    """About 40 s on a loaded 2-core machine (NUTS compiles), hence slow."""
    from bayes_attn import _arviz as az

    out = tmp_path / "k.nc"
    argv = ["sample", "--level", "kernel", "--L", "4", "--V", "3", "--P", "12", "--chains", "1",
            "--warmup", "10", "--samples", "10", "--tokens", "markov:alpha=0.3,seed=2"]  # fmt: skip
    code, _, err = _run(capsys, *argv, "--out", out)
    assert code == 0, err
    idata = az.from_netcdf(out)
    attrs = idata.posterior.attrs
    assert attrs["tokens"] == "markov:alpha=0.3,seed=2"
    task, _ = preset_from_attrs(attrs)
    assert task == ba.CopyTask(4, 3, Markov.dirichlet(0.3, seed=2))
    # the data are the source's draws
    from bayes_attn.models.levels import DATASET_FOLD

    data = task.sample(jax.random.fold_in(jax.random.key(0), DATASET_FOLD), 12)
    np.testing.assert_array_equal(idata.observed_data["tokens"].values, data)
    from bayes_attn.inference.record import header

    assert "tokens markov:alpha=0.3,seed=2" in header(attrs)


def test_binary_search_inverse_cdf_is_the_linear_count():
    """Above LINEAR_SEARCH_MAX_V the inverse CDF halves instead of comparing with every
    cumulative value: the same index bit for bit (u at every cumulative value, just below 1 and
    random; one shared CDF and one per element), so the draws at large V are unchanged."""
    import jax.numpy as jnp

    from bayes_attn.tokens import LINEAR_SEARCH_MAX_V, _inverse_cdf

    rng = np.random.default_rng(0)
    for V in (LINEAR_SEARCH_MAX_V + 1, 64, 100):
        cdf = jnp.asarray(np.cumsum(rng.dirichlet(np.full(V, 0.3))))
        u = jnp.concatenate(
            [cdf, jnp.asarray(rng.uniform(size=2000)), jnp.asarray([0.0, 1 - 1e-16])]
        )
        linear = jnp.sum(cdf[:-1] <= u[:, None], axis=-1, dtype=jnp.int32)
        np.testing.assert_array_equal(_inverse_cdf(cdf, u), linear)
        rows = jnp.asarray(np.cumsum(rng.dirichlet(np.full(V, 0.5), size=u.shape[0]), axis=-1))
        linear = jnp.sum(rows[:, :-1] <= u[:, None], axis=-1, dtype=jnp.int32)
        np.testing.assert_array_equal(_inverse_cdf(rows, u), linear)
