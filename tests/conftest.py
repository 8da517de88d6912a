"""Markers by where a test lives: every test under tests/integration is ``integration``; those that run
judgesweep (or any python) as a process (the process is their point: exit codes, kill -9 and resume, SIGINT, a
pseudo-terminal, launchers, a sweep's callbacks, Hydra's logging, what a fresh process imports), start an MLflow
server, run for tens of seconds or wait on the clock for seconds as their point (a capped Retry-After, a rate
window, pacing at an rpm) are also ``slow``, which `make test-fast` leaves out (marked here by module, or in
the test module by ``pytestmark`` or per test). Also: tmp_path on tmpfs, the longest modules first, and the
fixtures many modules share (``schemas``, ``hydra_conf``: Hydra on conf/ for tests.builders.to_run_config).
Hand-built records and configs shared by modules are in tests/builders.py, what integration modules share (overrides
for the loopback server, reply policies that know the shipped presets, published numbers, checks of a run's output)
in tests/integration/shared.py, the fake server and its generic reply policies in tests/fakes/; a test module
imports nothing from another (tests/unit/test_test_modules.py)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import DictConfig

SLOW_MODULES = frozenset({
    "test_calibration",  # Optuna sweeps and their held-out runs
    "test_compare",  # a sweep, then judgesweep-compare as a command
    "test_default_run",  # `make run`'s command line
    "test_disk_full",  # a run on a full filesystem, then resumed, in processes
    "test_interrupt",  # SIGINT/SIGTERM to a running judgesweep process
    "test_launchers",  # joblib workers
    "test_llmbar_subsets",  # 24 runs over the published subsets
    "test_mlflow_server",  # a real `mlflow server`
    "test_ray_launcher",  # a local Ray cluster
    "test_replay_sweep",  # a six-job sweep and its table
    "test_resume",  # kill -9, then resume
    "test_run_dir_owner",  # two processes on one run directory, kill -9 of its owner, of a joblib sweep
    "test_startup",  # what a fresh `python -m runner` imports (--help, --cfg): the process is the point
    "test_results_api",  # sweeps read back
    "test_tracking_start",  # a run killed during its calls and resumed, in a process
    "test_wheel_install",  # builds the wheel, installs it into a fresh venv, runs judgesweep there
})


# tmp_path in RAM where the machine has it: the runs under test fsync their journals, caches and MLflow sqlite stores
# (a fresh store is a few dozen committed migrations), which on a VM's disk cost seconds of waiting per test and on
# tmpfs nothing. The files and calls are the same; PYTEST_DEBUG_TEMPROOT (or --basetemp) set by hand wins.
TMPFS = Path("/dev/shm")


# The modules that take longest (tens of seconds each: a Ray cluster, joblib workers, sweeps, processes killed and
# resumed), longest first. They run first, so that with `-n 2 --dist loadscope` (one module to one worker) the many
# short modules fill in at the end rather than one long module running alone after the other worker is done;
# xdist's own order (scopes by number of tests, --loadscope-reorder) would start them last.
LONGEST_FIRST = ("test_sweep_resume", "test_tracking_view", "test_ray_launcher", "test_wheel_install", "test_interrupt",
                 "test_batch_api", "test_compare", "test_launchers", "test_calibration", "test_run_dir_owner",
                 "test_tracking_launchers", "test_sweep_best", "test_secrets", "test_tracking_promises",
                 "test_provider_faults", "test_llmbar_subsets", "test_live_bar", "test_shared_store", "test_config",
                 "test_tracking_start", "test_rate_limits", "test_startup", "test_disk_full", "test_docs",
                 "test_default_run", "test_published_figures", "test_in_process", "test_make_run", "test_presets")


def pytest_configure(config: pytest.Config) -> None:  # noqa: D103
    if config.option.basetemp is None and TMPFS.is_dir() and os.access(TMPFS, os.W_OK | os.X_OK):
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(TMPFS))
    if hasattr(config.option, "loadscopereorder") and "--loadscope-reorder" not in config.invocation_params.args:
        config.option.loadscopereorder = False  # the order of collection: LONGEST_FIRST first


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:  # noqa: D103
    rank = {stem: n for n, stem in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))  # stable: a module stays whole
    for item in items:
        path = Path(str(item.fspath))
        if "integration" in path.parts:
            item.add_marker(pytest.mark.integration)
        fixtures = getattr(item, "fixturenames", ())
        if path.stem in SLOW_MODULES or "run_process" in fixtures or "mlflow_server" in fixtures:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def schemas() -> None:
    """judgesweep's schemas in Hydra's ConfigStore (register_configs: idempotent), as a run registers them."""
    from runner.core.config_store import register_configs

    register_configs()


@functools.cache
def _composed_with_hydra(cwd: str) -> DictConfig:
    """The default config with its hydra node as composed in ``cwd`` (its runtime.cwd), composed once: HydraConfig
    takes a copy of it, and nothing here changes it."""
    from hydra import compose

    return compose(config_name="config", return_hydra_config=True)


@pytest.fixture()
def hydra_conf(schemas: None) -> Iterator[None]:
    """Initialise Hydra on conf/ and set HydraConfig, as a real run does, for ${hydra:...} interpolations
    (tests.builders.to_run_config composes there)."""
    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from tests.builders import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        HydraConfig.instance().set_config(_composed_with_hydra(str(Path.cwd())))
        try:
            yield
        finally:
            HydraConfig.instance().cfg = None  # type: ignore[assignment]
