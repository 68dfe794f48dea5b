"""Benchmark: the induction study's MAP sweep (issue 43, part 5: "the study's kernel-limit MAP sweep
over P in <= 10 min on 2 cores").

A reduced sweep of the study's ``induction`` points (``bayes_attn/configs/induction_study.toml``:
L = 16, V = 3, Table-1 scales, in-context Markov tokens, num_test 2000, maxiter 300) at ``--P``,
one dataset (``--seed``), both activations. Each point is timed two ways in the same process, in
CPU seconds (``time.process_time``, all threads; the machine is shared, so wall time mostly
measures the load):

- **new**: :func:`~bayes_attn.experiments.induction.map_search` as the sweep runs it
  (``method="l-bfgs"``: L-BFGS on the potential in blocks of sequences,
  :func:`~bayes_attn.experiments.induction.blocked_potential`, compiled once per P and
  activation, stopped at the gradient of
  :data:`~bayes_attn.experiments.induction.LBFGS_XTOL`), then its reading
  (:func:`~bayes_attn.experiments.induction.map_reading`: held-out scores and references);
- **old** (the baseline, ``--baseline floor``, the default): the search before, the same L-BFGS
  run to the float64 floor (``xtol=None``), plus its own reading, compared with the new one's
  (potentials, scores, losses); ``--baseline trust-krylov``: the search before that, the same
  blocked potential under ``find_modes``' trust region with Krylov products by differences of
  gradients (``method="trust-krylov"``), also with its own reading; ``--baseline model``:
  :func:`~bayes_attn.inference.potential.find_modes` differentiating the NumPyro model's
  potential (compiled per point), the new reading charged to it.

It prints per point the CPU seconds, the optimiser's calls (gradients + difference products, both
starts) and the CPU seconds spent inside them (the rest is the optimiser's own work, the starts,
the reading and Python), the modes' potentials from both starts under each (they must agree to
the optimiser's tolerance) and, from fits of the seconds per call (a + b P) and of the calls (k0 + k1 P), both
linear in P (at least three P), the full study's 72 points (12 P x 3 seeds x 2 activations) projected for
each and their ratio (an extrapolation to P = 8000 from the P measured). One untimed small point
first takes the one-time compilations (sampling, the reading) out of the timings, and before each P the costs both
searches share at a new P (compiling the sampler and the model's trace at P) are paid untimed;
with ``--baseline model`` the model's potential's compilation stays in the old search (paid at
every point), while the blocked potential's, which both ``map_search`` methods share (once per P
and activation), is paid untimed before each P.

Run: ``.venv/bin/python benchmarks/bench_induction_map.py [--P 100 300 1000] [--no-old]
[--baseline floor|trust-krylov|model]``;
``--gradients 1000 8000 --P`` times one gradient each way at those P instead: the model's
potential, the blocked one, the blocked one in float32 (the lever measured and not taken:
attention and the design's products in float32, their sums and the Cholesky factor in float64)
and the three datasets of a P in one vmapped call against three calls (the other lever not
taken).
The numbers in docs/performance.md ("Induction head: the study's MAP sweep") came from it.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from bayes_attn.experiments.induction import map_reading, map_search  # noqa: E402
from bayes_attn.induction import InductionTask  # noqa: E402
from bayes_attn.inference.potential import find_modes  # noqa: E402
from bayes_attn.models.two_layer import BLOCK, forward, two_layer_kernel_model  # noqa: E402
from bayes_attn.task import Hyper  # noqa: E402
from bayes_attn.tokens import parse_tokens  # noqa: E402

TOKENS = "icl-markov:alpha=1,start=uniform"
#: the study's P (bayes_attn/configs/induction_study.toml), 3 seeds x 2 activations each
STUDY_P = (10, 30, 100, 200, 400, 700, 1000, 1500, 2000, 3000, 5000, 8000)
OPTIONS = {"num_test": 2000, "maxiter": 300}


class Counter:
    """``scipy.optimize.minimize`` with its calls of ``fun`` and ``hessp`` (where given)
    counted."""

    def __init__(self):
        from scipy import optimize

        self.optimize, self.minimize = optimize, optimize.minimize
        self.calls = {"fun": 0, "hessp": 0}
        self.seconds = 0.0

    def __enter__(self):
        def counted(fun, x0, **kw):
            def wrap(name, f):
                def g(*a):
                    self.calls[name] += 1
                    t0 = time.process_time()
                    out = f(*a)
                    self.seconds += time.process_time() - t0
                    return out

                return g

            if "hessp" in kw:  # L-BFGS has none
                kw["hessp"] = wrap("hessp", kw["hessp"])
            return self.minimize(wrap("fun", fun), x0, **kw)

        self.calls.update(fun=0, hessp=0)
        self.seconds = 0.0
        self.optimize.minimize = counted
        return self

    def __exit__(self, *exc):
        self.optimize.minimize = self.minimize

    def __str__(self):
        return f"{self.calls['fun']} + {self.calls['hessp']}"


def old_search(task, hyper, activation: str, s: dict) -> list[float]:
    """The search before: the model's own potential differentiated, compiled for this point."""
    args = (task, hyper, s["tokens"], activation, None)
    found = find_modes(two_layer_kernel_model, starts=list(s["starts"].values()),
                       model_args=args, maxiter=OPTIONS["maxiter"], hvp="difference")  # fmt: skip
    return [m.U for m in found]


def warm(task, hyper, P: int, activation: str, seed: int) -> None:
    """The per-P costs both searches share, untimed: compiling the sampler at P, the model's
    trace at P (each start is mapped to the flat space through it) and the blocked potential's
    value and gradient (paid once per P and activation by the sweep)."""
    from bayes_attn.experiments.induction import blocked_data, blocked_value_and_grad, circuit
    from bayes_attn.inference.potential import flat_potential
    from bayes_attn.keys import dataset_key, run_key

    tokens = task.sample(dataset_key(run_key(None, seed)), P)
    pot = flat_potential(two_layer_kernel_model, (task, hyper, tokens, activation, None))
    x = pot.unconstrain(circuit(task, 3.0))
    scales = (hyper.chi, hyper.g_w, hyper.g_o, hyper.sigma2)
    data = blocked_data(task, tokens)
    jax.block_until_ready(blocked_value_and_grad(x, data, scales, activation=activation))


def point(task, hyper, P: int, activation: str, seed: int, old: str | None) -> dict:
    """CPU seconds of one sweep point, new and (with ``old``, the baseline) the old search."""
    out = {}
    warm(task, hyper, P, activation, seed)
    with Counter() as c:
        t0 = time.process_time()
        s = map_search(task, hyper, P, activation, seed=seed, method="l-bfgs", **OPTIONS)
        t1 = time.process_time()
        out["reading_new"] = map_reading(task, hyper, activation, s)[0]
        t2 = time.process_time()
    out.update(new=t2 - t0, reading=t2 - t1, calls_new=str(c), in_calls_new=c.seconds,
               U_new=[m.U for m in s["modes"].values()])  # fmt: skip
    if old == "model":
        with Counter() as c:
            t0 = time.process_time()
            out["U_old"] = old_search(task, hyper, activation, s)
            out["old"] = time.process_time() - t0 + out["reading"]
        out.update(calls_old=str(c), in_calls_old=c.seconds)
    elif old:
        search = {"floor": {"method": "l-bfgs", "xtol": None}, "trust-krylov": {}}[old]
        with Counter() as c:
            t0 = time.process_time()
            s = map_search(task, hyper, P, activation, seed=seed, **search, **OPTIONS)
            out["reading_old"] = map_reading(task, hyper, activation, s)[0]
            out["old"] = time.process_time() - t0
        out.update(
            calls_old=str(c), in_calls_old=c.seconds, U_old=[m.U for m in s["modes"].values()]
        )
    return out


def reading_change(new: dict, old: dict) -> str:
    """How far the new search's reading is from the old one's: the largest absolute change of
    the scores, losses and KLs (``U_*`` compared apart; ``start_won`` and ``converged`` named
    where they differ)."""
    skip = {"U_zero", "U_circuit", "U_weak_circuit", "start_won", "converged"}
    d = max(abs(new[k] - old[k]) for k in new if k not in skip)
    flags = [
        f"{k} {old[k]:g} -> {new[k]:g}" for k in ("start_won", "converged") if new[k] != old[k]
    ]
    return f", scores and losses within {d:.1e}" + (f" ({', '.join(flags)})" if flags else "")


def project(Ps, seconds, calls) -> tuple[np.ndarray, np.ndarray, float]:
    """The study's 72 points in CPU seconds from the measured points: the seconds per call (the
    point's overheads spread over its calls) linear in P, a + b P, and the optimiser's calls
    linear in P, k0 + k1 P (both grow with P); returns ((a, b), (k0, k1), the study's total over
    3 seeds)."""
    Ps, seconds, calls = (np.asarray(v, float) for v in (Ps, seconds, calls))
    b, a = np.polyfit(Ps, seconds / calls, 1)
    k1, k0 = np.polyfit(Ps, calls, 1)
    study = np.asarray(STUDY_P, float)
    return (
        np.array([a, b]),
        np.array([k0, k1]),
        3 * float(np.sum((k0 + k1 * study) * (a + b * study))),
    )


def blocked_potential_f32(x, data: dict, scales, activation: str):
    """:func:`~bayes_attn.experiments.induction.blocked_potential` with the forms, the features,
    both layers' attention and each block's products in float32, the sums over blocks, the
    Cholesky factor and the prior in float64 (the float32 lever, not taken)."""
    from bayes_attn.theory.action import woodbury_evidence

    chi, g_w, g_o, sigma2 = scales
    psi, y = data["psi"], data["y"]
    n, V = psi.shape[-1], y.shape[-1]
    f32, f64 = (lambda a: a.astype(jax.numpy.float32)), (lambda a: a.astype(jax.numpy.float64))
    M1, M2 = f32(x[: n * n].reshape(n, n)), f32(x[n * n :].reshape(2 * n, 2 * n))

    @jax.checkpoint
    def add_block(acc, block):
        ps, yb = f32(block[0]), f32(block[1])
        Phi, _, _ = forward(M1, M2, ps, activation, True, ("h1", "h2"))
        H, rows = Phi[:, :-1].reshape(-1, 3 * n), ps[:, :-1].reshape(-1, n)
        return (acc[0] + f64(rows.T @ H), acc[1] + f64(H.T @ H),
                acc[2] + f64(H.T @ yb.reshape(-1, V))), None  # fmt: skip

    zero = (
        jax.numpy.zeros((n, 3 * n)),
        jax.numpy.zeros((3 * n, 3 * n)),
        jax.numpy.zeros((3 * n, V)),
    )
    (SpH, SHH, BH), _ = jax.lax.scan(add_block, zero, (psi, y))
    G = jax.numpy.block([[data["Spp"], SpH], [SpH.T, SHH]])
    B = jax.numpy.concatenate([data["Bp"], BH])
    s_data, logdet = woodbury_evidence(G, B, data["yy"], sigma2, g_o)
    var = g_w / chi
    prior = 0.5 * jax.numpy.sum(x**2) / var + 0.5 * x.size * jax.numpy.log(2 * jax.numpy.pi * var)
    return chi * s_data + logdet + prior


def best_of(f, x, times: int = 4) -> tuple[float, float, object]:
    """CPU seconds of ``f(x)``'s first call (compilation), the best of ``times`` after it, and
    its value."""
    t0 = time.process_time()
    out = jax.block_until_ready(f(x))
    first, best = time.process_time() - t0, np.inf
    for _ in range(times):
        t0 = time.process_time()
        jax.block_until_ready(f(x))
        best = min(best, time.process_time() - t0)
    return first, best, out


def gradients(task, hyper, P: int, activation: str) -> None:
    """One value and gradient at ``P`` (near the circuit): the model's potential differentiated
    against :func:`~bayes_attn.experiments.induction.blocked_potential`, CPU ms, the first call
    (compilation) and the best of 4 after it; then the two levers not taken against the blocked
    gradient: float32 (:func:`blocked_potential_f32`, its value's and gradient's error) and the
    three datasets of a P (seeds 0-2) in one vmapped call against three calls."""
    from bayes_attn.experiments.induction import (
        blocked_data,
        blocked_potential,
        blocked_value_and_grad,
        circuit,
    )
    from bayes_attn.inference.potential import flat_potential
    from bayes_attn.keys import dataset_key, run_key

    tokens = task.sample(dataset_key(run_key(None, 0)), P)
    pot = flat_potential(two_layer_kernel_model, (task, hyper, tokens, activation))
    x = pot.ravel(circuit(task, 1.0)) + 0.05 * jax.random.normal(jax.random.key(1), (pot.dim,))
    data, scales = blocked_data(task, tokens), (hyper.chi, hyper.g_w, hyper.g_o, hyper.sigma2)
    vg32 = jax.jit(jax.value_and_grad(blocked_potential_f32), static_argnames="activation")
    pot_b = flat_potential(two_layer_kernel_model, (task, hyper, tokens, activation),
                           {"block": BLOCK})  # fmt: skip
    ways = {"model": jax.jit(jax.value_and_grad(pot.U)),
            "model_block": jax.jit(jax.value_and_grad(pot_b.U)),
            "blocked": lambda x: blocked_value_and_grad(x, data, scales, activation=activation),
            "float32": lambda x: vg32(x, data, scales, activation=activation)}  # fmt: skip
    res = {name: best_of(f, x) for name, f in ways.items()}
    (f0, m, (v0, _)), (f1, b, (v1, g1)) = res["model"], res["blocked"]
    _, b32, (v32, g32) = res["float32"]
    _, mb, (vb, _) = res["model_block"]
    print(f"gradient {activation} P = {P}: the model's own block={BLOCK} (what NUTS, the umbrella "
          f"and the LLC sample) {mb * 1e3:.0f} ms, x{m / mb:.2f} against the model's whole "
          f"design, value within {abs(vb - v0) / abs(v0):.0e} relative")  # fmt: skip
    print(f"gradient {activation} P = {P}: model {m * 1e3:.0f} ms (first call {f0:.1f} s), blocked "
          f"{b * 1e3:.0f} ms (first call {f1:.1f} s), x{m / b:.2f}, values within "
          f"{abs(v1 - v0) / abs(v0):.0e} relative")  # fmt: skip
    print(f"  float32: {b32 * 1e3:.0f} ms, x{b / b32:.2f} against blocked; value within "
          f"{abs(v32 - v1) / abs(v1):.0e} relative, gradient's largest error "
          f"{float(np.max(np.abs(g32 - g1))):.1e} (largest entry {float(np.max(np.abs(g1))):.1e})")  # fmt: skip
    datas = [data] + [blocked_data(task, task.sample(dataset_key(run_key(None, s)), P))
                      for s in (1, 2)]  # fmt: skip
    stacked = jax.tree.map(lambda *a: jax.numpy.stack(a), *datas)
    vg3 = jax.jit(jax.vmap(jax.value_and_grad(blocked_potential), in_axes=(0, 0, None, None)),
                  static_argnums=3)  # fmt: skip
    xs = jax.numpy.stack([x, x, x])
    _, three, _ = best_of(lambda x: [blocked_value_and_grad(x[i], d, scales, activation=activation)
                                     for i, d in enumerate(datas)], xs)  # fmt: skip
    _, one, _ = best_of(lambda x: vg3(x, stacked, scales, activation), xs)
    print(
        f"  3 datasets: 3 calls {three * 1e3:.0f} ms, one vmapped call {one * 1e3:.0f} ms, "
        f"x{three / one:.2f}"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--P", type=int, nargs="*", default=[100, 300, 1000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--activation", nargs="+", default=["softmax", "linear"])
    ap.add_argument("--no-old", action="store_true", help="time the new search only")
    ap.add_argument(
        "--baseline",
        choices=("floor", "trust-krylov", "model"),
        default="floor",
        help="the old search: L-BFGS to the float64 floor, or the trust region on the blocked or "
        "the model's potential",
    )
    ap.add_argument("--gradients", type=int, nargs="*", default=[], help="time one gradient at P")
    args = ap.parse_args(argv)
    task = InductionTask(16, 3, parse_tokens(TOKENS))
    hyper = Hyper(30.0, 1.0, 1.0, 30.0)
    print(f"JAX {jax.__version__}, {jax.default_backend()}, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs; L = 16, V = 3, Table 1, {TOKENS}, {OPTIONS}")  # fmt: skip
    if args.gradients:
        a = jax.random.normal(jax.random.key(0), (1024, 1024))
        dot = jax.jit(jax.numpy.dot)
        jax.block_until_ready(dot(a, a))
        best = np.inf
        for _ in range(5):
            t0 = time.process_time()
            jax.block_until_ready(dot(a, a))
            best = min(best, time.process_time() - t0)
        print(
            f"float64 matmul peak (1024^3, best of 5): {2 * 1024**3 / best / 1e9:.1f} GFLOP/s per CPU s"
        )
    for P in args.gradients:
        gradients(task, hyper, P, args.activation[0])
    if not args.P:
        return
    for activation in args.activation:  # one-time compilations, untimed
        map_reading(task, hyper, activation, map_search(task, hyper, 10, activation, num_test=2000,
                                                        maxiter=5))  # fmt: skip
    total = {"new": 0.0, "old": 0.0}
    for activation in args.activation:
        rows = []
        for P in args.P:
            r = point(task, hyper, P, activation, args.seed, None if args.no_old else args.baseline)
            rows.append(r)
            line = (f"{activation:7s} P = {P:5d}: new {r['new']:7.1f} CPU s ({r['calls_new']} "
                    f"calls, {r['in_calls_new']:.1f} s in them; reading {r['reading']:.2f} s)")  # fmt: skip
            if "old" in r:
                dU = max(abs(a - b) / abs(b) for a, b in zip(r["U_new"], r["U_old"], strict=True))
                line += (f", old {r['old']:7.1f} CPU s ({r['calls_old']} calls, {r['in_calls_old']:.1f} s "
                         f"in them), x{r['old'] / r['new']:.2f}, "
                         f"potentials from both starts within {dU:.1e} relative")  # fmt: skip
                if "reading_old" in r:
                    line += reading_change(r["reading_new"], r["reading_old"])
            print(line + f"; load {os.getloadavg()[0]:.1f}", flush=True)
        for way in ("new", "old"):
            if len(args.P) > 2 and way in rows[0]:
                calls = [sum(map(int, r[f"calls_{way}"].split(" + "))) for r in rows]
                (a, b), (k0, k1), study = project(args.P, [r[way] for r in rows], calls)
                total[way] += study
                print(f"  {activation} {way}: calls x ({a * 1e3:.1f} ms + {b * 1e6:.1f} us x P), "
                      f"calls ~ {k0:.0f} + {k1:.3f} P -> the study's 36 {activation} points "
                      f"~{study / 60:.1f} CPU min")  # fmt: skip
    for way in ("new", "old"):
        if total[way]:
            print(f"study sweep (72 points), {way}: ~{total[way] / 60:.1f} CPU min projected; on 2 "
                  f"cores (two sweep processes) ~{total[way] / 120:.1f} min")  # fmt: skip
    if total["new"] and total["old"]:
        print(f"old / new: x{total['old'] / total['new']:.2f}")


if __name__ == "__main__":
    main()
