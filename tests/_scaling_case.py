"""One small Adam ensemble shared by tests/test_sharding.py and tests/test_distributed.py, and run by
their subprocesses (which import this file by path). Imports are lazy so that a subprocess can call
``initialize_distributed`` before JAX starts its backend.

Data and initial weights come from NumPy; the per-member keys of the minibatches come from the
trainer's seed, so the tests see whether they depend on the layout. Three members, softmax, early
stopping that stops the members at different steps (so a group that stops early must be padded to
the others' steps).
"""

import functools

D_MODEL = 6
PS = (4, 12)
SETTINGS = dict(
    members=3,
    seed=1,
    lr=2e-2,
    max_steps=80,
    chunk=10,
    patience=8,
    min_delta=1e-3,
    batch_size=6,
    num_test=8,
    progress_bar=False,
)


def task_and_hyper():
    import bayes_attn as ba

    return ba.CopyTask(L=4, V=3), ba.Hyper.paper().replace(sigma2=5.0)


def data(P):
    """The members' datasets and the test set, drawn with NumPy: a fresh process then compiles
    fewer random-number programs (each threefry program takes seconds to compile on the CPU)."""
    import numpy as np

    rng = np.random.default_rng(P)
    task, _ = task_and_hyper()
    tokens = rng.integers(0, task.V, (SETTINGS["members"], P, task.L), dtype=np.int32)
    test = rng.integers(0, task.V, (SETTINGS["num_test"], task.L), dtype=np.int32)
    return tokens, test


def init():
    """Prior draws of the members' weights, with NumPy (as for :func:`data`)."""
    import numpy as np

    from bayes_attn.models.network import param_shapes, prior_scales

    task, hyper = task_and_hyper()
    rng = np.random.default_rng(0)
    std = prior_scales(hyper, D_MODEL)
    shapes = param_shapes(task, D_MODEL)
    return {n: std[n] * rng.standard_normal((SETTINGS["members"], *s)) for n, s in shapes.items()}


def train(P, **changes):
    from bayes_attn.inference import train_adam

    task, hyper = task_and_hyper()
    tokens, test = data(P)
    kwargs = {**SETTINGS, "tokens": tokens, "test_tokens": test, "init": init(), **changes}
    return train_adam(task, hyper, "softmax", D_MODEL, P, **kwargs)


@functools.cache
def baseline(P):
    """The ensemble on one device in one group (cached for the test session)."""
    import jax

    return train(P, devices=jax.local_devices()[:1], return_params=True)


def sweep_point(ds):
    """The final values of one P, as one point of a sweep over P."""
    final = ds.isel(step=-1, drop=True)
    return final.expand_dims(P=[int(ds.attrs["P"])])
