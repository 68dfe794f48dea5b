"""NUTS on the normal crossings with its divergences and leapfrog counts (docs/validation.md,
"The LLC by tempered SMC on normal crossings").

For each case (a, b, nβ) of tests/test_llc_smc.py: ``--runs`` independent NumPyro NUTS runs on the
localized target of w₁^(2a) w₂^(2b) on [-1, 1]² (uniform prior, γ = 0), as ``run_llc`` runs it
(4 chains × ``--draws`` after 500 warm-up steps, started at w* plus N(0, 0.014²)), with the
divergences and the leapfrog steps NumPyro reports. One JSON line per case: the runs' mean λ̂,
their spread, the rms of their MCSEs, the divergences per run, the leapfrog steps per run (kept
draws) and the wall time per run.

    python benchmarks/llc_smc_crossings.py --runs 2 [--cases 1,1,1000 1,2,1000 ...]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

import bayes_attn  # noqa: F401  (float64)
from bayes_attn import _arviz as az
from bayes_attn.inference.llc import llc_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_llc_smc import CASES, crossing, crossing_exact  # noqa: E402


def one_case(a, b, t, runs, draws):
    tg = llc_target(
        crossing, jnp.zeros(2), model_kwargs={"a": a, "b": b}, n=1, nbeta=t, gamma=0.0,
        include_prior=True,
    )  # fmt: skip
    out = []
    for seed in range(runs):
        t0 = time.perf_counter()
        k_init, k_run = jax.random.split(jax.random.key(100 + seed))
        x0 = tg.x_star + 0.01414 * jax.random.normal(k_init, (4, 2))
        mcmc = MCMC(
            NUTS(potential_fn=lambda x: -tg.log_density(x)), num_warmup=500, num_samples=draws,
            num_chains=4, chain_method="vectorized", progress_bar=False,
        )  # fmt: skip
        mcmc.run(k_run, init_params=x0, extra_fields=("num_steps", "diverging"))
        per = t * np.asarray(jax.vmap(jax.vmap(tg.loss))(mcmc.get_samples(group_by_chain=True)))
        extra = mcmc.get_extra_fields(group_by_chain=True)
        out.append({
            "llc": float(per.mean()), "mcse": float(az.mcse(per)),
            "steps": int(np.asarray(extra["num_steps"]).sum()),
            "div": int(np.asarray(extra["diverging"]).sum()), "wall": time.perf_counter() - t0,
        })  # fmt: skip
    llc = np.array([o["llc"] for o in out])
    return {
        "a": a, "b": b, "t": t, "exact": crossing_exact(a, b, t), "runs": runs, "draws": draws,
        "mean": float(llc.mean()), "sd_runs": float(llc.std(ddof=1)) if runs > 1 else None,
        "rms_mcse": float(np.sqrt(np.mean([o["mcse"] ** 2 for o in out]))),
        "divergences": [o["div"] for o in out],
        "steps_per_run": float(np.mean([o["steps"] for o in out])),
        "wall_per_run": float(np.mean([o["wall"] for o in out])),
    }  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--draws", type=int, default=3000)
    p.add_argument("--cases", nargs="*", help="a,b,nbeta (default: the test's 16)")
    args = p.parse_args(argv)
    cases = CASES if not args.cases else [
        (int(a), int(b), float(t)) for a, b, t in (c.split(",") for c in args.cases)
    ]  # fmt: skip
    for a, b, t in cases:
        print(json.dumps(one_case(a, b, t, args.runs, args.draws)), flush=True)


if __name__ == "__main__":
    main()
