"""The LLC's edges that a new user meets (issue 46): the CLI's defaults, a sampler that
diverges, the verdict beside the number, resuming an interrupted run, bad input, devinterp's
fields.

Most tests run on the quadratic L_n = ½ Σ a_i w_i² (w* = 0, a = (1, 4, 0.25)), whose localized
target has the curvatures h_i = nβ a_i + γ exactly, so a step's fate is known in advance: the
unadjusted Langevin recursion w' = (1 - εh) w + √(2ε) ξ diverges for εh > 2. The CLI's tests put
the quadratic in place of the copy-task problem (``llc_problem``) so that they test the command,
not the MAP; the seeds are fixed and were not chosen.
"""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn._validation import SamplerDiverged
from bayes_attn.analysis.llc import llc_estimate, llc_verdict
from bayes_attn.cli import main
from bayes_attn.inference.llc import llc_step_size, llc_target, run_llc

A = np.array([1.0, 4.0, 0.25])
NBETA, GAMMA = 50.0, 10.0
H_MAX = NBETA * A.max() + GAMMA  # 210


def quadratic(n=100):
    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand((3,)).to_event(1))
    numpyro.factor("loss", -n * 0.5 * jnp.sum(jnp.asarray(A) * w**2))


def normal_model():
    numpyro.sample("x", dist.Normal(0.0, 0.01).expand((2,)).to_event(1))


@pytest.fixture
def quadratic_problem(monkeypatch):
    """``llc_problem`` returns the quadratic at nβ = 50 (n = 100 examples) whatever it is asked."""
    import bayes_attn.experiments.llc as experiment

    monkeypatch.setattr(
        experiment, "llc_problem", lambda *a, **k: (quadratic, (), {}, jnp.zeros(3), 100)
    )


def cli(capsys, *argv):
    code = main(["-q", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------------------------------
# 1. The defaults work on Table 1


class _Stop(Exception):
    pass


def _cli_llc_defaults() -> dict:
    """The defaults of ``bayes-attn llc``'s options, by parameter name."""
    import click

    from bayes_attn.cli import cli as group

    cmd = group.commands["llc"]
    ctx = click.Context(cmd)
    return {p.name: p.get_default(ctx) for p in cmd.params}


def test_cli_llc_defaults_are_llc_settings():
    """The command's sampler options are COMMAND_SETTINGS' (LLCSettings with NUTS), run_llc's
    signature reads LLCSettings, and the two estimate the same quantity: they differ in the
    sampler, its metric and the draws only."""
    import dataclasses
    import inspect

    from bayes_attn.inference.llc import COMMAND_SETTINGS, LLCSettings

    s, c, got = LLCSettings(), COMMAND_SETTINGS, _cli_llc_defaults()
    sig = inspect.signature(run_llc).parameters  # the options come as settings= or **changes
    assert sig["settings"].default is None and "changes" in sig
    assert not {f.name for f in dataclasses.fields(LLCSettings)} & set(sig)
    for option, field in [("sampler", "sampler"), ("metric", "metric"), ("draws", "num_draws"),
                          ("step_size", "step_size"), ("gamma", "gamma")]:  # fmt: skip
        assert got[option] == getattr(c, field), option
    assert (c.sampler, c.metric) == ("nuts", "adapt")
    changed = {f.name for f in dataclasses.fields(c) if getattr(c, f.name) != getattr(s, f.name)}
    assert changed <= {"sampler", "metric", "num_draws", "num_burnin"}
    from bayes_attn.experiments.sweep import DEFAULTS

    assert DEFAULTS["llc"]["num_chains"] == s.num_chains == c.num_chains
    assert got["burnin"] == DEFAULTS["llc"]["num_burnin"] == c.num_burnin


@pytest.mark.slow  # about 10 CPU-minutes: the command's own defaults on Table 1
def test_cli_llc_defaults_pass_their_verdict(capsys, tmp_path):
    """``bayes-attn llc`` with no options (Table 1, softmax, P = 300, d = V + L) gives a run whose
    verdict passes and exits 0: NUTS, λ̂ 14.47 ± 0.15, |w − w*| R-hat 1.002, ESS 837 (before, by
    SGLD: λ̂ 17.48 ± 1.1, R-hat 1.325, |w − w*| R-hat 2.81, ESS 5, exit 1)."""
    out = tmp_path / "llc.nc"
    code, printed, err = cli(capsys, "llc", "--out", out)
    print(printed)  # the estimate and the verdict (pytest -rP shows them)
    verdict = llc_verdict(az.from_netcdf(out))
    assert verdict.trusted and code == 0, (printed, err)


def test_llc_default_width_fits_table_1(monkeypatch, tmp_path):
    """``bayes-attn llc`` with no options used d_model = 16 < V + L = 30 and refused itself; now
    the default width is V + L (the work is stopped where the network is built)."""
    import bayes_attn.experiments.llc as experiment

    widths = []

    def stop(task, hyper, d, key):
        widths.append(d)
        raise _Stop

    monkeypatch.setattr(experiment, "seed_embeddings", stop)
    with pytest.raises(_Stop):
        main(["-q", "llc", "--out", str(tmp_path / "llc.nc")])
    assert widths == [ba.CopyTask.paper().n_features]


# --------------------------------------------------------------------------------------------------
# 2. The step follows the curvature; a diverging sampler stops with one line


def test_auto_step_is_a_tenth_of_the_inverse_curvature():
    """On the quadratic h_max = nβ a_max + γ = 210 exactly (the power method converges to it),
    and ``run_llc``'s default step is 0.1 / h_max, recorded as a number."""
    target = llc_target(quadratic, jnp.zeros(3), nbeta=NBETA, gamma=GAMMA, n=100)
    assert llc_step_size(target) == pytest.approx(0.1 / H_MAX, rel=1e-9)
    idata = run_llc(quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA, num_draws=20)
    assert llc_estimate(idata).step_size == pytest.approx(0.1 / H_MAX, rel=1e-9)
    assert idata.posterior.attrs["step_rule"] == "auto"
    auto = run_llc(quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA, num_draws=20,
                   num_burnin="auto")  # fmt: skip
    assert auto.posterior.attrs["warmup"] == int(np.ceil(5 * H_MAX / (0.1 * GAMMA)))  # 1050


@pytest.mark.parametrize(
    "eps, last",
    [
        (0.1, 40),  # εh_max = 21: non-finite within about 240 steps; seen by step 40
        (0.0125, 200),  # εh_max = 2.6: |1 - εh| = 1.6 a step, finite but blown up by step 200
    ],
)
def test_diverging_sgld_stops_with_one_line(eps, last):
    with pytest.raises(SamplerDiverged) as err:
        run_llc(quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA, step_size=eps,
                num_draws=300, seed=0)  # fmt: skip
    e = err.value
    assert "\n" not in str(e) and "sgld diverged at step" in str(e) and f"{eps:.3g}" in str(e)
    assert 1 <= e.step <= last and e.step_size == eps and e.chains


def test_diverging_run_sgld_stops_with_one_line():
    """run_sgld on N(0, 0.01²): the potential's curvature is 10⁴, so ε = 1 diverges at once
    (before: NaN draws, or NumPyro's 'invalid loc parameter' on a network)."""
    from bayes_attn.inference import run_sgld

    with pytest.raises(SamplerDiverged, match=r"^sgld diverged at step \d+ .*step size 1") as err:
        run_sgld(normal_model, num_chains=2, num_warmup=50, num_samples=50, step_size=1.0,
                 progress=False, init_params={"x": np.zeros((2, 2))})  # fmt: skip
    assert "\n" not in str(err.value) and err.value.step <= 100


def test_cli_diverged_sampler_is_one_line_and_status_1(capsys, tmp_path, quadratic_problem):
    code, out, err = cli(capsys, "llc", "--sampler", "sgld", "--step-size", "0.1", "--nbeta",
                         NBETA, "--gamma", GAMMA, "--out", tmp_path / "llc.nc")  # fmt: skip
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "diverged at step" in lines[0] and "0.1" in lines[0]


# --------------------------------------------------------------------------------------------------
# 4. The verdict beside the number; 5. diagnose on a diverged run


def test_cli_prints_the_verdict_of_diagnose_and_exits_1_when_it_fails(
    capsys, tmp_path, quadratic_problem
):
    """Four chains of 20 draws that start 1 apart (init_noise through the problem's w* is not a
    CLI option, so the chains start at w* and a step of εh_max = 1.9 leaves the MALA acceptance
    far below 0.9): the verdict fails, ``llc`` prints it and exits 1, and with
    --allow-untrusted prints the same and exits 0; ``diagnose`` prints the same verdict."""
    from bayes_attn.analysis.report import read_report

    out = tmp_path / "llc.nc"
    argv = ["llc", "--sampler", "sgld", "--step-size", 1.9 / H_MAX, "--nbeta", NBETA, "--gamma",
            GAMMA, "--draws", "20", "--out", out]  # fmt: skip
    code, printed, err = cli(capsys, *argv)
    verdict = llc_verdict(az.from_netcdf(out))
    assert not verdict.trusted and "FAILS" in str(verdict)
    assert code == 1 and str(verdict) in printed and "--allow-untrusted" in err
    assert str(verdict) in read_report(out).text
    code, printed_again, _ = cli(capsys, *argv, "--allow-untrusted")
    assert code == 0 and str(verdict) in printed_again


def test_diagnose_says_a_nan_run_diverged(capsys, tmp_path):
    idata = run_llc(quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA, step_size=1e-3,
                    num_draws=10)  # fmt: skip
    loss = np.asarray(idata.posterior["loss"]).copy()
    loss[1, 4:] = np.nan
    az.set_variable(idata, "posterior", "loss", ("chain", "draw"), loss)
    path = tmp_path / "nan.nc"
    az.to_netcdf(idata, path)
    code, out, _ = cli(capsys, "diagnose", path)
    assert code == 0
    said = [line for line in out.splitlines() if "diverged" in line.lower()]
    assert len(said) == 1 and "6 of 40 draws are not finite" in said[0]
    assert "R-hat nan" not in out and "the chains disagree" not in out


# --------------------------------------------------------------------------------------------------
# 6. Cost, interrupts and resumes


def test_llc_point_announces_its_cost_and_keeps_its_run(tmp_path, caplog, quadratic_problem):
    from bayes_attn.experiments.llc import llc_point

    keep = tmp_path / "llc.nc"
    call = dict(level="network", task=ba.CopyTask(8, 3), hyper=ba.Hyper.paper(), P=20,
                activation="softmax", keep=keep, nbeta=NBETA, gamma=GAMMA, num_draws=20)  # fmt: skip
    with caplog.at_level("INFO", logger="bayes_attn"):
        first, _ = llc_point(progress=True, **call)
    assert any("on this machine" in r.message and "gradient" in r.message for r in caplog.records)
    assert keep.exists()
    caplog.clear()
    with caplog.at_level("INFO", logger="bayes_attn"):
        again, _ = llc_point(progress=True, **call)
    assert any("holds this run" in r.message for r in caplog.records)
    np.testing.assert_array_equal(again.posterior["loss"], first.posterior["loss"])
    other, _ = llc_point(progress=False, **{**call, "seed": 1})  # other arguments: run anew
    assert not np.array_equal(other.posterior["loss"], first.posterior["loss"])


def _stop_at_the_second_save(monkeypatch):
    """The LLC checkpoint saves after every chunk (chunks of one unit) and raises Ctrl-C after its
    second save: (the saves so far, a call that gives back the real save)."""
    import bayes_attn.inference.llc_checkpoint as ckpt

    save, calls = ckpt.save, []

    def save_then_stop(*args):
        save(*args)
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(ckpt, "save", save_then_stop)
    monkeypatch.setattr(ckpt, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(ckpt, "CHUNK_SECONDS", 0.0)
    return calls, lambda: monkeypatch.setattr(ckpt, "save", save)


def _interrupted_then_resumed(tmp_path, monkeypatch, run):
    """``run_llc(**run)`` whole; then with a checkpoint, stopped by Ctrl-C after its second
    save, refused with another seed, and resumed: (whole, resumed, the checkpoint's path)."""
    whole = run_llc(quadratic, jnp.zeros(3), **run)
    path = tmp_path / "llc.ckpt.npz"
    calls, restore = _stop_at_the_second_save(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_llc(quadratic, jnp.zeros(3), checkpoint=path, **run)
    restore()
    assert path.exists() and len(calls) == 2
    with pytest.raises(ValueError, match="checkpoint: .*other arguments"):
        run_llc(quadratic, jnp.zeros(3), checkpoint=path, **{**run, "seed": run["seed"] + 1})
    resumed = run_llc(quadratic, jnp.zeros(3), checkpoint=path, **run)
    assert not path.exists()  # removed when the run completes
    return whole, resumed


#: the NUTS run of the checkpoint and chunk tests: one set of compiled programs for both (the
#: chains, draws, warm-up and target are constants of the programs; the seed is not)
_NUTS = dict(n=100, sampler="nuts", nbeta=NBETA, gamma=GAMMA, num_draws=60, num_burnin=40,
             thinning=2, seed=3)  # fmt: skip


@pytest.mark.slow  # ~16 s; the Keeper's resume runs by default in the Langevin tests below
def test_interrupted_nuts_resumes_bit_for_bit_and_refuses_other_arguments(tmp_path, monkeypatch):
    """NUTS with a checkpoint, interrupted after its second chunk (in the warm-up), then rerun:
    the same draws as an uninterrupted run; a checkpoint made with another seed is refused."""
    whole, resumed = _interrupted_then_resumed(tmp_path, monkeypatch, _NUTS)
    for group, name in (("posterior", "loss"), ("sample_stats", "acceptance"),
                        ("sample_stats", "diverging")):  # fmt: skip
        np.testing.assert_array_equal(resumed[group][name], whole[group][name])


@pytest.mark.slow  # ~25 s of CPU; the default run resumes the same Keeper (NUTS tests above)
def test_interrupted_exact_llc_resumes_bit_for_bit(tmp_path, monkeypatch):
    """``llc --exact``'s run (exact_frozen_llc, W_O integrated out) keeps the same checkpoint:
    Ctrl-C after its second save, then the same call, gives the uninterrupted run's draws
    (before: a rerun started from nothing, and 10 minutes of NUTS were lost)."""
    import jax

    from bayes_attn import algebra
    from bayes_attn.inference.llc import exact_frozen_llc
    from bayes_attn.models import network_model
    from bayes_attn.models.network import init_embeddings

    task, hyper, d = ba.CopyTask(8, 3), ba.Hyper.paper(), 12
    tokens = task.sample(jax.random.key(1), 12)
    emb = init_embeddings(jax.random.key(2), task, hyper, d)
    U = algebra.span_basis(*emb)
    w_star = {"W_G": 0.1 * U @ U.T, "W_O": np.zeros((task.V, d))}  # any point serves here
    call = dict(model_args=(task, hyper, tokens, "softmax", d),
                model_kwargs={"train_embeddings": False, "embeddings": emb}, num_chains=2,
                num_draws=12, num_burnin=8, seed=4)  # fmt: skip
    whole = exact_frozen_llc(network_model, w_star, **call)
    path = tmp_path / "llc_exact.ckpt.npz"
    _, restore = _stop_at_the_second_save(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        exact_frozen_llc(network_model, w_star, checkpoint=path, **call)
    restore()
    assert path.exists()
    resumed = exact_frozen_llc(network_model, w_star, checkpoint=path, **call)
    assert not path.exists()
    np.testing.assert_array_equal(resumed.posterior["loss"], whole.posterior["loss"])


@pytest.mark.slow  # ~18 s; the Keeper's resume runs by default in the Langevin tests below
def test_interrupted_laplace_nuts_resumes_bit_for_bit(tmp_path, monkeypatch):
    """NUTS in the Laplace metric keeps the same checkpoint (its warm-up adapts the step alone);
    a checkpoint of the window-adapted NUTS is another run's."""
    run = dict(n=100, sampler="nuts", metric="laplace", nbeta=NBETA, gamma=GAMMA, num_draws=30,
               num_burnin=20, seed=3)  # fmt: skip
    whole, resumed = _interrupted_then_resumed(tmp_path, monkeypatch, run)
    for group, name in (("posterior", "loss"), ("sample_stats", "acceptance"),
                        ("sample_stats", "diverging")):  # fmt: skip
        np.testing.assert_array_equal(resumed[group][name], whole[group][name])
    assert whole.posterior.attrs["metric"] == "laplace"


def test_laplace_metric_is_the_inverse_hessian_of_the_target():
    """On the quadratic the target is Gaussian with precisions h_i = nβ a_i + γ: the metric is
    diag(1/h) (to rounding); a metric above LAPLACE_MAX_DIM weights, or of another name, is
    refused naming ``metric``."""
    import bayes_attn.inference.llc_nuts as llc_nuts

    target = llc_target(quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA)
    inv = np.asarray(llc_nuts.laplace_inverse_mass(target))
    np.testing.assert_allclose(inv, np.diag(1 / (NBETA * A + GAMMA)), rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="^metric must be one of"):
        run_llc(quadratic, jnp.zeros(3), n=100, sampler="nuts", metric="dense")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(llc_nuts, "LAPLACE_MAX_DIM", 2)
        with pytest.raises(ValueError, match="^metric: 'laplace' builds a dense 3 x 3"):
            run_llc(quadratic, jnp.zeros(3), n=100, sampler="nuts", metric="laplace")


def double_well(n=100):
    """L_n = w0⁴ - 0.11 w0² + ½ Σ a_i w_i² (i ≥ 1): at w* = 0 it curves down along w0, nβ L_n's
    curvature there -11, beyond the localization's γ = 10."""
    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand((3,)).to_event(1))
    well = w[0] ** 4 - 0.11 * w[0] ** 2 + 0.5 * jnp.sum(jnp.asarray(A[1:]) * w[1:] ** 2)
    numpyro.factor("loss", -n * well)


def test_laplace_metric_is_floored_at_gamma_where_the_loss_curves_down():
    """Where w* is not a minimum the Hessian of -log p can have an eigenvalue at or below zero
    (here -11 + γ = -1): the metric takes it by magnitude, floored at γ (variance 1/γ; before,
    clipped to 1e-8 of the largest, it was 4.8e5, and at the two-layer target of P = 400 NUTS's
    step collapsed below 1e-3), and the other directions keep 1/(nβ a_i + γ). A curvature above
    the floor is kept by magnitude: with the floor at 0 the first variance is 1/|-1| = 1."""
    import bayes_attn.inference.llc_nuts as llc_nuts
    from bayes_attn.inference.hmc import laplace_metric

    target = llc_target(double_well, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA)
    inv = np.asarray(llc_nuts.laplace_inverse_mass(target))
    rest = 1 / (NBETA * A[1:] + GAMMA)
    np.testing.assert_allclose(inv, np.diag([1 / GAMMA, *rest]), rtol=1e-10, atol=1e-14)
    bare = laplace_metric(target.log_density, target.x_star)
    np.testing.assert_allclose(bare, np.diag([1.0, *rest]), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_laplace_nuts_llc_agrees_with_the_exact_value(seed):
    """NUTS in the Laplace metric on the quadratic: λ = ½ Σ nβ a_i / (nβ a_i + γ) exactly; λ̂ is
    within 3.3 MCSE of it (two-sided p = 0.001 per seed) at each of three fixed seeds, not
    chosen, with an ESS of λ̂ of at least 100 per chain (the exploration check's bar)."""
    exact = 0.5 * np.sum(NBETA * A / (NBETA * A + GAMMA))
    idata = run_llc(quadratic, jnp.zeros(3), n=100, sampler="nuts", metric="laplace",
                    nbeta=NBETA, gamma=GAMMA, num_draws=500, num_burnin=100, seed=seed)  # fmt: skip
    est = llc_estimate(idata)
    assert abs(est.llc_mean - exact) < 3.3 * est.mcse, (est.llc_mean, est.mcse, exact)
    assert est.ess >= 100 * idata.posterior.sizes["chain"]  # the exploration check's bar
    assert not idata.sample_stats["diverging"].any()


@pytest.mark.parametrize("sampler", ["sgld", "mala"])
def test_interrupted_langevin_resumes_bit_for_bit(tmp_path, monkeypatch, sampler):
    """SGLD and MALA keep the same checkpoint as NUTS: Ctrl-C in the burn-in keeps the finished
    chunks, and the rerun gives the draws of an uninterrupted run, bit for bit."""
    run = dict(n=100, sampler=sampler, nbeta=NBETA, gamma=GAMMA, step_size=1e-3, num_draws=30,
               num_burnin=20, thinning=2, seed=5)  # fmt: skip
    whole, resumed = _interrupted_then_resumed(tmp_path, monkeypatch, run)
    for group, name in (("posterior", "loss"), ("posterior", "distance"),
                        ("sample_stats", "acceptance")):  # fmt: skip
        np.testing.assert_array_equal(resumed[group][name], whole[group][name])


def test_langevin_interrupted_among_the_draws_resumes(tmp_path, monkeypatch):
    """Stopped after its 2nd save with no burn-in (so among the kept draws): the same draws."""
    run = dict(n=100, nbeta=NBETA, gamma=GAMMA, step_size=1e-3, num_draws=12, thinning=3, seed=6)
    whole, resumed = _interrupted_then_resumed(tmp_path, monkeypatch, run)
    np.testing.assert_array_equal(resumed.posterior["loss"], whole.posterior["loss"])


def test_chunks_do_not_change_the_langevin_draws(monkeypatch):
    """Chunks sized by wall time (Ctrl-C acts between them) give the draws of one long chunk."""
    import bayes_attn.inference.llc_checkpoint as ckpt

    run = dict(n=100, nbeta=NBETA, gamma=GAMMA, step_size=1e-3, num_draws=50, num_burnin=30,
               thinning=3, seed=2)  # fmt: skip
    a = run_llc(quadratic, jnp.zeros(3), **run)
    monkeypatch.setattr(ckpt, "CHUNK_SECONDS", 0.0)  # every chunk one unit
    b = run_llc(quadratic, jnp.zeros(3), **run)
    np.testing.assert_array_equal(a.posterior["loss"], b.posterior["loss"])


@pytest.mark.parametrize("metric", ["adapt", pytest.param("laplace", marks=pytest.mark.slow)])
def test_chunks_do_not_change_the_nuts_draws(monkeypatch, metric):
    """The same for NUTS (each step's key is folded from its index), warm-up included, in either
    metric."""
    import bayes_attn.inference.llc_checkpoint as ckpt

    run = {**_NUTS, "seed": 2, "metric": metric}  # the programs of the checkpoint test
    a = run_llc(quadratic, jnp.zeros(3), **run)
    monkeypatch.setattr(ckpt, "CHUNK_SECONDS", 0.0)
    b = run_llc(quadratic, jnp.zeros(3), **run)
    np.testing.assert_array_equal(a.posterior["loss"], b.posterior["loss"])


# --------------------------------------------------------------------------------------------------
# 7. Bad input


@pytest.fixture
def no_llc_work(monkeypatch):
    import bayes_attn.experiments.llc as experiment

    def started(*args, **kwargs):
        raise AssertionError("the work started before the arguments were checked")

    monkeypatch.setattr(experiment, "llc_point", started)


def test_out_that_is_not_a_netcdf_result_is_refused(capsys, tmp_path, no_llc_work):
    text = tmp_path / "notes.txt"
    text.write_text("my notes")
    code, _, err = cli(capsys, "llc", "--out", text)
    assert code == 2 and "--out" in err and "not a NetCDF result" in err
    assert text.read_text() == "my notes"


def test_batch_size_above_P_is_refused(capsys, tmp_path, no_llc_work):
    code, _, err = cli(capsys, "llc", "--P", "20", "--batch-size", "21", "--out",
                       tmp_path / "llc.nc")  # fmt: skip
    assert code == 2 and "batch_size" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("sampler, chains", [("smc", 16), ("sgld", 4), ("nuts", 4)])
def test_llc_default_chains_follow_the_sampler(capsys, tmp_path, monkeypatch, sampler, chains):
    """SMC's error is the spread of its independent runs, and its own check wants 8 or more:
    `llc --sampler smc` defaults to llc_smc.DEFAULT_RUNS of them, the others to the sweep's 4.
    Ctrl-C names the checkpoint of the sampler that ran (before: the exact run's only)."""
    import bayes_attn.experiments.llc as experiment

    seen = {}

    ckpt = tmp_path / f"llc_{sampler}.ckpt.npz"

    def record(*args, **kwargs):
        seen.update(kwargs)
        ckpt.write_bytes(b"")  # as if its first checkpoint were written (SMC's is never read)
        raise KeyboardInterrupt  # the CLI reports what it keeps

    monkeypatch.setattr(experiment, "llc_point", record)
    code, _, err = cli(capsys, "llc", "--sampler", sampler, "--out", tmp_path / "llc.nc")
    assert code == 130 and seen["num_chains"] == chains
    assert ("metric" in seen) == (sampler == "nuts")  # NUTS's option goes to NUTS alone
    assert (str(ckpt) in err) == (sampler != "smc") and "exact" not in err, err


def test_llc_interrupt_names_every_checkpoint_kept(capsys, tmp_path, monkeypatch):
    """With --exact, Ctrl-C names the run's checkpoint and the exact run's, as llc_point keeps
    them."""
    import bayes_attn.experiments.llc as experiment

    def stop(*args, **kwargs):
        for name in ("run_nuts.ckpt.npz", "run_exact.ckpt.npz"):  # both checkpoints written
            (tmp_path / name).write_bytes(b"")
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "llc_point", stop)
    code, _, err = cli(capsys, "llc", "--exact", "--out", tmp_path / "run.nc")
    assert code == 130
    for name in ("run_nuts.ckpt.npz (the nuts run's state)", "run_exact.ckpt.npz (the exact"):
        assert name in err, err
    assert "run.nc (its run finished)" not in err, err  # OUT was not written


def test_w_star_is_checked_before_any_work():
    from bayes_attn.models import network_model

    task, hyper = ba.CopyTask(8, 3), ba.Hyper.paper()
    tokens = task.sample(__import__("jax").random.key(1), 12)
    call = dict(model_args=(task, hyper, tokens, "softmax", 12),
                model_kwargs={"train_embeddings": False}, num_draws=2)  # fmt: skip
    good = {"W_G": np.zeros((12, 12)), "W_O": np.zeros((3, 12))}
    with pytest.raises(ValueError, match=r"w_star: 'W_G' must have shape \(12, 12\)"):
        run_llc(network_model, {**good, "W_G": np.zeros((11, 12))}, **call)
    nan = good["W_O"].copy()
    nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="w_star: 'W_O' has entries that are not finite"):
        run_llc(network_model, {**good, "W_O": nan}, **call)
    with pytest.raises(ValueError, match="w_star: .* not finite"):
        run_llc(quadratic, jnp.array([0.0, np.nan, 0.0]), n=100)


# --------------------------------------------------------------------------------------------------
# 8. devinterp's fields


def test_llc_std_is_devinterps_and_the_devinterp_view():
    est = llc_estimate(run_llc(quadratic, jnp.zeros(3), n=100, nbeta=NBETA, gamma=GAMMA,
                               step_size=1e-3, num_draws=50, seed=1))  # fmt: skip
    assert est.llc_std == pytest.approx(np.std(est.llc_per_chain, ddof=1), rel=1e-12)
    view = est.as_devinterp()
    assert set(view) == {"llc/mean", "llc/std", "loss/trace", *(f"llc-chain/{i}" for i in range(4))}
    assert view["llc/mean"] == est.llc_mean and view["llc/std"] == est.llc_std
    assert [view[f"llc-chain/{i}"] for i in range(4)] == list(est.llc_per_chain)
    np.testing.assert_array_equal(view["loss/trace"], est.loss_trace)


@pytest.mark.parametrize(
    "argv, said",
    [
        # before: 1000 steps of 7-127 gradients, the adapted metric's warm-up and trees
        (["--metric", "laplace"], "llc by nuts, 4 chains x 700 steps"),
        (["--sampler", "nuts"], "llc by nuts, 4 chains x 1000 steps"),
        # before: "llc by smc, 16 chains x 1550 steps", SGLD's schedule, then SMC's own
        (["--sampler", "smc"], None),
    ],
)
def test_llc_announces_the_run_it_makes(argv, said, capsys, tmp_path, quadratic_problem,
                                        monkeypatch):  # fmt: skip
    """The cost announced is the run's: NUTS in the Laplace metric warms up for LAPLACE_WARMUP
    steps at 3-31 gradients each; SMC announces its own cost (by tempering step) alone."""
    import functools

    import bayes_attn.experiments.llc as experiment

    @functools.wraps(run_llc)  # its signature, whose defaults the announcement reads
    def stop(*args, **kwargs):
        raise KeyboardInterrupt  # the announcement is made; stop before the run

    monkeypatch.setattr(experiment, "run_llc", stop)
    main(["llc", *argv, "--nbeta", str(NBETA), "--gamma", str(GAMMA), "--out",
          str(tmp_path / "llc.nc")])  # fmt: skip
    lines = [s for s in capsys.readouterr().err.splitlines() if "llc by " in s and " x " in s]
    if said is None:
        assert lines == [], lines
    else:
        assert len(lines) == 1 and said in lines[0], lines
        per_draw = (3, 31) if "laplace" in argv else (7, 127)
        steps = 4 * (700 if "laplace" in argv else 1000)
        assert f"{steps * per_draw[0]:.2g}-{steps * per_draw[1]:.2g} gradients" in lines[0], lines
