# judgesweep: `make run` and `make test` are all a fresh machine needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
# Python's own bytecode cache, even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1 on some CI images):
# without it each test process and each `python -m runner` a test starts compiles runner/ and rewrites every test
# module's asserts again (~3 CPU-s a pytest process).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-fast test-time lint install clean bench bench-scale bench-peers report-check install-size

# Two stamps: `make run` installs the runtime dependencies only; the test, lint and bench targets add the dev
# extras (pytest, ruff, mypy, import-linter, ray). `benchmarks/install_size.sh` measures both.
RUN_STAMP := $(VENV)/.installed-run

# The installs print one line, then only what went wrong: pip at -qq shows its errors (a failed build with the
# backend's output, dependency conflicts) and nothing else. A single --quiet still shows the build backend's
# warnings: setuptools' ~950 lines on each fresh install before pyproject.toml listed every data directory, and
# its notice about editable installs, which says nothing a user of `make run` acts on. INSTALL_QUIET= shows it all.
# Not named PIP_QUIET: pip reads that variable itself (PIP_QUIET=1 in a user's environment became `pip install 1`,
# and `make run PIP_QUIET=--quiet` reached pip as an invalid value). tests/integration/test_make_run.py runs it.
INSTALL_QUIET ?= --quiet --quiet

$(RUN_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing judgesweep and its dependencies into $(VENV) (minutes on a fresh machine)"
	@$(BIN)/python -m pip install $(INSTALL_QUIET) --upgrade pip
	@$(BIN)/python -m pip install $(INSTALL_QUIET) -e .
	@touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing judgesweep, its dependencies and the dev tools into $(VENV) (minutes on a fresh machine)"
	@$(BIN)/python -m pip install $(INSTALL_QUIET) --upgrade pip
	@$(BIN)/python -m pip install $(INSTALL_QUIET) -e '.[dev]'
	@touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

run: $(RUN_STAMP)  ## the default experiment: LLMBar Natural, replayed GPT-4, no key, no network
	@$(BIN)/judgesweep $(ARGS)

# Two test processes (pytest-xdist), a module's tests kept in one of them so its module-scoped fixtures run once.
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/ruff check runner tests
	$(BIN)/lint-imports
	$(BIN)/mypy runner
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope

# Unit and in-process integration tests only: no test that runs judgesweep (or any python) as a process, signals
# one, starts a server or waits on the clock for seconds as its point (the `slow` marker, tests/conftest.py).
# `make test` runs them all.
test-fast: $(STAMP)
	$(BIN)/ruff check runner tests
	$(BIN)/lint-imports
	$(BIN)/mypy runner
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope -m "not slow"

# How long `make test` and `make test-fast` take in a clean clone of HEAD (install, then each twice), with this machine's
# speed beside them and where the CPU goes; Markdown rows for docs/performance.md (benchmarks/suite_time.py, ~25 min).
test-time: $(STAMP)
	$(BIN)/python -m benchmarks.suite_time $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check runner tests
	$(BIN)/lint-imports
	$(BIN)/mypy runner

# Benchmarks against a fake server (its own process); a table, merged into benchmarks/results.json. `bench` runs every
# scenario with scale at 10,000 and 100,000 judgments (~25 min on 2 cores); `bench-scale` adds 1,000,000 (~1.5 h).
# `python -m benchmarks.readme_table` then rewrites docs/performance.md's table from results.json.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench $(ARGS)

bench-scale: $(STAMP)
	$(BIN)/python -m benchmarks.bench --only scale --scale-sizes 1000000 $(ARGS)

# The tracking scenario's peers (promptfoo from npm, inspect-ai in its own venv) into benchmarks/.peers/ (git-ignored);
# `make bench` measures them only once they are there.
bench-peers:
	PYTHON=$(PYTHON) bash benchmarks/peers.sh

# report.html in headless chromium at 1280 px (overflow, filters, search, the sweep's links); screenshots in SHOTS.
SHOTS ?= outputs/report-shots
report-check: $(STAMP)
	REPORT_SHOTS=$(abspath $(SHOTS)) $(BIN)/python -m pytest -q -n 0 -rs tests/integration/test_report_browser.py

# Install size (du of the venv) and time of `make run`'s and `make test`'s installs, each into a fresh venv.
install-size:
	PYTHON=$(PYTHON) bash benchmarks/install_size.sh

clean:
	rm -rf $(VENV) outputs/runs outputs/multirun
