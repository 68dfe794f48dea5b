"""devinterp 2.0.1 and ``run_llc`` side by side on the frozen-embedding network, against the exact LLC.

docs/validation.md, "The local learning coefficient against exact values" (issue 28, point 4). The
network and data of ``llc_exact.py``'s network rows (L = 8, V = 3, softmax, P = 20, embeddings frozen
at a prior draw, w* the exact MAP mapped onto W_G and W_O, γ = 100), at each width d:

* **exact**: ``exact_frozen_llc`` (W_O integrated out, NUTS over the whitened gate), nβ = P / log P;
* **ours**: ``run_llc`` SGLD, full batch, at the step ε of ``llc_exact.py``'s last rung (16/d · 2.5e-4,
  ``--step`` the value at d = 16);
* **devinterp, same target**: devinterp's ``llc`` (``benchmarks/_llc_devinterp_torch.py``, in the
  bench environment) with the same target and step: its loss is per token, so ``n_beta`` = L nβ; its
  step ε' = 2ε; ``localization`` = γ; a full batch;
* **devinterp, defaults**: the same but ``n_beta`` from its ``default_nbeta(batch)`` = B / log B on
  the per-token loss, with devinterp's default batch 32 (here the whole P = 20: its loader drops an
  incomplete batch), that is nβ = (B / log B) / L in the package's units; the exact value at that
  nβ is computed too. (devinterp's ``sample`` defaults ``localization`` to 0; γ = 100 is kept so
  that the target is the same family and proper.)

Every chain takes the same number of steps and records the loss at every step; the estimates leave
the first ``burnin`` steps out, with the MCSE from ArviZ's ESS (devinterp's own ``llc_mean``, which
averages over every step, burn-in included, is printed beside). Before sampling, the torch network's
L_n(w*) is checked against the package's. Time: the wall time of each call (compile included for
ours) over the ESS; both sides on one thread (torch ``set_num_threads(1)``, XLA single-threaded).

Run: ``.venv/bin/python benchmarks/llc_devinterp.py [d ...] [--steps N] [--chains C]``
(``make bench-peers`` first; default d = 16 64, 20000 steps x 4 chains, 1000 left out).
"""

from __future__ import annotations

import os

os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import argparse  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bayes_attn import _arviz as az  # noqa: E402
from bayes_attn.analysis.llc import llc_estimate  # noqa: E402
from bayes_attn.inference.llc import default_nbeta, exact_frozen_llc, run_llc  # noqa: E402
from bayes_attn.models import network_model  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TORCH_SIDE = ROOT / "benchmarks" / "_llc_devinterp_torch.py"


def frozen_case(P, d):
    import importlib.util

    spec = importlib.util.spec_from_file_location("llc_exact", ROOT / "benchmarks/llc_exact.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.frozen_case(P, d)


def from_trace(llc_trace, burnin):
    """(λ̂, MCSE, ESS) of a (chain, step) array of per-step nβ (L − L(w*)); prints R-hat and the
    chains' means."""
    x = np.asarray(llc_trace)[:, burnin:]
    print(f"  (R-hat {az.rhat(x):.3f}, chains {np.round(x.mean(axis=1), 3).tolist()})")
    return float(x.mean()), az.mcse(x), az.ess(x)


def torch_side(python, w_star, call, runs):
    task, hyper, tokens, act, _ = call["model_args"]
    W_emb, p = call["model_kwargs"]["embeddings"]
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = pathlib.Path(tmp) / "in.npz", pathlib.Path(tmp) / "out.npz"
        np.savez(inp, tokens=np.asarray(tokens), W_emb=np.asarray(W_emb), p=np.asarray(p),
                 W_G=np.asarray(w_star["W_G"]), W_O=np.asarray(w_star["W_O"]), chi=hyper.chi,
                 sigma2=hyper.sigma2, activation=act, runs=np.asarray(runs, dtype=float))  # fmt: skip
        subprocess.run([python, str(TORCH_SIDE), str(inp), str(out)], check=True)
        return dict(np.load(out))


def line(label, mean, mcse, ess, seconds, exact, exact_mcse, extra=""):
    z = (mean - exact) / math.hypot(mcse, exact_mcse)
    print(f"| {label} | {mean:.4f} ± {mcse:.4f} | {z:+.1f} | {ess:.0f} | {seconds:.1f} | "
          f"{1e3 * seconds / ess:.1f} |{extra}")  # fmt: skip
    return z


def one_width(d, args, P=20):
    w_star, call = frozen_case(P, d)
    task = call["model_args"][0]
    L, gamma = task.L, call["gamma"]
    nbeta = default_nbeta(P)
    eps = args.step * 16 / d
    batch = min(32, P)
    nbeta_default = default_nbeta(batch) / L  # devinterp's B / log B on the per-token loss
    exact = {}
    for nb in (nbeta,) if args.same_only else (nbeta, nbeta_default):
        t0 = time.perf_counter()
        ex = llc_estimate(exact_frozen_llc(network_model, w_star, nbeta=nb, num_draws=1000,
                                           seed=0, **call))  # fmt: skip
        exact[nb] = (ex, time.perf_counter() - t0)
    steps, chains, burn = args.steps, args.chains, args.burnin
    seed = 100 + args.seed  # devinterp's default init_seed is 100
    runs = [(2 * eps, L * nbeta, gamma, P, steps, chains, seed),
            (2 * eps, L * nbeta_default, gamma, batch, steps, chains, seed)][: 2 - args.same_only]  # fmt: skip
    res = torch_side(args.torch_python, w_star, call, runs)
    ours_init = exact[nbeta][0].init_loss
    print(f"\nd = {d}: L_n(w*) package {ours_init:.10f}, torch {res['init_loss']:.10f} "
          f"(difference {res['init_loss'] - ours_init:.2e}); nβ = {nbeta:.4f}, γ = {gamma:g}, "
          f"ε = {eps:g} (devinterp lr {2 * eps:g}); {chains} chains x {steps} steps, the first "
          f"{burn} left out; torch {res['torch_version']}")  # fmt: skip
    assert abs(res["init_loss"] - ours_init) < 1e-6 * abs(ours_init), "the two networks differ"
    print("| run | λ̂ ± MCSE | from exact (combined MCSE) | ESS | wall (s) | ms per ESS |")
    print("|---|---|---|---|---|---|")
    for nb, (ex, sec) in exact.items():
        print(f"| exact (NUTS), nβ = {nb:.4f} | {ex.llc_mean:.4f} ± {ex.mcse:.4f} | | "
              f"{ex.ess:.0f} | {sec:.1f} | {1e3 * sec / ex.ess:.1f} |")  # fmt: skip
    ex, _ = exact[nbeta]
    t0 = time.perf_counter()
    idata = run_llc(network_model, w_star, sampler="sgld", step_size=eps, num_chains=chains,
                    num_draws=steps, seed=args.seed, **call)  # fmt: skip
    sec = time.perf_counter() - t0
    t0 = time.perf_counter()  # a one-draw call: about the compile and set-up every call pays
    run_llc(network_model, w_star, sampler="sgld", step_size=eps, num_chains=chains,
            num_draws=1, seed=0, **call)  # fmt: skip
    setup = time.perf_counter() - t0
    ours = np.asarray(az.dataset(idata)["llc"])
    m_o, se_o, ess_o = from_trace(ours, burn)
    line("ours, run_llc SGLD", m_o, se_o, ess_o, sec, ex.llc_mean, ex.mcse,
         f" {1e3 * (sec - setup) / ess_o:.1f} ms per ESS without the {setup:.1f} s of compile "
         "and set-up")  # fmt: skip
    labels = (("devinterp, same nβ, γ, ε, full batch", nbeta),
              (f"devinterp defaults (batch {batch}, its nβ)", nbeta_default))  # fmt: skip
    for i, (label, nb) in enumerate(labels[: len(runs)]):
        # devinterp's loss is per token: its n_beta (L nβ) times it is nβ L_n
        trace = runs[i][1] * (res[f"loss_trace_{i}"] - res[f"init_loss_{i}"])
        m, se, e = from_trace(trace, burn)
        own = f" devinterp's own llc_mean (burn-in included) {float(res[f'llc_mean_{i}']):.4f}"
        line(label, m, se, e, float(res[f"seconds_{i}"]), ex.llc_mean, ex.mcse, own)
        if i == 0:
            z = (m - m_o) / math.hypot(se, se_o)
            print(f"(devinterp − ours: {m - m_o:+.4f}, {z:+.1f} combined MCSE)")
        else:
            ex_d = exact[nb][0]
            z = (m - ex_d.llc_mean) / math.hypot(se, ex_d.mcse)
            print(f"(against the exact value at its own nβ {nb:.4f}: {ex_d.llc_mean:.4f}, "
                  f"{z:+.1f} combined MCSE)")  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("widths", nargs="*", type=int, default=[16, 64])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--burnin", type=int, default=1000)
    ap.add_argument("--step", type=float, default=2.5e-4, help="ε at d = 16 (scaled by 16 / d)")
    ap.add_argument("--P", type=int, default=20, help="sequences (batch 32 < P: minibatches)")
    ap.add_argument("--same-only", action="store_true", help="leave out devinterp's defaults")
    ap.add_argument("--seed", type=int, default=0, help="ours; devinterp's init_seed is 100 + it")
    ap.add_argument("--torch-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    args = ap.parse_args()
    if not pathlib.Path(args.torch_python).exists():
        raise SystemExit(f"no {args.torch_python}: make bench-peers builds it")
    for d in args.widths:
        one_width(d, args, P=args.P)


if __name__ == "__main__":
    main()
