# judgesweep: `make run` and `make test` are all a fresh machine needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test lint install clean bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)  ## the default experiment: LLMBar Natural, replayed GPT-4, no key, no network
	$(BIN)/judgesweep $(ARGS)

# Two test processes (pytest-xdist), a module's tests kept in one of them so its module-scoped fixtures run once.
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/ruff check runner tests
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope

lint: $(STAMP)
	$(BIN)/ruff check runner tests

bench: $(STAMP)  ## benchmarks against a fake server (separate process); table + benchmarks/results.json (~20 min)
	$(BIN)/python -m benchmarks.bench $(ARGS)

clean:
	rm -rf $(VENV) outputs/runs outputs/multirun
