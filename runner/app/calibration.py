"""Calibration search: after Hydra's Optuna sweeper has tuned a judge configuration on the dev split, run
the chosen configuration once on the held-out test split and report both agreements.

The search itself is the sweeper's (``conf/experiment/calibrate_llmbar.yaml``): each trial is an ordinary
job on ``dataset.split=dev`` that returns its ``objective`` metric (runner.app.cli). The test split is never
seen by a trial; :class:`HeldOutTest` runs it exactly once, as a separate ``judgesweep`` process with the
sweep's own overrides plus the best parameters, so the held-out run is logged and reported like any run.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from runner.core.config_store import multirun_tracking
from runner.modes.base import cell
from runner.outputs import console, sweep, tracking
from runner.storage import store

log = logging.getLogger(__name__)

RESULTS_NAME = "optimization_results.yaml"  # written by hydra-optuna-sweeper into the sweep directory
CALIBRATION_NAME = "calibration.json"
HELDOUT_DIR = "heldout"
CALIBRATION_KIND = "calibration"


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def heldout_overrides(task: Sequence[str], best: Mapping[str, Any], run_dir: Path) -> list[str]:
    """The held-out run's command line: the sweep's overrides, the best parameters instead of the swept
    keys, the test split, and its own run directory."""
    replaced = {*best, "dataset.split"}
    kept = [o for o in task if _key(o) not in replaced]
    return [*kept, *(f"{k}={v}" for k, v in best.items()), "dataset.split=test", f"hydra.run.dir={run_dir}"]


def _metrics(job_dir: Path) -> dict[str, float]:
    path = job_dir / store.METRICS_NAME
    return json.loads(path.read_text()) if path.is_file() else {}


def summarize(sweep_dir: Path, results: Mapping[str, Any], objective: str, heldout: Mapping[str, float],
              returncode: int) -> dict[str, Any]:
    """calibration.json: the chosen parameters, dev and held-out test agreement, item counts, trials."""
    trials = [_metrics(d) for d in sorted(sweep_dir.iterdir()) if d.is_dir() and d.name.isdigit()]
    dev_items = max((m.get("items/total", 0) for m in trials), default=0)
    return {
        "objective": objective,
        "best_params": dict(results.get("best_params") or {}),
        "dev": {"value": results.get("best_value"), "items": int(dev_items)},
        "test": {"value": heldout.get(objective), "ci_low": heldout.get(f"{objective}_ci_low"),
                 "ci_high": heldout.get(f"{objective}_ci_high"), "items": int(heldout.get("items/total", 0)),
                 "ok": returncode == 0},
        "trials": len(trials),
        "failed_trials": sum(1 for d in sweep_dir.glob(f"*/{sweep.FAILURE_NAME}") if d.parent.name.isdigit()),
    }


def console_lines(outcome: Mapping[str, Any]) -> list[str]:
    """Two lines: dev agreement of the chosen config (tuned) and its held-out test agreement (never tuned on)."""
    dev, test = outcome["dev"], outcome["test"]
    chosen = " ".join(f"{k}={v}" for k, v in outcome["best_params"].items())
    ci = f" [{cell(test['ci_low'])}, {cell(test['ci_high'])}]" if test.get("ci_low") is not None else ""
    return [f"calibration: best of {outcome['trials']} trials on dev ({dev['items']} items): "
            f"{outcome['objective']} {cell(dev['value'])} with {chosen}",
            f"calibration: held-out test ({test['items']} items, never tuned on): "
            f"{outcome['objective']} {cell(test['value'])}{ci}"]


class HeldOutTest(Callback):
    """Hydra callback of the calibration presets: when the Optuna study ends, test its best config once."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:  # noqa: D102
        sweep_dir = Path(config.hydra.sweep.dir)
        results_path = sweep_dir / RESULTS_NAME
        if not results_path.is_file():
            log.warning("calibration: %s not found (is hydra/sweeper=optuna?); no held-out test run", results_path)
            return
        loaded = OmegaConf.to_container(OmegaConf.load(results_path), resolve=True)
        if not isinstance(loaded, dict):
            raise TypeError(f"calibration: {results_path} holds no mapping (is it hydra-optuna-sweeper's?)")
        results = {str(key): value for key, value in loaded.items()}
        run_dir = sweep_dir / HELDOUT_DIR
        args = heldout_overrides(list(config.hydra.overrides.task), results.get("best_params") or {}, run_dir)
        log.info("calibration: held-out test run: judgesweep %s", " ".join(args))
        proc = subprocess.run([sys.executable, "-m", "runner", *args], check=False)
        outcome = summarize(sweep_dir, results, str(config.objective), _metrics(run_dir), proc.returncode)
        path = sweep_dir / CALIBRATION_NAME
        path.write_text(json.dumps(outcome, indent=2) + "\n", encoding="utf-8")
        for line in console_lines(outcome):
            console.print_line(line)
        _track(config, sweep_dir, path, outcome)


def _track(config: DictConfig, sweep_dir: Path, path: Path, outcome: Mapping[str, Any]) -> None:
    tracking_cfg = multirun_tracking(config)
    if not tracking_cfg.enabled:
        return
    metrics = {f"calibration/{split}_{outcome['objective']}": outcome[split]["value"] for split in ("dev", "test")}
    metrics.update({f"calibration/{split}_items": outcome[split]["items"] for split in ("dev", "test")})
    tracking.log_sweep(tracking_cfg, sweep_dir, [path], {k: float(v) for k, v in metrics.items() if v is not None},
                       kind=CALIBRATION_KIND)
