"""Phase boundaries: closed forms, scaling laws, definitions, and the phase-diagram grids."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import bayes_attn as ba
from bayes_attn.theory import action as act
from bayes_attn.theory import boundaries as bd
from bayes_attn.theory import global_saddle, phase_boundaries, phase_diagram, saddles


@given(
    st.integers(2, 500),
    st.integers(2, 100),
    st.floats(0.01, 100),
    st.floats(0.01, 100),
    st.floats(0.1, 1e5),
)
def test_numeric_second_order_equals_closed_form(L, V, g_w, g_o, sigma2):
    sc = act.Scales(*(jnp.float64(x) for x in (L, V, g_w, g_o, sigma2)))
    numeric = bd.second_order_numeric(sc)
    closed = float(bd.second_order_closed_form(sc))
    assert abs(numeric / closed - 1) < 1e-6
    # the leading-order form (docs/theory.md §7) differs by a small, documented amount
    assert abs(float(bd.second_order_leading(sc)) / closed - 1) < 0.05


def test_paper_preset_is_table_1_and_its_linear_transition(paper):
    """Table 1 (sigma^2 = 30): the leading-order P* = L^2 V^2 (sigma^2 / L) / ((L + V) sqrt(g_O g_W
    (L + 1)(L + V - 1))), typed here from the Hessian at the origin (docs/theory.md, section 4), is
    22.7612 at L = 25, V = 5; the exact root of the Hessian's determinant lies 1e-5 below it."""
    task, hyper = paper
    assert (hyper.chi, hyper.g_w, hyper.g_o, hyper.sigma2) == (30.0, 1.0, 1.0, 30.0)
    L, V = task.L, task.V
    want = L**2 * V**2 * (hyper.sigma2 / L) / ((L + V) * math.sqrt((L + 1) * (L + V - 1)))
    b = phase_boundaries(*paper)
    assert abs(b.second_order_leading - want) < 1e-9 * want
    assert abs(b.second_order / want - 1) < 2e-5
    # below P* the origin is the only minimum, above it the origin is a saddle
    assert saddles(*paper, 0.99 * b.second_order, "linear")[0].c1 == 0.0
    assert saddles(*paper, 1.01 * b.second_order, "linear")[0].c1 > 0.0


def test_large_L_slope_of_log_Pstar_against_log_V_is_two():
    """Fit log P* = a + k log V at L = 1e5 over V in [2, 64]: k = 2 up to O(V/L) corrections."""
    Vs = np.geomspace(2, 64, 12)
    Ps = [
        bd.second_order_numeric(act.Scales(*(jnp.float64(x) for x in (1e5, V, 1.0, 1.0, 100.0))))
        for V in Vs
    ]
    fit = stats.linregress(np.log(Vs), np.log(Ps))
    assert abs(fit.slope - 2.0) < 2e-3
    # and at the paper's L = 25 the law visibly bends (the crossover out of the scaling regime)
    Ps25 = [
        float(
            bd.second_order_closed_form(act.Scales(*(jnp.float64(x) for x in (25, V, 1, 1, 100))))
        )
        for V in Vs
    ]
    assert stats.linregress(np.log(Vs), np.log(Ps25)).slope < 1.8


def test_softmax_boundaries_are_ordered_and_are_folds(paper):
    task, hyper = paper
    b = phase_boundaries(task, hyper)
    lo, hi = b.spinodals
    assert lo < b.first_order < hi
    assert len(saddles(task, hyper, lo * 1.0001, "softmax")) == 2
    assert len(saddles(task, hyper, lo * 0.9999, "softmax")) == 1
    assert len(saddles(task, hyper, hi * 0.9999, "softmax")) == 2
    assert len(saddles(task, hyper, hi * 1.0001, "softmax")) == 1


def test_crossover_is_the_steepest_growth_of_cG(paper):
    """Finite differences of independent global saddles: the slope of cG in log P peaks at the crossover."""
    task, hyper = paper
    b = phase_boundaries(task, hyper)
    P_x = b.crossover

    def slope(P, h=1e-3):
        up = global_saddle(task, hyper, P * math.exp(h), "linear").cG
        down = global_saddle(task, hyper, P * math.exp(-h), "linear").cG
        return (up - down) / (2 * h)

    assert slope(P_x) > slope(P_x * 0.9) and slope(P_x) > slope(P_x * 1.1)
    m = b.crossover_markers
    assert b.second_order < m["c1_peak"] < m["copy_overtakes"] < P_x
    sd = global_saddle(task, hyper, m["copy_overtakes"], "linear")
    assert abs(sd.c1 - sd.cG) < 1e-6


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_phase_diagram_matches_pointwise_global_saddles(paper):
    task, hyper = paper
    Ps = np.geomspace(20, 4000, 20)
    for activation, key in (("linear", "cG"), ("softmax", "aG")):
        ds = phase_diagram(task, hyper, Ps, activation, L=[10, 25], boundaries=False)
        assert ds[key].dims == ("L", "P") and ds[key].shape == (2, 20)
        for L in (10, 25):
            t = ba.CopyTask(L=L, V=task.V)
            for i in (2, 10, 15, 19):
                sd = global_saddle(t, hyper, Ps[i], activation)
                got = float(ds[key].sel(L=L).isel(P=i))
                want = sd.cG if activation == "linear" else sd.aG
                assert abs(got - want) < 1e-6 * (1 + abs(want)), (activation, L, Ps[i])
                assert abs(float(ds["loss"].sel(L=L).isel(P=i)) - sd.loss) < 1e-8
    # the boundaries along the L axis are those of phase_boundaries at each L
    b = phase_boundaries(task, hyper)
    lin = phase_diagram(task, hyper, Ps[:3], "linear", L=[25])
    assert abs(float(lin.second_order.sel(L=25)) / b.second_order - 1) < 1e-9
    assert abs(float(lin.crossover.sel(L=25)) / b.crossover - 1) < 1e-6
    dv = phase_diagram(task, hyper, Ps[:3], "softmax", V=[3, 5])
    assert dv["aG"].dims == ("V", "P") and dv["first_order"].dims == ("V",)
    assert abs(float(dv.first_order.sel(V=5)) / b.first_order - 1) < 1e-6
    assert dv.spinodal_lower.sel(V=5) < dv.first_order.sel(V=5) < dv.spinodal_upper.sel(V=5)


def test_theory_is_vmappable_over_P_and_scales(paper):
    """The actions and the candidate search are pure JAX: vmap over P and over a batch of scales."""
    import jax

    from bayes_attn.theory.saddles import candidates

    task, hyper = paper
    sc = act.scales(task, hyper)
    Ps = jnp.array([50.0, 300.0, 1500.0])
    c = jnp.array([0.3, 0.5])
    s_batch = jax.vmap(lambda P: act.action_linear(c, P, sc))(Ps)
    for P, s in zip(Ps, s_batch, strict=True):
        assert abs(float(s) - float(act.action_linear(c, P, sc))) < 1e-12
    pts, vals, _, _ = jax.vmap(lambda P: candidates("softmax", P, sc))(Ps)
    assert pts.shape[0] == 3 and vals.shape[0] == 3
    assert abs(float(vals[2].min()) - saddles(task, hyper, 1500.0, "softmax")[0].action) < 1e-9
    sigma2s = jnp.array([30.0, 131.8, 400.0])
    batch = sc._replace(sigma2=sigma2s)
    axes = act.Scales(None, None, None, None, 0)
    P_num = jax.vmap(bd.second_order_closed_form, in_axes=(axes,))(batch)
    assert jnp.all(jnp.diff(P_num) > 0)  # P* grows linearly with sigma^2
    np.testing.assert_allclose(P_num / sigma2s, P_num[0] / sigma2s[0], rtol=1e-12)


def test_narrow_coexistence_windows_near_the_end_point_are_found(paper):
    """At V = 5 the coexistence windows of L = 16, 17 and 19 are narrower than the 4% spacing of
    the coarse P scan (L = 16: 228.48 to 228.84); the zoomed scan finds them, so the first-order
    line of the (P, L) diagram does not skip rows between its end point and L = 20."""
    task, hyper = paper
    firsts = []
    for L in (16, 17, 18, 19, 20):
        P1, lo, hi = bd.softmax_transition(act.scales(ba.CopyTask(L, 5), hyper))
        assert lo < P1 < hi, L
        for P, n in ((lo * 0.9999, 1), (lo * 1.0001, 2), (hi * 0.9999, 2), (hi * 1.0001, 1)):
            assert len(saddles(ba.CopyTask(L, 5), hyper, P, "softmax")) == n, (L, P)  # folds
        firsts.append(P1)
    assert np.all(np.diff(firsts) > 0)  # P* grows with L
    assert math.isnan(bd.softmax_transition(act.scales(ba.CopyTask(15, 5), hyper))[0])


def test_critical_end_point_is_the_cusp_where_the_spinodals_meet(paper):
    """The first-order line ends between L = 15 (continuous) and 16: at the end point s', s''
    and s''' vanish together; just above its L the transition is first order with spinodals
    closing on its P, just below it is continuous."""
    task, hyper = paper
    end = ba.theory.critical_end_point(task, hyper, bracket=(15, 16))
    assert end["polished"] and 15.0 < end["L"] < 16.0
    lo, hi = end["L_bracket"]
    assert lo - 0.01 <= end["L"] <= hi + 0.01
    sc = act.scales(task, hyper)
    at_end = sc._replace(L=jnp.float64(end["L"]))
    d1 = jax.grad(lambda c: act.action_softmax(c, jnp.float64(end["P"]), at_end))
    d2 = jax.grad(d1)
    d3 = jax.grad(d2)
    c = jnp.float64(end["cG"])
    np.testing.assert_allclose([d1(c), d2(c), d3(c)], 0.0, atol=1e-8)
    P1, s_lo, s_hi = bd.softmax_transition(sc._replace(L=jnp.float64(end["L"] + 0.02)))
    assert s_lo < P1 < s_hi and s_hi / s_lo - 1 < 1e-3  # a window that closes on the end point
    assert abs(P1 / end["P"] - 1) < 1e-3
    assert math.isnan(bd.softmax_transition(sc._replace(L=jnp.float64(end["L"] - 0.02)))[0])


def test_lockstep_runs_solvers_together_and_hands_back_their_errors():
    """bayes_attn.theory._lockstep: scipy solvers in lockstep threads, their requests batched in
    chunks smaller than a round; each gets its own rows, and a solver's exception is its result."""
    from typing import NamedTuple

    from scipy import optimize

    from bayes_attn.theory._lockstep import Lockstep

    class Par(NamedTuple):
        a: float

    def solver(k):
        def run(ev):
            if k == 3:
                raise ValueError("boom")
            f = lambda x: ev.ask("sq", (np.array([x]),), Par(k + 1.0))[0][0] - 2.0 * (k + 1)  # noqa: E731
            return optimize.brentq(f, 0.0, 10.0, xtol=1e-14)

        return run

    out = Lockstep({"sq": (lambda x, p: x * x * p.a, 2)}).run([solver(k) for k in range(6)])
    assert isinstance(out[3], ValueError)
    for k in (0, 1, 2, 4, 5):
        assert abs(out[k] / math.sqrt(2.0) - 1) < 1e-12
