"""The relabelled dataset of the symmetry test (docs/validation.md, "Is the symmetry breaking
spontaneous?"): every block is a token permutation of the base, its counts are token-symmetric,
and the two-layer kernel limit's potential on it is invariant under relabelling the forms; the
pieces of the ``induction_symmetry`` and ``induction_closure`` sweep kinds (the projection on the
token-symmetric forms, the Hessian on the asymmetric ones, their options' checks)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bayes_attn.experiments.induction_symmetry import (
    asymmetric_hessian,
    off_symmetric,
    perm_distance,
    relabel_forms,
    symmetrise,
)
from bayes_attn.experiments.sweep import SweepConfig
from bayes_attn.induction import InductionTask, relabellings
from bayes_attn.inference.potential import flat_potential
from bayes_attn.keys import dataset_key
from bayes_attn.models.two_layer import two_layer_kernel_model
from bayes_attn.task import Hyper
from bayes_attn.tokens import InContextMarkov

HYPER = Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)


def _task(L=5, V=3):
    return InductionTask(L, V, InContextMarkov(1.0, start="uniform"))


@pytest.mark.parametrize("V", [2, 3])
def test_blocks_are_token_permutations(V):
    """Block k renames token i to the k-th permutation's entry i; block 0 is the base."""
    base = np.asarray(_task(L=6, V=V).sample(dataset_key(seed=0), 7))
    out = relabellings(base, V)
    perms = list(itertools.permutations(range(V)))
    assert out.shape == (len(perms) * 7, 6)
    for k, p in enumerate(perms):
        block = out[7 * k : 7 * (k + 1)]
        np.testing.assert_array_equal(block, np.asarray(p)[base])
    np.testing.assert_array_equal(out[:7], base)


def test_counts_are_token_symmetric(V=3):
    """Every token, and every ordered pair of distinct tokens (bigrams a -> b, a != b), occurs
    equally often in the relabelled dataset, and so does every repeated pair (a -> a)."""
    out = relabellings(np.asarray(_task(L=8, V=V).sample(dataset_key(seed=1), 5)), V)
    unigram = np.bincount(out.ravel(), minlength=V)
    assert np.all(unigram == unigram[0])
    bigram = np.zeros((V, V), dtype=int)
    np.add.at(bigram, (out[:, :-1].ravel(), out[:, 1:].ravel()), 1)
    off = bigram[~np.eye(V, dtype=bool)]
    assert np.all(off == off[0]) and np.all(np.diag(bigram) == bigram[0, 0])


def test_potential_is_invariant_on_the_relabelled_dataset(V=3):
    """U(p(M)) = U(M) to 1e-10 for every relabelling p on the closed dataset; not so on its base
    (the finite dataset is not token-symmetric)."""
    task = _task(L=5, V=V)
    base = task.sample(dataset_key(seed=2), 4)
    n = task.n_features
    k1, k2 = jax.random.split(jax.random.PRNGKey(3))
    M1, M2 = 0.5 * jax.random.normal(k1, (n, n)), 0.5 * jax.random.normal(k2, (2 * n, 2 * n))
    spread = {}
    for name, tokens in (("closed", jnp.asarray(relabellings(base, V))), ("base", base)):
        pot = flat_potential(two_layer_kernel_model, model_args=(task, HYPER, tokens, "softmax"))
        U = jax.jit(pot.U)
        u0 = float(U(ravel_pytree({"M1": M1, "M2": M2})[0]))
        us = [float(U(ravel_pytree(dict(zip(("M1", "M2"), relabel_forms(M1, M2, p, V),
                                            strict=True)))[0]))
              for p in itertools.permutations(range(V))]  # fmt: skip
        spread[name] = max(abs(u - u0) for u in us)
    assert spread["closed"] < 1e-10
    assert spread["base"] > 1e-3


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="V"):
        relabellings(np.zeros((2, 3), dtype=int), 1)
    with pytest.raises(ValueError, match="tokens"):
        relabellings(np.zeros(3, dtype=int), 2)
    with pytest.raises(ValueError, match="tokens"):
        relabellings(np.full((2, 3), 2), 2)


def _forms(task, key, scale=0.5):
    n = task.n_features
    k1, k2 = jax.random.split(jax.random.PRNGKey(key))
    return scale * jax.random.normal(k1, (n, n)), scale * jax.random.normal(k2, (2 * n, 2 * n))


def test_symmetrise_is_the_projection_on_symmetric_forms(V=3):
    """The relabelling average is idempotent and fixed by every relabelling (1e-12); the shares
    off the symmetric forms are 0 there and in (0, 1) at random forms; a relabelled copy of the
    forms is at distance 0 after the right relabelling only."""
    task = _task(L=4, V=V)
    M1, M2 = _forms(task, 4)
    S1, S2 = symmetrise(M1, M2, V)
    T1, T2 = symmetrise(S1, S2, V)
    np.testing.assert_allclose(T1, S1, atol=1e-12)
    np.testing.assert_allclose(T2, S2, atol=1e-12)
    for p in itertools.permutations(range(V)):
        R1, R2 = relabel_forms(S1, S2, p, V)
        np.testing.assert_allclose(R1, S1, atol=1e-12)
        np.testing.assert_allclose(R2, S2, atol=1e-12)
    assert max(off_symmetric(S1, S2, V)) < 1e-24
    assert all(0 < f < 1 for f in off_symmetric(M1, M2, V))
    p = (2, 0, 1)
    d, found = perm_distance((M1, M2), relabel_forms(M1, M2, p, V), V)
    inverse = tuple(int(i) for i in np.argsort(p))
    assert d < 1e-12 and found == inverse
    assert perm_distance((M1, M2), relabel_forms(M1, M2, p, V), V, identity=True)[0] > 0.1


# slow (30 s in the default run: the dense Hessian of the model's potential compiles); the kind's
# eigenvalues at P = 1000 and 2000 equal the former benchmark's (docs/validation.md, "Is the
# symmetry breaking spontaneous?"), an independent check at the study's size
@pytest.mark.slow
def test_asymmetric_hessian_is_the_dense_hessian_projected(V=2):
    """At a token-symmetric point of a relabelling-closed dataset, the blocked potential's
    Hessian on the asymmetric forms (exact products) has the eigenvalues of the model's dense
    Hessian projected on them (1e-8 relative)."""
    task = _task(L=3, V=V)
    tokens = jnp.asarray(relabellings(task.sample(dataset_key(seed=5), 3), V))
    forms = symmetrise(*_forms(task, 6), V)
    lam, dim = asymmetric_hessian(task, HYPER, tokens, "softmax", forms)
    pot = flat_potential(two_layer_kernel_model, model_args=(task, HYPER, tokens, "softmax"))
    x, unravel = ravel_pytree({"M1": forms[0], "M2": forms[1]})
    H = np.asarray(jax.hessian(pot.U)(x))
    S = np.asarray(jax.vmap(lambda v: ravel_pytree(dict(zip(
        ("M1", "M2"), symmetrise(unravel(v)["M1"], unravel(v)["M2"], V), strict=True)))[0])(
        jnp.eye(x.size)))  # fmt: skip
    w, Q = np.linalg.eigh(np.eye(x.size) - S)
    Q = Q[:, w > 0.5]
    assert dim == Q.shape[1] and 0 < dim < x.size
    np.testing.assert_allclose(lam, np.linalg.eigvalsh(Q.T @ H @ Q), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize(
    "kind, options, match",
    [
        ("induction_symmetry", {"runs": ["real:nowhere"]}, "runs"),
        ("induction_symmetry", {"runs": ["both:zero"]}, "runs"),
        ("induction_symmetry", {"runs": ["sym:zero"], "hessian": 4}, "hessian"),
        ("induction_symmetry", {"maxiter": 0}, "maxiter"),
        ("induction_closure", {"families": ["2", "nope"]}, "families"),
        ("induction_closure", {"sym": "yes"}, "sym"),
        ("induction_closure", {"maps": 3}, "maps"),
    ],
)
def test_bad_options_name_the_parameter(kind, options, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig(kind=kind, P=(12,), L=(4,), V=(2,), activation=("softmax",),
                    tokens="icl-markov:alpha=1,start=uniform", options=options)  # fmt: skip
