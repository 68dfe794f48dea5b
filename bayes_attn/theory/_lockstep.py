"""Many independent solvers run in lockstep, their JAX programs batched across the solvers.

A solver is plain Python (scipy root finders, bisections, scans) that asks for programs one call
at a time. Run alone, each call pays the dispatch of a small program; run as one thread per solver
under :class:`Lockstep`, every round waits until each live solver waits on a program, then
evaluates all the requests of a kind together, vmapped, in chunks of a fixed size (one compile per
kind), and hands each solver its rows. The solvers' logic is unchanged, so each result is the
one-solver result up to the last bits of the vmapped programs.

References
----------
docs/validation.md, "The scaling of P*(L, V)" (cost); used by
:func:`bayes_attn.theory.boundaries.softmax_boundaries_many`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np


@functools.cache
def _batched(fn: Callable):
    return jax.jit(jax.vmap(fn))


class Lockstep:
    """Runs solvers in lockstep threads; ``kernels`` maps a kind to ``(fn, chunk)``, ``fn(*args,
    params)`` a per-item program (``params`` a NamedTuple of scalars, e.g. ``Scales``)."""

    def __init__(self, kernels: dict[str, tuple[Callable, int]]):
        self._kernels = kernels
        self._cv = threading.Condition()
        self._waiting: dict = {}
        self._results: dict = {}
        self._alive = 0

    def ask(self, kind: str, items: tuple, params) -> tuple:
        """Evaluate ``kind`` on ``items`` (arrays with a leading item axis) at ``params``, batched
        with the other solvers' requests; called from a solver thread. Returns the program's
        outputs, each with the item axis first."""
        key = threading.get_ident()
        with self._cv:
            self._waiting[key] = (kind, items, params)
            self._cv.notify_all()
            self._cv.wait_for(lambda: key in self._results)
            out = self._results.pop(key)
        if isinstance(out, Exception):  # the batched program failed: each of its askers raises
            raise out
        return out

    def run(self, solvers: list[Callable]) -> list:
        """Call each ``solver(self)`` in its own thread; returns their results in order, the
        exception where one raised."""
        out: list = [None] * len(solvers)
        self._alive = len(solvers)

        def work(k):
            try:
                out[k] = solvers[k](self)
            except Exception as err:  # noqa: BLE001 - handed back to the caller, per solver
                out[k] = err
            finally:
                with self._cv:
                    self._alive -= 1
                    self._cv.notify_all()

        threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(len(out))]
        for t in threads:
            t.start()
        while True:
            with self._cv:
                self._cv.wait_for(lambda: len(self._waiting) == self._alive)
                if self._alive == 0:
                    break
                batch, self._waiting = self._waiting, {}
            try:
                results = self._evaluate(batch)
            except Exception as err:  # noqa: BLE001 - raised in every solver that asked
                results = dict.fromkeys(batch, err)
            with self._cv:
                self._results.update(results)
                self._cv.notify_all()
        for t in threads:
            t.join()
        return out

    def _evaluate(self, batch: dict) -> dict:
        groups: dict = {}
        for key, (kind, items, params) in batch.items():
            shape = tuple(a.shape[1:] for a in items)
            groups.setdefault((kind, shape), []).append((key, items, params))
        results = {}
        for (kind, _), requests in groups.items():
            sizes = [len(items[0]) for _, items, _ in requests]
            args = [np.concatenate([r[1][i] for r in requests]) for i in range(len(requests[0][1]))]
            cls = type(requests[0][2])
            params = cls(
                *(
                    np.concatenate(
                        [np.full(m, float(r[2][f])) for r, m in zip(requests, sizes, strict=True)]
                    )
                    for f in range(len(cls._fields))
                )
            )
            fn, chunk = self._kernels[kind]
            outs = _chunked(fn, chunk, args, params, sum(sizes))
            splits = np.cumsum(sizes)[:-1]
            parts = [np.split(o, splits) for o in outs]
            for j, (key, _, _) in enumerate(requests):
                results[key] = tuple(p[j] for p in parts)
        return results


def _chunked(fn: Callable, size: int, args: list, params, n: int) -> list:
    """``jit(vmap(fn))`` over n items in chunks of ``size`` (the last padded by repeating its final
    item), two chunks at a time (one per core: they are independent)."""
    batched = _batched(fn)

    def one(start):
        stop = min(start + size, n)
        take = np.minimum(np.arange(start, start + size), stop - 1)
        res = batched(
            *(jnp.asarray(a[take]) for a in args),
            type(params)(*(jnp.asarray(f[take]) for f in params)),
        )
        res = res if isinstance(res, tuple) else (res,)
        return [np.asarray(r)[: stop - start] for r in res]

    outs = [one(0)]  # alone first: a first call compiles, and two at once could compile twice
    if n > size:
        with ThreadPoolExecutor(2) as pool:
            outs += list(pool.map(one, range(size, n, size)))
    return [np.concatenate(parts) for parts in zip(*outs, strict=True)]
