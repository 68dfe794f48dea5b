"""Independent check of the exact protocol's posterior means (docs/validation.md, "The protocol at
any width, exactly"): NumPyro's NUTS with its own adaptation on one member, against the
``member_nuts`` value stored in ``docs/figures/paper/exact_d10000.nc``.

    python benchmarks/frozen_posterior_check.py [--act linear] [--P 400] [--member 0]

Same member, dataset, embeddings and held-out sequences as the protocol; 2 chains x 300 draws after
300 warm-up steps, started at the MAP; the held-out order parameters of every third draw.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import xarray as xr

import bayes_attn as ba
from bayes_attn import _arviz as az
from bayes_attn import algebra
from bayes_attn.experiments import frozen
from bayes_attn.experiments.protocol import ProtocolConfig, held_out, member_datasets
from bayes_attn.inference import run_nuts
from bayes_attn.models.kernel_limit import kernel_limit_model
from bayes_attn.theory.level1 import level1_map


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--act", default="linear")
    ap.add_argument("--P", type=int, default=400)
    ap.add_argument("--member", type=int, default=0)
    ap.add_argument("--stored", default="docs/figures/paper/exact_d10000.nc")
    args = ap.parse_args()
    cfg, hyper = ProtocolConfig.paper(), ba.Hyper.paper()
    task, act, P, m = cfg.task(), args.act, args.P, args.member
    tokens = np.asarray(member_datasets(cfg, act, P))
    test = np.asarray(held_out(cfg))
    g = frozen.member_grams(cfg, hyper, act, P, 10_000)[m]
    M0 = np.asarray(level1_map(task, hyper, tokens[m], act, gram=g).M)
    t0 = time.perf_counter()
    idata = run_nuts(kernel_limit_model, model_args=(task, hyper, tokens[m], act),
                     model_kwargs={"gram": g}, num_chains=2, num_warmup=300, num_samples=300,
                     seed=7, init_params={"M": np.stack([M0, M0])}, progress_bar=False)  # fmt: skip
    R = algebra.gram_factor(g)
    n = task.n_features
    Ms = np.asarray(idata.posterior["M"].values).reshape(2, -1, n, n)[:, ::3]
    q = np.array([[
        [float(v) for v in (lambda pr: (pr["c1"], pr["cG"]))(algebra.project(
            algebra.attention(algebra.logits_from_M(M, test, task.V, R), act)))]
        for M in chain] for chain in Ms])  # fmt: skip
    q1, qG = q[..., 0], q[..., 1]
    if act == "linear":
        q1, qG = (np.asarray(x) for x in algebra.fold_sign(q1, qG))
    print(
        f"NumPyro NUTS 2 x 300, {act} P = {P} member {m}: qG mean {qG.mean():.3f} "
        f"± {az.mcse(qG):.3f} (sd {qG.std():.3f}, ESS {az.ess(qG):.0f}; "
        f"{time.perf_counter() - t0:.0f} s)"
    )
    ds = xr.load_dataset(args.stored).sel(activation=act, P=P)
    s = ds.sel(member=m)
    print(
        f"member_nuts (stored): member {m} qG {float(s.exact_post_cG):.3f} "
        f"(sd {float(s.exact_post_cG_sd):.3f}, ESS {float(s.exact_post_ess):.0f}); "
        f"mean over the members {float(ds.exact_post_cG.mean()):.3f}; MAP {float(s.exact_cG):.3f}"
    )


if __name__ == "__main__":
    main()
