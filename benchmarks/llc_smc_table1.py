"""The LLC by tempered SMC at Table-1 points against the study's exact NUTS value (issue 45,
point 4; docs/validation.md, "The LLC by tempered SMC on normal crossings", "The Table-1 check").

At each point (activation, P) of the LLC study (L = 25, V = 5, d = 256, embeddings frozen at
seed 0, w* the exact MAP, nβ = P / log P, γ = 100): ``run_llc_smc(..., frozen=True)`` on the
whitened Level-1 target (the 900 numbers of the gate, the readout integrated out), ``--runs``
independent runs of ``--particles`` (the se from the runs' spread), and ``z = (λ̂ − exact) /
hypot(se, exact MCSE)`` against the study's exact NUTS value (``llc_table1_d256.nc``). The cost
is counted in gradients: HMC moves × particles × leapfrog steps (the moves' initial gradient and
the estimates' final evaluations are left out). One JSON line per point.

    python benchmarks/llc_smc_table1.py --points linear,10 softmax,10 --runs 8 --particles 200

``--nuts DRAWS``: instead, NUTS's gradients per draw on the same target, as ``exact_frozen_llc``
runs it (4 chains from w* + N(0, 1e-3²), its window adaptation over 500 warm-up steps, seed 0),
then ``DRAWS`` transitions per chain at the adapted step and metric, counting their leapfrog
steps (the warm-up's are not recorded; a draw after it costs what one during it does).
"""

import argparse
import json
import math
import time

import numpy as np

import bayes_attn  # noqa: F401  (float64)
from bayes_attn.experiments.llc import llc_problem
from bayes_attn.inference.llc_smc import run_llc_smc
from bayes_attn.task import CopyTask, Hyper

#: the study's exact NUTS values (docs/validation.md, "λ̂ against P at Table 1"): λ̂, MCSE, ESS
EXACT = {("linear", 10): (0.4454, 0.026, 2019), ("softmax", 10): (7.776, 0.004, 3456)}


def one_point(activation, P, runs, particles, seed, leapfrog, batch_size=None):
    task, hyper = CopyTask(25, 5, "uniform"), Hyper.paper()
    model, args, kw, w_star, _ = llc_problem("network", task, hyper, P, activation, d_model=256,
                                             seed=0)  # fmt: skip
    t0 = time.perf_counter()
    run = run_llc_smc(
        model, w_star, model_args=args, model_kwargs=kw, gamma=100.0, frozen=True,
        num_particles=particles, num_runs=runs, num_integration_steps=leapfrog, seed=seed,
        batch_size=batch_size,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    a = run.posterior.attrs
    llc_runs = np.asarray(a["llc_runs"])
    se = float(llc_runs.std(ddof=1) / math.sqrt(runs))
    exact, mcse, ess = EXACT.get((activation, P), (math.nan, math.nan, math.nan))
    return {
        "activation": activation, "P": P, "runs": runs, "particles": particles, "seed": seed,
        "nbeta": float(run.constant_data["nbeta"]), "llc": float(llc_runs.mean()), "se": se,
        "llc_runs": llc_runs.round(5).tolist(),
        "genealogy_se_rms": float(np.sqrt(np.mean(np.asarray(a["llc_run_se"]) ** 2))),
        "runs_p_value": float(a["llc_runs_p_value"]), "exact": exact, "exact_mcse": mcse,
        "exact_ess": ess, "z": (float(llc_runs.mean()) - exact) / math.hypot(se, mcse),
        "tempering_steps": np.asarray(a["num_tempering_steps"]).tolist(),
        "total_moves": int(a["total_moves"]),
        "gradients": int(a["total_moves"]) * particles * leapfrog,
        "lineages_min": int(np.min(a["num_eve_lineages"])), "batch_size": batch_size,
        "wall_s": round(wall, 1),
    }  # fmt: skip


def nuts_point(activation, P, draws, burnin=500, chains=4):
    import jax

    from bayes_attn.inference.hmc import nuts_transitions, window_adaptation
    from bayes_attn.inference.llc_frozen import frozen_llc_target
    from bayes_attn.inference.llc_nuts import TARGET_ACCEPT, _programs

    task, hyper = CopyTask(25, 5, "uniform"), Hyper.paper()
    model, args, kw, w_star, _ = llc_problem("network", task, hyper, P, activation, d_model=256,
                                             seed=0)  # fmt: skip
    target = frozen_llc_target(model, w_star, model_args=args, model_kwargs=kw, gamma=100.0)
    t0 = time.perf_counter()
    k_init, k_run = jax.random.split(jax.random.key(0))
    x0 = target.x_star + 1e-3 * jax.random.normal(k_init, (chains, target.x_star.size))
    start, warm, _ = _programs(target.log_density, burnin, 1)
    k_tune, k_steps = jax.random.split(k_run)
    carry = start(jax.random.split(k_tune, chains), x0)
    carry = warm(carry, jax.random.split(k_steps, chains), 0, burnin)
    state, window = carry
    step, inv = jax.vmap(window_adaptation(TARGET_ACCEPT)[2])(window)
    t_warm = time.perf_counter() - t0
    keys = jax.random.split(jax.random.key(1), (chains, draws))
    run = jax.jit(jax.vmap(lambda k, s, e, m: nuts_transitions(k, s, target.log_density, e, m)))
    _, (_, _, info) = run(keys, state, step, inv)
    steps = np.asarray(info["num_integration_steps"])
    return {
        "activation": activation, "P": P, "nuts_chains": chains, "nuts_draws": draws,
        "step_size": np.asarray(step).round(4).tolist(),
        "leapfrog_per_draw": float(steps.mean()), "leapfrog_quantiles":
        np.quantile(steps, [0.1, 0.5, 0.9]).tolist(),
        "acceptance": float(np.mean(info["acceptance_rate"])),
        "divergent": int(np.sum(info["is_divergent"])), "warmup_wall_s": round(t_warm, 1),
        "wall_s": round(time.perf_counter() - t0, 1),
    }  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", nargs="+", default=["linear,10", "softmax,10"])
    p.add_argument("--runs", type=int, default=16)
    p.add_argument("--particles", type=int, default=200)
    p.add_argument("--leapfrog", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=None, help="run_llc_smc's (None: 16)")
    p.add_argument("--nuts", type=int, default=0, metavar="DRAWS")
    o = p.parse_args(argv)
    for point in o.points:
        act, P = point.split(",")
        if o.nuts:
            print(json.dumps(nuts_point(act, int(P), o.nuts)), flush=True)
            continue
        row = one_point(act, int(P), o.runs, o.particles, o.seed, o.leapfrog, o.batch_size)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
