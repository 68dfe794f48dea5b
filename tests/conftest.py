"""Test setup: CPU only, float64, a non-interactive matplotlib backend."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# Most of the suite's time is compilation (a fresh clone's default run took 636 s with an empty
# compilation cache against 250 s with a warm one, 2026-12-07). LLVM's backend at optimisation
# level 0, without its expensive passes, compiles about a quarter faster (the fresh clone's run:
# 491 s). The programs are the same; their rounding differs in the last bits (the instructions
# and the order of sums LLVM picks), which two tests pinned to the last bits noticed and now
# say so (test_adam.py's recorded losses, test_precursors.py's tie at P*). The benchmarks and
# every user run keep XLA's defaults; a caller's own XLA_FLAGS win.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
)

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


# --------------------------------------------------------------------------------------------------
# Sampler runs shared by the tests that only read a result (issue 44: the default suite's time is
# mostly compiling; one run here replaces one compiled program per test). Each is built on first use
# in a worker and kept for the session: read them, never modify them (copy first). The model's
# arguments (P, the activation, the tokens), the chains and the warm-up length are constants of the
# compiled program: a run that differs in any of them compiles again (~9-14 s of CPU for a reduced
# NUTS run; the same program again costs ~2.7 s, the seed is not part of it). A test that needs a
# sampler's result but not particular values takes these runs, or these settings.


@pytest.fixture(scope="session")
def reduced_nuts():
    """NUTS on the reduced model (Table 1 preset, linear, P = 9 < P*, with the log-determinant),
    2 chains x (50 warm-up + 50 draws), seed 7. Read by test_provenance (the record, diagnose's
    first line, R-hat) and test_arviz_seam (the structure)."""
    import bayes_attn as ba
    from bayes_attn.inference import run_nuts
    from bayes_attn.models import order_param_model

    return run_nuts(
        order_param_model,
        model_args=(ba.CopyTask.paper(), ba.Hyper.paper(), 9.0, "linear"),
        model_kwargs={"include_logdet": True},
        num_chains=2,
        num_warmup=50,
        num_samples=50,
        seed=7,
        progress=False,
    )


@pytest.fixture(scope="session")
def reduced_smc():
    """Tempered SMC on the reduced model at the weight crossing (Table 1 preset, softmax,
    P = 276, with the log-determinant), one run of 200 particles, seed 5, run with every warning
    an error (no ArviZ shape warning). Read by test_provenance (the record, diagnose's SMC report)
    and test_arviz_seam (the structure)."""
    import warnings

    import bayes_attn as ba
    from bayes_attn.inference import run_smc
    from bayes_attn.models import order_param_model

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return run_smc(
            order_param_model,
            model_args=(ba.CopyTask.paper(), ba.Hyper.paper(), 276.0, "softmax"),
            model_kwargs={"include_logdet": True},
            num_particles=200,
            num_runs=1,
            seed=5,
        )
