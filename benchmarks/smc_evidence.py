"""Numbers in docs/validation.md "Tempered SMC evidence against exact evidences": run_smc's log
evidence at its defaults (or at settings given on the command line) against exact values, per seed.

The models and their exact evidences are those of ``tests/test_smc.py``: a 1-D conjugate Gaussian
(RWM and HMC moves), a Gamma(3) kernel on an improper base, a conjugate Gaussian in 10 dimensions,
the AR(5) regression (closed form in the coefficients, quadrature in the noise scale) and a
150-coefficient Gaussian regression with HMC moves (``wide``). The earlier
column of the table came from the same script run against the code before issue 18 (``git archive``
of its commit, with ``TESTS`` pointing at that tree's ``tests/``).

Run: ``.venv/bin/python benchmarks/smc_evidence.py [g1rwm g1hmc gamma g10 ar5 wide] [key=value ...]``;
``key=value`` pairs go to ``run_smc`` (e.g. ``mixing_target=0.1 target_ess=0.5
num_particles=2000``), ``seeds=N`` sets the number of seeds (default 4).
"""

import math
import os
import sys
import time
import warnings

import jax.numpy as jnp
import numpy as np
from scipy import special, stats

sys.path.insert(0, os.environ.get("TESTS", os.path.join(os.path.dirname(__file__), "../tests")))
import test_smc as T  # noqa: E402

from bayes_attn.inference.smc import run_smc  # noqa: E402


def _value(v):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


args = [a for a in sys.argv[1:] if "=" not in a]
kw = {k: _value(v) for k, v in (a.split("=", 1) for a in sys.argv[1:] if "=" in a)}
seeds = range(kw.pop("seeds", 4))
which = args or ["g1rwm", "g1hmc", "gamma", "g10", "ar5", "wide"]
warnings.simplefilter("ignore")


def show(name, seed, idata, exact, seconds):
    a = idata.posterior.attrs
    se = a.get("log_evidence_se", float("nan"))
    print(
        f"{name} seed {seed}: error {a['log_evidence'] - exact:+.4f} se {se:.4f} lineages "
        f"{np.atleast_1d(a['num_eve_lineages'])} tempering steps "
        f"{np.atleast_1d(a['num_tempering_steps'])} time {seconds:.1f} s",
        flush=True,
    )


def run(name, model, args, exact, **extra):
    for s in seeds:
        t = time.perf_counter()
        idata = run_smc(model, model_args=args, seed=s, **{**extra, **kw})
        show(name, s, idata, exact, time.perf_counter() - t)


if {"g1rwm", "g1hmc"} & set(which):
    y = np.random.default_rng(0).normal(1.5, 1.0, size=20)
    exact = stats.multivariate_normal(np.zeros(20), np.eye(20) + 4.0).logpdf(y)
    for k in ("rwm", "hmc"):
        if "g1" + k in which:
            run("gauss1-" + k, T.gaussian_model, (jnp.asarray(y), 2.0, 1.0), exact, kernel=k)
if "gamma" in which:
    run("gamma", T.gamma_kernel_model, (3.0,), math.log(special.gamma(3.0)))
if "g10" in which:
    y, exact = T.gaussian10_data()
    run("gauss10", T.gaussian10_model, (jnp.asarray(y),), exact)
if "ar5" in which:
    X, y = T._ar5_data()
    run("ar5", T.regression_model, (jnp.asarray(X), jnp.asarray(y)), T._regression_log_z(X, y))
if "wide" in which:
    X, y, tau, sigma, exact = T._wide_regression()
    run("wide150", T.wide_regression_model, (jnp.asarray(X), jnp.asarray(y), tau, sigma), exact)
