"""The relabelled dataset of the symmetry test (docs/validation.md, "Is the symmetry breaking
spontaneous?"): every block is a token permutation of the base, its counts are token-symmetric,
and the two-layer kernel limit's potential on it is invariant under relabelling the forms."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bayes_attn.induction import InductionTask, relabellings
from bayes_attn.inference.potential import flat_potential
from bayes_attn.keys import dataset_key
from bayes_attn.models.two_layer import two_layer_kernel_model
from bayes_attn.task import Hyper
from bayes_attn.tokens import InContextMarkov

HYPER = Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=30.0)


def _task(L=5, V=3):
    return InductionTask(L, V, InContextMarkov(1.0, start="uniform"))


def _relabel_forms(M1, M2, p, V):
    """Pi^T M Pi on both layers, Pi permuting the token block of the features."""
    n = M1.shape[0]
    Pi = jnp.eye(n)[np.r_[list(p), V:n]]
    Pi2 = jax.scipy.linalg.block_diag(Pi, Pi)
    return Pi.T @ M1 @ Pi, Pi2.T @ M2 @ Pi2


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
        us = [float(U(ravel_pytree(dict(zip(("M1", "M2"), _relabel_forms(M1, M2, p, V),
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


@pytest.mark.slow
def test_symmetry_benchmark_runs(tmp_path):
    """``benchmarks/induction_order_parameters.py symmetry`` at a tiny size (P = 6, two steps)
    writes its row, with the potential invariant on the relabelled dataset, and reads it back."""
    import subprocess
    import sys

    import xarray as xr

    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    script = str(root / "benchmarks" / "induction_order_parameters.py")
    out = str(tmp_path / "sym.nc")
    for start in ("zero", "circuit"):
        subprocess.run([sys.executable, script, "symmetry", out, "sym:6:0", start, "2"],
                       check=True, cwd=root, capture_output=True)  # fmt: skip
    ds = xr.open_dataset(out)
    assert list(ds.run.values) == ["sym:6:0:zero", "sym:6:0:circuit"]
    assert int(ds.P_data[0]) == 6 and float(ds.perm_dU.max()) < 1e-9
    assert float(ds.off_symmetric1.sel(run="sym:6:0:circuit")) < 1e-12
    report = subprocess.run([sys.executable, script, "symmetry_report", out], check=True,
                            cwd=root, capture_output=True, text=True).stdout  # fmt: skip
    assert "vs circuit" in report
