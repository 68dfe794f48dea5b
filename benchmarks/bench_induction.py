"""Benchmark: the induction head's two-layer kernel limit (issue 43, part 5, "Performance").

Four measurements at the study's preset (``bayes_attn/configs/induction_study.toml``: L = 16,
V = 3, Table-1 scales, in-context Markov tokens; 1805 dimensions):

1. **Peak**: this CPU's float64 (and float32) matmul rate, a 1024 x 1024 product, best of 5.
2. **Gradient**: value and gradient of the potential at ``--P-grad``: wall time, XLA's FLOP count
   of the compiled program (``cost_analysis``), the achieved GFLOP/s and the fraction of the peak;
   beside it the value alone, the exact Hessian-vector product (forward over reverse) and the
   design's Gram G = Phi^T Phi with its backward (the part that grows as P L (4n)^2), so that one
   sees where a gradient's time goes.
3. **MAP per point** (:func:`bayes_attn.experiments.induction.induction_map`, both starts, the
   held-out scores included) at ``--P-map``, with the Krylov steps' Hessian-vector products by a
   difference of gradients (the default) and, with ``--exact``, by forward over reverse (what the
   sweep used before); then the whole study's sweep (72 points) extrapolated from a fit of the
   seconds per point linear in P.
4. **NUTS** on the kernel limit at ``--P-nuts`` (a short run: one chain, Laplace metric at the
   MAP): seconds, gradients per draw, the bulk ESS of the order parameters and seconds per
   effective draw.

Run: ``.venv/bin/python benchmarks/bench_induction.py [--quick] [--exact]``; ``--quick`` (small P,
a short NUTS run) takes about a minute. The numbers in docs/performance.md ("Induction head")
came from the commands there.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from bayes_attn.experiments.induction import circuit, induction_map  # noqa: E402
from bayes_attn.induction import InductionTask  # noqa: E402
from bayes_attn.inference.potential import flat_potential  # noqa: E402
from bayes_attn.keys import dataset_key, run_key  # noqa: E402
from bayes_attn.models.two_layer import two_layer_kernel_model  # noqa: E402
from bayes_attn.task import Hyper  # noqa: E402
from bayes_attn.tokens import parse_tokens  # noqa: E402

TOKENS = "icl-markov:alpha=1,start=uniform"
#: the study's P (bayes_attn/configs/induction_study.toml), 2 activations x 3 seeds each
STUDY_P = (10, 30, 100, 200, 400, 700, 1000, 1500, 2000, 3000, 5000, 8000)


def preset(L: int = 16, V: int = 3):
    return InductionTask(L, V, parse_tokens(TOKENS)), Hyper(30.0, 1.0, 1.0, 30.0)


def best_time(fn, *args, repeat: int = 3) -> float:
    """The best wall time of ``fn(*args)`` over ``repeat`` calls, after one call (compilation)."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return min(times)


def flops(fn, *args) -> float:
    """XLA's FLOP count of the compiled ``fn`` at ``args``."""
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    return float(cost.get("flops", float("nan")))


def peak(n: int = 1024) -> dict[str, float]:
    """The matmul rate in GFLOP/s, float64 and float32, best of 5."""
    out = {}
    for dtype in (jnp.float64, jnp.float32):
        a = jax.random.normal(jax.random.key(0), (n, n), dtype)
        out[jnp.dtype(dtype).name] = 2 * n**3 / best_time(jax.jit(jnp.dot), a, a, repeat=5) / 1e9
    print(f"peak (matmul {n}^3, best of 5): float64 {out['float64']:.1f} GFLOP/s, "
          f"float32 {out['float32']:.1f} GFLOP/s")  # fmt: skip
    return out


def potential_at(P: int, activation: str = "softmax", seed: int = 0):
    """The kernel limit's flat potential on ``P`` sequences and a point near the circuit."""
    task, hyper = preset()
    tokens = task.sample(dataset_key(run_key(None, seed)), P)
    pot = flat_potential(two_layer_kernel_model, (task, hyper, tokens, activation))
    x = pot.ravel(circuit(task, 1.0)) + 0.05 * jax.random.normal(jax.random.key(1), (pot.dim,))
    return pot, x


def gradient_report(P: int, peak64: float) -> None:
    """Time and FLOPs of the gradient at ``P``, and where its time goes."""
    pot, x = potential_at(P)
    vg = jax.value_and_grad(pot.U)
    t0 = time.perf_counter()
    jax.block_until_ready(jax.jit(vg)(x))
    compile_s = time.perf_counter() - t0
    t_grad, f_grad = best_time(jax.jit(vg), x), flops(vg, x)
    t_val = best_time(jax.jit(pot.U), x)
    hvp = jax.jit(lambda x, v: jax.jvp(jax.grad(pot.U), (x,), (v,))[1])
    t_hvp = best_time(hvp, x, jnp.ones_like(x))
    rows = P * 15
    Phi = jax.random.normal(jax.random.key(2), (rows, 76))
    gram = jax.value_and_grad(lambda F: jnp.sum(jnp.tril(F.T @ F)))
    t_gram = best_time(jax.jit(gram), Phi)
    rate = f_grad / t_grad / 1e9
    print(f"gradient P = {P:5d}: {t_grad * 1e3:8.1f} ms ({compile_s:.1f} s to compile), "
          f"{f_grad / 1e9:.2f} GFLOP -> {rate:.2f} GFLOP/s = {rate / peak64:.1%} of the f64 peak; "
          f"value alone {t_val * 1e3:.1f} ms, exact hvp {t_hvp * 1e3:.1f} ms "
          f"({t_hvp / t_grad:.1f} gradients), Gram Phi^T Phi + backward {t_gram * 1e3:.1f} ms "
          f"({t_gram / t_grad:.0%} of the gradient)")  # fmt: skip


class _Counted:
    """``scipy.optimize.minimize`` with its calls of ``fun`` (a gradient) and ``hessp`` counted."""

    def __init__(self):
        from scipy import optimize

        self.minimize, self.calls = optimize.minimize, {"fun": 0, "hessp": 0}

    def __call__(self, fun, x0, **kw):
        def counted(name, f):
            def g(*a):
                self.calls[name] += 1
                return f(*a)

            return g

        kw["hessp"] = counted("hessp", kw["hessp"])
        return self.minimize(counted("fun", fun), x0, **kw)


def map_report(Ps, exact: bool) -> None:
    """Seconds per sweep point at each P, the optimiser's gradients and Hessian-vector products
    (both starts), and the study's sweep extrapolated."""
    from scipy import optimize

    task, hyper = preset()
    methods = ("difference", "exact") if exact else ("difference",)
    induction_map(task, hyper, 10, "softmax", num_test=2000, maxiter=300)  # one-time costs
    seconds: dict[str, list[float]] = {m: [] for m in methods}
    counter = _Counted()
    optimize.minimize = counter
    try:
        for P in Ps:
            for m in methods:
                counter.calls.update(fun=0, hessp=0)
                t0 = time.perf_counter()
                out = induction_map(task, hyper, P, "softmax", num_test=2000, maxiter=300, hvp=m)
                seconds[m].append(time.perf_counter() - t0)
                print(f"MAP P = {P:5d}, hvp = {m:10s}: {seconds[m][-1]:7.1f} s, "
                      f"{counter.calls['fun']} gradients + {counter.calls['hessp']} products, U = "
                      f"{min(v for k, v in out.items() if k.startswith('U_')):.8f}, converged "
                      f"{out['converged']:.0f}, start won {out['start_won']:.0f}", flush=True)  # fmt: skip
    finally:
        optimize.minimize = counter.minimize
    for m in methods:
        b, a = np.polyfit(np.asarray(Ps, float), seconds[m], 1) if len(Ps) > 1 else (0.0, 0.0)
        if b > 0:
            total = 6 * sum(a + b * P for P in STUDY_P)
            print(f"study sweep (72 points), hvp = {m}: ~{total / 60:.0f} min extrapolated "
                  f"({a:.1f} s + {b * 1e3:.2f} ms x P per point)")  # fmt: skip


def nuts_report(P: int, num_warmup: int, num_samples: int) -> None:
    """A short NUTS run on the kernel limit: seconds per effective draw."""
    import arviz as az

    from bayes_attn.inference.nuts import run_nuts

    task, hyper = preset()
    tokens = task.sample(dataset_key(run_key(None, 0)), P)
    t0 = time.perf_counter()
    idata = run_nuts(two_layer_kernel_model, model_args=(task, hyper, tokens, "softmax"),
                     num_chains=1, num_warmup=num_warmup, num_samples=num_samples, seed=0,
                     metric="laplace", start=circuit(task, 3.0), progress=False)  # fmt: skip
    seconds = time.perf_counter() - t0
    names = ["uniform1", "copy1", "induction2", "uniform2"]
    ess = {n: float(az.ess(idata, var_names=[n])[n]) for n in names}
    steps = float(idata.sample_stats["n_steps"].mean())
    worst = min(ess.values())
    print(f"NUTS P = {P}: {num_warmup} + {num_samples} draws in {seconds:.0f} s (Laplace metric "
          f"included), {steps:.1f} gradients per draw, bulk ESS "
          + ", ".join(f"{n} {e:.0f}" for n, e in ess.items())
          + f"; {seconds / worst:.2f} s per effective draw (the worst)")  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small P and a short NUTS run")
    ap.add_argument("--exact", action="store_true", help="also time the exact-hvp MAP")
    ap.add_argument("--P-grad", type=int, nargs="+", default=None)
    ap.add_argument("--P-map", type=int, nargs="+", default=None)
    ap.add_argument("--P-nuts", type=int, default=None)
    ap.add_argument("--no-nuts", action="store_true")
    args = ap.parse_args(argv)
    p_grad = args.P_grad or ([100] if args.quick else [100, 1000, 8000])
    p_map = args.P_map or ([30, 100] if args.quick else [100, 400, 1000])
    print(
        f"JAX {jax.__version__}, backend {jax.default_backend()}, load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, "
        f"{jax.local_devices()[0].device_kind}; preset L = 16, V = 3, Table 1, {TOKENS}"
    )
    pk = peak()
    for P in p_grad:
        gradient_report(P, pk["float64"])
    map_report(p_map, args.exact)
    if not args.no_nuts:
        P = args.P_nuts or 30
        nuts_report(P, 20 if args.quick else 100, 40 if args.quick else 200)


if __name__ == "__main__":
    main()
