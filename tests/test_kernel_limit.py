"""The kernel-limit (Level 1) posterior as a NumPyro model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.analysis import diagnose
from bayes_attn.inference import run_nuts
from bayes_attn.models import kernel_limit_model
from bayes_attn.theory import global_saddle, level1_action

# The scale that puts the paper-size linear P* at 100 (not the paper's Table 1, sigma^2 = 30); this
# test was designed at it (its P* and sample sizes below are quoted at this scale).
P100_SCALE = ba.Hyper(chi=30.0, g_w=1.0, g_o=1.0, sigma2=131.8)


def test_kernel_limit_model_sites_dims_and_density():
    task, hyper = ba.CopyTask(L=4, V=2), ba.Hyper.paper()
    tok = task.sample(jax.random.key(0), 20)
    idata = run_nuts(
        kernel_limit_model,
        model_args=(task, hyper, tok, "softmax"),
        num_chains=2,
        num_warmup=50,
        num_samples=50,
        progress_bar=False,
    )
    post = idata.posterior
    assert post["M"].dims == ("chain", "draw", "row", "col")
    assert list(post.row.values[:3]) == ["x0", "x1", "p0"]
    assert {"a1", "aG", "token_residual"} <= set(post.data_vars)
    np.testing.assert_array_equal(idata.observed_data["tokens"].values, np.asarray(tok))
    assert idata.posterior.attrs["level"] == "kernel"
    # the model's log density is -chi * (Level-1 action with log-determinant), up to a constant
    from numpyro.infer.util import log_density

    @jax.jit  # one compiled program each (eagerly, every op compiles: 3.2 s -> 0.7 s of CPU)
    def logp(M):
        return log_density(kernel_limit_model, (task, hyper, tok, "softmax"), {}, {"M": M})[0]

    M1, M2 = (0.2 * jax.random.normal(jax.random.key(k), (6, 6)) for k in (1, 2))
    S = jax.jit(lambda M: hyper.chi * level1_action(M, tok, task, hyper, "softmax", True))
    assert abs(float(logp(M1) - logp(M2)) + float(S(M1) - S(M2))) < 1e-8


@pytest.mark.slow
@pytest.mark.parametrize("P", [30, 400])
def test_kernel_limit_posterior_mean_agrees_with_reduced_saddle(P):
    """L = 8, V = 3 (P* = 90.9), P below and above P*.

    Tolerance: |posterior mean - saddle| <= 0.5 posterior sd + 4 MCSE. The saddle is the chi -> infinity
    limit of the reduced theory on the population; the kernel-limit posterior at chi = 30 is shifted
    from it by O(1/chi) (asymmetry of the action, the log-determinant) and by the difference between one
    dataset and the EK average, O(1/sqrt(PL)). Measured here: 0.2 sd in c1 and 0.35 sd in cG at P = 400.
    Chains start in the c1 > 0 image of the Z2 pair.
    """
    task, hyper = ba.CopyTask(L=8, V=3), P100_SCALE
    tok = task.sample(jax.random.key(1), P)
    sd = global_saddle(task, hyper, P, "linear")
    M0 = algebra.min_norm_M(algebra.reduced_logits(sd.c1, sd.cG, task.L), task.V)
    init = {"M": jnp.broadcast_to(M0, (2, *M0.shape))}
    idata = run_nuts(
        kernel_limit_model,
        model_args=(task, hyper, tok, "linear"),
        num_chains=2,
        num_warmup=400,
        num_samples=400,
        init_params=init,
        seed=2,
        progress_bar=False,
    )
    d = diagnose(idata, var_names=["c1", "cG"])
    for v, want in (("c1", sd.c1), ("cG", sd.cG)):
        row = d.table.loc[v]
        assert abs(row["mean"] - want) <= 0.5 * row["sd"] + 4 * row["mcse_mean"], (v, row, want)
