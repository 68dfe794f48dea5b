"""Ctrl-C that stops a command within a second, whatever its work is doing.

A compiled JAX program does not return to Python until it ends (NUTS's warm-up is one), and a
``KeyboardInterrupt`` that arrives while Python runs JAX's garbage-collection callback is
printed and lost: ``bayes-attn sample --level kernel`` ran on for minutes after Ctrl-C (issue
46). The commands therefore run their work in a worker thread that the main thread waits on in
short sleeps (:func:`bayes_attn.inference.umbrella_store.interruptible`): Ctrl-C reaches the
waiting main thread at once, the command says what it kept, and the process leaves with status
130 without waiting for the program in flight. What the work keeps (finished points, windows,
checkpoints) is written atomically, so nothing is left half-written; a sweep's claim on the
point in flight is taken over by the next run, since its process has died.
"""

from __future__ import annotations

import functools


def interruptibly(fn, /, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a worker thread; Ctrl-C raises ``KeyboardInterrupt`` here
    within a tenth of a second. Returns its result; re-raises its error."""
    from bayes_attn.inference.umbrella_store import interruptible

    return interruptible(functools.partial(fn, *args, **kwargs))
