# `make test` and `make demo` work on a fresh machine: each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: test demo slow lint bench bench-peers clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

test: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -n 2 --durations=15

slow: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -n 2 -m slow

demo: $(STAMP)
	MPLBACKEND=Agg $(VENV)/bin/bayes-attn theory
	mkdir -p out  # bayes-attn checks that the folder above --out exists
	MPLBACKEND=Agg $(VENV)/bin/bayes-attn figures --quick --out out/demo
	@echo "make demo: the figures and their data are in out/demo/"

lint: $(STAMP)
	$(VENV)/bin/ruff check bayes_attn tests examples benchmarks docs/scripts
	$(VENV)/bin/ruff format --check bayes_attn tests examples benchmarks docs/scripts

bench: $(STAMP)
	$(PY) benchmarks/bench_phase_grid.py

# the peers of issue 14: PyTorch (CPU wheel) and devinterp in their own venv, beside ours
bench-peers: $(STAMP)
	test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q 'torch==2.13.0' 'devinterp==2.0.1'
	$(PY) benchmarks/bench_peers.py

clean:
	rm -rf $(VENV) out .pytest_cache
