# `make test` and `make demo` work on a fresh machine: each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml .ci/constraints-oldest.txt | cksum | cut -d' ' -f1)

.PHONY: test test-latest demo docs slow lint bench bench-peers clean

$(STAMP): pyproject.toml .ci/constraints-oldest.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -c .ci/constraints-oldest.txt
	rm -f $(VENV)/.installed-*
	touch $@

test: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -n 2 --durations=60

# The newest stack: a second venv from a Python >= 3.12 with the newest releases that the ranges
# in pyproject.toml admit, and the tests that touch ArviZ, JAX transforms, the samplers and the CLI.
PYTHON_LATEST ?= $(shell sh .ci/python-latest)
VENV_LATEST := .venv-latest
LATEST_TESTS := tests/test_arviz_seam.py tests/test_nuts_reduced.py tests/test_sgld.py \
	tests/test_smc.py tests/test_cli.py tests/test_sharding.py tests/test_distributed.py \
	tests/test_member_nuts.py tests/test_layers.py tests/test_sweep.py \
	tests/test_llc_edges.py tests/test_llc_smc.py tests/test_tokens.py tests/test_landscape_edges.py \
	tests/test_induction_task.py \
	--deselect tests/test_smc.py::test_regression_evidence_at_the_defaults \
	--deselect tests/test_sweep.py::test_protocol_sweep_equals_run_protocol

test-latest:
	@test -n "$(PYTHON_LATEST)" || { echo "make test-latest: no Python >= 3.12 found; set PYTHON_LATEST"; exit 2; }
	test -x $(VENV_LATEST)/bin/python || $(PYTHON_LATEST) -m venv $(VENV_LATEST)
	$(VENV_LATEST)/bin/python -m pip install -q --upgrade pip
	$(VENV_LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e '.[dev]'
	$(VENV_LATEST)/bin/python -c "import sys, jax, numpyro, arviz, blackjax; print('newest stack: python', sys.version.split()[0], '| jax', jax.__version__, '| numpyro', numpyro.__version__, '| arviz', arviz.__version__, '| blackjax', blackjax.__version__)"
	MPLBACKEND=Agg $(VENV_LATEST)/bin/python -m pytest -q -n 2 --durations=10 $(LATEST_TESTS)

# the docs site into site/: the docs extra on top of .[dev] (its own stamp, so that `make test`'s
# install stays as it is), then mkdocs --strict, which executes the tutorials (docs/tutorials/*.py)
# and fails on any warning, broken link, anchor or API cross-reference
DOCS_STAMP := $(VENV)/.docs-$(shell cat pyproject.toml .ci/constraints-oldest.txt | cksum | cut -d' ' -f1)

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dev,docs]' -c .ci/constraints-oldest.txt
	rm -f $(VENV)/.docs-*
	touch $@

docs: $(DOCS_STAMP)
	rm -rf .cache/mkdocs-jupyter  # mkdocs-jupyter's cache would skip a tutorial whose source is unchanged
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

slow: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -n 2 -m slow

demo: $(STAMP)
	MPLBACKEND=Agg $(VENV)/bin/bayes-attn theory
	mkdir -p out  # bayes-attn checks that the folder above --out exists
	MPLBACKEND=Agg $(VENV)/bin/bayes-attn figures --quick --out out/demo
	@echo "make demo: the figures and their data are in out/demo/"

lint: $(STAMP)
	$(VENV)/bin/ruff check bayes_attn tests examples benchmarks docs/scripts docs/plugins
	$(VENV)/bin/ruff format --check bayes_attn tests examples benchmarks docs/scripts docs/plugins

bench: $(STAMP)
	$(PY) benchmarks/bench_phase_grid.py

# the peers of issue 14: PyTorch and devinterp in their own venv, beside ours. torch's CPU wheel
# (about 200 MB) from PyTorch's index; where that index cannot be reached, PyPI's torch (the CUDA
# build, several GB, which runs on the CPU too)
bench-peers: $(STAMP)
	test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q --index-url https://download.pytorch.org/whl/cpu 'torch==2.13.0' \
		|| .venv-bench/bin/python -m pip install -q 'torch==2.13.0'
	.venv-bench/bin/python -m pip install -q 'devinterp==2.0.1'
	$(PY) benchmarks/bench_peers.py

clean:
	rm -rf $(VENV) $(VENV_LATEST) out site .pytest_cache
