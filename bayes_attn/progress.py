"""One way to report progress: the ``"bayes_attn"`` logger, on stderr.

Long work says what it is doing, and what it will cost, before it starts (:func:`announce`), and
steps without a progress bar say how far they are (:func:`say`); loops over steps show one bar
(:func:`bar`, tqdm on stderr). Both go to the logger
``"bayes_attn"`` at level INFO, only when the caller asked for progress. If nothing is configured
to show that logger (no handler on it or on the root logger), the first message attaches one
handler that writes to stderr, so a script or a notebook sees the messages without any logging
setup; stdout is left for results. The CLI configures the logger itself (``-q``, ``-v``).

The cost estimate times one gradient of the model's potential (after compiling it;
:func:`seconds_per_call` on the gradient that :mod:`bayes_attn.inference.potential` builds) and
multiplies by the number of gradients the work will take, as a range where that number is not
known in advance.
"""

from __future__ import annotations

import logging
import sys
import time

from bayes_attn._deprecation import moved

__all__ = ["announce", "bar", "duration", "say", "seconds_per_call"]

log = logging.getLogger("bayes_attn")

#: the base layer times a callable (:func:`seconds_per_call`); a model's potential is the
#: inference layer's, so ``seconds_per_gradient`` lives in :mod:`bayes_attn.inference.potential`
__getattr__ = moved(__name__, {"seconds_per_gradient": "bayes_attn.inference.potential"})


class _Stderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is at the time of each message."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler.__init__ sets it; sys.stderr is read at each write
        pass


def _visible() -> None:
    if not log.handlers and not logging.getLogger().handlers:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("bayes-attn: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
        if log.level == logging.NOTSET:
            log.setLevel(logging.INFO)


def say(message: str, *args, enabled: bool = True) -> None:
    """Log ``message % args`` at INFO on the ``"bayes_attn"`` logger (stderr), if ``enabled``."""
    if enabled:
        _visible()
        log.info(message, *args)


def bar(total, desc: str, enabled: bool = True, **options):
    """The one progress bar: tqdm on stderr over ``total`` units (a number), or over the items of
    ``total`` (an iterable, to loop over), labelled ``desc``, hidden unless ``enabled``. Use it as
    a context manager or a loop (or close it); ``options`` go to tqdm (``initial``,
    ``bar_format``). Every bar of the package is made here, so that one place decides how
    progress looks and where it goes."""
    import numbers

    from tqdm.auto import tqdm

    if isinstance(total, numbers.Number):
        return tqdm(total=total, desc=desc, disable=not enabled, **options)
    return tqdm(total, desc=desc, disable=not enabled, **options)


def duration(seconds: float) -> str:
    """'40 s', '3.2 min' or '1.5 h'."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def seconds_per_call(fn, x, repeats: int = 3) -> float:
    """Wall time of ``fn(x)`` (a jitted JAX function), after one call that compiles it."""
    import jax

    jax.block_until_ready(fn(x))
    t = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(x))
    return (time.perf_counter() - t) / repeats


def announce(what: str, gradients: tuple[float, float], seconds: float, enabled: bool = True):
    """Say what starts now and its cost: ``gradients`` (low, high) at ``seconds`` each."""
    lo, hi = (g * seconds for g in gradients)
    span = duration(lo) if hi <= 1.5 * lo else f"{duration(lo)} to {duration(hi)}"
    say(
        "%s: about %s on this machine (%.3g ms per gradient, %.2g-%.2g gradients)",
        what,
        span,
        1e3 * seconds,
        gradients[0],
        gradients[1],
        enabled=enabled,
    )
