"""Mode census of the reduced posterior: exact basin weights, Laplace weights, the weight crossing.

Error budget. The quadrature is exact to round-off: the trapezoid rule on a grid of 4 points per
standard deviation has an aliasing error ~exp(-2 pi^2 16) for the smooth, decaying density, so
halving the spacing changes the log-masses by < 1e-9 (float64 sums of ~1e3-1e5 terms, with
chi * s of order 1e3-1e4 nats) and so the weights by < 1e-10 (a weight moves by w (1 - w) times the
log-mass difference; measured 3.6e-12 at chi = 1000), and scipy's adaptive quad agrees to 1e-8 in log-mass. What is not exact is
the theory's approximations, and those the tests measure: the Laplace weights differ from the exact
ones by O(1/chi) (|w_exact - w_laplace| * chi = 0.0178, 0.0172, 0.0170, 0.0170 at chi = 30, 100,
300, 1000; tolerance 10% about 0.017), and the finite-chi weight crossing sits O(1/chi) above the
equal-action P* (chi (P_cross - P*) = 8.1928, 8.1935, 8.1937, 8.1938 against the asymptotic
(1/2) log(H_s/H_w) / |d(s_s - s_w)/dP| = 8.194; tolerance 1%), with a 10-90% width
chi * width = 129.6, 128.8, 128.6, 128.6 against 2 log 9 / |d(s_s - s_w)/dP| = 128.5 (tolerance 2%).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import integrate, optimize

import bayes_attn as ba
from bayes_attn.models.order_params import order_param_model
from bayes_attn.theory import action as act
from bayes_attn.theory.boundaries import second_order_closed_form, softmax_boundaries
from bayes_attn.theory.modes import modes, phase_weights, weight_crossing

CHIS = (30.0, 100.0, 300.0, 1000.0)


@pytest.fixture(scope="module")
def preset():
    return ba.CopyTask.paper(), ba.Hyper.paper()


@pytest.fixture(scope="module")
def transition(preset):
    """Equal-action P* and spinodals (the code path of phase_boundaries' softmax entries)."""
    task, hyper = preset
    sc = act.scales(task, hyper)
    soft = softmax_boundaries(sc, float(second_order_closed_form(sc)))
    return soft["first_order"], soft["spinodals"]


@pytest.fixture(scope="module")
def crossings(preset):
    task, hyper = preset
    return {chi: weight_crossing(task, hyper.replace(chi=chi)) for chi in CHIS}


def _barrier_cG(P, sc, lo, hi):
    """Maximum of the softmax action between two minima, by a dense grid and a bounded search."""
    f = jax.jit(lambda c: act.action_softmax(c, P, sc))
    x = np.linspace(lo, hi, 20001)
    i = int(np.argmax(np.asarray(f(jnp.asarray(x)))))
    res = optimize.minimize_scalar(
        lambda c: -float(f(c)),
        bounds=(x[i - 1], x[i + 1]),
        method="bounded",
        options={"xatol": 1e-12},
    )
    return res.x


# --------------------------------------------------------------------------------------------------
# Softmax: the quadrature itself


@pytest.mark.parametrize("chi", [30.0, 1000.0])
def test_softmax_quadrature_converges_and_matches_adaptive_quad(preset, transition, chi):
    """Halving the grid spacing moves nothing; scipy.quad over the same basins agrees to 1e-8."""
    task, hyper = preset
    hyper = hyper.replace(chi=chi)
    P = transition[0]
    a = modes(task, hyper, P, "softmax")
    b = modes(task, hyper, P, "softmax", points_per_sd=8.0)
    assert list(a.phase.values) == ["weak", "strong"]
    assert np.max(np.abs(a.weight.values - b.weight.values)) < 1e-10
    assert np.max(np.abs(a.log_weight.values - b.log_weight.values)) < 1e-9
    # independent: adaptive quadrature split at the barrier, relative to each mode's action
    sc = act.scales(task, hyper)
    f = jax.jit(lambda c: act.action_softmax(c, P, sc))
    x = a.cG.values
    cut = _barrier_cG(P, sc, x[0], x[1])
    s0 = a.action.values
    sig = 1 / np.sqrt(chi * 4.0)  # narrower than either mode (s'' >= 8.5 at P*)
    ranges = [(x[0] - 40 * sig, cut), (cut, x[1] + 40 * sig)]
    for k, (lo, hi) in enumerate(ranges):
        val, _ = integrate.quad(
            lambda c: math.exp(-chi * (float(f(c)) - s0[k])),
            lo,
            hi,
            points=[x[k]],
            epsabs=0,
            epsrel=1e-12,
            limit=400,
        )
        assert abs(math.log(val) - chi * s0[k] - a.log_weight.values[k]) < 1e-8


def test_softmax_weights_invariant_under_change_to_aG(preset, transition):
    """The NumPyro model's density over aG (with the Jacobian) gives the same basin masses."""
    task, hyper = preset
    P = transition[0]
    ds = modes(task, hyper, P, "softmax")
    sc = act.scales(task, hyper)
    cut = _barrier_cG(P, sc, *ds.cG.values)
    to_aG = lambda c: float(ba.algebra.softmax_order(c, task.L)[1])  # noqa: E731
    logp = jax.jit(
        lambda a: log_density(order_param_model, (task, hyper, P, "softmax"), {}, {"aG": a})[0]
    )
    ref = float(logp(ds.aG.values[0]))
    edges = [to_aG(ds.cG.values[0] - 1.5), to_aG(cut), to_aG(ds.cG.values[1] + 1.5)]
    mass = [
        integrate.quad(
            lambda a: math.exp(float(logp(a)) - ref), lo, hi, epsabs=0, epsrel=1e-11, limit=400
        )[0]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]
    w = np.array(mass) / sum(mass)
    assert np.max(np.abs(w - ds.weight.values)) < 1e-9


# --------------------------------------------------------------------------------------------------
# Softmax: Laplace against exact, and the weight crossing


def test_laplace_weights_converge_like_one_over_chi(preset, transition):
    """At the equal-action P* both phases keep O(1) weight for every chi; the Laplace weights miss
    the exact ones by O(1/chi): measured chi * |dw| = 0.0178, 0.0172, 0.0170, 0.0170."""
    task, hyper = preset
    errs = []
    for chi in CHIS:
        ds = modes(task, hyper.replace(chi=chi), transition[0], "softmax")
        errs.append(float(np.max(np.abs(ds.weight - ds.laplace_weight))))
        assert abs(float(ds.delta_F - ds.delta_F_laplace)) < 0.1 / chi
    errs = np.array(errs)
    assert np.all(np.diff(errs) < 0)
    scaled = errs * np.array(CHIS)
    assert np.all(np.abs(scaled / scaled.mean() - 1) < 0.1)


def _asymptotics(task, hyper, P_star):
    """(1/2) log(H_s / H_w) and d(s_strong - s_weak)/dP at P* (envelope theorem: partial in P)."""
    sc = act.scales(task, hyper)
    found = sorted(ba.theory.saddles(task, hyper, P_star, "softmax"), key=lambda sd: sd.cG)
    assert len(found) == 2
    weak, strong = found
    dsdP = jax.grad(lambda P, c: act.action_softmax(c, P, sc))
    slope = float(dsdP(P_star, strong.cG) - dsdP(P_star, weak.cG))
    return 0.5 * math.log(strong.hessian[0, 0] / weak.hessian[0, 0]), slope


def test_weight_crossing_converges_to_equal_action_P(preset, transition, crossings):
    """P_cross - P* ~ 1/chi with the predicted coefficient (1%); the 10-90% width ~ 1/chi (2%)."""
    task, hyper = preset
    P_star, spinodals = transition
    dF1, slope = _asymptotics(task, hyper, P_star)
    assert slope < 0  # the strong phase gains action more slowly: it wins at large P
    gaps, widths = [], []
    for chi, wc in crossings.items():
        assert wc.first_order == pytest.approx(P_star, abs=1e-9)
        assert wc.spinodals == pytest.approx(spinodals, abs=1e-9)
        assert spinodals[0] < wc.P_10 < wc.P_cross < wc.P_90 < spinodals[1]
        gaps.append(wc.P_cross - P_star)
        widths.append(wc.width)
        assert wc.width == pytest.approx(2 * math.log(9) / abs(wc.slope), rel=0.01)
        assert wc.slope / chi == pytest.approx(slope, rel=0.01)  # delta_F ~ chi (s_s - s_w)
    chis = np.array(list(crossings))
    gaps, widths = np.array(gaps), np.array(widths)
    assert np.all(gaps > 0) and np.all(np.diff(gaps) < 0)
    assert np.all(np.abs(chis * gaps / (dF1 / abs(slope)) - 1) < 0.01)
    assert np.all(np.abs(chis * widths / (2 * math.log(9) / abs(slope)) - 1) < 0.02)
    # the Laplace crossing approaches the exact one faster (O(1/chi^2))
    lap = np.array([abs(wc.P_cross_laplace - wc.P_cross) for wc in crossings.values()])
    assert np.all(np.diff(lap) < 0) and lap[-1] < 1e-4


def test_phase_weight_curve(preset, transition):
    """0 below the lower spinodal, 1 above the upper, monotone between, and the same as modes()."""
    task, hyper = preset
    P_star, (lo, hi) = transition
    Ps = [
        250.0,
        lo * 0.999,
        lo * 1.001,
        271.0,
        274.3,
        P_star,
        276.6,
        284.5,
        hi * 0.999,
        319.0,
    ]
    pw = phase_weights(task, hyper, Ps)
    w = pw.strong_weight.values
    assert list(pw.n_modes.values) == [1, 1, 2, 2, 2, 2, 2, 2, 2, 1]
    assert w[0] == w[1] == 0.0 and w[-1] == 1.0
    assert np.all(np.diff(w) >= 0)
    assert np.max(np.abs(w - pw.strong_weight_laplace.values)) < 1e-3
    ds = modes(task, hyper, P_star, "softmax")
    at = float(pw.strong_weight.sel(P=P_star))
    assert at == pytest.approx(float(ds.weight.values[1]), abs=1e-12)
    assert float(pw.delta_F.sel(P=P_star)) == pytest.approx(float(ds.delta_F), abs=1e-10)
    assert np.isposinf(pw.delta_F.values[0]) and np.isneginf(pw.delta_F.values[-1])


def test_logdet_weights_converge_to_laplace(preset, transition):
    """With the O(1) log-determinant the exact and Laplace delta_F still agree as chi grows
    (1.02 at chi = 30, 0.10 at chi = 300: the log-det's gradient shifts the modes by O(1/chi))."""
    task, hyper = preset
    gaps = []
    for chi in (30.0, 300.0):
        ds = modes(task, hyper.replace(chi=chi), transition[0], "softmax", include_logdet=True)
        gaps.append(abs(float(ds.delta_F - ds.delta_F_laplace)))
    assert gaps[1] < 0.15 and gaps[0] / gaps[1] > 5


# --------------------------------------------------------------------------------------------------
# Linear


def test_linear_below_transition_one_mode(preset):
    task, hyper = preset
    ds = modes(task, hyper, 11.0, "linear")
    assert ds.sizes["mode"] == 1
    m = ds.isel(mode=0)
    assert abs(float(m.c1)) < 1e-8 and abs(float(m.cG)) < 1e-8
    assert float(m.weight) == 1.0 and float(m.laplace_weight) == 1.0
    assert str(m.phase.values) == "symmetric"
    assert abs(float(m.log_weight - m.laplace_log_weight)) < 0.01  # Laplace, O(1/chi)


@pytest.mark.parametrize("P", [27.3, 91.0])
def test_linear_above_transition_z2_pair(preset, P):
    """Two mirror-image modes of weight 1/2 (exact by the equivariant watershed); halving the grid
    moves the log-masses by < 1e-9. At P = 27.3 (1.2 P*) the two images overlap (Laplace off by 0.10)."""
    task, hyper = preset
    ds = modes(task, hyper, P, "linear")
    fine = modes(task, hyper, P, "linear", points_per_sd=8.0)
    assert ds.sizes["mode"] == 2 and list(ds.image.values) == [1, -1]
    c = np.stack([ds.c1.values, ds.cG.values], -1)
    assert np.allclose(c[0], -c[1]) and c[0, 0] > 0
    assert np.allclose(ds.weight.values, 0.5, atol=1e-12)
    assert np.allclose(ds.laplace_weight.values, 0.5, atol=1e-12)
    assert np.max(np.abs(ds.log_weight.values - fine.log_weight.values)) < 1e-9
    assert np.max(np.abs(ds.log_weight.values - ds.laplace_log_weight.values)) < 0.15


def test_linear_past_crossover_two_pairs(preset):
    """P = 680: the copy pair and the metastable cG < 0 pair; the latter's mass (e^-1029 relative)
    is still resolved, and matches Laplace to 1e-3 in log."""
    task, hyper = preset
    ds = modes(task, hyper, 680.0, "linear")
    assert ds.sizes["mode"] == 4
    assert np.allclose(ds.weight.values, [0.5, 0.5, 0.0, 0.0], atol=1e-12)
    assert np.all(np.isfinite(ds.log_weight.values))
    assert np.max(np.abs(ds.log_weight.values - ds.laplace_log_weight.values)) < 1e-3
    assert np.isnan(float(ds.delta_F))


# --------------------------------------------------------------------------------------------------
# Input checks


def test_bad_input_names_the_parameter(preset):
    task, hyper = preset
    for P in (0.0, -5.0, float("nan")):
        with pytest.raises(ValueError, match="P"):
            modes(task, hyper, P, "softmax")
    with pytest.raises(ValueError, match="activation"):
        modes(task, hyper, 100.0, "relu")
    with pytest.raises(ValueError, match="points_per_sd"):
        modes(task, hyper, 100.0, "linear", points_per_sd=0.0)
    with pytest.raises(ValueError, match="points_per_sd"):
        modes(task, hyper, 400.0, "linear", max_points=100)
    with pytest.raises(ValueError, match="max_points"):
        modes(task, hyper, 400.0, "linear", max_points=0)
    with pytest.raises(ValueError, match="activation"):
        phase_weights(task, hyper, [100.0], activation="linear")
    with pytest.raises(ValueError, match="Ps"):
        phase_weights(task, hyper, [100.0, -1.0])
    with pytest.raises(ValueError, match="xtol"):
        weight_crossing(task, hyper, xtol=0.0)
    with pytest.raises(ValueError, match="not first order"):
        weight_crossing(ba.CopyTask(L=10, V=5), hyper)


@pytest.mark.slow
def test_crossing_limit_is_phase_boundaries_first_order(preset, crossings):
    """The P* used above is phase_boundaries' first-order P* (it also computes the linear crossover)."""
    task, hyper = preset
    b = ba.theory.phase_boundaries(task, hyper)
    for wc in crossings.values():
        assert wc.first_order == pytest.approx(b.first_order, abs=1e-8)
        assert wc.spinodals == pytest.approx(b.spinodals, abs=1e-8)


# --------------------------------------------------------------------------------------------------
# The phase split: owned here; the old homes warn


def test_inside_window_and_phase_boundary_are_the_level2_split(preset, transition):
    """``inside_window`` leaves P inside the spinodals alone and moves P outside to 1e-3 of the
    window's width inside it; ``phase_boundary`` lies between the modes of :func:`modes` and at a
    P outside the window is the boundary at the moved P (exact equalities: same code path)."""
    from bayes_attn.theory.modes import inside_window, phase_boundary

    task, hyper = preset
    _, (lo, hi) = transition
    margin = 1e-3 * (hi - lo)
    assert inside_window(task, hyper, 270.0) == 270.0
    assert inside_window(task, hyper, 100.0) == pytest.approx(lo + margin, rel=1e-12)
    assert inside_window(task, hyper, 2000.0) == pytest.approx(hi - margin, rel=1e-12)
    m = modes(task, hyper, 276.0, "softmax", include_logdet=True)
    b = phase_boundary(task, hyper, 276.0, include_logdet=True)
    assert float(m.aG[0]) < b < float(m.aG[-1])
    moved = inside_window(task, hyper, 2000.0)
    assert phase_boundary(task, hyper, 2000.0) == phase_boundary(task, hyper, moved)
    with pytest.raises(ValueError, match="not first order"):
        inside_window(ba.CopyTask(L=10, V=5), hyper, 100.0)
    with pytest.raises(ValueError, match="var"):
        phase_boundary(task, hyper, 276.0, var="a1")


def test_moved_names_warn_and_point_to_their_new_homes():
    import importlib
    import sys

    from bayes_attn import algebra
    from bayes_attn.theory import boundaries
    from bayes_attn.theory.modes import phase_boundary

    census = importlib.import_module(
        "bayes_attn.theory.modes"
    )  # the package's "modes" is the function

    with pytest.warns(DeprecationWarning, match="theory.modes.phase_boundary"):
        from bayes_attn.analysis import phase_boundary as old
    assert old is phase_boundary
    with pytest.warns(DeprecationWarning, match="theory.modes.phase_boundary"):
        from bayes_attn.analysis.phases import phase_boundary as old
    assert old is phase_boundary
    with pytest.warns(DeprecationWarning, match="boundaries.softmax_transition"):
        old = census.transition_window
    assert old is boundaries.softmax_transition
    with pytest.warns(DeprecationWarning, match="algebra.network_gate"):
        from bayes_attn.experiments.coexistence import network_gate as old
    assert old is algebra.network_gate
    sys.modules.pop("bayes_attn.analysis.modes", None)
    with pytest.warns(DeprecationWarning, match="bayes_attn.analysis.modes has moved"):
        shim = importlib.import_module("bayes_attn.analysis.modes")
    with pytest.warns(DeprecationWarning, match="theory.modes.modes"):
        assert shim.modes is modes
    with pytest.warns(DeprecationWarning, match="theory.modes.weight_crossing"):
        from bayes_attn.analysis.modes import weight_crossing as old
    assert old is weight_crossing
    with pytest.raises(AttributeError):
        census.no_such_name  # noqa: B018
