"""Benchmark: what a user would run instead, side by side, on one network (issue 14, §4).

One network and one dataset for every sampler: L = 25, V = 5, d = 256, P = 800, softmax, embeddings
frozen at a prior draw, Table 1, float64, every chain started at the network's exact MAP (the
whitened Level-1 MAP mapped back to W_G and W_O), the SGLD chains with one step size (the curvature
rule of ``inference.members.sgld_step_size``):

* **(a) PyTorch SGLD the way devinterp runs it:** an ``nn.Module`` with the per-token forward and
  devinterp 2.0.1's ``SGLD`` optimizer, in the optional ``bench`` environment
  (``benchmarks/_peers_torch.py``; ``make bench-peers`` builds ``.venv-bench`` with the torch 2.13 CPU
  wheel and devinterp);
* **(b) NumPyro's NUTS** on the per-token network forward (a few draws at a capped tree depth: one
  draw costs hundreds of gradients of a 66,816-dimensional model);
* **(c) ours, explicit:** ``run_sgld`` on ``network_model`` (the span forward);
* **(d) ours, exact:** NUTS on ``kernel_limit_model(..., gram=g)``, the same posterior in its 900
  whitened weights with W_O integrated out (docs/theory.md, "Frozen embeddings at any width").

It prints seconds per step (per draw for NUTS), the ESS of aG (ArviZ's bulk ESS of the one chain)
and seconds per effective sample, with the ratios against (a). SGLD's ESS is that of a chain at the
stable step for this stiff posterior, so it is small for every SGLD, and the same for (a) and (c):
the two run the same chain.

Run: ``make bench-peers`` or ``.venv/bin/python benchmarks/bench_peers.py [--steps 300]
[--torch-python .venv-bench/bin/python] [--d 256] [--sgld-only] [--ours-steps N] [--repeats R]``
(``--sgld-only``: (a) and (c) and their ratio per step, which issues 28 and 44 ask for at
``--d 1024``, side by side: each of R repeats runs (a) for STEPS steps, then (c)'s kernel step
(``SGLD.sample``, jitted loops of N = ``--ours-steps`` steps, default 10) with the default settings and
with each of :data:`OPTIONS` (``SGLDSettings``' fast-step options), then the step's floor, the
value and gradient of the potential plus one normal draw per weight, float64; it prints wall and
CPU (process) seconds, the CPU ones being the robust figure on a loaded machine;
otherwise ``--ours-steps N``: (c)'s step from the difference of runs of N and 2N steps).
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import tempfile
import time
import warnings
from functools import partial

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.flatten_util import ravel_pytree
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import potential_energy

import bayes_attn as ba
from bayes_attn import algebra
from bayes_attn.inference import run_nuts, run_sgld
from bayes_attn.inference.members import sgld_step_size
from bayes_attn.inference.sgld import SGLD
from bayes_attn.models import forward_per_token, init_params, kernel_limit_model, network_model
from bayes_attn.models.network import prior_scales
from bayes_attn.theory.level1 import level1_fit, level1_map

ROOT = pathlib.Path(__file__).resolve().parents[1]

OPTIONS = {
    "default": {},
    "fused": {"fused": True},
    "fused + float32 noise": {"fused": True, "noise_dtype": "float32"},
    "float32 (all) + fused": {"fused": True, "dtype": "float32"},
}
"""(c)'s settings in ``--sgld-only``: ``run_sgld`` keyword arguments (``SGLDSettings`` fields)."""


def per_token_model(task, hyper, tokens, activation, d_model, embeddings):
    """``network_model`` with frozen embeddings, on the per-token forward (peer (b))."""
    std = prior_scales(hyper, d_model)
    W_G = numpyro.sample("W_G", dist.Normal(0.0, std["W_G"]).expand((d_model, d_model)).to_event(2))
    W_O = numpyro.sample("W_O", dist.Normal(0.0, std["W_O"]).expand((task.V, d_model)).to_event(2))
    params = {"W_emb": embeddings[0], "p": embeddings[1], "W_G": W_G, "W_O": W_O}
    f, A = forward_per_token(params, tokens, activation)
    numpyro.sample("y", dist.Normal(f, (hyper.sigma2 / hyper.chi) ** 0.5).to_event(3),
                   obs=algebra.targets(tokens, task.V))  # fmt: skip
    numpyro.deterministic("aG", algebra.project(A)["cG"])


def map_start(task, hyper, tokens, activation, W_emb, p):
    """The network's exact MAP: the whitened Level-1 MAP, mapped back to (W_G, W_O)."""
    g = algebra.embedding_gram(W_emb, p)
    m = level1_map(task, hyper, tokens, activation, gram=g)
    w = level1_fit(m.M, tokens, task, hyper, activation, gram=g)["w"].T  # (V, V + L), whitened
    U = algebra.span_basis(W_emb, p)
    return {"W_G": U @ jnp.asarray(m.M) @ U.T, "W_O": w @ U.T / jnp.sqrt(W_emb.shape[0])}, g


def ess(x):
    return float(az.ess(np.asarray(x)[None, :]))


def _clock():
    return np.array([time.perf_counter(), time.process_time()])


def _per_step(model_args, kw, start, eps, steps, dtype="float64", **options):
    """(wall, CPU) seconds per step of run_sgld's kernel (``SGLD.sample``, the body of run_sgld's
    compiled loop), the least of 3 calls of one jitted loop of ``steps`` steps: no compile, no
    post-processing, no load spikes of a single call."""
    with jax.enable_x64(dtype == "float64"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cast = partial(jax.tree.map, lambda x: jnp.asarray(np.asarray(x), dtype))
        kernel, kw = (
            SGLD(network_model, eps, **options),
            {**kw, "embeddings": cast(kw["embeddings"])},
        )
        state = kernel.init(jax.random.key(0), 0, cast(start), model_args, kw)
        body = lambda i, s: kernel.sample(s, model_args, kw)  # noqa: E731
        loop = jax.jit(lambda s: jax.lax.fori_loop(0, steps, body, s))
        state = jax.block_until_ready(loop(state))
        best = np.full(2, np.inf)
        for _ in range(3):
            t0 = _clock()
            state = jax.block_until_ready(loop(state))
            best = np.minimum(best, _clock() - t0)
    return best / steps


def _floor(U, flat, reps=20):
    """(wall, CPU) seconds of the step's floor: the jitted value and gradient of ``U`` at ``flat``
    plus one float64 normal draw per weight, each timed over ``reps`` calls."""
    vg = jax.jit(jax.value_and_grad(U))
    draw = jax.jit(lambda k: jax.random.normal(k, flat.shape, flat.dtype))
    total = np.zeros(2)
    for f, x in ((vg, flat), (draw, jax.random.key(0))):
        jax.block_until_ready(f(x))
        t0 = _clock()
        for _ in range(reps):
            out = f(x)
        jax.block_until_ready(out)
        total += (_clock() - t0) / reps
    return total


def _torch(torch_py, args, tokens, W_emb, p, start, eps, hyper, steps):
    """(a): its (wall, CPU) seconds per step and its aG trace, run in the bench environment."""
    std = prior_scales(hyper, args.d)
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = pathlib.Path(tmp) / "in.npz", pathlib.Path(tmp) / "out.npz"
        np.savez(inp, tokens=np.asarray(tokens), W_emb=np.asarray(W_emb), p=np.asarray(p),
                 W_G=np.asarray(start["W_G"]), W_O=np.asarray(start["W_O"]), eps=eps,
                 steps=steps, chi=hyper.chi, sigma2=hyper.sigma2, activation="softmax",
                 prec_G=1 / std["W_G"] ** 2, prec_O=1 / std["W_O"] ** 2)  # fmt: skip
        subprocess.run([str(torch_py), str(ROOT / "benchmarks" / "_peers_torch.py"), str(inp),
                        str(out)], check=True)  # fmt: skip
        res = dict(np.load(out))
    sec = np.array([float(res["seconds_per_step"]), float(res["cpu_seconds_per_step"])])
    return sec, res["aG"], str(res["torch_version"])


def side_by_side(args, ours, U, flat, torch_py, torch_args):
    """``--sgld-only``: per repeat, (a), (c) under every :data:`OPTIONS`, and the floor."""
    rows = {}
    for r in range(args.repeats):
        if torch_py.exists():
            rows.setdefault("(a) PyTorch + devinterp SGLD (per-token)", []).append(
                _torch(torch_py, *torch_args, args.steps)[0])  # fmt: skip
        for name, options in OPTIONS.items():
            sec = _per_step(*ours, args.ours_steps or 10, **options)
            rows.setdefault(f"(c) ours, {name}", []).append(sec)
        rows.setdefault("floor: value+grad + normal draw (f64)", []).append(_floor(U, flat))
        print(f"repeat {r + 1}: " + ", ".join(f"{k.split(',')[-1].strip()} {v[-1][0]:.4f} s"
                                           for k, v in rows.items()), flush=True)  # fmt: skip
    a = rows.get("(a) PyTorch + devinterp SGLD (per-token)")
    print(f"\nd = {args.d}, P = 800: seconds per step, wall / CPU, each repeat"
          + ("" if a is None else "; (a) / row per repeat, wall and CPU"))  # fmt: skip
    for name, secs in rows.items():
        line = "  ".join(f"{w:.4f}/{c:.4f}" for w, c in secs)
        if a is not None:
            ratio = [
                f"x{aw / w:.1f}/x{ac / c:.1f}" for (aw, ac), (w, c) in zip(a, secs, strict=True)
            ]
            line += "   " + " ".join(ratio)
        print(f"{name:42s} {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="SGLD steps timed, (a) and (c)")
    ap.add_argument("--nuts-draws", type=int, default=100, help="(d): warm-up steps and draws")
    ap.add_argument("--per-token-draws", type=int, default=10, help="(b): warm-up steps and draws")
    ap.add_argument("--torch-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    ap.add_argument("--d", type=int, default=256, help="d_model")
    ap.add_argument("--ours-steps", type=int, default=0,
                    help="(c) per step from runs of N and 2N steps; --sgld-only: loops of N steps")  # fmt: skip
    ap.add_argument("--sgld-only", action="store_true", help="(a) and (c) only: the per-step ratio")
    ap.add_argument("--repeats", type=int, default=3, help="--sgld-only: side-by-side repeats")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    task, hyper = ba.CopyTask.paper(), ba.Hyper.paper()
    d, P, act = args.d, 800, "softmax"
    tokens = task.sample(jax.random.key(0), P)
    draw = init_params(jax.random.key(1), task, hyper, d)
    W_emb, p = draw["W_emb"], draw["p"]
    start, g = map_start(task, hyper, tokens, act, W_emb, p)
    kw = {"train_embeddings": False, "embeddings": (W_emb, p)}
    flat, unravel = ravel_pytree(start)

    def U(m, z):
        return potential_energy(network_model, (task, hyper, tokens, act, d), kw, unravel(z))

    eps = sgld_step_size(U, flat[None], d)
    print(f"one network: L=25, V=5, d={d}, P={P}, {act}, frozen embeddings, Table 1, float64; "
          f"SGLD step {eps:.3g} (curvature rule), chains start at the exact MAP")  # fmt: skip
    rows = {}
    torch_py = pathlib.Path(args.torch_python)
    if args.sgld_only:
        torch_args = (args, tokens, W_emb, p, start, eps, hyper)
        ours = ((task, hyper, tokens, act, d), kw, start, eps)
        side_by_side(args, ours, lambda z: U(None, z), flat, torch_py, torch_args)
        if not torch_py.exists():
            print(f"(a) skipped: no {torch_py} (make bench-peers builds it)")
        return

    # (c) ours, explicit SGLD on the span forward
    run_sgld(
        network_model,
        model_args=(task, hyper, tokens, act, d),
        model_kwargs=kw,
        step_size=eps,
        num_chains=1,
        num_warmup=0,
        num_samples=5,
        init_params=start,
        progress_bar=False,
    )  # fmt: skip  (compile)

    def timed(n):
        t0 = time.perf_counter()
        idata = run_sgld(network_model, model_args=(task, hyper, tokens, act, d), model_kwargs=kw,
                         step_size=eps, num_chains=1, num_warmup=0, num_samples=n,
                         init_params=start, progress_bar=False)  # fmt: skip
        return idata, time.perf_counter() - t0

    idata, total = timed(args.steps)
    sec = total / args.steps
    if args.ours_steps:  # the difference of two runs: no compile, no post-processing
        sec = (timed(2 * args.ours_steps)[1] - timed(args.ours_steps)[1]) / args.ours_steps
    rows["(c) ours, explicit SGLD (span forward)"] = (
        sec,
        ess(idata.posterior.aG.values[0]),
        "step",
    )

    # (a) PyTorch + devinterp SGLD, per-token forward, in the bench environment
    if torch_py.exists():
        sec, aG, version = _torch(torch_py, args, tokens, W_emb, p, start, eps, hyper, args.steps)
        rows[f"(a) PyTorch {version} + devinterp SGLD (per-token)"] = (sec[0], ess(aG), "step")
    else:
        print(f"(a) skipped: no {torch_py} (make bench-peers builds it)")

    # (b) NumPyro NUTS on the per-token forward, a few draws at tree depth <= 6
    mcmc = MCMC(NUTS(per_token_model, max_tree_depth=6), num_warmup=args.per_token_draws,
                num_samples=args.per_token_draws, progress_bar=False)  # fmt: skip
    t0 = time.perf_counter()
    mcmc.run(jax.random.key(2), task, hyper, tokens, act, d, (W_emb, p), init_params=start,
             extra_fields=("num_steps",))  # fmt: skip
    jax.block_until_ready(mcmc.get_samples())  # MCMC.run returns before the device is done
    total = time.perf_counter() - t0
    sec = total / (2 * args.per_token_draws)
    leap = float(np.mean(mcmc.get_extra_fields()["num_steps"]))
    rows["(b) NumPyro NUTS (per-token forward), depth <= 6"] = (sec, float("nan"), "draw")
    print(
        f"(b) {2 * args.per_token_draws} NUTS iterations in {total:.0f} s, compile included, "
        f"{leap:.0f} leapfrog steps per draw: ESS not measurable from {args.per_token_draws} draws"
    )

    # (d) ours, exact: NUTS on the whitened Level 1
    t0 = time.perf_counter()
    idata = run_nuts(kernel_limit_model, model_args=(task, hyper, tokens, act),
                     model_kwargs={"gram": g}, num_chains=1, num_warmup=args.nuts_draws,
                     num_samples=args.nuts_draws, seed=3, progress_bar=False,
                     init_params={"M": np.asarray(level1_map(task, hyper, tokens, act,
                                                             gram=g).M)})  # fmt: skip
    total = time.perf_counter() - t0
    rows["(d) ours, exact: NUTS on the whitened Level 1"] = (
        total / (2 * args.nuts_draws), ess(idata.posterior.aG.values[0]), "draw")  # fmt: skip
    mean_d = float(idata.posterior.aG.mean())

    base = next((v for k, v in rows.items() if k.startswith("(a)")), None)
    print(f"\n{'sampler':54s} {'s per step/draw':>16s} {'ESS(aG)':>9s} {'s per ESS':>10s} "
          f"{'vs (a), per ESS':>16s}")  # fmt: skip
    for name, (sec, e, unit) in sorted(rows.items()):
        n = args.steps if unit == "step" else args.nuts_draws
        per_ess = sec * n / e if np.isfinite(e) and e > 0 else float("nan")
        rel = ""
        if base is not None and np.isfinite(per_ess):
            rel = f"x{(base[0] * args.steps / base[1]) / per_ess:8.1f}"
        print(f"{name:54s} {sec:12.4f} /{unit:4s} {e:9.1f} {per_ess:10.2f} {rel:>16s}")
    print(f"\n(d)'s posterior mean of aG: {mean_d:.4f}")


if __name__ == "__main__":
    main()
