# The two commands of the quickstart: `make run` (the pool) and `make test` (everything).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
LISTEN ?= 127.0.0.1:8765

.PHONY: run test lint typecheck unit clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,dist,backends]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/gpupool server --listen $(LISTEN)

lint: $(VENV)/.installed-test
	$(BIN)/python -m ruff check src tests bench examples

typecheck: $(VENV)/.installed-test
	$(BIN)/python -m mypy

unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests/unit -q

system-deps:
	@bash scripts/system-deps.sh

# Three workers on CI's two cores: most of the time goes to waiting on daemons, Slurm, Ray
# and jobs, not to the CPU; each file runs whole on one worker (its module fixtures: one
# Slurm cluster, one Ray head). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test system-deps lint typecheck
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
