"""Umbrella sampling of a model's posterior along one scalar site (a collective variable).

The free energy of a scalar site ``q`` (the order parameter ``aG``, or any latent or deterministic
scalar), ``F(q) = -log p(q | data)``, is what a physicist draws of a multimodal posterior: its
minima are the phases and its maximum between them is the barrier. Where the barrier is high, one
chain never crosses it. Umbrella sampling runs one chain per *window* ``k`` on the posterior tilted
by a harmonic bias,

    p_k(x) ∝ p(x | data) exp(-kappa_k / 2 (q(x) - q_k)^2),

so that each window holds ``q`` near its centre ``q_k``; neighbouring windows overlap, and MBAR
(:func:`bayes_attn.analysis.free_energy_profile`) removes the biases and joins the windows into
one ``F(q)``. The windows are independent: they run as one program, ``batch`` chains vectorised
at a time (``jax.vmap``; all at once by default, one by one for Level 1 on a CPU, whose gradient
does not vectorise), split over the local devices where there are several
(:mod:`bayes_attn.inference.sharding`).

Each window

1. starts on the path through the modes (``find_mode`` from each of ``starts``, sorted by q,
   joined by straight lines in the flat unconstrained space, and continued past the outer modes
   along the Laplace conditional mean of x given q), relaxed to the minimum of the biased
   potential ``U(x) + kappa_k / 2 (q(x) - q_k)^2`` (L-BFGS, ``optax.lbfgs``); where the minima
   of neighbouring windows jump apart by more than twice their spacing, the barrier is curved
   nearly as sharply as the bias and the windows would slide into a basin, so kappa there is
   raised fourfold (at most twice) and the starts relaxed again;
2. takes as its dense NUTS metric the inverse of that biased potential's Hessian there
   (:func:`bayes_attn.inference.potential.hessian`; eigenvalues by magnitude, floored), so that in
   the metric's coordinates the window's posterior is near-isotropic (``metric="mode"``: the
   nearest mode's Hessian plus ``kappa grad q grad q'``, two Hessians in all);
3. runs ``num_chains`` BlackJAX NUTS chains: ``num_warmup`` steps of dual averaging of the step,
   then ``num_samples`` draws, recording every scalar site.

The windows run as compiled calls (all at once where they are vectorised together, ``batch``
0; otherwise as many as fill one batch), each in a worker thread the caller waits on, so that
Ctrl-C stops the run within a second (:func:`interruptible`); with ``checkpoint`` the finished
windows are kept after each call (:class:`WindowStore`) and a rerun resumes them.

Default placement (no ``centres``): the modes are found from ``starts`` (default: a start in
each phase of the package's softmax models, :func:`bayes_attn.theory.modes.phase_starts`; for
any other model NumPyro's initial values from four keys); from the modes' q and the Laplace
standard deviation of q at each, windows run from ``past`` standard deviations below the lowest
mode to ``past`` above the highest, evenly spaced by the smallest mode's standard deviation
(between 8 and ``max_windows`` windows), with ``kappa = 1 / spacing^2`` (each bias one spacing
wide, so neighbours overlap). Where the windows cover one basin only, a :class:`CoverageWarning`
says so.
Refinement (``refine`` rounds): where two neighbours' histograms of q overlap less than
``min_overlap``, a window is added at the midpoint of their centres, started from the nearer
neighbour's last draw, and the new windows are run.

References
----------
Torrie & Valleau (1977), umbrella sampling; Shirts & Chodera (2008), MBAR; Kästner (2011),
"Umbrella sampling", WIREs Comput. Mol. Sci. 1, 932. docs/theory.md, "The free-energy landscape".
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import math
import threading
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import _arviz as az
from bayes_attn._validation import check_int, check_positive
from bayes_attn.distributed import process_share
from bayes_attn.inference import potential
from bayes_attn.inference.members import adapt_nuts_step
from bayes_attn.inference.record import RunRecord
from bayes_attn.inference.sharding import member_mesh, sharded_map
from bayes_attn.keys import resolve_key
from bayes_attn.progress import announce, duration, say, seconds_per_call

__all__ = ["CoverageWarning", "UmbrellaPlan", "UmbrellaSettings", "WindowStore", "fingerprint",
           "interruptible", "merge_umbrella", "overlap", "plan_windows", "run_umbrella"]  # fmt: skip

#: gradients per NUTS transition in the cost estimate (low, high): trees of depth 2 to 8
GRADIENTS_PER_DRAW = (3, 255)
#: L-BFGS steps that relax each window's start to the minimum of its biased potential
RELAX_STEPS = 60
#: the windows' metrics (run_umbrella's ``metric``)
METRICS = ("window", "mode")


@dataclasses.dataclass(frozen=True)
class UmbrellaSettings:
    """:func:`run_umbrella`'s options and their defaults (the one place they are set).

    ``UmbrellaSettings()`` holds :func:`run_umbrella`'s own defaults; :meth:`for_level` the
    landscape's at a level, which ``bayes-attn landscape`` and the ``landscape`` sweep read.
    The fields are :func:`run_umbrella`'s keyword arguments of the same names.
    """

    num_warmup: int = 200
    num_samples: int = 500
    num_chains: int = 2
    max_windows: int = 48
    refine: int = 1
    min_overlap: float = 0.1
    past: float = 4.0
    target_accept: float = 0.8
    batch: int = 0
    metric: str = "window"

    @classmethod
    def for_level(cls, level: str) -> UmbrellaSettings:
        """The landscape's settings at ``level``. Level 2 (``reduced``: one dimension, every
        window vectorised, a Hessian per window) takes :func:`run_umbrella`'s defaults: with
        fewer draws or one chain its barrier windows mix too little to be trusted at Table 1
        (docs/validation.md, "Free-energy profiles"). Level 1 (``kernel``: 900 dimensions,
        a gradient that does not vectorise on a CPU) runs one chain of 100 warm-up steps and 250
        draws in at most 32 windows, one chain at a time, with the two modes' Hessians as the
        metric (``metric="mode"``): the budget validated against SMC at the small preset."""
        if level == "reduced":
            return cls()
        if level == "kernel":
            return cls(num_warmup=100, num_samples=250, num_chains=1, max_windows=32, batch=1,
                       metric="mode")  # fmt: skip
        raise ValueError(f"level must be 'reduced' or 'kernel', got {level!r}")

    def options(self, *names) -> dict:
        """The fields ``names`` (default all) as keyword arguments of :func:`run_umbrella`."""
        o = dataclasses.asdict(self)
        return {n: o[n] for n in (names or o)}


_DEFAULT = UmbrellaSettings()


class UmbrellaPlan(NamedTuple):
    """Where the windows sit (:func:`plan_windows`).

    Attributes
    ----------
    centres, kappa : numpy.ndarray (windows,)
        Each window's centre in q and its bias strength.
    starts : numpy.ndarray (windows, dim)
        Each window's start in the flat unconstrained space (before relaxation).
    mode_q, mode_sd : numpy.ndarray (modes,)
        q at each mode and its Laplace standard deviation there, sorted by q.
    mode_hessian : numpy.ndarray (modes, dim, dim)
        The potential's Hessian at each mode (eigenvalues by magnitude, floored).
    """

    centres: np.ndarray
    kappa: np.ndarray
    starts: np.ndarray
    mode_q: np.ndarray
    mode_sd: np.ndarray
    mode_hessian: np.ndarray


# --------------------------------------------------------------------------------------------------
# Placement


#: NumPyro initial values tried for a model the default placement does not know
GENERIC_STARTS = 4


def _default_starts(model, pot, key) -> list[dict]:
    """The starts of the default placement: one inside each phase of the package's softmax
    models (:func:`bayes_attn.theory.modes.phase_starts`: the Level-2 minima, realised at
    Level 1 and in a network with frozen embeddings), so that the windows span both phases;
    for any other model, NumPyro's own initial values (uniform in [-2, 2] unconstrained) from
    :data:`GENERIC_STARTS` keys, the first being ``key``'s."""
    known = _phase_starts(model, pot.model_args, pot.model_kwargs)
    if known is not None:
        return known
    from numpyro.infer.util import initialize_model

    out = []
    for k in [key, *jax.random.split(key, GENERIC_STARTS - 1)]:
        info = initialize_model(
            k, pot.model, model_args=pot.model_args, model_kwargs=pot.model_kwargs
        )
        sites = pot.sites(pot.ravel(info.param_info.z))
        out.append({n: sites[n] for n in pot.shapes})
    return out


def _phase_starts(model, args, kwargs) -> list[dict] | None:
    """A start in each softmax phase for the package's models, None for any other model."""
    from bayes_attn.models.kernel_limit import kernel_limit_model
    from bayes_attn.models.network import network_model
    from bayes_attn.models.order_params import order_param_model
    from bayes_attn.theory.modes import phase_starts

    if len(args) < 4 or args[3] != "softmax":
        return None
    task, hyper, data = args[0], args[1], args[2]
    if model is order_param_model:
        st = phase_starts(task, hyper, float(data), "reduced")
    elif model is kernel_limit_model:
        st = phase_starts(task, hyper, float(np.shape(data)[0]), "kernel")
    elif (model is network_model and kwargs.get("embeddings") is not None
          and not kwargs.get("factorized", False)
          and np.shape(kwargs["embeddings"][0])[0] >= task.n_features):  # fmt: skip
        # (a narrower network cannot realise the strong phase's M exactly: NumPyro's starts)
        st = phase_starts(task, hyper, float(np.shape(data)[0]), "network",
                          embeddings=kwargs["embeddings"])  # fmt: skip
    else:
        return None
    return [st["weak"], st["strong"]]


def _modes(model, pot, q, starts):
    """Flat modes (sorted by q, duplicates dropped), their q, the Laplace sd of q and the
    conditional-mean direction dx/dq at each."""
    found = []
    for start in starts:
        m = potential.find_mode(
            model, start=start, model_args=pot.model_args, model_kwargs=pot.model_kwargs
        )
        found.append(np.asarray(m.x))
    qs = np.array([float(q(jnp.asarray(x))) for x in found])
    order = np.argsort(qs)
    xs, qs, sds, dirs, hs = [], [], [], [], []
    for i in order:
        x = found[i]
        if qs and abs(float(q(jnp.asarray(x))) - qs[-1]) < 1e-6 * (1 + abs(qs[-1])):
            continue
        H = potential.hessian(pot.U, x)
        g = np.asarray(jax.grad(q)(jnp.asarray(x)), dtype=np.float64)
        lam, Q = np.linalg.eigh(H)
        lam = np.maximum(np.abs(lam), 1e-8 * max(float(np.abs(lam).max()), 1e-300))
        v = (Q / lam) @ (Q.T @ g)  # Sigma g
        var = float(g @ v)
        if not var > 0:
            raise ValueError("cv: its gradient vanishes at a mode; it does not move with the model")
        xs.append(x)
        qs.append(float(q(jnp.asarray(x))))
        sds.append(math.sqrt(var))
        dirs.append(v / var)  # E[x | q] = x* + (q - q*) Sigma g / (g' Sigma g)
        hs.append((Q * lam) @ Q.T)
    return np.array(xs), np.array(qs), np.array(sds), np.array(dirs), np.array(hs)


def _path_point(q, xs, qs, dirs, centre) -> np.ndarray:
    """A point whose q is near ``centre``: on the straight segments between the modes, or on the
    Laplace conditional mean beyond the outer modes."""
    if centre <= qs[0] or len(xs) == 1 and centre >= qs[0]:
        i = 0 if centre <= qs[0] else -1
        return xs[i] + (centre - qs[i]) * dirs[i]
    if centre >= qs[-1]:
        return xs[-1] + (centre - qs[-1]) * dirs[-1]
    j = int(np.searchsorted(qs, centre)) - 1
    t = np.linspace(0.0, 1.0, 101)
    seg = xs[j][None] + t[:, None] * (xs[j + 1] - xs[j])[None]
    qt = np.asarray(jax.vmap(q)(jnp.asarray(seg)))
    return seg[int(np.argmin(np.abs(qt - centre)))]


def plan_windows(
    model,
    cv: str,
    *,
    model_args=(),
    model_kwargs=None,
    starts=None,
    centres=None,
    kappa=None,
    past: float = _DEFAULT.past,
    max_windows: int = _DEFAULT.max_windows,
    key=None,
) -> UmbrellaPlan:
    """The windows of :func:`run_umbrella`: centres, bias strengths and starting points.

    Parameters
    ----------
    starts : sequence of dict, optional
        Constrained values of every latent site, one per phase (each inside a basin); the modes
        found from them bound the windows. Default: a start in each phase of the package's
        softmax models, else NumPyro's initial values from :data:`GENERIC_STARTS` keys.
    centres : array_like, optional
        The windows' centres; default from the modes (module docstring).
    kappa : float or array_like, optional
        The bias strength (one, or one per window); default ``1 / spacing^2``.
    past : float
        How many Laplace standard deviations of q the windows reach past the outer modes.
    max_windows : int
        The most windows the default placement makes (at least 8 are made).
    """
    past = check_positive("past", past)
    max_windows = check_int("max_windows", max_windows, 8)
    pot = potential.flat_potential(model, model_args, model_kwargs)
    q = pot.scalar_site(cv)
    if starts is None:
        starts = _default_starts(model, pot, jax.random.key(0) if key is None else key)
    xs, qs, sds, dirs, hs = _modes(model, pot, q, list(starts))
    if centres is None:
        lo, hi = qs[0] - past * sds[0], qs[-1] + past * sds[-1]
        n = int(np.clip(math.ceil((hi - lo) / sds.min()) + 1, 8, max_windows))
        centres = np.linspace(lo, hi, n)
    centres = np.sort(np.asarray(centres, dtype=np.float64).ravel())
    if centres.size < 2 or not np.all(np.isfinite(centres)) or np.any(np.diff(centres) <= 0):
        raise ValueError("centres: give at least two distinct finite window centres")
    if kappa is None:
        kappa = 1.0 / float(np.median(np.diff(centres))) ** 2
    kappa = np.broadcast_to(np.asarray(kappa, dtype=np.float64), centres.shape).copy()
    if not np.all(kappa > 0):
        raise ValueError(f"kappa must be > 0, got {kappa.min()}")
    path = np.stack([_path_point(q, xs, qs, dirs, c) for c in centres])
    return UmbrellaPlan(centres, kappa, path, qs, sds, hs)


# --------------------------------------------------------------------------------------------------
# One window's chains


def _biased(U, q):
    def biased_U(x, centre, kappa):
        return U(x) + 0.5 * kappa * (q(x) - centre) ** 2

    return biased_U


def _relax(biased_U, x0, centres, kappas, steps: int, batch: int = 0):
    """Each start moved to the minimum of its window's biased potential (L-BFGS, vmapped)."""
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

    return jax.jit(lambda a: _batched(lambda b: one(*b), a, batch))((x0, centres, kappas))


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
    for _ in range(tries):
        x0 = interruptible(_relax, biased_U, jnp.asarray(starts), jnp.asarray(centres),
                           jnp.asarray(kappas), RELAX_STEPS, batch)  # fmt: skip
        qr = np.asarray(qv(x0))
        jump = np.abs(np.diff(qr)) > 2.0 * np.diff(centres)
        off = np.append(jump, False) | np.insert(jump, 0, False)
        if not off.any():
            break
        kappas = np.where(off, 4.0 * kappas, kappas)
    return x0, kappas


def _run_windows(pot, q, names, centres, kappas, hold, starts, key, *, num_chains, num_warmup,
                 num_samples, target_accept, mesh, progress, batch, metric, plan,
                 windows=None, store=None, round_=0) -> _Chains:  # fmt: skip
    """Relax, take the metric, and run every window's chains in one vectorised program (only
    the ``windows`` given, by index, after the starts of all are relaxed; each window's key is
    folded from its index)."""
    import blackjax

    biased_U = _biased(pot.U, q)
    kappas = np.array(kappas, dtype=np.float64)
    kept = store.relaxed(round_) if store is not None else None
    if kept is None:
        x0, kappas = _hold(biased_U, q, starts, centres, kappas, batch, tries=3 if hold else 1)
        if store is not None:  # kept, so that a resumed run skips the relaxation
            store.keep_relaxed(round_, x0, kappas)
    else:
        x0, kappas = jnp.asarray(kept[0]), np.array(kept[1])
    index = np.arange(len(centres)) if windows is None else np.asarray(windows, dtype=int)
    x0, centres, kappas = x0[index], np.asarray(centres)[index], kappas[index]
    W = len(centres)
    say("umbrella: %d window starts relaxed; each window's metric next, then its chains", W,
        enabled=progress)  # fmt: skip
    if metric == "window":
        chunk = batch if batch > 0 else 30
        inv_mass = np.stack([_metric(biased_U, x0[k], centres[k], kappas[k], chunk)
                             for k in range(W)])  # fmt: skip
    else:
        inv_mass = _mode_metrics(q, x0, kappas, plan)
    observe = _observer(pot, names)
    kernel = blackjax.nuts.build_kernel()

    def chain(args):
        k, x, c, kap, inv, i = args
        logdensity = lambda z: -biased_U(z, c, kap)  # noqa: E731
        k_warm, k_draw = jax.random.split(k)
        state, step = adapt_nuts_step(k_warm, x, logdensity, inv, num_warmup, target_accept)
        step = step if num_warmup else jnp.asarray(0.5, x.dtype)

        def draw(state, kk):
            state, info = kernel(kk, state, logdensity, step, inv)
            return state, (observe(state.position), info.acceptance_rate,
                           info.num_integration_steps, info.is_divergent)  # fmt: skip

        state, out = jax.lax.scan(draw, state, jax.random.split(k_draw, num_samples))
        if progress:  # a line as each chain ends (a 900-dimensional window takes a minute)
            jax.debug.callback(tick, i, c, jnp.mean(out[1]))
        return out, step, state.position

    mesh = member_mesh() if mesh is None else mesh
    n_dev = mesh.size
    # windows per compiled call: every window at once where they are vectorised together
    # (batch 0), else as many as fill one batch on every device; Python regains control between
    # calls, so Ctrl-C stops the run there and the finished windows are kept (``store``)
    per_call = W if batch <= 0 else max(1, (n_dev * batch) // num_chains)
    per_dev = -(-per_call * num_chains // n_dev)

    def by_device(tree):  # (devices, per device, ...): sharded_map hands each device its share
        return jax.tree.map(
            lambda a: _pad(a, n_dev * per_dev).reshape(n_dev, per_dev, *a.shape[1:]), tree
        )

    run = jax.jit(lambda a: sharded_map(lambda share: _batched(chain, share, batch), a, mesh=mesh))
    done = store.load(round_, index) if store is not None else {}
    todo = [k for k in range(W) if int(index[k]) not in done]
    if done:
        say("umbrella: %d of %d windows of round %d resumed from %s", W - len(todo), W, round_,
            store.path, enabled=progress)  # fmt: skip
    tick = _ticker(len(todo) * num_chains, progress)
    t = time.perf_counter()
    for n0 in range(0, len(todo), per_call):
        sel = np.asarray(todo[n0 : n0 + per_call])
        sel = np.concatenate([sel, np.repeat(sel[-1:], per_call - sel.size)])
        rep = lambda a, s=sel: jnp.repeat(jnp.asarray(a)[s], num_chains, axis=0)  # noqa: E731
        # each window's chains from its own index: the same draws whichever share runs it
        keys = jax.vmap(lambda i: jax.random.split(jax.random.fold_in(key, i), num_chains))(
            jnp.asarray(index[sel])
        ).reshape(per_call * num_chains)
        args = (keys, rep(x0), rep(centres), rep(kappas), rep(inv_mass), rep(index))
        out = interruptible(run, by_device(args))
        out = jax.tree.map(
            lambda a: np.asarray(a).reshape(n_dev * per_dev, *a.shape[2:])[: per_call * num_chains]
            .reshape(per_call, num_chains, *a.shape[2:]), out)  # fmt: skip
        (obs, acc, steps, div), step, last = out
        for m, k in enumerate(sel[: len(todo[n0 : n0 + per_call])]):
            done[int(index[k])] = ({n: v[m] for n, v in obs.items()}, acc[m], steps[m], div[m],
                                   step[m], last[m])  # fmt: skip
        if store is not None:
            store.save(round_, done)
        finished = min(n0 + per_call, len(todo))
        if finished < len(todo):
            spent = time.perf_counter() - t
            say("umbrella: %d of %d windows done in %s; about %s left at this pace", finished,
                len(todo), duration(spent), duration(spent / finished * (len(todo) - finished)),
                enabled=progress)  # fmt: skip
    say("umbrella: %d windows x %d chains sampled in %.0f s", len(todo), num_chains,
        time.perf_counter() - t, enabled=progress)  # fmt: skip
    rows = [done[int(i)] for i in index]
    stack = lambda f: np.stack([r[f] for r in rows])  # noqa: E731
    draws = {n: np.stack([r[0][n] for r in rows]) for n in names}
    return _Chains(draws, stack(1), stack(2), stack(3), stack(4), stack(5), kappas)


def interruptible(fn, *args):
    """``fn(*args)`` (a compiled JAX call) in a worker thread, the caller waiting in short sleeps:
    a compiled program does not return to Python until it ends, so Ctrl-C would wait for it;
    here it stops the caller within a tenth of a second (``KeyboardInterrupt``), the program
    left to run in its daemon thread (at exit the process then leaves at once, status 130, see
    :func:`_leave_at_exit`). Returns its outputs, ready; re-raises its error."""
    box = {}

    def work():
        try:
            box["out"] = jax.block_until_ready(fn(*args))
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box["err"] = err

    worker = threading.Thread(target=work, name="bayes-attn-umbrella", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        _IN_FLIGHT.add(worker)
        if len(_IN_FLIGHT) == 1:
            atexit.register(_leave_at_exit)
        raise
    if "err" in box:
        raise box["err"]
    return box["out"]


#: worker threads left running by an interrupt (:func:`interruptible`)
_IN_FLIGHT: set = set()


def _leave_at_exit() -> None:
    """At exit after an interrupt left a compiled program running: flush and leave at once
    (status 130, as an interrupt). The interpreter's shutdown would end the threads XLA runs it
    and its host callbacks on while they wait for Python, which XLA answers with an abort
    ("terminate called ... FATAL: exception not rethrown", status 134, or a segfault, 139)."""
    if _IN_FLIGHT:
        import logging
        import os
        import sys

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream: nothing to flush
                pass
        logging.shutdown()
        os._exit(130)


# --------------------------------------------------------------------------------------------------
# Finished windows kept across an interrupt


def fingerprint(*parts) -> str:
    """A digest of everything that decides a run's draws: arrays by dtype, shape and bytes,
    mappings by sorted keys, functions by name, anything else by ``repr``."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(str(k).encode())
                feed(x[k])
        elif isinstance(x, list | tuple):
            h.update(f"seq{len(x)}".encode())
            for v in x:
                feed(v)
        elif callable(x) and hasattr(x, "__qualname__"):
            h.update(f"{x.__module__}.{x.__qualname__}".encode())
        elif isinstance(x, np.ndarray | jax.Array | np.generic):
            if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
                x = jax.random.key_data(x)
            a = np.ascontiguousarray(np.asarray(x))
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(a.tobytes())
        else:
            h.update(repr(x).encode())

    feed(list(parts))
    return h.hexdigest()


class WindowStore:
    """The finished windows of one run (:func:`run_umbrella` with ``checkpoint``): a NetCDF file
    rewritten atomically (:func:`bayes_attn.io.write_atomic`) after each compiled call, holding
    each finished window's draws, statistics, step and last position by (round, window), and the
    run's :func:`fingerprint`. A run with other arguments refuses the file."""

    def __init__(self, path, digest: str):
        self.path, self.digest = Path(path), digest
        self._rounds: dict[int, dict] = {}
        self._relaxed: dict[int, tuple] = {}  # round -> the windows' relaxed starts and kappas
        if self.path.exists():
            import xarray as xr

            try:
                with xr.open_dataset(self.path, engine="h5netcdf") as f:
                    ds = f.load()
            except Exception as err:  # h5py raises OSError, xarray ValueError
                raise ValueError(f"checkpoint: cannot read {self.path}: {err}") from err
            if ds.attrs.get("fingerprint") != digest:
                raise ValueError(
                    f"checkpoint: {self.path} holds windows of a run with other arguments (model, "
                    "data, seed or settings); remove it, or rerun with the arguments that made it"
                )
            names = [str(v)[4:] for v in ds.data_vars if str(v).startswith("obs_")]
            for v in ds.data_vars:
                if str(v).startswith("relaxed_x0_"):
                    r = int(str(v)[len("relaxed_x0_") :])
                    self._relaxed[r] = (ds[v].values, ds[f"relaxed_kappa_{r}"].values)
            for s in range(ds.sizes.get("slot", 0)):
                row = ds.isel(slot=s)
                self._rounds.setdefault(int(row["round"]), {})[int(row["window"])] = (
                    {n: row[f"obs_{n}"].values for n in names}, row["acceptance"].values,
                    row["n_steps"].values, row["diverging"].values, row["step_size"].values,
                    row["last"].values)  # fmt: skip

    def load(self, round_: int, index) -> dict:
        """The finished windows of ``round_`` among ``index``: window -> outputs."""
        have = self._rounds.get(int(round_), {})
        return {int(i): have[int(i)] for i in index if int(i) in have}

    def count(self) -> int:
        return sum(len(r) for r in self._rounds.values())

    def relaxed(self, round_: int):
        """The relaxed starts and kappas of every window of ``round_`` (all windows, before a
        share is taken), or None: a resumed run skips the relaxation."""
        return self._relaxed.get(int(round_))

    def keep_relaxed(self, round_: int, x0, kappas) -> None:
        self._relaxed[int(round_)] = (np.asarray(x0), np.asarray(kappas))
        self.save(round_, {})

    def save(self, round_: int, done: dict) -> None:
        import xarray as xr

        from bayes_attn.io import write_atomic

        self._rounds.setdefault(int(round_), {}).update(done)
        rows = [
            (r, w, out) for r, ws in sorted(self._rounds.items()) for w, out in sorted(ws.items())
        ]
        data = {}
        for r, (x0, kap) in self._relaxed.items():
            data[f"relaxed_x0_{r}"] = ((f"relaxed_{r}", "dim"), x0)
            data[f"relaxed_kappa_{r}"] = ((f"relaxed_{r}",), kap)
        if rows:
            names = list(rows[0][2][0])
            stack = lambda f: np.stack([out[f] for _, _, out in rows])  # noqa: E731
            cdw = ("slot", "chain", "draw")
            data.update(
                {**{f"obs_{n}": (cdw, np.stack([out[0][n] for _, _, out in rows])) for n in names},
                 "acceptance": (cdw, stack(1)), "n_steps": (cdw, stack(2)),
                 "diverging": (cdw, stack(3)), "step_size": (("slot", "chain"), stack(4)),
                 "last": (("slot", "chain", "dim"), stack(5)),
                 "round": ("slot", np.array([r for r, _, _ in rows])),
                 "window": ("slot", np.array([w for _, w, _ in rows]))}
            )  # fmt: skip
        attrs = {"fingerprint": self.digest,
                 "description": "finished umbrella windows, kept to resume an interrupted run"}  # fmt: skip
        write_atomic(xr.Dataset(data, attrs=attrs), self.path)


# --------------------------------------------------------------------------------------------------
# Overlap and refinement


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


# --------------------------------------------------------------------------------------------------
# The result


def _window_stats(chains: _Chains, cv: str) -> dict:
    qd = chains.draws[cv]
    r_hat = np.array([_rhat(w) for w in qd])
    ess = np.array([az.ess(w) for w in qd])
    return {
        "r_hat": (("window",), r_hat),
        "ess_bulk": (("window",), ess),
        "acceptance": (("window",), chains.acceptance.mean(axis=(1, 2))),
    }


def _rhat(draws) -> float:
    """Split R-hat of (chain, draw) (one chain is split in two)."""
    d = np.asarray(draws, dtype=float)
    if d.shape[0] == 1:
        half = d.shape[1] // 2
        d = np.stack([d[0, :half], d[0, half : 2 * half]])
    return float(az.rhat(d, method="rank")) if d.shape[1] >= 4 else math.nan


def _to_idata(chains: _Chains, centres, kappas, cv, record, model, model_args, model_kwargs,
              index):  # fmt: skip
    import xarray as xr

    move = lambda a: np.moveaxis(a, 0, -1)  # (window, chain, draw) -> (chain, draw, window)  # noqa: E731
    dims = {n: ["window"] for n in chains.draws}
    stats = {
        "acceptance_rate": move(chains.acceptance),
        "n_steps": move(chains.steps),
        "diverging": move(chains.diverging),
        "step_size": move(np.broadcast_to(chains.step_size[..., None], chains.acceptance.shape)),
    }
    idata = az.from_dict(
        {"posterior": {n: move(v) for n, v in chains.draws.items()}, "sample_stats": stats},
        coords={"window": np.asarray(index)},
        dims={**dims, **{n: ["window"] for n in stats}},
    )
    const = xr.Dataset(
        {"centre": ("window", centres), "kappa": ("window", kappas),
         **_window_stats(chains, cv)},
        coords={"window": np.asarray(index)},
    )  # fmt: skip
    az.set_group(idata, "constant_data", const)
    attrs = record.attrs(model, model_args, model_kwargs)
    attrs["cv"] = cv
    for group in az.groups(idata):
        idata[group].attrs.update(attrs)
    return idata


class CoverageWarning(UserWarning):
    """The umbrella windows cover one basin only (:func:`run_umbrella`)."""


def _basins(q, sd) -> np.ndarray:
    """The modes (sorted by q) grouped into basins: modes closer than the larger of their two
    Laplace standard deviations of q are one basin. Returns each basin's mean q."""
    groups = [[0]] if len(q) else []
    for i in range(1, len(q)):
        if q[i] - q[groups[-1][-1]] < max(sd[i], sd[groups[-1][-1]]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return np.array([float(np.mean(q[g])) for g in groups])


def _coverage(plan, centres, cv) -> dict:
    """How many basins the modes found make and how many the windows span (attrs), with a
    :class:`CoverageWarning` where the windows cover one basin only."""
    basins = _basins(plan.mode_q, plan.mode_sd)
    lo, hi = float(np.min(centres)), float(np.max(centres))
    covered = int(np.sum((basins >= lo) & (basins <= hi)))
    text = ""
    where = ", ".join(f"{b:.4g}" for b in basins)
    if basins.size == 1:
        text = (f"the windows cover one basin only: the starts reach one mode ({cv} = {where}); a "
                "phase elsewhere is missing from F (give starts= one inside each phase, or "
                "centres= that reach it)")  # fmt: skip
    elif covered < 2:
        text = (f"the windows ({cv} {lo:.4g} to {hi:.4g}) cover one of the {basins.size} basins "
                f"the starts reach ({cv} = {where}); F misses the others' mass (widen centres=)")  # fmt: skip
    if text:
        warnings.warn(f"run_umbrella: {text}", CoverageWarning, stacklevel=3)
    return {"basins_found": int(basins.size), "basins_covered": covered, "coverage": text}


def run_umbrella(
    model,
    cv: str,
    *,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    starts=None,
    centres=None,
    kappa=None,
    num_warmup: int = _DEFAULT.num_warmup,
    num_samples: int = _DEFAULT.num_samples,
    num_chains: int = _DEFAULT.num_chains,
    seed: int | None = None,
    key=None,
    target_accept: float = _DEFAULT.target_accept,
    refine: int = _DEFAULT.refine,
    min_overlap: float = _DEFAULT.min_overlap,
    past: float = _DEFAULT.past,
    max_windows: int = _DEFAULT.max_windows,
    batch: int = _DEFAULT.batch,
    metric: str = _DEFAULT.metric,
    mesh=None,
    windows=None,
    share: tuple[int, int] | None = None,
    checkpoint=None,
    progress: bool = False,
):
    """Umbrella sampling of ``model``'s posterior along its scalar site ``cv``.

    Parameters
    ----------
    model : callable
        A NumPyro model with a finite density (the package's models at any level).
    cv : str
        A scalar latent or deterministic site (``aG``, ``cG``, ``a1``, ``c1``, ...).
    model_args, model_kwargs : tuple, dict
        The model's arguments.
    starts : sequence of dict, optional
        Constrained values of every latent site, one inside each phase; the modes found from
        them place the default windows. Default: for the package's softmax models a start in
        each phase (:func:`bayes_attn.theory.modes.phase_starts`), for any other model
        NumPyro's initial values from :data:`GENERIC_STARTS` keys.
    centres, kappa : optional
        The windows' centres and bias strength (scalar or per window); default
        :func:`plan_windows`.
    num_warmup, num_samples, num_chains : int
        Per window: dual-averaging steps, draws kept, and chains (R-hat needs two or more).
    seed, key
        A seed or a PRNG key (not both; seed 0 when neither).
    target_accept : float
        The dual averaging's target acceptance.
    refine : int
        Rounds of refinement: windows added where neighbours overlap less than ``min_overlap``
        (the common area of their histograms of q, :func:`overlap`).
    past, max_windows
        The default placement's reach past the outer modes (Laplace sds) and its most windows.
    batch : int
        Chains vectorised together (``jax.vmap``); the batches run one after another. 0 (the
        default) vectorises every window's chains at once, best for a cheap density; 1 runs them
        one by one, best on a CPU for Level 1, whose gradient does not vectorise well. Also the
        Hessian-vector products per batch of each window's metric (30 for 0).
    metric : {"window", "mode"}
        Each window's dense NUTS metric: the inverse Hessian of its biased potential at its
        start (``"window"``: a Hessian per window), or the nearest mode's Hessian plus the bias
        term ``kappa g g'`` (``"mode"``: two Hessians in all; for a costly density in many
        dimensions, such as Level 1's 900).
    mesh : jax.sharding.Mesh, optional
        The devices the windows are split over (default: the local devices).
    windows : sequence of int, optional
        Run only these of the planned windows (indices into the sorted centres): one host's share
        (:func:`bayes_attn.distributed.process_share`). Every host plans and relaxes the same
        windows, and each window's draws come from its own index, so :func:`merge_umbrella` of
        the shares equals the run of all (``refine`` must then be 0: refinement needs every
        window).
    share : (process_id, num_processes), optional
        Instead of ``windows``: this process's share of the planned windows (every
        ``num_processes``-th from ``process_id`` on).
    checkpoint : path, optional
        A file that keeps the finished windows (:class:`WindowStore`), rewritten after each
        compiled call: a run interrupted (Ctrl-C stops it within a second, ``KeyboardInterrupt``)
        and started again with the same arguments runs only the windows left, and its result
        equals the uninterrupted run's. A file made with other arguments is refused. It is left
        in place; remove it once the result is written.
    progress : bool
        Announce the cost before starting and say each stage on stderr.

    Warns
    -----
    CoverageWarning
        Where the windows cover one basin only (one mode found, or modes left outside the
        windows): F is then the profile of that basin, and a phase elsewhere is missing from it.
        The attrs say the same (``basins_found``, ``basins_covered``, ``coverage``).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: every scalar site, dims (chain, draw, window); ``sample_stats``:
        ``acceptance_rate``, ``n_steps``, ``diverging``, ``step_size``; ``constant_data``:
        ``centre`` and ``kappa`` per window and the window's ``r_hat``, ``ess_bulk`` and
        ``acceptance`` (of ``cv``). Attrs: the run record (``sampler = "umbrella"``, seed,
        chains, warm-up, draws, the model's options, versions) and ``cv``. The windows are
        sorted by centre. :func:`bayes_attn.analysis.free_energy_profile` turns it into F(q).
    """
    num_warmup = check_int("num_warmup", num_warmup, 0)
    num_samples = check_int("num_samples", num_samples, 4)
    num_chains = check_int("num_chains", num_chains, 1)
    refine = check_int("refine", refine, 0)
    batch = check_int("batch", batch, 0)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if not 0.0 < target_accept < 1.0:
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
    if not 0.0 <= min_overlap < 1.0:
        raise ValueError(f"min_overlap must be in [0, 1), got {min_overlap}")
    if share is not None:
        if windows is not None:
            raise ValueError("windows, share: give one or neither")
        share = (check_int("share[0]", share[0], 0), check_int("share[1]", share[1], 1))
    if (windows is not None or share is not None) and refine:
        raise ValueError("refine: refinement needs every window; give refine=0 with windows")
    model_args, model_kwargs = tuple(model_args), dict(model_kwargs or {})
    rng, seed, key_attrs = resolve_key(key, seed)
    k_plan, k_run = jax.random.split(rng)
    pot = potential.flat_potential(model, model_args, model_kwargs)
    q = pot.scalar_site(cv)
    names = _scalar_sites(pot, cv)
    say("umbrella: finding the modes (Newton in %d dimensions, from %s) and their Hessians "
        "before the windows are placed", pot.dim, "the starts given" if starts is not None
        else "a start in each phase" if _phase_starts(model, model_args, model_kwargs)
        is not None else f"{GENERIC_STARTS} NumPyro starts", enabled=progress)  # fmt: skip
    plan = plan_windows(model, cv, model_args=model_args, model_kwargs=model_kwargs,
                        starts=starts, centres=centres, kappa=kappa, past=past,
                        max_windows=max_windows, key=k_plan)  # fmt: skip
    if share is not None:
        windows = process_share(range(len(plan.centres)), *share, interleave=True)
    if windows is not None:
        windows = np.unique(np.asarray(windows, dtype=int))
        if windows.size == 0 or windows[0] < 0 or windows[-1] >= len(plan.centres):
            raise ValueError(f"windows: indices in [0, {len(plan.centres)}), got {windows}")
    W = len(plan.centres) if windows is None else windows.size
    if progress:
        seconds = seconds_per_call(jax.jit(jax.grad(pot.U)), jnp.asarray(plan.starts[0]))
        lo, hi = GRADIENTS_PER_DRAW
        draws = W * num_chains * (num_warmup + num_samples)
        hessians = W if metric == "window" else len(plan.mode_q)
        extra = 4 * pot.dim * hessians + 3 * 3 * W * RELAX_STEPS
        announce(
            f"run_umbrella: {W} windows in {cv} ({plan.centres[0]:.4g} to {plan.centres[-1]:.4g},"
            f" kappa {plan.kappa[0]:.3g}) x {num_chains} chains x ({num_warmup} warm-up + "
            f"{num_samples}) draws in {pot.dim} dimensions, {lo} to {hi} gradients per draw"
            f"{', and up to ' + str(refine) + ' refinement round(s)' if refine else ''}",
            (extra + lo * draws, extra + hi * draws),
            seconds,
        )
    store = None
    if checkpoint is not None:
        digest = fingerprint(model, model_args, model_kwargs, cv, rng, plan.centres, plan.kappa,
                             plan.starts, num_warmup, num_samples, num_chains, target_accept,
                             refine, min_overlap, batch, metric, windows)  # fmt: skip
        store = WindowStore(checkpoint, digest)
    opts = dict(num_chains=num_chains, num_warmup=num_warmup, num_samples=num_samples,
                target_accept=target_accept, mesh=mesh, progress=progress, batch=batch,
                metric=metric, plan=plan, store=store)  # fmt: skip
    centres_, kappas = plan.centres, plan.kappa
    keys = jax.random.split(k_run, refine + 1)
    chains = _run_windows(pot, q, names, centres_, kappas, True, plan.starts, keys[0],
                          windows=windows, **opts)  # fmt: skip
    if windows is not None:
        centres_ = centres_[windows]
    kappas = chains.kappa
    rounds = 0
    for r in range(refine):
        new_c, new_k, new_x = _refine(centres_, kappas, chains.draws[cv], chains.last, min_overlap)
        if new_c.size == 0:
            break
        rounds += 1
        say("umbrella: refinement %d adds %d window(s) at q = %s", r + 1, new_c.size,
            np.array2string(new_c, precision=4), enabled=progress)  # fmt: skip
        more = _run_windows(pot, q, names, new_c, new_k, False, new_x, keys[r + 1],
                            round_=r + 1, **opts)  # fmt: skip
        order = np.argsort(np.concatenate([centres_, new_c]), kind="stable")
        centres_ = np.concatenate([centres_, new_c])[order]
        chains = _merge(chains, more, order)
        kappas = chains.kappa
    settings = {
        "cv": cv,
        "windows": len(centres_),
        "target_accept": target_accept,
        "refine": refine,
        "refinement_rounds": rounds,
        "min_overlap": min_overlap,
        "metric": metric,
        "batch": batch,
        "mode_q": plan.mode_q,
        "mode_sd": plan.mode_sd,
        "planned_windows": len(plan.centres),
        **_coverage(plan, plan.centres if windows is not None else centres_, cv),
        **key_attrs,
    }
    record = RunRecord("umbrella", seed, num_chains, num_warmup, num_samples, settings=settings)
    idata = _to_idata(chains, centres_, kappas, cv, record, model, model_args, model_kwargs,
                      np.arange(len(centres_)) if windows is None else windows)  # fmt: skip
    if progress:
        const = az.dataset(idata, "constant_data")
        for k in range(len(centres_)):
            say("umbrella: window %d, centre %.4g, kappa %.3g: mean %s %.4g, acceptance %.2f, "
                "R-hat %.3f, ESS %.0f", k, centres_[k], kappas[k], cv,
                chains.draws[cv][k].mean(), float(const.acceptance[k]), float(const.r_hat[k]),
                float(const.ess_bulk[k]))  # fmt: skip
    return idata


def merge_umbrella(parts):
    """Join the shares of one umbrella run (:func:`run_umbrella` with ``windows``, the same model,
    plan and seed on every host) into the result of the run of all windows, group by group with
    :func:`bayes_attn.io.concat_disjoint` (which refuses a window in two shares, or missing)."""
    from bayes_attn.io import concat_disjoint

    parts = list(parts)
    if not parts:
        raise ValueError("parts: nothing to merge")
    first = az.dataset(parts[0], "posterior").attrs
    same = ("cv", "seed", "planned_windows", "draws", "chains")
    for p in parts[1:]:
        a = az.dataset(p, "posterior").attrs
        if any(str(a.get(k)) != str(first.get(k)) for k in same):
            raise ValueError(f"parts: not shares of one run (they differ in {same})")
    index = np.concatenate([az.dataset(p, "constant_data").window.values for p in parts])
    planned = int(first.get("planned_windows", index.size))
    merged = parts[0].copy()
    names = [f"share {i}" for i in range(len(parts))]
    for group in az.groups(parts[0]):
        # the one merge of disjoint shares: refuses a window in two shares, or one missing
        try:
            joined = concat_disjoint([az.dataset(p, group) for p in parts], "window",
                                     expected=np.arange(planned), names=names)  # fmt: skip
        except ValueError as err:
            raise ValueError(f"parts: {err}") from None
        az.set_group(merged, group, joined)
        merged[group].attrs.clear()
        merged[group].attrs.update(first, windows=planned)
    return merged
