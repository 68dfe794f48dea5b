"""The umbrella windows' chains: each window's start relaxed, its metric, its NUTS chains.

Each window ``k`` samples the posterior tilted by a harmonic bias in q,
``U(x) + kappa_k / 2 (q(x) - q_k)^2``. Its start is relaxed to the minimum of that biased
potential (L-BFGS, ``optax.lbfgs``; :func:`_hold` raises kappa where the bias does not hold the
windows apart), its dense metric is the inverse of the biased potential's Hessian there
(``metric="window"``) or the nearest mode's Hessian plus the bias term (``metric="mode"``), and its
chains are NUTS from the one NUTS home, :mod:`bayes_attn.inference.hmc`
(:func:`~bayes_attn.inference.hmc.adapt_nuts_step`, then
:func:`~bayes_attn.inference.hmc.nuts_scan`). The windows run as compiled calls of at most
:data:`CALL_WINDOWS` windows (``batch`` 0: vectorised together) or one batch on every device,
each call in :func:`~bayes_attn.inference.umbrella_store.interruptible`; the finished windows of
each call are kept in the run's :class:`~bayes_attn.inference.umbrella_store.WindowStore`.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn.inference import potential
from bayes_attn.inference.hmc import GRADIENTS_PER_DRAW, adapt_nuts_step, nuts_scan
from bayes_attn.inference.sharding import member_mesh, sharded_map
from bayes_attn.inference.umbrella_store import interruptible
from bayes_attn.progress import duration, say

__all__ = ["CALL_WINDOWS", "PROGRESS_SECONDS", "RELAX_STEPS", "overlap"]

#: L-BFGS steps that relax each window's start to the minimum of its biased potential
RELAX_STEPS = 60
#: the most windows in one compiled call where every window's chains are vectorised together
#: (``batch`` 0): Python regains control between calls, so Ctrl-C stops a Level-2 run there and
#: the finished windows are kept (each window's draws do not depend on the windows beside it)
CALL_WINDOWS = 8
#: with ``progress``, the seconds between the lines a window writes while its chain runs (a
#: window of the two-layer kernel limit's 1805 dimensions can take an hour)
PROGRESS_SECONDS = 300.0


def _biased(U, q):
    def biased_U(x, centre, kappa):
        return U(x) + 0.5 * kappa * (q(x) - centre) ** 2

    return biased_U


def _relax(relaxer, x0, centres, kappas):
    """Each start moved to the minimum of its window's biased potential: ``relaxer``
    (:func:`_relaxer`) called, the compiled call that :func:`_hold` runs interruptibly."""
    return relaxer((x0, centres, kappas))


def _relaxer(biased_U, steps: int, batch: int = 0):
    """The starts' relaxation (L-BFGS, vmapped), jitted once: :func:`_hold`'s tries call the one
    compiled program (each try's own jit traced and lowered it again, and compiled it again
    without the persistent cache)."""
    import optax

    def one(x0, c, k):
        f = lambda x: biased_U(x, c, k)  # noqa: E731
        opt = optax.lbfgs()
        vg = optax.value_and_grad_from_state(f)

        def body(carry, _):
            x, st = carry
            v, g = vg(x, state=st)
            upd, st = opt.update(g, st, x, value=v, grad=g, value_fn=f)
            return (optax.apply_updates(x, upd), st), None

        (x, _), _ = jax.lax.scan(body, (x0, opt.init(x0)), None, length=steps)
        ok = jnp.isfinite(f(x)) & (f(x) <= f(x0)) & jnp.all(jnp.isfinite(x))
        return jnp.where(ok, x, x0)

    return jax.jit(lambda a: _batched(lambda b: one(*b), a, batch))


def _metric(biased_U, x, centre, kappa, chunk) -> np.ndarray:
    """The inverse of the biased potential's Hessian at ``x``, eigenvalues by magnitude, floored."""
    H = potential.hessian(biased_U, x, (jnp.float64(centre), jnp.float64(kappa)), chunk=chunk)
    if not np.all(np.isfinite(H)):
        raise ValueError("the Hessian of the biased potential is not finite at a window's start")
    lam, Q = np.linalg.eigh(H)
    lam = np.maximum(np.abs(lam), 1e-6 * max(float(np.abs(lam).max()), 1e-300))
    return (Q / lam) @ Q.T


def _mode_metrics(q, x0, kappas, plan) -> np.ndarray:
    """Per window: the inverse of the nearest mode's Hessian plus the bias's ``kappa g g'``, with
    ``g`` the gradient of q at the window's start (two Hessians in all, not one per window)."""
    qs = np.asarray(jax.vmap(q)(x0))
    grads = np.asarray(jax.vmap(jax.grad(q))(x0), dtype=np.float64)
    out = []
    for k in range(len(qs)):
        H = plan.mode_hessian[int(np.argmin(np.abs(plan.mode_q - qs[k])))]
        out.append(np.linalg.inv(H + kappas[k] * np.outer(grads[k], grads[k])))
    return np.stack([0.5 * (m + m.T) for m in out])


def _ticker(total: int, progress: bool):
    """The host callback that reports each window's chain as it ends: how many of ``total``,
    the window (index and centre), its acceptance, and the time so far."""
    state = {"done": 0, "t0": time.perf_counter()}

    def tick(i, centre, acceptance):
        for k, c, a in zip(np.atleast_1d(i), np.atleast_1d(centre), np.atleast_1d(acceptance),
                           strict=True):  # fmt: skip
            if state["done"] == total:  # the padding of the last batch or device
                return
            state["done"] += 1
            say("umbrella: chain %d/%d done (window %d at %.4g, acceptance %.2f), %s so far",
                state["done"], total, int(k), float(c), float(a),
                duration(time.perf_counter() - state["t0"]), enabled=progress)  # fmt: skip

    return tick


def _step_ticker(num_warmup: int, num_samples: int):
    """The host callback after each transition of a window's chain: at most every
    :data:`PROGRESS_SECONDS` a line with the window, the transitions done of all, the leapfrogs
    a transition so far and the time in the window (the last transition is the chain's own
    line, :func:`_ticker`'s)."""
    total, windows = num_warmup + num_samples, {}

    def tick(i, centre, t, leapfrogs):
        now = time.perf_counter()
        for k, c, tt, n in zip(np.atleast_1d(i), np.atleast_1d(centre), np.atleast_1d(t),
                               np.atleast_1d(leapfrogs), strict=True):  # fmt: skip
            if int(tt) == 0 or int(k) not in windows:  # the window's chain starts
                windows[int(k)] = {"t0": now, "last": now, "leapfrogs": []}
            w = windows[int(k)]
            w["leapfrogs"].append(int(n))
            if int(tt) + 1 >= total or now - w["last"] < PROGRESS_SECONDS:
                continue
            w["last"] = now
            say("umbrella: window %d at %.4g: transition %d of %d (%d warm-up), %.0f leapfrogs "
                "a transition, %s in this window", int(k), float(c), int(tt) + 1, total,
                num_warmup, float(np.mean(w["leapfrogs"])), duration(now - w["t0"]))  # fmt: skip

    return tick


def _observer(pot, names):
    def observe(x):
        tr = pot.trace(x)
        return {n: jnp.reshape(tr[n]["value"], ()) for n in names}

    return observe


def _scalar_sites(pot, cv) -> list[str]:
    """The model's scalar latent and deterministic sites (``cv`` first)."""
    tr = jax.eval_shape(
        lambda x: {n: s["value"] for n, s in pot.trace(x).items() if _recorded(s)},
        jnp.zeros(pot.dim),
    )
    names = [n for n, v in tr.items() if int(np.prod(v.shape)) == 1 and n != cv]
    return [cv, *sorted(names)]


def _recorded(site) -> bool:
    return site["type"] == "deterministic" or (site["type"] == "sample" and not site["is_observed"])


class _Chains(NamedTuple):
    draws: dict  # name -> (windows, chains, draws)
    acceptance: np.ndarray
    steps: np.ndarray
    diverging: np.ndarray
    step_size: np.ndarray  # (windows, chains)
    last: np.ndarray  # (windows, chains, dim)
    kappa: np.ndarray  # (windows,): as run (raised where the bias did not hold)


def _pad(a, n: int):
    """``a``'s leading axis padded to ``n`` by repeating its last entry."""
    extra = n - a.shape[0]
    return jnp.concatenate([a, jnp.repeat(a[-1:], extra, 0)]) if extra else a


def _batched(fn, args, batch: int):
    """``fn`` over the leading axis of ``args``: ``batch`` entries vmapped at a time, the batches
    one after another (``lax.map``); ``batch = 0`` vmaps them all. (On the CPU a vmapped Level-1
    gradient costs ~14 serial ones: its table gathers do not batch well.)"""
    n = jax.tree.leaves(args)[0].shape[0]
    batch = n if batch <= 0 else min(batch, n)
    nb = -(-n // batch)
    blocks = jax.tree.map(lambda a: _pad(a, nb * batch).reshape(nb, batch, *a.shape[1:]), args)
    out = jax.lax.map(jax.vmap(fn), blocks)
    return jax.tree.map(lambda a: a.reshape(nb * batch, *a.shape[2:])[:n], out)


def _hold(biased_U, q, starts, centres, kappas, batch, tries: int = 3):
    """Relaxed starts, and kappa raised (x4, up to ``tries - 1`` times) where the bias does not
    hold the windows apart: the relaxed q of neighbouring windows (``centres`` sorted) jump by more
    than twice their spacing. A window's relaxed q moves with its centre at the rate
    ``kappa / (kappa + F'')``, so a jump means ``kappa + F'' < kappa / 2``: the barrier is curved
    nearly as sharply as the bias and windows there slide into a basin. (A shift of every window
    down a slope, ``F' / kappa``, is harmless and left alone.)"""
    qv = jax.jit(jax.vmap(q))
    relaxer = _relaxer(biased_U, RELAX_STEPS, batch)
    for _ in range(tries):
        x0 = interruptible(_relax, relaxer, jnp.asarray(starts), jnp.asarray(centres),
                           jnp.asarray(kappas))  # fmt: skip
        qr = np.asarray(qv(x0))
        jump = np.abs(np.diff(qr)) > 2.0 * np.diff(centres)
        off = np.append(jump, False) | np.insert(jump, 0, False)
        if not off.any():
            break
        kappas = np.where(off, 4.0 * kappas, kappas)
    return x0, kappas


def _run_windows(pot, q, names, centres, kappas, hold, starts, key, s, *, plan, mesh=None,
                 progress=False, windows=None, store=None, round_=0) -> _Chains:  # fmt: skip
    """Relax, take the metric, and run every window's chains (``s``: the run's
    :class:`~bayes_attn.inference.umbrella.UmbrellaSettings`) in compiled calls (only the
    ``windows`` given, by index, after the starts of all are relaxed; each window's key is
    folded from its index, so its draws are the same whichever call or share runs it)."""
    biased_U = _biased(pot.U, q)
    x0, kappas = _starts(biased_U, q, starts, centres, kappas, hold, s.batch, store, round_)
    index = np.arange(len(centres)) if windows is None else np.asarray(windows, dtype=int)
    x0, centres, kappas = x0[index], np.asarray(centres)[index], kappas[index]
    say("umbrella: %d window starts relaxed; each window's metric next, then its chains",
        len(index), enabled=progress)  # fmt: skip
    if s.metric == "window":
        chunk = s.batch if s.batch > 0 else 30
        inv_mass = np.stack([_metric(biased_U, x0[k], centres[k], kappas[k], chunk)
                             for k in range(len(index))])  # fmt: skip
    else:
        inv_mass = _mode_metrics(q, x0, kappas, plan)
    done = store.load(round_, index) if store is not None else {}
    todo = [k for k in range(len(index)) if int(index[k]) not in done]
    if done:
        say("umbrella: %d of %d windows of round %d resumed from %s", len(index) - len(todo),
            len(index), round_, store.path, enabled=progress)  # fmt: skip
    tick = _ticker(len(todo) * s.num_chains, progress) if progress else None
    chain = _chain(biased_U, _observer(pot, names), s, tick)
    calls = _Calls(chain, s, member_mesh() if mesh is None else mesh, len(index))
    t = time.perf_counter()
    for n0 in range(0, len(todo), calls.per_call):
        sel = np.asarray(todo[n0 : n0 + calls.per_call])
        out = calls(key, sel, (x0, centres, kappas, inv_mass, index), index)
        done.update({int(index[k]): row for k, row in zip(sel, out, strict=False)})
        if store is not None:
            store.save(round_, done)
        calls.report(min(n0 + calls.per_call, len(todo)), len(todo), progress)
    say("umbrella: %d windows x %d chains sampled in %.0f s", len(todo), s.num_chains,
        time.perf_counter() - t, enabled=progress)  # fmt: skip
    rows = [done[int(i)] for i in index]
    stack = lambda f: np.stack([r[f] for r in rows])  # noqa: E731
    draws = {n: np.stack([r[0][n] for r in rows]) for n in names}
    return _Chains(draws, stack(1), stack(2), stack(3), stack(4), stack(5), kappas)


def _starts(biased_U, q, starts, centres, kappas, hold, batch, store, round_):
    """The windows' relaxed starts and kappas (:func:`_hold`), or those kept in ``store`` by an
    interrupted run; kept there once relaxed, so that a resumed run skips the relaxation."""
    kept = store.relaxed(round_) if store is not None else None
    if kept is not None:
        return jnp.asarray(kept[0]), np.array(kept[1])
    kappas = np.array(kappas, dtype=np.float64)
    x0, kappas = _hold(biased_U, q, starts, centres, kappas, batch, tries=3 if hold else 1)
    if store is not None:
        store.keep_relaxed(round_, x0, kappas)
    return x0, kappas


def _chain(biased_U, observe, s, tick):
    """One window's chain (traceable; vmapped over chains and windows): dual averaging of the
    step at the window's metric, then ``num_samples`` NUTS draws, from the one NUTS home."""
    steps = None if tick is None else _step_ticker(s.num_warmup, s.num_samples)

    def chain(args):
        k, x, c, kap, inv, i = args
        logdensity = lambda z: -biased_U(z, c, kap)  # noqa: E731
        k_warm, k_draw = jax.random.split(k)

        def told(off):  # each transition's line, on the host (i and c passed: not closed over)
            if steps is not None:
                return lambda t, n: jax.debug.callback(steps, i, c, t + off, n)

        state, step = adapt_nuts_step(k_warm, x, logdensity, inv, s.num_warmup, s.target_accept,
                                      told(0))  # fmt: skip
        step = step if s.num_warmup else jnp.asarray(0.5, x.dtype)
        state, out = nuts_scan(k_draw, state, logdensity, step, inv, s.num_samples, observe,
                               told(s.num_warmup))  # fmt: skip
        if tick is not None:  # a line as each chain ends (a 900-dimensional window takes a minute)
            jax.debug.callback(tick, i, c, jnp.mean(out[1]))
        return out, step, state.position

    return chain


def _compile(run, args):
    """``run`` (jitted) compiled ahead for ``args``: the first call's time is then sampling only,
    which the cost line after it projects from (:meth:`_Calls.report`)."""
    return run.lower(args).compile()


class _Calls:
    """The compiled calls over the windows: every window at once where they are vectorised
    together (``batch`` 0) up to :data:`CALL_WINDOWS`, else as many as fill one batch on every
    device. Each call runs in :func:`interruptible`, so Ctrl-C stops the run between calls and
    the finished windows are kept."""

    def __init__(self, chain, s, mesh, windows: int):
        self.s, self.mesh, self.n_dev = s, mesh, mesh.size
        if s.batch <= 0:
            self.per_call = min(windows, CALL_WINDOWS)
        else:
            self.per_call = max(1, (self.n_dev * s.batch) // s.num_chains)
        self.per_dev = -(-self.per_call * s.num_chains // self.n_dev)
        self.run = jax.jit(lambda a: sharded_map(lambda share: _batched(chain, share, s.batch), a,
                                                 mesh=mesh))  # fmt: skip
        self.compiled, self.seconds, self.steps = None, [], []

    def __call__(self, key, sel, args, index) -> list[tuple]:
        """The outputs of the windows ``sel`` (positions in ``index``), one tuple per window."""
        n, C = sel.size, self.s.num_chains
        sel = np.concatenate([sel, np.repeat(sel[-1:], self.per_call - n)])
        rep = lambda a: jnp.repeat(jnp.asarray(a)[sel], C, axis=0)  # noqa: E731
        # each window's chains from its own index: the same draws whichever call or share runs it
        keys = jax.vmap(lambda i: jax.random.split(jax.random.fold_in(key, i), C))(
            jnp.asarray(index[sel])
        ).reshape(self.per_call * C)
        shares = jax.tree.map(
            lambda a: _pad(a, self.n_dev * self.per_dev).reshape(self.n_dev, self.per_dev,
                                                                 *a.shape[1:]),
            (keys, *(rep(a) for a in args)),
        )  # fmt: skip
        if self.compiled is None:
            self.compiled = interruptible(_compile, self.run, shares)
        t = time.perf_counter()
        out = interruptible(self.compiled, shares)
        self.seconds.append(time.perf_counter() - t)
        out = jax.tree.map(
            lambda a: np.asarray(a).reshape(self.n_dev * self.per_dev, *a.shape[2:])
            [: self.per_call * C].reshape(self.per_call, C, *a.shape[2:]), out)  # fmt: skip
        (obs, acc, steps, div), step, last = out
        self.steps.append(float(np.mean(steps[:n])))
        return [({k: v[m] for k, v in obs.items()}, acc[m], steps[m], div[m], step[m], last[m])
                for m in range(n)]  # fmt: skip

    def report(self, finished: int, total: int, progress: bool) -> None:
        """After a call: the windows done and the time left, projected from the calls' own
        sampling time (compilation apart) and the gradients per draw measured so far."""
        if finished >= total or not progress:
            return
        pace = float(np.mean(self.seconds)) / self.per_call
        lo, hi = GRADIENTS_PER_DRAW["window"]
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        say("umbrella: %d of %d windows done; %.3g gradients per draw measured (%d to %d "
            "assumed); about %s left at this pace (load %.1f on %d cores)", finished, total,
            float(np.mean(self.steps)), lo, hi, duration(pace * (total - finished)), load,
            os.cpu_count() or 1)  # fmt: skip


def overlap(a, b, bins: int = 40) -> float:
    """The overlap coefficient of two samples of q: the common area of their histograms on shared
    bins (1 for identical distributions, 0 for disjoint ones)."""
    a, b = np.ravel(a), np.ravel(b)
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    if hi <= lo:
        return 1.0
    edges = np.linspace(lo, hi, bins + 1)
    pa = np.histogram(a, edges)[0] / a.size
    pb = np.histogram(b, edges)[0] / b.size
    return float(np.minimum(pa, pb).sum())


def _refine(centres, kappas, q_draws, last, min_overlap):
    """New windows at the midpoints of neighbours that overlap less than ``min_overlap``."""
    new_c, new_k, new_x = [], [], []
    for k in range(len(centres) - 1):
        if overlap(q_draws[k], q_draws[k + 1]) >= min_overlap:
            continue
        c = 0.5 * (centres[k] + centres[k + 1])
        near = k if abs(q_draws[k].mean() - c) <= abs(q_draws[k + 1].mean() - c) else k + 1
        new_c.append(c)
        new_k.append(max(kappas[k], kappas[k + 1]))
        new_x.append(last[near, 0])
    return np.array(new_c), np.array(new_k), np.array(new_x)


def _merge(a: _Chains, b: _Chains, order) -> _Chains:
    cat = lambda x, y: np.concatenate([x, y])[order]  # noqa: E731
    return _Chains({n: cat(a.draws[n], b.draws[n]) for n in a.draws},
                   *(cat(getattr(a, f), getattr(b, f)) for f in _Chains._fields[1:]))  # fmt: skip
