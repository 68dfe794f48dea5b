"""The two-layer causal model (the induction head), at both levels: its reduction to the one-layer
models, its exact evidence against Monte Carlo over the readout, and a hand-built induction circuit
against the in-context bigram estimator."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

from bayes_attn import algebra
from bayes_attn.induction import InductionTask
from bayes_attn.models.kernel_limit import kernel_limit_model
from bayes_attn.models.network import network_model
from bayes_attn.models.two_layer import (
    forward,
    induction_scores,
    two_layer_kernel_model,
    two_layer_network_model,
)
from bayes_attn.task import CopyTask, Hyper
from bayes_attn.theory import induction_refs as R

Z = 4.0  # every statistical check: |z| < 4 (one false alarm in ~16,000 per check)


def _density(model, args, kwargs, params):
    return float(log_density(model, args, kwargs, params)[0])


@pytest.mark.parametrize("activation", ["linear", "softmax"])
@pytest.mark.parametrize("frozen", [False, True])
def test_one_layer_copy_reduction_of_the_kernel_limit(activation, frozen):
    """Layer 2 removed, the readout on h1 only, the copy task: today's Level-1 model, to 1e-12
    (log density and order parameters), with and without frozen embeddings."""
    task, hyper = CopyTask(L=5, V=3), Hyper.paper()
    k = jax.random.split(jax.random.key(0), 3)
    tokens = task.sample(k[0], 7)
    n = task.n_features
    M = 0.7 * jax.random.normal(k[1], (n, n))
    gram = None
    if frozen:  # a narrow width, so that the Gram is far from the identity
        W = jax.random.normal(k[2], (11, n))
        gram = W.T @ W / 11
    one = _density(kernel_limit_model, (task, hyper, tokens, activation, gram), {}, {"M": M})
    two = _density(two_layer_kernel_model, (task, hyper, tokens, activation, gram),
                   {"layers": 1, "readout": ("h1",)}, {"M1": M})  # fmt: skip
    assert two == pytest.approx(one, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_one_layer_copy_reduction_of_the_network(activation):
    task, hyper, d = CopyTask(L=4, V=3), Hyper.paper(), 9
    k = jax.random.split(jax.random.key(1), 6)
    tokens = task.sample(k[0], 5)
    p = {
        "W_emb": jax.random.normal(k[1], (d, 3)),
        "p": jax.random.normal(k[2], (d, 4)),
        "W_G": 0.3 * jax.random.normal(k[3], (d, d)),
        "W_O": 0.1 * jax.random.normal(k[4], (3, d)),
    }
    one = _density(network_model, (task, hyper, tokens, activation, d), {}, p)
    q = {"W_emb": p["W_emb"], "p": p["p"], "W_G1": p["W_G"], "W_O": p["W_O"]}
    two = _density(two_layer_network_model, (task, hyper, tokens, activation, d),
                   {"layers": 1, "readout": ("h1",)}, q)  # fmt: skip
    assert two == pytest.approx(one, rel=1e-12, abs=1e-12)


def test_network_and_kernel_limit_share_the_forward():
    """The network's logits and outputs equal the kernel-limit forward at its (M1, M2, w)."""
    from bayes_attn.models.two_layer import network_forms

    task, d = InductionTask(5, 3), 7
    k = jax.random.split(jax.random.key(2), 6)
    tokens = task.sample(k[0], 4)
    W = jax.random.normal(k[1], (d, task.n_features))
    G1, G2 = jax.random.normal(k[2], (d, d)), jax.random.normal(k[3], (2 * d, 2 * d))
    W_O = jax.random.normal(k[4], (3, 4 * d))
    M1, M2, w = network_forms(W, G1, G2, W_O)
    Phi, A1, A2 = forward(M1, M2, algebra.features(tokens, 3), "softmax", True)
    # per token, in d dimensions: h0 = W psi, h1 = A1 h0, z = [h0, h1], h2 = A2 z
    h0 = algebra.features(tokens, 3) @ W.T
    B1 = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((5, 5), bool)),
                                  jnp.einsum("pad,de,pbe->pab", h0, G1, h0) / d, -jnp.inf), -1)  # fmt: skip
    h1 = B1 @ h0
    z = jnp.concatenate([h0, h1], -1)
    B2 = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((5, 5), bool)),
                                  jnp.einsum("pad,de,pbe->pab", z, G2, z) / d, -jnp.inf), -1)  # fmt: skip
    f = jnp.concatenate([h0, h1, B2 @ z], -1) @ W_O.T
    np.testing.assert_allclose(A1, B1, atol=1e-12)
    np.testing.assert_allclose(A2, B2, atol=1e-12)
    np.testing.assert_allclose(Phi @ w.T, f, atol=1e-10)


def test_exact_evidence_against_monte_carlo_over_the_readout():
    """log p(y | M1, M2) with the readout integrated out (the model's density less the priors of
    M1 and M2, plus the Gaussian's normalising constant), against the log of the mean likelihood
    over 2.5 x 10^5 prior readouts (its standard error by the delta method; budget Z se)."""
    from scipy.stats import norm

    task, hyper = InductionTask(3, 2), Hyper(chi=2.0, g_w=1.0, g_o=1.0, sigma2=4.0)
    k = jax.random.split(jax.random.key(3), 4)
    tokens = task.sample(k[0], 2)
    n = task.n_features
    M1, M2 = jax.random.normal(k[1], (n, n)), jax.random.normal(k[2], (2 * n, 2 * n))
    noise2, prior2 = hyper.sigma2 / hyper.chi, hyper.g_o / hyper.chi
    y = task.targets(tokens)[:, :-1].reshape(-1, 2)
    density = _density(two_layer_kernel_model, (task, hyper, tokens, "softmax"), {},
                       {"M1": M1, "M2": M2})  # fmt: skip
    sd = math.sqrt(hyper.g_w / hyper.chi)
    priors = (
        norm.logpdf(np.asarray(M1), scale=sd).sum() + norm.logpdf(np.asarray(M2), scale=sd).sum()
    )
    exact = density - priors - 0.5 * y.size * math.log(2 * math.pi * noise2)

    Phi, _, _ = forward(M1, M2, algebra.features(tokens, 2), "softmax", True)
    Phi = Phi[:, :-1].reshape(y.shape[0], -1)
    w = math.sqrt(prior2) * jax.random.normal(k[3], (250_000, 2, Phi.shape[1]))
    r = y[None] - jnp.einsum("nd,kvd->knv", Phi, w)
    ll = -0.5 * jnp.sum(r**2, axis=(1, 2)) / noise2 - 0.5 * y.size * math.log(2 * math.pi * noise2)
    m = jnp.max(ll)
    e = jnp.exp(ll - m)
    mc = float(m + jnp.log(jnp.mean(e)))
    se = float(jnp.std(e) / jnp.mean(e)) / math.sqrt(e.size)
    assert abs(mc - exact) < Z * se, (mc, exact, se)
    assert se < 0.05  # the check has power: the evidence is pinned to a few percent


def _induction_circuit(task, beta: float):
    """M1 = copy (position a attends to a - 1), M2 = match (the query's token against the key's
    copied token, the key at position 0 shut out), the readout on h2's token block."""
    V, L = task.V, task.L
    n = V + L
    M1 = jnp.zeros((n, n)).at[V + jnp.arange(1, L), V + jnp.arange(L - 1)].set(beta)
    M2 = jnp.zeros((2 * n, 2 * n))
    M2 = M2.at[jnp.arange(V), n + jnp.arange(V)].set(beta)  # token x[a] -> copied x[b-1]
    M2 = M2.at[jnp.arange(V), V].set(-beta)  # every query shuts out the key at position 0
    w = jnp.zeros((V, 4 * n)).at[jnp.arange(V), 2 * n + jnp.arange(V)].set(1.0)
    return M1, M2, w


@pytest.mark.parametrize(
    ("activation", "readout"),
    [("softmax", ("h0", "h1", "h2")), pytest.param("linear", ("h1", "h2"), marks=pytest.mark.slow)],
)
def test_network_with_the_readout_integrated_out_is_its_exact_marginal(activation, readout):
    """``two_layer_network_model(integrate_readout=True)`` against the full model's potential
    integrated over W_O in closed form (it is quadratic in W_O: U(w*) + 1/2 log det H - D/2
    log 2 pi, w* and H from jax.hessian): the same function of the other weights up to a
    constant, to 1e-9 of the potential, at three random points (d = 8, L = 5, V = 2, P = 7,
    blocks of 3); the deterministic sites are the full model's."""
    from bayes_attn.inference.potential import flat_potential

    task, hyper, d = InductionTask(5, 2, "icl-markov:alpha=1"), Hyper(5.0, 1.0, 2.0, 3.0), 8
    tokens = task.sample(jax.random.key(0), 7)
    args = (task, hyper, tokens, activation, d)
    full = flat_potential(two_layer_network_model, args, {"readout": readout})
    marg = flat_potential(two_layer_network_model, args,
                          {"readout": readout, "integrate_readout": True, "block": 3})  # fmt: skip
    assert "W_O" in full.shapes and "W_O" not in marg.shapes
    shape = full.shapes["W_O"]

    def u(w, z):
        return full.U(full.ravel({**marg.unravel(z), "W_O": w.reshape(shape)}))

    w0 = jnp.zeros(math.prod(shape))

    @jax.jit
    def closed_form(z):  # the exact integral of exp(-u) over W_O, u quadratic in it
        H = jax.hessian(u)(w0, z)
        w_star = -jnp.linalg.solve(H, jax.grad(u)(w0, z))
        U = u(w_star, z) + 0.5 * jnp.linalg.slogdet(H)[1] - 0.5 * w0.size * jnp.log(2 * jnp.pi)
        return U, w_star

    got, want = [], []
    for i in range(3):
        z = 0.7 * jax.random.normal(jax.random.key(10 + i), (marg.dim,))
        U, w_star = closed_form(z)
        want.append(float(U))
        got.append(float(marg.U(z)))
        ref = full.sites(full.ravel({**marg.unravel(z), "W_O": w_star.reshape(shape)}))
        np.testing.assert_allclose(marg.sites(z)["copy1"], ref["copy1"], rtol=1e-12)
    diff = np.array(got) - np.array(want)
    assert np.ptp(diff) <= 1e-9 * max(abs(x) for x in want)


def test_hand_built_induction_circuit_is_the_in_context_bigram():
    """Where x[a] has been followed before (the estimator is defined), the circuit's output is the
    unsmoothed in-context bigram n_ij / n_i, and its loss that estimator's loss (computed
    exactly on the same sequences); its scores say copy head and induction head."""
    task = InductionTask(12, 3)
    tokens = task.sample(jax.random.key(4), 300)
    M1, M2, w = _induction_circuit(task, beta=60.0)
    Phi, A1, A2 = forward(M1, M2, algebra.features(tokens, 3), "softmax", True)
    f = (Phi @ w.T)[:, :-1]
    big = R.empirical_bigram(tokens, 3)
    seen = jnp.sum(big, axis=-1) > 0
    assert int(seen.sum()) > 1000
    np.testing.assert_allclose(jnp.where(seen[..., None], f, 0.0), big, atol=1e-9)
    y = task.targets(tokens)[:, :-1]
    loss = lambda g: float(jnp.sum(jnp.where(seen, 0.5 * jnp.sum((y - g) ** 2, -1), 0)))  # noqa: E731
    assert loss(f) == pytest.approx(loss(big), rel=1e-9)
    s = induction_scores(A1, A2, tokens, 3)
    assert float(s["induction2"]) == pytest.approx(1.0, abs=1e-9)
    assert float(s["copy1"]) > 0.9 * task.L * (1 - 1 / task.L)


def test_uniform_attention_scores_are_zero_excess():
    task = InductionTask(6, 2)
    tokens = task.sample(jax.random.key(5), 50)
    n = task.n_features
    _, A1, A2 = forward(jnp.zeros((n, n)), jnp.zeros((2 * n, 2 * n)),
                        algebra.features(tokens, 2), "softmax", True)  # fmt: skip
    s = induction_scores(A1, A2, tokens, 2)
    assert float(s["induction2_excess"]) == pytest.approx(0.0, abs=1e-12)


def test_bad_input_names_the_parameter():
    task, hyper = InductionTask(4, 2), Hyper.paper()
    tokens = task.sample(jax.random.key(0), 3)
    with pytest.raises(ValueError, match="readout"):
        log_density(two_layer_kernel_model, (task, hyper, tokens, "softmax"),
                    {"layers": 1}, {"M1": jnp.zeros((6, 6))})  # fmt: skip
    with pytest.raises(ValueError, match="layers"):
        log_density(two_layer_kernel_model, (task, hyper, tokens, "softmax"), {"layers": 3}, {})
    with pytest.raises(ValueError, match="readout"):
        log_density(two_layer_kernel_model, (task, hyper, tokens, "softmax"),
                    {"readout": ("h3",)}, {})  # fmt: skip
    with pytest.raises(ValueError, match="tokens"):
        log_density(two_layer_kernel_model, (task, hyper, tokens + 5, "softmax"), {}, {})
    for kw, name in (
        ({"integrate_readout": True}, "d_model"),
        ({"integrate_readout": 2}, "integr"),
    ):
        with pytest.raises(ValueError, match=name):  # d = 4 < n = 6: K would be singular
            z = {"W_emb": jnp.ones((4, 2)), "p": jnp.ones((4, 4)), "W_G1": jnp.zeros((4, 4)),
                 "W_G2": jnp.zeros((8, 8))}  # fmt: skip
            log_density(two_layer_network_model, (task, hyper, tokens, "softmax", 4), kw, z)
    with pytest.raises(ValueError, match="block"):
        log_density(two_layer_kernel_model, (task, hyper, tokens, "softmax"), {"block": 0},
                    {"M1": jnp.zeros((6, 6)), "M2": jnp.zeros((12, 12))})  # fmt: skip


def test_the_model_factory_gives_the_two_layers_for_the_induction_task():
    from bayes_attn.models import levels

    task, hyper = InductionTask(5, 3), Hyper.paper()
    tokens = task.sample(jax.random.key(0), 4)
    model, args, kw = levels.model_at("kernel", task, hyper, tokens, "softmax")
    assert model is two_layer_kernel_model and levels.level_of(model) == "kernel"
    model, args, kw = levels.model_at("network", task, hyper, tokens, "linear", d_model=8)
    assert model is two_layer_network_model and args[-1] == 8
    with pytest.raises(ValueError, match="level: the induction task has no reduced"):
        levels.model_at("reduced", task, hyper, 10.0, "softmax")
    with pytest.raises(ValueError, match="d_model"):
        levels.model_at("network", task, hyper, tokens, "softmax")


# slow: test_induction_cli.test_map_writes_a_sweep_file_that_diagnose_reads[kernel] runs
# induction_map end to end (L = 5, P = 20); the Bayes bound below stays in the default run
@pytest.mark.slow
def test_induction_map_at_a_tiny_size():
    """The MAP experiment end to end (two starts, scores, losses)."""
    from bayes_attn.experiments.induction import induction_map
    from bayes_attn.tokens import InContextMarkov

    task = InductionTask(6, 2, InContextMarkov(1.0, start="uniform"))
    hyper = Hyper(chi=5.0, g_w=1.0, g_o=1.0, sigma2=5.0)
    out = induction_map(task, hyper, 60, "softmax", seed=1, num_test=400, maxiter=60)
    for k in ("U_zero", "U_circuit", "loss", "loss_bigram", "copy1", "induction2", "kl_bigram"):
        assert np.isfinite(out[k]), k
    assert out["start_won"] in (0.0, 1.0, 2.0)
    assert out["loss_bigram"] < out["loss_uniform"]


def test_no_loss_below_bayes_at_the_hand_built_circuit():
    """The hand-built circuit's held-out loss (at its readout mean) is not below the Bayes-optimal
    loss (the Polya bigram of the uniform-start source) beyond four standard errors of the paired
    per-sequence difference."""
    from bayes_attn.experiments.induction import circuit, readout_mean
    from bayes_attn.tokens import InContextMarkov

    task = InductionTask(6, 2, InContextMarkov(1.0, start="uniform"))
    hyper = Hyper(chi=5.0, g_w=1.0, g_o=1.0, sigma2=5.0)
    # the Bayes bound, paired per sequence, at the hand-built circuit's readout mean
    tokens = task.sample(jax.random.key(7), 200)
    test = task.sample(jax.random.key(8), 2000)
    c = circuit(task, 3.0)
    w = readout_mean(c["M1"], c["M2"], task, hyper, tokens, "softmax")
    Phi, _, _ = forward(c["M1"], c["M2"], algebra.features(test, 2), "softmax", True)
    d = np.asarray(R.loss_per_sequence(Phi @ w.T, test, 2)) - np.asarray(
        R.loss_per_sequence(R.bayes_optimal(task, test), test, 2)
    )
    assert d.mean() > -Z * d.std(ddof=1) / math.sqrt(d.size), (d.mean(), d.std())


@pytest.mark.slow
def test_induction_study_config_runs_at_its_quick_size(tmp_path):
    """The study's config (bayes_attn/configs/induction_study.toml) at its [quick] size, through
    run_sweep: every point done, the outputs finite, the provenance names the kind and the source."""
    from pathlib import Path

    import bayes_attn
    from bayes_attn.experiments.sweep import SweepConfig, read_sweep_table, run_sweep

    path = Path(bayes_attn.__file__).parent / "configs" / "induction_study.toml"
    cfg = SweepConfig.from_dict(read_sweep_table(path, quick=True))
    ds = run_sweep(cfg, tmp_path / "q.nc", progress=False)
    assert bool(ds["done"].all())
    assert np.isfinite(ds["loss"]).all() and np.isfinite(ds["copy1"]).all()
    assert ds.attrs["kind"] == "induction" and "start=uniform" in ds.attrs["config"]


def test_find_modes_by_a_difference_of_gradients_finds_the_exact_modes():
    """The induction MAP's Krylov steps with Hessian-vector products by a difference of gradients
    (the sweep's default) reach the modes of the exact products from both starts: potentials
    within 1e-9 relative, positions within 1e-5 (the optimiser's gradient tolerance is 1e-7);
    an unknown ``hvp`` is named."""
    from bayes_attn.experiments.induction import START_SCALE, circuit
    from bayes_attn.inference.potential import find_mode, find_modes
    from bayes_attn.tokens import InContextMarkov

    task = InductionTask(4, 2, InContextMarkov(1.0, start="uniform"))
    hyper = Hyper(chi=5.0, g_w=1.0, g_o=1.0, sigma2=5.0)
    tokens = task.sample(jax.random.key(3), 20)
    n = task.n_features
    k1, k2 = jax.random.split(jax.random.key(4))
    starts = [circuit(task, 3.0), {"M1": START_SCALE * jax.random.normal(k1, (n, n)),
                                   "M2": START_SCALE * jax.random.normal(k2, (2 * n, 2 * n))}]  # fmt: skip
    args = (task, hyper, tokens, "softmax")
    new = find_modes(two_layer_kernel_model, starts=starts, model_args=args, maxiter=80,
                     hvp="difference")  # fmt: skip
    exact = find_modes(two_layer_kernel_model, starts=starts, model_args=args, maxiter=80)
    for m, old in zip(new, exact, strict=True):
        assert old.converged and m.converged
        assert abs(m.U - old.U) <= 1e-9 * abs(old.U)
        np.testing.assert_allclose(m.x, old.x, atol=1e-5)
    with pytest.raises(ValueError, match="hvp"):
        find_mode(two_layer_kernel_model, start=starts[0], model_args=args, hvp="bfgs")
