"""The PyTorch side of ``llc_devinterp.py``: devinterp 2.0.1's LLC on the frozen-embedding network.

Run by ``llc_devinterp.py`` in the optional bench environment (``make bench-peers`` builds
``.venv-bench``: torch, devinterp 2.0.1): ``python benchmarks/_llc_devinterp_torch.py IN.npz
OUT.npz``. The network is ``benchmarks/_peers_torch.py``'s ``CopyAttention`` (per-token forward,
float64, frozen embeddings); devinterp's ``slt.llc.llc`` samples it through ``slt.sampling.sample``
(its own data loader, optimizer ``SGMCMC.sgld``, zarr output) and ``compute_llc`` forms the
estimate.

devinterp 2.0.1 is built for language models: the data are a ``datasets.Dataset`` with an
``input_ids`` column, and ``loss_fn(model, input_ids)`` returns the per-token loss of shape
(batch, len - 1). Each sequence of L tokens is passed as L + 1 ids (a padding id appended, never
read), and the loss of position a is the network's per-token Gaussian negative log likelihood,
``χ/(2σ²) Σ_v (y_av − f_av)² + (V/2) log(2πσ²/χ)``, so that devinterp's loss (the mean over the
batch and the positions) is ``L_n / L`` with ``L_n`` the package's per-sequence loss: the same
target needs devinterp's ``n_beta`` = L nβ (docs/theory.md §11, "Normalisations").

Its update is θ ← θ − (ε'/2)(n_beta ∇loss + γ(θ − θ₀)) + √ε' ξ (``SGMCMC.sgld``): the package's
step ε is ε'/2.
"""

from __future__ import annotations

import math
import pathlib
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
from datasets import Dataset
from devinterp.slt.llc import llc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _peers_torch import CopyAttention  # noqa: E402


def per_token_loss(chi, sigma2, V, L):
    const = V / 2 * math.log(2 * math.pi * sigma2 / chi)

    def loss_fn(model, input_ids):
        tokens = input_ids[:, :L]
        y = torch.nn.functional.one_hot(torch.roll(tokens, 1, dims=1), V).to(torch.float64)
        f = model(tokens)
        return chi / (2 * sigma2) * ((y - f) ** 2).sum(-1) + const  # (batch, L)

    return loss_fn


def main(inp, out):
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    d = np.load(inp)
    tokens = torch.tensor(d["tokens"], dtype=torch.long)
    P, L = tokens.shape
    V = d["W_emb"].shape[1]
    chi, sigma2 = float(d["chi"]), float(d["sigma2"])
    model = CopyAttention(d["W_emb"], d["p"], d["W_G"], d["W_O"], str(d["activation"]))
    loss_fn = per_token_loss(chi, sigma2, V, L)
    with torch.no_grad():  # L_n(w*) per sequence, float64, for the check against the package
        init_loss = float(loss_fn(model, tokens).mean() * L)
    ids = torch.cat([tokens, torch.zeros((P, 1), dtype=torch.long)], dim=1)
    data = Dataset.from_dict({"input_ids": ids.numpy()}).with_format("torch")
    result = {"init_loss": init_loss, "torch_version": torch.__version__}
    for i, (lr, n_beta, gamma, batch, steps, chains, seed) in enumerate(d["runs"]):
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            res = llc(
                model, data, {}, lr=float(lr), n_beta=float(n_beta), loss_fn=loss_fn,
                localization=float(gamma), batch_size=int(batch), num_chains=int(chains),
                num_draws=int(steps), num_burnin_steps=0, num_steps_bw_draws=1,
                init_seed=int(seed), output_path=pathlib.Path(tmp) / "samples.zarr", device="cpu",
            )  # fmt: skip
            res = res.load()
        result[f"seconds_{i}"] = time.perf_counter() - t0
        result[f"loss_trace_{i}"] = np.asarray(res["loss_trace"], dtype=np.float64)
        for k in ("llc_mean", "llc_std", "init_loss"):
            result[f"{k}_{i}"] = float(res[k])
    np.savez(out, **result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
