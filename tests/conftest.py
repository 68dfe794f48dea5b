"""Test setup: CPU only, float64, a non-interactive matplotlib backend."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import hypothesis  # noqa: E402
import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

# One compilation per program for the whole run: NumPyro and the samplers trace a new closure on
# every call, so the same program is compiled again and again across tests (the same model at the
# same shapes). JAX's persistent cache keys each executable by its program and the JAX version, so a
# hit is the executable a fresh compilation would give, bit for bit. The xdist workers share the
# folder; it is kept between runs (.gitignore) and can be deleted at any time.
_cache = os.environ.get(
    "BAYES_ATTN_TEST_JAX_CACHE", os.path.join(os.path.dirname(__file__), "..", ".jax_cache")
)
jax.config.update("jax_compilation_cache_dir", os.path.abspath(_cache))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

hypothesis.settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, print_blob=True
)
hypothesis.settings.load_profile("ci")


@pytest.fixture
def paper():
    import bayes_attn as ba

    return ba.CopyTask.paper(), ba.Hyper.paper()
