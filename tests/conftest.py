"""Test setup: CPU only, float64, a non-interactive matplotlib backend."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import hypothesis  # noqa: E402
import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

hypothesis.settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, print_blob=True
)
hypothesis.settings.load_profile("ci")


@pytest.fixture
def paper():
    import bayes_attn as ba

    return ba.CopyTask.paper(), ba.Hyper.paper()
