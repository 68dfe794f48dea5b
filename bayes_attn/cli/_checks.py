"""The checks of ``--P`` that ``sample``, ``train`` and ``llc`` make before any work (issue 46:
``--P 1e9`` aborted inside XLA with a C++ stack trace and exit 134, ``--P 1e15`` at Level 2 was
accepted and ran, ``--P 272.5`` reached the library after the log line)."""

from __future__ import annotations

import math

import click


def check_run_P(task, hyper, P, level: str, d_model: int | None = None):
    """``P`` for a run at ``level``, else ``click.BadParameter`` naming ``--P``: at Level 2
    (``reduced``) at most the theory's largest P
    (:func:`bayes_attn.theory.saddles.check_P_in_range`); at Level 1 (``kernel``) a whole
    number whose gradient fits in memory (:func:`bayes_attn.experiments.landscape.check_landscape_P`);
    for the network a whole number whose one member (one chain) of width ``d_model`` fits in
    memory (:func:`bayes_attn.inference.memory.estimate_bytes`, against the device's limit or
    the machine's RAM)."""
    try:
        return _check(task, hyper, P, level, d_model)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--P") from None


def _check(task, hyper, P, level, d_model):
    from bayes_attn._validation import check_positive

    P = check_positive("P", P)
    if level == "reduced":
        from bayes_attn.theory.saddles import check_P_in_range

        return check_P_in_range(task, hyper, P)
    if level == "kernel":
        from bayes_attn.experiments.landscape import check_landscape_P

        return check_landscape_P(task, hyper, P, "kernel")
    if P != math.floor(P):
        raise ValueError(f"P must be a whole number of sequences at level {level}, got {P:g}")
    from bayes_attn.inference.memory import estimate_bytes, memory_limit

    d = task.n_features if d_model is None else d_model
    limit = memory_limit()
    if limit is None:
        import os

        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    one, two = (estimate_bytes(task, d, n, 1) for n in (1, 2))  # linear in P
    most = max(int((limit - (one - (two - one))) // (two - one)), 1)
    if P > most:
        need = estimate_bytes(task, d, 1, 1) + (P - 1) * (two - one)
        raise ValueError(f"P must be <= {most:.3g} at level {level} (d_model={d}): a run at "
                         f"P = {P:g} holds about {need / 1e9:.3g} GB, more than the "
                         f"{limit / 1e9:.3g} GB this machine has")  # fmt: skip
    return int(P)
