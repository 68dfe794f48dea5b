"""The PyTorch side of ``bench_peers.py``: SGLD the way devinterp runs it, on the per-token network.

Run by ``bench_peers.py`` in the optional ``bench`` environment (torch 2.13 CPU wheel, devinterp
2.0.1): ``python benchmarks/_peers_torch.py IN.npz OUT.npz``. The network is an ``nn.Module`` with
the straightforward per-token forward (embed every token, (P, L, d) products), float64, frozen
embeddings; the update is devinterp's own ``devinterp.optim.SGLD`` optimizer, stepped by hand over
the full batch (devinterp's ``sample`` drives the same optimizer through a ``DataLoader``; a full
batch of 800 sequences is one step either way). The step alone is timed (wall and process CPU
seconds); the order parameters recorded after every step are not.

devinterp's update is w <- w - (eps'/2)(nbeta grad L + lambda w) + N(0, eps'), so with L the mean
over sequences of chi |y - f|^2 / (2 sigma^2), nbeta = P (n = m = P) and the weight decay per group
the prior precision, it is Langevin dynamics on U = -log posterior with eps' = 2 eps, the same chain
as ours (z <- z - eps grad U + sqrt(2 eps) xi).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from devinterp.optim import SGLD


class CopyAttention(torch.nn.Module):
    """One attention layer, per-token forward, frozen embeddings."""

    def __init__(self, W_emb, p, W_G, W_O, activation):
        super().__init__()
        self.register_buffer("W_emb", torch.tensor(W_emb))
        self.register_buffer("p", torch.tensor(p))
        self.W_G = torch.nn.Parameter(torch.tensor(W_G))
        self.W_O = torch.nn.Parameter(torch.tensor(W_O))
        self.activation = activation

    def attention(self, tokens):
        d = self.W_emb.shape[0]
        h = self.W_emb.T[tokens] + self.p.T[None]  # (P, L, d)
        K = torch.einsum("pad,de,pbe->pab", h, self.W_G, h) / d
        A = torch.softmax(K, -1) if self.activation == "softmax" else K / K.shape[-1]
        return A, h

    def forward(self, tokens):
        A, h = self.attention(tokens)
        return torch.einsum("pab,pbd->pad", A, h) @ self.W_O.T


def order_parameters(A):
    """(a1, aG) of the mean attention (as bayes_attn.algebra.project)."""
    A = A.mean(0)
    L = A.shape[-1]
    shift = torch.roll(torch.eye(L, dtype=A.dtype), -1, dims=1)
    s = (A * shift).sum()
    off = (A.sum() - s) / (L * L - L)
    return float(L * off), float(L * (s / L - off))


def main(inp, out):
    torch.set_default_dtype(torch.float64)
    d = np.load(inp)
    chi, sigma2 = float(d["chi"]), float(d["sigma2"])
    tokens = torch.tensor(d["tokens"], dtype=torch.long)
    P, L = tokens.shape
    V = d["W_emb"].shape[1]
    y = torch.nn.functional.one_hot(torch.roll(tokens, 1, dims=1), V).double()  # y[a] = x[a-1]
    model = CopyAttention(d["W_emb"], d["p"], d["W_G"], d["W_O"], str(d["activation"]))
    groups = [
        {"params": [model.W_G], "weight_decay": float(d["prec_G"])},
        {"params": [model.W_O], "weight_decay": float(d["prec_O"])},
    ]
    opt = SGLD(groups, lr=2.0 * float(d["eps"]), nbeta=float(P))
    steps = int(d["steps"])
    aG = np.empty(steps)
    gen = torch.Generator().manual_seed(0)

    def one_step():
        opt.zero_grad()
        f = model(tokens)
        loss = chi * ((y - f) ** 2).sum() / (2 * sigma2) / P  # the mean per sequence
        loss.backward()
        opt.step(noise_generator=gen)

    one_step()  # warm the allocator
    wall = cpu = 0.0
    for i in range(steps):  # the step alone is timed, not the order parameters
        t0, c0 = time.perf_counter(), time.process_time()
        one_step()
        wall, cpu = wall + time.perf_counter() - t0, cpu + time.process_time() - c0
        with torch.no_grad():
            aG[i] = order_parameters(model.attention(tokens)[0])[1]
    np.savez(out, aG=aG, seconds_per_step=wall / steps, cpu_seconds_per_step=cpu / steps,
             torch_version=torch.__version__)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
