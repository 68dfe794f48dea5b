"""Frozen embeddings at any width: the network's posterior over (W_G, W_O) is the Level-1 posterior
on the whitened features R^T psi, with g = W^T W / d = R R^T (docs/theory.md, "Frozen embeddings at
any width"). Closed forms against the explicit network, at widths below, near and far above V + L.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import potential_energy

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.models import init_params, kernel_limit_model
from bayes_attn.models.network import forward, neg_log_posterior
from bayes_attn.theory.action import evidence_exact
from bayes_attn.theory.level1 import level1_action, level1_map

TASK, HYPER = ba.CopyTask.paper(), ba.Hyper.paper()


def _network(d, seed=1, scale=20.0):
    p = init_params(jax.random.key(seed), TASK, HYPER, d)
    p["W_G"] = scale * p["W_G"]  # sizeable logits, so softmax is far from uniform
    return p


@pytest.mark.parametrize("d", [12, 64, 10_000])  # below V + L = 30, above it, and the paper's width
@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_network_logits_and_readout_are_whitened_level1(d, activation):
    """W^T W_G W / d = R M R^T and W_O W = w R^T with M = U^T W_G U, w = sqrt(d) W_O U: the network's
    attention and readout equal the whitened Level-1 ones to rounding."""
    p = _network(d)
    tok = TASK.sample(jax.random.key(0), 40)
    g = algebra.embedding_gram(p["W_emb"], p["p"])
    U = algebra.span_basis(p["W_emb"], p["p"])
    M, w = U.T @ p["W_G"] @ U, jnp.sqrt(d) * p["W_O"] @ U
    f, A = forward(p, tok, activation)
    R = algebra.gram_factor(g)
    A2 = algebra.attention(algebra.logits_from_M(M, tok, TASK.V, R), activation)
    f2 = A2 @ algebra.readout_from_w(w @ R.T, tok, TASK.V)
    assert float(jnp.std(A)) > 1e-2
    np.testing.assert_allclose(A2, A, atol=1e-12)
    np.testing.assert_allclose(f2, f, atol=1e-12)
    # under the prior the whitened coordinates are i.i.d. N(0, g_W / chi) on the Gram's range:
    # U^T U is the orthogonal projector onto it (I for d >= V + L)
    proj = np.asarray(g @ np.linalg.pinv(np.asarray(g), rcond=1e-10))
    np.testing.assert_allclose(U.T @ U, proj, atol=1e-10)
    if d >= TASK.n_features:
        np.testing.assert_allclose(U.T @ U, np.eye(TASK.n_features), atol=1e-10)


@pytest.mark.parametrize("d", [12, 64])
@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_profiled_network_objective_is_the_level1_action(d, activation):
    """Minimising the network's negative log-posterior over W_O in closed form (a ridge regression
    in d dimensions) leaves chi times the whitened Level-1 action (no log-determinant) plus the
    prior of the part of W_G outside the span."""
    p = _network(d)
    tok = TASK.sample(jax.random.key(0), 60)
    frozen = {"W_emb": p["W_emb"], "p": p["p"]}
    W = jnp.concatenate([p["W_emb"], p["p"]], axis=1)
    A = forward(p, tok, activation)[1]
    h = algebra.features(tok, TASK.V) @ W.T  # (P, L, d): every token's embedding
    Phi = np.asarray(A @ h).reshape(-1, d)
    y = np.asarray(algebra.targets(tok, TASK.V)).reshape(-1, TASK.V)
    lam = HYPER.sigma2 * d / HYPER.g_o
    W_O = np.linalg.solve(Phi.T @ Phi + lam * np.eye(d), Phi.T @ y).T
    U_net = neg_log_posterior({"W_G": p["W_G"], "W_O": jnp.asarray(W_O)}, tok, HYPER, activation,
                              frozen=frozen) / HYPER.chi  # fmt: skip
    g = algebra.embedding_gram(p["W_emb"], p["p"])
    U = algebra.span_basis(p["W_emb"], p["p"])
    M = U.T @ p["W_G"] @ U
    outside = float(jnp.sum(p["W_G"] ** 2) - jnp.sum(M**2)) / (2 * HYPER.g_w)
    s = float(level1_action(M, tok, TASK, HYPER, activation, gram=g))
    assert float(U_net) == pytest.approx(s + outside, rel=1e-12)


@pytest.mark.parametrize("d", [12, 32])
@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_integrating_w_o_out_leaves_the_level1_log_joint_plus_a_constant(d, activation):
    """Integrating W_O out of the network's likelihood by brute force (a dense Gaussian over every
    token of one output column, the design read off the forward by autodiff) gives the whitened
    Level-1 factor -chi s - logdet plus -(V P L / 2) log(2 pi sigma^2 / chi), the same constant at
    every W_G; and the W_G prior splits into the prior of M = U^T W_G U and the part outside the
    span. So each basin's network evidence is Level 1's times one constant, and Delta F is the same
    at both levels (docs/theory.md, "Frozen embeddings at any width")."""
    tok = TASK.sample(jax.random.key(5), 6)
    P, L, V = tok.shape[0], TASK.L, TASK.V
    chi, s2 = HYPER.chi, HYPER.sigma2
    y = np.asarray(algebra.targets(tok, V)).reshape(-1, V)
    const = -0.5 * V * P * L * np.log(2 * np.pi * s2 / chi)
    offsets = []
    for seed in (1, 2):
        p = _network(d, seed=seed, scale=10.0)
        frozen = {"W_emb": p["W_emb"], "p": p["p"]}

        def f_of(W_O, p=p, frozen=frozen):
            return forward({**frozen, "W_G": p["W_G"], "W_O": W_O}, tok, activation)[0]

        H = np.asarray(jax.jacobian(f_of)(jnp.zeros((V, d)))).reshape(P * L, V, V, d)
        var_o = HYPER.g_o / (chi * d)
        log_marg = 0.0
        for v in range(V):
            Hv = H[:, v, v, :]  # output column v depends on row v of W_O only
            C = s2 / chi * np.eye(P * L) + var_o * Hv @ Hv.T
            _, logdet = np.linalg.slogdet(2 * np.pi * C)
            log_marg += -0.5 * y[:, v] @ np.linalg.solve(C, y[:, v]) - 0.5 * logdet
        U = algebra.span_basis(p["W_emb"], p["p"])
        M = U.T @ p["W_G"] @ U
        R = algebra.gram_factor(algebra.embedding_gram(p["W_emb"], p["p"]))
        A = algebra.attention(algebra.logits_from_M(M, tok, V, R), activation)
        s_data, logdet = evidence_exact(A, tok, V, s2, HYPER.g_o, R)
        offsets.append(log_marg - float(-chi * s_data - logdet))
        # the prior: |W_G|^2 = |M|^2 + |outside|^2, so the densities split (Jacobian 1)
        outside = float(jnp.sum(p["W_G"] ** 2) - jnp.sum(M**2))
        assert outside >= -1e-9 * float(jnp.sum(p["W_G"] ** 2))
    np.testing.assert_allclose(offsets, const, rtol=1e-9)


@pytest.mark.parametrize("activation", ["linear", "softmax"])
def test_identity_gram_is_level1_exactly(activation):
    """At g = I the reduced form is today's Level 1: the same density at the same M."""
    tok = TASK.sample(jax.random.key(3), 30)
    M = 0.7 * jax.random.normal(jax.random.key(4), (TASK.n_features,) * 2)
    args = (TASK, HYPER, tok, activation)
    u0 = potential_energy(kernel_limit_model, args, {}, {"M": M})
    u1 = potential_energy(kernel_limit_model, args, {"gram": jnp.eye(TASK.n_features)}, {"M": M})
    assert float(u1) == pytest.approx(float(u0), rel=1e-13)


def test_gram_is_checked():
    tok = TASK.sample(jax.random.key(3), 5)
    with pytest.raises(ValueError, match="gram must have shape"):
        level1_map(TASK, HYPER, tok, "linear", gram=np.eye(5))
    with pytest.raises(ValueError, match="gram must be positive semidefinite"):
        level1_map(TASK, HYPER, tok, "linear", gram=-np.eye(TASK.n_features))
    bad = np.eye(TASK.n_features)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="gram must be finite"):
        potential_energy(kernel_limit_model, (TASK, HYPER, tok, "linear"), {"gram": bad},
                         {"M": jnp.zeros((30, 30))})  # fmt: skip


def test_reduced_map_equals_adams_explicit_map():
    """Adam on the explicit network (d = 32, frozen embeddings, W_G and W_O trained) and L-BFGS on
    the whitened Level-1 action, from the same start, reach the same minimum: the same action per
    chi, the same whitened M and the same order parameters, to the optimisers' tolerance. Measured
    when written: action equal to 1e-15, M to 8e-8 relative, aG to 6e-10."""
    from bayes_attn.inference import train_adam

    d, P, act = 32, 100, "softmax"
    tok = TASK.sample(jax.random.key(5), P)
    p0 = init_params(jax.random.key(2), TASK, HYPER, d)
    ds = train_adam(TASK, HYPER, act, d, P, members=1, tokens=tok[None],
                    init={k: v[None] for k, v in p0.items()}, train_embeddings=False, lr=1e-2,
                    decay="cosine", max_steps=3000, patience=10**9, return_params=True,
                    progress=False)  # fmt: skip
    frozen = {"W_emb": p0["W_emb"], "p": p0["p"]}
    trained = {"W_G": jnp.asarray(ds.W_G.values[0]), "W_O": jnp.asarray(ds.W_O.values[0])}
    adam_action = float(neg_log_posterior(trained, tok, HYPER, act, frozen=frozen)) / HYPER.chi
    g = algebra.embedding_gram(p0["W_emb"], p0["p"])
    U = algebra.span_basis(p0["W_emb"], p0["p"])
    m = level1_map(TASK, HYPER, tok, act, M0=U.T @ p0["W_G"] @ U, gram=g)
    assert m.converged
    assert adam_action == pytest.approx(m.action, rel=1e-10)
    M_adam = U.T @ trained["W_G"] @ U
    assert float(jnp.linalg.norm(M_adam - m.M) / jnp.linalg.norm(m.M)) < 1e-5
    pr = algebra.project(forward({**trained, **frozen}, tok, act)[1])
    assert float(pr["cG"]) == pytest.approx(m.cG, abs=1e-7)
    assert float(pr["c1"]) == pytest.approx(m.c1, abs=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("d", [32, 64])
def test_nuts_on_the_explicit_network_matches_nuts_on_the_reduced_form(d):
    """NUTS on ``network_model(..., train_embeddings=False)`` (d^2 + V d weights) and NUTS on the
    whitened ``kernel_limit_model(..., gram=g)`` ((V + L)^2 weights, W_O integrated out) sample one
    posterior: the means and sds of (a1, aG) agree within 4 combined MCSE (ArviZ's, of the mean and
    of the sd). Softmax, P = 100 (one phase), 2 chains x 500 draws each; fixed seeds. Measured at
    d = 32 when written: |z| <= 1.32 (a few minutes per width on 2 cores)."""
    import arviz as az

    from bayes_attn.inference import run_nuts
    from bayes_attn.models import network_model

    P, act = 100, "softmax"
    tok = TASK.sample(jax.random.key(5), P)
    p0 = init_params(jax.random.key(2), TASK, HYPER, d)
    g = algebra.embedding_gram(p0["W_emb"], p0["p"])
    kw = dict(num_chains=2, num_warmup=300, num_samples=500, progress=False)
    net = run_nuts(network_model, model_args=(TASK, HYPER, tok, act, d),
                   model_kwargs=dict(train_embeddings=False, embeddings=(p0["W_emb"], p0["p"])),
                   seed=0, **kw)  # fmt: skip
    red = run_nuts(kernel_limit_model, model_args=(TASK, HYPER, tok, act),
                   model_kwargs=dict(gram=g), seed=1, **kw)  # fmt: skip
    for name in ("a1", "aG"):
        for method, stat in (("mean", np.mean), ("sd", np.std)):
            a, b = (float(stat(i.posterior[name].values)) for i in (net, red))
            ea, eb = (float(az.mcse(i, var_names=[name], method=method)[name]) for i in (net, red))
            assert abs(a - b) < 4 * np.hypot(ea, eb), (name, method, a, b, ea, eb)


def test_init_embeddings_are_init_params_embeddings():
    key = jax.random.key(7)
    full = init_params(key, TASK, HYPER, 24)
    from bayes_attn.models import init_embeddings

    W_emb, p = init_embeddings(key, TASK, HYPER, 24)
    np.testing.assert_array_equal(W_emb, full["W_emb"])
    np.testing.assert_array_equal(p, full["p"])


@pytest.mark.slow  # over 20 s on 2 cores: the default suite's 10-minute budget
def test_frozen_protocol_point_lines_up_with_the_explicit_protocol():
    """The exact path sees the explicit protocol's members: the same embeddings (those Adam holds
    fixed) and datasets; at d = 10^4 its MAP sits on the Level-2 saddle and every start agrees.
    Small: 2 members, softmax at P = 400."""
    from bayes_attn.experiments.frozen import frozen_point, member_grams
    from bayes_attn.experiments.protocol import ProtocolConfig, protocol_keys
    from bayes_attn.inference import train_adam

    cfg = ProtocolConfig.quick(Ps=(20, 400), members=2, d_model=40)
    grams = member_grams(cfg, HYPER, "softmax", 400, 40)
    adam = protocol_keys(cfg.seed).point("softmax", 400).adam
    ds = train_adam(TASK, HYPER, "softmax", 40, 5, members=2, key=adam, max_steps=1,
                    train_embeddings=False, return_params=True, progress=False)  # fmt: skip
    for m in range(2):
        g = algebra.embedding_gram(ds.W_emb.values[m], ds.p.values[m])
        np.testing.assert_allclose(grams[m], g, rtol=1e-12)
    # at d = 40 the Gram is far from the identity (E g^-1 = d / (d - V - L - 1) = 4.4): the exact
    # MAP copies much less than the theory (measured: aG 3.08 and 3.14 against 6.05); at d = 10^4
    # both members sit within a few % of the Level-2 saddle (5.98, 5.96), at the same (Level-1) cost
    out, sec = frozen_point(cfg, HYPER, "softmax", 400, d_model=40)
    assert np.all(out["exact_cG"] < 0.6 * out["theory_cG"])
    out, sec = frozen_point(cfg, HYPER, "softmax", 400, d_model=10_000)
    assert out["exact_global_min"].all() and np.all(out["exact_starts_agree"] == 1)
    np.testing.assert_allclose(out["exact_cG"], out["theory_cG"], rtol=0.05)
    assert sec["map"] > 0
    # the old forms with grid indices: frozen_point's warns (same point), member_grams' refuses
    from bayes_attn.experiments.protocol import point_values

    with pytest.warns(DeprecationWarning, match="frozen_point"):
        assert point_values(cfg, 1, 1, "frozen_point") == ("softmax", 400)
    with pytest.raises(TypeError, match="values"):
        member_grams(cfg, HYPER, 1, 40)


def test_run_frozen_protocol_stacks_points_and_records_its_settings():
    """The whole-grid driver: dims, the record in the attrs, and a value the theory fixes (below the
    linear P* = 22.76 the MAP is the origin at any width)."""
    from bayes_attn.experiments.frozen import run_frozen_protocol
    from bayes_attn.experiments.protocol import ProtocolConfig

    ds, sec = run_frozen_protocol(ProtocolConfig.quick(Ps=(20,), members=2), HYPER, d_model=64,
                                  progress=False)  # fmt: skip
    assert ds.exact_cG.dims == ("activation", "P", "member")
    assert ds.theory_cG.dims == ("activation", "P")
    assert ds.attrs["d_model"] == 64 and ds.attrs["sigma2"] == HYPER.sigma2
    lin = ds.sel(activation="linear", P=20)
    np.testing.assert_allclose(lin.exact_c1, 0.0, atol=1e-6)
    np.testing.assert_allclose(lin.exact_cG, 0.0, atol=1e-6)
    assert sec["map"] > 0 and sec["posterior"] == 0


@pytest.mark.slow
def test_frozen_posterior_means_match_nuts_on_the_reduced_model():
    """The protocol's posterior means (``member_nuts``: the first member's Laplace metric shared by
    the members) against NumPyro's NUTS on ``kernel_limit_model(..., gram=g)`` for the same
    member: the held-out aG's mean within 4 combined MCSE. Softmax, P = 60, d = 64, 2 members x
    300 draws against 2 chains x 300; fixed seeds."""
    from bayes_attn import _arviz as az
    from bayes_attn.experiments.frozen import _posteriors, member_grams
    from bayes_attn.experiments.protocol import ProtocolConfig, held_out
    from bayes_attn.inference import run_nuts

    cfg = ProtocolConfig.quick(Ps=(60,), members=2)
    test = held_out(cfg)
    tok = np.stack([TASK.sample(jax.random.key(k), 60) for k in (11, 12)])
    grams = np.stack(member_grams(cfg, HYPER, "softmax", 60, 64))
    Ms = [level1_map(TASK, HYPER, tok[m], "softmax", gram=grams[m]).M for m in range(2)]
    post = _posteriors(TASK, HYPER, tok, test, "softmax", grams, Ms, 300, jax.random.key(0))
    assert np.all(post["ess"] > 30) and np.all(post["leapfrogs"] >= 1)
    ref = run_nuts(kernel_limit_model, model_args=(TASK, HYPER, tok[1], "softmax"),
                   model_kwargs={"gram": grams[1]}, num_chains=2, num_warmup=300,
                   num_samples=300, seed=3, progress=False)  # fmt: skip
    n = TASK.n_features
    aG = np.asarray([
        float(algebra.project(algebra.attention(algebra.logits_from_M(
            M.reshape(n, n), test, TASK.V, algebra.gram_factor(grams[1])), "softmax"))["cG"])
        for M in ref.posterior["M"].values.reshape(-1, n, n)[::5]
    ])  # fmt: skip
    e_ref = float(az.ess(aG.reshape(2, -1)))
    se = np.hypot(aG.std() / np.sqrt(e_ref), post["cG_sd"][1] / np.sqrt(post["ess"][1]))
    assert abs(post["cG"][1] - aG.mean()) < 4 * se, (post["cG"][1], aG.mean(), se)
