"""The scaling of P*(L, V) (bayes_attn.theory.scaling; docs/theory.md and docs/validation.md
"The scaling of P*(L, V)")."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.theory import phase_boundaries, scaling
from bayes_attn.theory.boundaries import second_order_closed_form, second_order_numeric


@pytest.fixture(scope="module")
def small_grid():
    """A 3 x 3 grid spanning the corners of the issue's box plus the paper's (25, 5)."""
    return scaling.pstar_grid([4, 25, 256], [2, 5, 512], ("linear", "softmax"))


def test_log_grid_is_distinct_integers_covering_the_box():
    Ls = scaling.log_grid(4, 256, 12, "L")
    Vs = scaling.log_grid(2, 512, 12, "V")
    assert Ls.size == Vs.size == 12
    assert (Ls[0], Ls[-1], Vs[0], Vs[-1]) == (4, 256, 2, 512)
    assert np.all(np.diff(Ls) > 0) and np.all(np.diff(Vs) > 0)
    assert scaling.log_grid(2, 14, 12, "V").size == 12  # rounding merges at the low end


def test_grid_matches_the_point_by_point_boundaries(small_grid):
    """Every cell is what theory.phase_boundaries gives for that (L, V): the same code path."""
    hyper = ba.Hyper.paper()
    for L, V in [(25, 5), (256, 512), (4, 512)]:
        pb = phase_boundaries(ba.CopyTask(L=L, V=V), hyper)
        cell = small_grid.sel(L=L, V=V)
        assert float(cell["second_order"]) == pytest.approx(pb.second_order, rel=1e-9)
        assert float(cell["crossover"]) == pytest.approx(pb.crossover, rel=1e-9)
        for got, want in [
            (cell["first_order"], pb.first_order),
            (cell["spinodal_lower"], pb.spinodals[0]),
            (cell["spinodal_upper"], pb.spinodals[1]),
        ]:
            assert float(got) == pytest.approx(want, rel=1e-9, nan_ok=True)
    # the paper's preset, as docs/theory.md §7 pins it
    paper = small_grid.sel(L=25, V=5)
    assert float(paper["first_order"]) == pytest.approx(275.97, abs=0.01)
    assert float(paper["crossover"]) == pytest.approx(442.7, abs=0.1)


def _assert_same_grid(a, b, rtol):
    assert scaling.nan_counts(a) == scaling.nan_counts(b)
    for k in b.data_vars:
        x, y = a[k].values, b[k].values
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=k)
        np.testing.assert_allclose(
            x[np.isfinite(y)], y[np.isfinite(y)], rtol=rtol, atol=0, err_msg=k
        )


def test_batched_grid_is_the_cell_by_cell_grid(small_grid):
    """The softmax cells solved together (programs batched across cells) give the one-cell
    results to 1e-10; the linear cells are solved one by one in both."""
    cells = scaling.pstar_grid([4, 25, 256], [2, 5, 512], ("linear", "softmax"), batched=False)
    _assert_same_grid(small_grid, cells, rtol=1e-10)
    for k in scaling.TRANSITIONS["linear"]:
        np.testing.assert_array_equal(small_grid[k].values, cells[k].values)


@pytest.mark.slow
def test_batched_12x12_grid_is_the_cell_by_cell_grid():
    """The issue's 12 x 12 grid, both activations: batched = cell by cell to 1e-10, NaN cells and
    their reasons equal (benchmarks/bench_scaling.py times the two)."""
    Ls = scaling.log_grid(*scaling.L_RANGE, 12, "L")
    Vs = scaling.log_grid(*scaling.V_RANGE, 12, "V")
    batched = scaling.pstar_grid(Ls, Vs, ("linear", "softmax"))
    cells = scaling.pstar_grid(Ls, Vs, ("linear", "softmax"), batched=False)
    _assert_same_grid(batched, cells, rtol=1e-10)


def test_nan_cells_are_counted_with_their_reason(small_grid):
    counts = scaling.nan_counts(small_grid)
    nan = int(np.isnan(small_grid["first_order"].values).sum())
    assert nan > 0  # L = 4 is below the critical end point at every V
    assert sum(counts["first_order"].values()) == nan
    assert counts["first_order"].get("continuous: no coexistence of two minima", 0) >= 3
    assert np.isnan(small_grid["first_order"].sel(L=4)).all()
    assert counts["second_order"] == {}
    assert small_grid.attrs["level"].startswith("Level 2")
    assert small_grid.attrs["sigma2"] == 30.0 and small_grid.attrs["tokens"] == "uniform"


def test_second_order_grid_is_the_closed_form_and_brute_force():
    ds = scaling.pstar_grid([4, 40], [3, 300], "linear")
    hyper = ba.Hyper.paper()
    for L in (4, 40):
        for V in (3, 300):
            sc = scaling._scales(L, V, hyper)
            assert float(ds["second_order"].sel(L=L, V=V)) == pytest.approx(
                second_order_numeric(sc), rel=1e-9
            )


def test_local_exponents_match_finite_differences_and_limits():
    """The exact local exponents against central differences of brute-force (numeric) P*, and
    their limits (docs/theory.md, "The scaling of P*(L, V)")."""
    hyper = ba.Hyper.paper()
    h = 1e-3
    for L, V in [(8.0, 3.0), (60.0, 60.0), (5.0, 400.0)]:
        b, c = scaling.local_exponents(L, V, hyper)

        def logp(lL, lV):
            return math.log(
                second_order_numeric(scaling._scales(math.exp(lL), math.exp(lV), hyper))
            )

        lL, lV = math.log(L), math.log(V)
        fd_b = (logp(lL + h, lV) - logp(lL - h, lV)) / (2 * h)
        fd_c = (logp(lL, lV + h) - logp(lL, lV - h)) / (2 * h)
        assert float(b) == pytest.approx(fd_b, abs=1e-5)
        assert float(c) == pytest.approx(fd_c, abs=1e-5)
    # limits: the corrections are O(V/L) and O(L/V), O(1/L) (docs/theory.md, "The scaling of P*(L, V)")
    b, c = scaling.local_exponents(1e6, 2.0, hyper)
    assert (float(b), float(c)) == pytest.approx(scaling.ASYMPTOTIC["long"], abs=1e-4)
    for L in (4.0, 1e4):  # V >> L: b = 1/2 + 1/(4(sqrt(L) + 1)) at any L
        b, c = scaling.local_exponents(L, 1e12, hyper)
        assert float(b) == pytest.approx(0.5 + 0.25 / (math.sqrt(L) + 1), abs=1e-4)
        assert float(c) == pytest.approx(scaling.ASYMPTOTIC["wide"][1], abs=1e-4)


def test_limits_of_the_second_order_point_are_the_closed_forms():
    """The derived limits against the exact root (which the grid holds), with the corrections
    the derivation gives: O(V/L) and O(L/V)."""
    hyper = ba.Hyper.paper()
    for L, V in [(1e5, 2.0), (1e6, 7.0)]:
        exact = float(second_order_closed_form(scaling._scales(L, V, hyper)))
        assert scaling.second_order_limits(L, V, hyper)["long"] == pytest.approx(
            exact, rel=3 * V / L
        )
    for L, V in [(4.0, 1e7), (256.0, 1e9)]:
        exact = float(second_order_closed_form(scaling._scales(L, V, hyper)))
        assert scaling.second_order_limits(L, V, hyper)["wide"] == pytest.approx(
            exact, rel=3 * L / V
        )
    # the leading form of §7 is not the V >> L limit at small L: 9% off at L = 4
    from bayes_attn.theory.boundaries import second_order_leading

    lead = float(second_order_leading(scaling._scales(4.0, 1e7, hyper)))
    wide = float(scaling.second_order_limits(4.0, 1e7, hyper)["wide"])
    assert lead / wide == pytest.approx(math.sqrt((4 + 2) / (4 + 1)), rel=1e-4)  # (L + √L)/(L + 1)


def test_slopes_of_the_second_order_point_are_the_derived_exponents():
    """As Diffrax measures an order: linregress of log P* over a decade, deep in each limit."""
    hyper = ba.Hyper.paper()

    def p2(L, V):
        return float(second_order_closed_form(scaling._scales(L, V, hyper)))

    Vs = np.geomspace(2, 20, 8)  # L = 1e5 >> V
    slope = stats.linregress(np.log(Vs), np.log([p2(1e5, V) for V in Vs])).slope
    assert slope == pytest.approx(2.0, abs=1e-3)
    Ls = np.geomspace(1e4, 1e5, 8)
    slope = stats.linregress(np.log(Ls), np.log([p2(L, 3.0) for L in Ls])).slope
    assert slope == pytest.approx(-1.0, abs=1e-3)
    Vs = np.geomspace(1e8, 1e9, 8)  # V >> L = 1e4
    slope = stats.linregress(np.log(Vs), np.log([p2(1e4, V) for V in Vs])).slope
    assert slope == pytest.approx(0.5, abs=1e-3)


def test_fit_recovers_an_exact_power_law_and_reports_errors():
    L, V = np.meshgrid([4.0, 8, 16, 32], [2.0, 4, 8, 16, 32], indexing="ij")
    import xarray as xr

    ds = xr.Dataset({"p": (("L", "V"), 3.0 * L**-1.0 * V**2.0)}, coords={"L": L[:, 0], "V": V[0]})
    fit = scaling.fit_exponents(ds, "p")
    assert fit["b"][0] == pytest.approx(-1.0, abs=1e-10)
    assert fit["c"][0] == pytest.approx(2.0, abs=1e-10)
    assert fit["a"][0] == pytest.approx(math.log(3.0), abs=1e-10)
    assert fit["b"][1] < 1e-8 and fit["n"] == 20
    rng = np.random.default_rng(0)
    ds["q"] = ds["p"] * np.exp(0.1 * rng.standard_normal(L.shape))
    fit = scaling.fit_exponents(ds, "q", cross=True)
    assert 0.005 < fit["b"][1] < 0.5 and "d" in fit
    assert abs(fit["c"][0] - 2.0) < 4 * fit["c"][1]


def test_readout_map_matches_the_design():
    rng = np.random.default_rng(0)
    L, V, P = 5, 3, 7
    tokens = jnp.asarray(rng.integers(0, V, (P, L)))
    M = jnp.asarray(rng.standard_normal((V + L, V + L)))
    A = algebra.attention(algebra.logits_from_M(M, tokens, V), "linear")
    want = algebra.phi(A, tokens, V).reshape(-1, V + L).T @ algebra.targets(tokens, V).reshape(
        -1, V
    )
    got = scaling._readout_map(tokens, L, V)(M)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: scaling.pstar_grid([1, 4], [2, 3]), "Ls"),
        (lambda: scaling.pstar_grid([4, 5], [1]), "Vs"),
        (lambda: scaling.pstar_grid([4, float("nan")], [2]), "Ls"),
        (lambda: scaling.pstar_grid([4], [2, float("nan")]), "Vs"),
        (lambda: scaling.pstar_grid([], [2]), "Ls"),
        (lambda: scaling.pstar_grid([4], []), "Vs"),
        (lambda: scaling.pstar_grid([4], [2], "relu"), "activation"),
        (lambda: scaling.log_grid(1, 256, 12, "L"), "L"),
        (lambda: scaling.log_grid(4, 10, 12, "L"), "L"),
        (lambda: scaling.local_exponents(1.0, 5.0), "L"),
        (lambda: scaling.local_exponents(25.0, float("nan")), "V"),
        (lambda: scaling.fit_exponents(scaling.pstar_grid([4, 5], [2, 3]), "nope"), "variable"),
        (lambda: scaling.level1_second_order(np.zeros((3, 4), int), 1), "V"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def _level1_ratios(L: int, V: int, P: int, seeds) -> np.ndarray:
    """r = P* / P1 (Level 2 over Level 1) on datasets of P sequences, one per seed, at the sigma^2
    that puts the Level-2 P* at P (Level 2 depends on P / sigma^2 only)."""
    hyper = ba.Hyper.paper()
    p2 = float(second_order_closed_form(scaling._scales(L, V, hyper)))
    hyper = hyper.replace(sigma2=hyper.sigma2 * P / p2)
    return np.array(
        [
            P
            / scaling.level1_second_order(
                np.random.default_rng(s).integers(0, V, (P, L)), V, hyper
            )["P"]
            for s in seeds
        ]
    )


@pytest.mark.slow
@pytest.mark.parametrize("L, V", [(4, 2), (4, 512)])
def test_level1_second_order_point_approaches_level2_like_one_over_P(L, V):
    """What docs/theory.md §14 derives for r(P) = P*/P1 = sigma_max(Bbar_P) / sigma_2, Bbar_P the mean
    of P i.i.d. per-sequence maps, stated before measuring (no constant here is fitted):

    * exact: E r(P) >= sigma_max(E B) / sigma_2 >= 1 (Jensen for the norm sigma_max; Level 2 is a
      restriction of the averaged Level 1), and E r(P) does not increase with P (the norm of a
      mean of more i.i.d. terms);
    * leading order (the perturbation of an isolated top singular value by the zero-mean noise
      Bbar_P - E B, of covariance ~ 1/P): E r(P) = r_inf + kappa'/P + O(1/P^2), kappa' >= 0, so the
      differences D1 = r(P0) - r(4 P0), D2 = r(4 P0) - r(16 P0) have D1 / D2 -> 4; checked within a
      factor 2 (2 <= D1/D2 <= 8), the O(1/P) relative corrections being ~ |r - 1| << 1 at
      P0 = max(100, 16 (V + L) / L) (16 tokens per feature of the readout).

    Means over 4 datasets; each inequality is allowed Z = 4 standard errors of the dataset spread.
    """
    Z, seeds = 4.0, range(4)
    P0 = max(100, math.ceil(16 * (V + L) / L))
    r = np.stack([_level1_ratios(L, V, P0 * 4**k, seeds) for k in range(3)])
    m, se = r.mean(axis=1), r.std(axis=1, ddof=1) / math.sqrt(r.shape[1])
    for k in range(3):  # the rows of docs/validation.md's table (run with -s)
        P = P0 * 4**k
        rows = ", ".join(f"{x:.4f}" for x in r[k])
        print(f"| {L} | {V} | {P} | {rows} | {m[k]:.4f} ± {se[k]:.2g} | {P * (m[k] - 1):.1f} |")

    def se_of(w):  # standard error of sum_k w_k m_k (independent datasets at each P)
        return math.sqrt(sum((wk * sk) ** 2 for wk, sk in zip(w, se, strict=True)))

    assert np.all(m >= 1 - Z * se), (m, se)
    assert m[0] - m[1] >= -Z * se_of((1, -1, 0)), (m, se)
    assert m[1] - m[2] >= -Z * se_of((0, 1, -1)), (m, se)
    # D1 - c D2 = m0 - (1 + c) m1 + c m2 for c = 2 (D1 >= 2 D2) and c = 8 (D1 <= 8 D2)
    assert (m[0] - m[1]) - 2 * (m[1] - m[2]) >= -Z * se_of((1, -3, 2)), (m, se)
    assert 8 * (m[1] - m[2]) - (m[0] - m[1]) >= -Z * se_of((1, -9, 8)), (m, se)
