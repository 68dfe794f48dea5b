"""Saddle points: against dense-grid brute force, coexisting minima, Laplace weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from scipy.ndimage import minimum_filter

import bayes_attn as ba
from bayes_attn.theory import action as act
from bayes_attn.theory import phase_boundaries, saddles


def _grid_minima_linear(task, hyper, P, half=1.5, n=601):
    """Local minima of the linear action on a dense (c1, cG) grid, in the package's Z2 image
    c1 + cG >= 0 (algebra.z2_sign)."""
    sc = act.scales(task, hyper)
    c1 = np.linspace(-half, half, n)
    cG = np.linspace(-4 * half, 4 * half, n)
    C1, CG = np.meshgrid(c1, cG, indexing="ij")
    S = np.asarray(act.action_linear(jnp.stack([C1, CG], -1), P, sc))
    loc = (S == minimum_filter(S, size=5, mode="nearest")) & (C1 + CG >= 0)
    return sorted((S[i, j], C1[i, j], CG[i, j]) for i, j in np.argwhere(loc))


# Table 1: P* = 22.76 (linear); c1 peaks near 303; a metastable anti-aligned minimum far above
@pytest.mark.parametrize("P", [11.0, 34.0, 180.0, 340.0, 680.0])
def test_linear_saddles_match_dense_grid(paper, P):
    task, hyper = paper
    found = saddles(task, hyper, P, "linear")
    grid = _grid_minima_linear(task, hyper, P)
    assert len(found) == len(grid)
    h = 3.0 / 600  # grid spacing in c1; 4x that in cG
    for sd, (s, c1, cG) in zip(found, grid, strict=True):
        assert abs(sd.c1 - c1) <= h and abs(sd.cG - cG) <= 4 * h
        assert sd.action <= s + 1e-12  # Newton refines below the grid value
        assert np.all(np.linalg.eigvalsh(sd.hessian) > 0)


# softmax at Table 1: one phase, below the lower spinodal 264.97, between it and P* = 275.97,
# between P* and the upper spinodal 296.76, one phase far above
@pytest.mark.parametrize("P", [68.0, 250.0, 273.0, 285.0, 455.0])
def test_softmax_saddles_match_dense_grid(paper, P):
    task, hyper = paper
    sc = act.scales(task, hyper)
    cg = np.linspace(-5, 5, 200001)
    s = np.asarray(act.action_softmax(jnp.asarray(cg), P, sc))
    idx = [k for k in range(1, len(cg) - 1) if s[k] < s[k - 1] and s[k] < s[k + 1]]
    found = saddles(task, hyper, P, "softmax")
    assert len(found) == len(idx)
    for a, b in zip(sorted(sd.cG for sd in found), sorted(cg[k] for k in idx), strict=True):
        assert abs(a - b) <= 1e-4  # two grid spacings
    for sd in found:
        assert abs(sd.a1 - (1 - sd.aG / task.L)) < 1e-12


def test_coexisting_minima_found_everywhere_between_spinodals(paper):
    """Multi-start plus continuation must find both softmax phases at every P between the spinodals."""
    task, hyper = paper
    b = phase_boundaries(task, hyper)
    lo, hi = b.spinodals
    for P in np.geomspace(lo * 1.001, hi * 0.999, 12):
        found = saddles(task, hyper, float(P), "softmax")
        assert len(found) == 2, P
        assert min(s.aG for s in found) < 1.0 < 2.5 < max(s.aG for s in found)  # weak, strong copy
    for P in (lo * 0.99, hi * 1.01):
        assert len(saddles(task, hyper, P, "softmax")) == 1


def test_softmax_first_order_jump(paper):
    """Two minima of equal action at the first-order P*, and aG jumps across it."""
    task, hyper = paper
    P_star = phase_boundaries(task, hyper).first_order
    both = saddles(task, hyper, P_star, "softmax")
    assert len(both) == 2
    assert abs(both[0].action - both[1].action) < 1e-8 * both[0].action
    below = saddles(task, hyper, P_star * 0.999, "softmax")[0]
    above = saddles(task, hyper, P_star * 1.001, "softmax")[0]
    assert below.aG < 1.0 and above.aG > 3.0


def test_linear_metastable_copy_sign_is_found(paper):
    """Far above the crossover the approximate Z2 x Z2 leaves a metastable minimum whose copy and
    pooling are anti-aligned (c1 cG < 0; the global one has c1 cG > 0), whichever Z2 image names
    them; both are reported in the image c1 + cG >= 0."""
    task, hyper = paper
    found = saddles(task, hyper, 680.0, "linear")
    assert len(found) == 2
    glob, meta = found
    assert glob.c1 * glob.cG > 0 > meta.c1 * meta.cG and glob.action < meta.action
    assert glob.c1 + glob.cG >= 0 and meta.c1 + meta.cG >= 0


@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_laplace_weight_converges_to_quadrature(paper, activation):
    """log int exp(-chi s) over the basin against the Laplace log-weight: the error falls like 1/chi."""
    task, _ = paper
    P = 137.0 if activation == "linear" else 68.0
    errs = []
    for chi in (30.0, 300.0, 3000.0):
        hyper = ba.Hyper.paper().replace(chi=chi)
        sd = saddles(task, hyper, P, activation)[0]
        sc = act.scales(task, hyper)
        w = 8 / np.sqrt(chi * np.diag(sd.hessian))  # +- 8 standard deviations
        if activation == "linear":
            f = jax.jit(lambda c1, cG: act.action_linear(jnp.array([c1, cG]), P, sc))
            g = lambda cG, c1: np.exp(-chi * (float(f(c1, cG)) - sd.action))  # noqa: E731
            val, _ = integrate.dblquad(
                g, sd.c1 - w[0], sd.c1 + w[0], sd.cG - w[1], sd.cG + w[1], epsabs=0, epsrel=1e-9
            )
            log_z = np.log(2 * val) - chi * sd.action  # both Z2 images
        else:
            f = jax.jit(lambda c: act.action_softmax(c, P, sc))
            val, _ = integrate.quad(
                lambda c: np.exp(-chi * (float(f(c)) - sd.action)),
                sd.cG - w[0],
                sd.cG + w[0],
                epsabs=0,
                epsrel=1e-11,
                limit=200,
            )
            log_z = np.log(val) - chi * sd.action
        errs.append(abs(log_z - sd.log_weight))
    assert errs[0] > errs[1] > errs[2]
    assert errs[1] / errs[2] > 5  # ~ 10 for a 1/chi error
    assert errs[2] < 1e-2
