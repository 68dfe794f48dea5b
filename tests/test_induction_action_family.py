"""The extended reduced family of the two-layer (induction-head) theory: it contains the
two-parameter family, its coordinates realise the logits they name, and its action is the kernel
limit's potential restricted to it (docs/theory.md §13, "The extended family")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bayes_attn import algebra
from bayes_attn.induction import InductionTask
from bayes_attn.inference.potential import flat_potential
from bayes_attn.models.two_layer import forward, two_layer_kernel_model
from bayes_attn.task import Hyper
from bayes_attn.theory import induction_action as ia
from bayes_attn.tokens import InContextMarkov

HYPER = Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)
FULL = ("copy_line", "match1", "pos1", "induction", "match2", "pos2")


def _task(L=5, V=2):
    return InductionTask(L, V, InContextMarkov(1.0, start="uniform"))


def _theta(fam, seed=0, scale=0.5):
    return scale * jax.random.normal(jax.random.PRNGKey(seed), (fam.size,))


def test_family_contains_the_two_parameter_family(L=5, V=2):
    """("copy", "induction") is induction_forms, its action induction_action (1e-12); the copy
    line's per-position strengths at one value give the same forms."""
    fam = ia.induction_family(("copy", "induction"), L, V)
    theta = jnp.array([1.3, -0.7])
    for a, b in zip(ia.family_forms(theta, fam), ia.induction_forms(theta, L, V), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-12)
    ref = ia.induction_reference(_task(L, V), HYPER, num=16, seed=1)
    assert float(ia.family_action(theta, 200.0, ref, fam)) == pytest.approx(
        float(ia.induction_action(theta, 200.0, ref)), rel=1e-12
    )
    line = ia.induction_family(("copy_line", "induction"), L, V)
    flat = jnp.concatenate([jnp.full(L - 1, 1.3), jnp.array([-0.7])])
    for a, b in zip(ia.family_forms(flat, line), ia.family_forms(theta, fam), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-12)


@pytest.mark.parametrize("activation", ["softmax", "linear"])
def test_layer1_coordinates_realise_their_logits(activation):
    """M1(theta) gives the logits tau1 ([i = j] - 1/V) + W1[a, b] on every visible key (softmax:
    up to a constant per query, so W1[a, 0] = 0), at the least norm: no other M1 with those
    visible logits is shorter (the residual is orthogonal to every logit-preserving direction)."""
    L, V = 5, 2
    fam = ia.induction_family(("match1", "pos1"), L, V, activation)
    theta = _theta(fam, 1)
    M1 = ia.family_forms(theta, fam)[0]
    tokens = _task(L, V).sample(jax.random.PRNGKey(2), 6)
    psi = algebra.features(tokens, V)
    K = jnp.einsum("pai,ij,pbj->pab", psi, M1, psi)
    W = np.zeros((L, L))
    for t, name in zip(theta[1:], fam.labels[1:], strict=True):
        a, b = map(int, name[3:-1].split(","))
        W[a, b] = float(t)
    same = np.asarray(tokens[:, :, None] == tokens[:, None, :], float)
    want = float(theta[0]) * (same - 1.0 / V) + W
    tri = np.tril(np.ones((L, L), bool))
    got = np.asarray(K)
    if activation == "softmax":
        got, want = got - got[:, :, :1], want - want[:, :, :1]
    np.testing.assert_allclose(got[:, tri], want[:, tri], atol=1e-12)
    # least norm: M1 lies in the row space of the constraints
    pinv, _ = ia._layer1_pinv(L, V, activation == "softmax")
    rowspace = pinv @ np.linalg.pinv(pinv)
    np.testing.assert_allclose(rowspace @ np.ravel(M1), np.ravel(M1), atol=1e-10)


@pytest.mark.parametrize("activation", ["softmax", "linear"])
def test_layer2_projection_keeps_every_logit(activation):
    """Layer 2's coordinates are projected off the features' fixed null directions: the patterns
    of the projected M2 equal those of the raw blocks for a token-dependent layer 1 (tau1 != 0)."""
    L, V = 6, 3
    fam = ia.induction_family(("match1", "copy_line", "induction", "match2", "pos2"), L, V,
                              activation)  # fmt: skip
    theta = _theta(fam, 3, 1.0)
    M1, M2 = ia.family_forms(theta, fam)
    labels2 = [lab for lab in fam.labels if not lab.startswith(("tau1", "cG1"))]
    raw = np.zeros_like(np.asarray(M2))
    n, c = V + L, np.eye(V) - 1.0 / V
    blocks = {"kappa2": (slice(0, V), slice(n, n + V)), "tau2[x,x]": (slice(0, V), slice(0, V)),
              "tau2[A1x,x]": (slice(n, n + V), slice(0, V)),
              "tau2[A1x,A1x]": (slice(n, n + V), slice(n, n + V))}  # fmt: skip
    for t, lab in zip(theta[fam.B1.shape[0] :], labels2, strict=True):
        if lab in blocks:
            raw[blocks[lab]] += float(t) * c
        else:
            a, b = map(int, lab[3:-1].split(","))
            raw[V + a, V + b] += float(t)
    psi = algebra.features(_task(L, V).sample(jax.random.PRNGKey(4), 8), V)
    A2 = forward(M1, M2, psi, activation, True)[2]
    A2_raw = forward(M1, jnp.asarray(raw), psi, activation, True)[2]
    np.testing.assert_allclose(np.asarray(A2), np.asarray(A2_raw), atol=1e-12)
    assert float(jnp.sum(M2**2)) <= float(np.sum(raw**2)) + 1e-12


@pytest.mark.parametrize("activation", ["softmax", "linear"])
def test_action_is_the_exact_potential_restricted_to_the_family(activation):
    """At P = N, chi times the action (with the log-determinant) is the kernel limit's potential
    at the family's forms up to one constant: equal differences between two points to 1e-10."""
    task = _task(5, 2)
    ref = ia.induction_reference(task, HYPER, num=12, seed=5)
    fam = ia.induction_family(FULL, task.L, task.V, activation)
    pot = flat_potential(two_layer_kernel_model, model_args=(task, HYPER, ref.tokens, activation))
    const = []
    for seed in (6, 7):
        theta = _theta(fam, seed)
        M1, M2 = ia.family_forms(theta, fam)
        U = float(pot.U(ravel_pytree({"M1": M1, "M2": M2})[0]))
        const.append(U - HYPER.chi * float(ia.family_action(theta, 12.0, ref, fam, HYPER.chi)))
    assert abs(const[0] - const[1]) < 1e-10 * max(1.0, abs(const[0]))


def test_family_minimum_lowers_the_action_and_scores_are_finite():
    task = _task(5, 2)
    ref = ia.induction_reference(task, HYPER, num=16, seed=8)
    fam = ia.induction_family(("copy_line", "match1", "induction"), task.L, task.V)
    s0 = float(ia.family_action(jnp.zeros(fam.size), 300.0, ref, fam))
    x, s = ia.family_minimum(fam, 300.0, ref)
    assert s <= s0 and x.shape == (fam.size,)
    assert all(np.isfinite(v) for v in ia.family_scores(x, fam, ref).values())


def test_family_refuses_unknown_components():
    with pytest.raises(ValueError, match="components"):
        ia.induction_family(("copy", "bogus"), 5, 2)
    with pytest.raises(ValueError, match="activation"):
        ia.induction_family(("copy",), 5, 2, "relu")
