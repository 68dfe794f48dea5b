"""The reduced theory against the Level-1 MAP, optimised over M with the exact evidence."""

import jax
import pytest

from bayes_attn.theory import global_saddle, level1_map


@pytest.mark.parametrize("activation", ["linear", "softmax"])
@pytest.mark.parametrize("P", [150, 400])
def test_level2_saddle_agrees_with_level1_map(paper, P, activation):
    """Two sampled datasets per point. Tolerance: 2% of the leading order parameter plus 0.01 absolute.

    The dataset-to-dataset spread of the Level-1 MAP is ~0.5% in c1 (a1) and ~0.002 in cG (aG) here
    (THEORY.md fact 4 reports a few per cent); the absolute part covers order parameters near zero.
    """
    task, hyper = paper
    sd = global_saddle(task, hyper, P, activation)
    want = (sd.c1, sd.cG) if activation == "linear" else (sd.a1, sd.aG)
    for seed in (0, 1):
        tok = task.sample(jax.random.key(seed), P)
        m = level1_map(task, hyper, tok, activation)
        assert m.converged
        for got, w in zip((m.c1, m.cG), want, strict=True):
            assert abs(got - w) <= 0.02 * max(abs(x) for x in want) + 0.01
        assert m.token_residual < 0.1  # the MAP stays near the 2-D subspace
