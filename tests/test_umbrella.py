"""Umbrella sampling + MBAR against exact free energies (docs/validation.md, "Free-energy profiles").

Error budgets: every window's draws are subsampled at their statistical inefficiency before MBAR,
so the standard errors are those of independent draws; the checks are at 3 s.e. (F per bin; a
two-sided 0.27% chance per bin for a calibrated error) or at the issue's absolute 0.1 nats for
Level 2's Delta F, whose s.e. the draw budget below puts near 0.03 (Delta F's variance is about
windows / draws per window, docs/theory.md "The free-energy landscape").
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints
from scipy.special import logsumexp
from scipy.stats import norm

import bayes_attn as ba
from bayes_attn.analysis.free_energy import free_energy_profile, profile_minima
from bayes_attn.experiments.coexistence import phase_starts
from bayes_attn.experiments.landscape import landscape_report, landscape_text
from bayes_attn.inference.umbrella import overlap, run_umbrella
from bayes_attn.models.levels import model_with_data
from bayes_attn.theory.modes import modes, phase_boundary
from bayes_attn.theory.profile import reduced_profile

P_STAR = 276.0  # the softmax P* of Table 1 (275.97)


def _level2(include_logdet, num_samples, num_chains):
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    model, args, kwargs = model_with_data(
        "reduced", task, hyper, P_STAR, "softmax", include_logdet=include_logdet
    )
    st = phase_starts(task, hyper, P_STAR, "reduced")
    idata = run_umbrella(model, "aG", model_args=args, model_kwargs=kwargs,
                         starts=[st["weak"], st["strong"]], num_warmup=300,
                         num_samples=num_samples, num_chains=num_chains, refine=0, seed=0)  # fmt: skip
    cut = phase_boundary(task, hyper, P_STAR, include_logdet=include_logdet)
    prof = landscape_report(idata, divide=cut)
    exact = float(modes(task, hyper, P_STAR, "softmax", include_logdet=include_logdet).delta_F)
    return prof, exact


# slow: each is 40 s on 2 cores (compilation and MBAR over 384,000 draws); the mixture below is
# the default suite's exact check of the profile
@pytest.mark.parametrize(
    ("include_logdet", "expected"),
    [
        pytest.param(True, 13.70, marks=pytest.mark.slow),
        pytest.param(False, None, marks=pytest.mark.slow),
    ],
)
def test_level2_delta_F_against_quadrature(include_logdet, expected):
    # 48 windows (the default placement, kappa ~ 120 to hold the 20-nat barrier) x 2 chains x
    # 4000 draws, thinned ~3x: Delta F's s.e. ~ 0.13 (var ~ kappa range^2 / independent draws,
    # docs/theory.md); the 0.1-nat check needs ~2.4e6 independent draws: the slow test
    prof, exact = _level2(include_logdet, 4000, 2)
    if expected is not None:
        assert exact == pytest.approx(expected, abs=0.005)
    se = float(prof.delta_F_se)
    assert se < 0.2
    assert abs(float(prof.delta_F) - exact) < 3 * se
    assert len(prof.q_minimum) == 2
    assert float(prof.min_overlap_next) > 0.03
    assert np.all(prof.r_hat.values < 1.05)
    assert "minima" in landscape_text(prof)
    assert np.isfinite(prof.F_level2.values).sum() > 40


@pytest.mark.slow
@pytest.mark.parametrize("include_logdet", [True, False])
def test_level2_profile_within_three_se_at_every_bin(include_logdet):
    # the same budget as above; 60 bins, each within 3 s.e. (measured at seed 0: the largest |z|
    # 1.38 with the log-determinant, 2.24 without; docs/validation.md, "Free-energy profiles")
    prof, _ = _level2(include_logdet, 4000, 2)
    ok = np.isfinite(prof.F_se.values)
    z = (prof.F.values - prof.F_level2.values)[ok] / prof.F_se.values[ok]
    assert ok.sum() > 50 and np.max(np.abs(z)) < 3.0, z


@pytest.mark.slow
@pytest.mark.parametrize("include_logdet", [True, False])
def test_level2_delta_F_within_a_tenth_of_a_nat(include_logdet):
    # 48 windows x 4 chains x 36000 draws, thinned ~3x = 2.3e6: Delta F's s.e. ~ 0.03
    prof, exact = _level2(include_logdet, 36000, 4)
    assert float(prof.delta_F_se) < 0.04
    assert abs(float(prof.delta_F) - exact) < 0.1


def _gaussian_model(mu, chol, a):
    def model():
        x = numpyro.sample("x", dist.MultivariateNormal(mu, scale_tril=chol))
        numpyro.deterministic("q", jnp.dot(a, x))

    return model


@pytest.mark.slow  # 20 windows x 2000 draws in 50 dimensions: minutes under load
def test_correlated_gaussian_linear_cv_is_a_parabola():
    rng = np.random.default_rng(0)
    k = 50
    A = rng.normal(size=(k, k)) / math.sqrt(k)
    cov = A @ A.T + 0.1 * np.eye(k)
    mu, a = rng.normal(size=k), rng.normal(size=k) / math.sqrt(k)
    m, s = float(a @ mu), float(math.sqrt(a @ cov @ a))
    model = _gaussian_model(jnp.asarray(mu), jnp.asarray(np.linalg.cholesky(cov)), jnp.asarray(a))
    # 12 windows x 2 chains x 2000 draws
    idata = run_umbrella(model, "q", starts=[{"x": mu}], centres=np.linspace(m - 4 * s, m + 4 * s, 12),
                         num_warmup=200, num_samples=2000, refine=0, seed=1)  # fmt: skip
    edges = np.linspace(m - 3.5 * s, m + 3.5 * s, 31)
    prof = free_energy_profile(idata, edges)
    mass = np.diff(norm.cdf(edges, m, s))
    exact = -np.log(mass / np.diff(edges))
    z = (prof.F.values - exact) / prof.F_se.values
    assert np.max(np.abs(z)) < 3.0, z
    assert len(prof.q_minimum) == 1
    assert abs(float(prof.q_minimum[0]) - m) < 0.5 * s


def _mixture_model(w_strong, sep, sd):
    log_w = jnp.log(jnp.array([1.0 - w_strong, w_strong]))
    locs = jnp.array([[-sep, 0.0], [sep, 0.0]])

    def model():
        x = numpyro.sample("x", dist.ImproperUniform(constraints.real_vector, (), (2,)))
        comp = dist.Normal(locs, sd).to_event(1).log_prob(x)
        numpyro.factor("mixture", jnp.logaddexp(log_w[0] + comp[0], log_w[1] + comp[1]))
        numpyro.deterministic("q", x[0])

    return model


@pytest.mark.slow  # in the slow run: the default suite stays under 10 min (issue 44)
def test_two_component_mixture_delta_F(caplog):
    w, sep, sd = 0.2, 2.0, 0.4  # barrier ~ (sep / sd)^2 / 2 = 12.5 nats
    model = _mixture_model(w, sep, sd)
    # the default placement (from both modes) x 2 chains x 4000 draws: s.e. ~ 0.15
    with caplog.at_level("INFO", logger="bayes_attn"):
        idata = run_umbrella(model, "q", starts=[{"x": np.array([-sep, 0.0])},
                                                 {"x": np.array([sep, 0.0])}],
                             num_warmup=200, num_samples=4000, seed=2, progress=True)  # fmt: skip
    # progress: a line as each window's chain ends (the refinement round's too), with its window,
    # centre and acceptance
    n = idata.posterior.sizes["window"] * idata.posterior.sizes["chain"]
    done = [r.getMessage() for r in caplog.records if "done (window" in r.getMessage()]
    assert len(done) == n and all("acceptance 0." in m for m in done), done
    prof = free_energy_profile(idata, divide=0.0)
    exact = math.log((1 - w) / w)  # the tails beyond the divide are 5 sd out: 3e-7
    se = float(prof.delta_F_se)
    assert se < 0.2
    assert abs(float(prof.delta_F) - exact) < 3 * se
    assert len(prof.q_minimum) == 2
    q0 = prof.divide_q.values  # Delta F as the divide moves, against the mixture's own cdf
    below = (1 - w) * norm.cdf(q0, -sep, sd) + w * norm.cdf(q0, sep, sd)
    curve = np.log(below) - np.log1p(-below)
    z = (prof.delta_F_divide.values - curve) / prof.delta_F_divide_se.values
    assert np.max(np.abs(z)) < 3.0, z


@pytest.mark.slow  # three NUTS programs compiled (8 windows, and two shares of 4): ~1 min loaded
def test_shares_of_the_windows_merge_into_the_whole_run():
    """Each host's share of the windows (``windows=``, ``process_share``) merged equals the run of
    all windows draw for draw: every window's chains come from its own index."""
    from bayes_attn.distributed import process_share
    from bayes_attn.inference import merge_umbrella

    model = _mixture_model(0.2, 2.0, 0.4)
    opts = dict(starts=[{"x": np.array([-2.0, 0.0])}, {"x": np.array([2.0, 0.0])}],
                centres=np.linspace(-3, 3, 8), num_warmup=20, num_samples=30, refine=0, seed=5)  # fmt: skip
    whole = run_umbrella(model, "q", **opts)
    parts = [run_umbrella(model, "q", windows=process_share(range(8), i, 2, interleave=True),
                          **opts) for i in (1, 0)]  # fmt: skip
    merged = merge_umbrella(parts)
    for group in ("posterior", "constant_data"):
        a, b = whole[group], merged[group]
        for name in a.data_vars:
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    with pytest.raises(ValueError, match="missing"):
        merge_umbrella(parts[:1])
    with pytest.raises(ValueError, match="refine"):
        run_umbrella(model, "q", **{**opts, "refine": 1}, windows=[0])


def test_reduced_profile_is_normalised():
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    L = task.L
    x = np.linspace(-L / (L - 1) + 1e-6, L - 1e-6, 400001)
    F = reduced_profile(task, hyper, P_STAR, "softmax", x, include_logdet=True)
    log_mass = logsumexp(-F) + math.log(x[1] - x[0])
    assert log_mass == pytest.approx(0.0, abs=1e-3)
    with pytest.raises(ValueError, match="var"):
        reduced_profile(task, hyper, P_STAR, "linear", x)


def test_linear_marginal_profile_against_a_brute_force_grid():
    """Linear attention's F(cG) (c1 integrated out on the census grid) is normalised, puts half
    the mass in each Z2 image, and matches a dense 2-D grid sum of the same density (Riemann sum,
    spacing 1e-3 in c1 over [-3, 3]: error far below the 1e-3 tolerance for this smooth density)."""
    from bayes_attn.theory.modes import linear_log_density

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    P = 400.0
    q = np.linspace(-3.0, 3.0, 1201)
    F = reduced_profile(task, hyper, P, "linear", q, var="cG")
    h = q[1] - q[0]
    assert logsumexp(-F) + math.log(h) == pytest.approx(0.0, abs=1e-4)
    assert logsumexp(-F[q > 0]) + math.log(h) == pytest.approx(math.log(0.5), abs=2e-3)
    c1 = np.arange(-3.0, 3.0, 1e-3)
    pts = np.array([0.0, 0.4, 0.79, 1.2])
    grid = np.stack(np.broadcast_arrays(c1[None], pts[:, None]), -1)
    brute = -logsumexp(linear_log_density(task, hyper, P, grid), axis=1) - math.log(1e-3)
    exact = reduced_profile(task, hyper, P, "linear", pts, var="cG")
    shift = exact - brute  # the normalisation, the same constant at every point
    assert np.ptp(shift) < 1e-3


def test_profile_minima_and_overlap():
    q = np.linspace(-3, 3, 61)
    F = (q**2 - 4) ** 2 / 4
    minima, tops = profile_minima(q, F)
    assert np.allclose(q[minima], [-2, 2]) and np.allclose(q[tops], [0])
    assert overlap(np.zeros(10), np.ones(10)) == 0.0
    assert overlap(np.arange(100.0), np.arange(100.0)) == 1.0


def test_bad_input_is_refused():
    model = _mixture_model(0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="not a latent or deterministic site"):
        run_umbrella(model, "nope", starts=[{"x": np.zeros(2)}])
    with pytest.raises(ValueError, match="centres"):
        run_umbrella(model, "q", starts=[{"x": np.zeros(2)}], centres=[1.0])
    with pytest.raises(ValueError, match="num_samples"):
        run_umbrella(model, "q", num_samples=0)
    from bayes_attn.cli import main

    assert main(["-q", "landscape", "--level", "reduced", "--centres", "1:0:3"]) == 2
    assert main(["-q", "landscape", "--level", "reduced", "--centres", "a:b"]) == 2


@pytest.mark.slow  # 11 windows x 2 chains x 1000 draws of the 2-D Level 2, ~1 min on 2 cores
def test_linear_level2_profile_against_the_marginal():
    """Umbrella + MBAR along linear attention's cG at Level 2 (P = 400, log-determinant in)
    against the quadrature marginal F(cG), conditioned on the windows' range: every bin within 3
    s.e. (measured: |z| <= 2.3 over 60 bins, seed 0)."""
    from bayes_attn.experiments.landscape import run_landscape

    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    idata = run_landscape(task, hyper, 400, "reduced", "linear", centres=np.linspace(0.55, 1.05, 11),
                          num_warmup=200, num_samples=1000, num_chains=2, refine=0, seed=0,
                          progress=False)  # fmt: skip
    prof = landscape_report(idata)
    ok = np.isfinite(prof.F_se.values)
    z = (prof.F.values - prof.F_level2.values)[ok] / prof.F_se.values[ok]
    assert ok.sum() > 40 and np.max(np.abs(z)) < 3.0, z


@pytest.mark.slow  # three umbrella runs end to end; the bad input is in the default run
def test_cli_landscape_diagnose_and_sweep(tmp_path, capsys):
    """The command line (Level 2, a small run) writes a landscape that ``diagnose`` reports, and
    a ``landscape`` sweep point gives the same numbers from the same seed."""
    from bayes_attn.cli import main
    from bayes_attn.experiments.sweep import SweepConfig, run_sweep

    out = tmp_path / "f.nc"
    argv = ["--level", "reduced", "--P", "276", "--samples", "300", "--windows", "48",
            "--refine", "0", "--seed", "3"]  # fmt: skip
    assert main(["-q", "landscape", *argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "minima" in text and "Delta F" in text
    assert main(["-q", "diagnose", str(out), "--plots", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert "umbrella" in report and "per-window R-hat" in report
    assert (tmp_path / "f_profile.png").exists()
    assert main(["-q", "landscape", "--level", "reduced", "--gram-width", "10", "--out",
                 str(tmp_path / "g.nc")]) == 2  # fmt: skip
    cfg = SweepConfig(kind="landscape", P=(276,), activation=("softmax",), seed=(3,),
                      options={"level": "reduced", "num_samples": 300, "max_windows": 48,
                               "refine": 0})  # fmt: skip
    ds = run_sweep(cfg, tmp_path / "s.nc", progress=False)
    assert bool(ds.done.all())
    assert np.isfinite(float(ds.delta_F.squeeze()))
    again = run_sweep(cfg, tmp_path / "s.nc", progress=False)  # resumes: nothing left to do
    assert float(again.delta_F.squeeze()) == float(ds.delta_F.squeeze())


@pytest.mark.slow
def test_level1_small_preset_against_smc():
    """Level 1 at the small preset (sigma^2 = 5, the nested P = 42 dataset of
    docs/validation.md): Delta F at SMC's divide (level_modes) against SMC's 43.34 ± 0.14, within
    3 combined standard errors (docs/scripts/landscape.py small; tens of minutes on two cores)."""
    import jax

    from bayes_attn.experiments.coexistence import level_modes
    from bayes_attn.experiments.landscape import run_landscape

    task, hyper = ba.CopyTask.paper(), ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=5.0)
    tokens = task.sample(jax.random.key(1), 60)[:42]
    _, cut = level_modes(task, hyper, tokens, "kernel")
    # 32 windows x 1 chain x (100 warm-up + 250) draws, one refinement round
    idata = run_landscape(task, hyper, 42, "kernel", tokens=tokens, num_warmup=100,
                          num_samples=250, num_chains=1, max_windows=32, seed=0, progress=False)  # fmt: skip
    prof = landscape_report(idata, divide=cut)
    se = math.hypot(float(prof.delta_F_se), 0.14)
    assert abs(float(prof.delta_F) - 43.34) < 3 * se


@pytest.mark.slow  # three processes, each compiles the Level-2 windows: a few minutes on 2 cores
def test_cli_landscape_on_two_processes_equals_one(tmp_path):
    """``bayes-attn landscape --num-processes 2``: each process runs its share of the windows, the
    first merges them; the result equals the one-process run draw for draw."""
    import os
    import socket
    import subprocess
    import sys

    from bayes_attn import _arviz as az

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # a small run, not to be trusted (its verdict would exit 1): only the merge is checked here
    argv = [sys.executable, "-m", "bayes_attn.cli", "-q", "landscape", "--level", "reduced",
            "--P", "276", "--samples", "60", "--warmup", "30", "--windows", "16", "--refine", "0",
            "--seed", "4", "--allow-untrusted"]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([*argv, "--out", str(tmp_path / "two.nc"), "--num-processes", "2",
                               "--process-id", str(i), "--coordinator", f"127.0.0.1:{port}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]  # fmt: skip
    try:
        logs = [p.communicate(timeout=900)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log
    one = subprocess.run([*argv, "--out", str(tmp_path / "one.nc")], env=env, check=True,
                         capture_output=True, text=True)  # fmt: skip
    assert one.returncode == 0
    a, b = az.from_netcdf(tmp_path / "one.nc"), az.from_netcdf(tmp_path / "two.nc")
    np.testing.assert_array_equal(a.posterior["aG"].values, b.posterior["aG"].values)
    assert b.posterior.attrs["windows"] == a.posterior.attrs["windows"]
