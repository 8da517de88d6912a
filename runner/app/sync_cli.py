"""``judgesweep sync <run dir | sweep dir> ... [tracking overrides]``: publish run directories to MLflow.

Each run directory (a judge run's, an aggregation's, or every job of a sweep directory, then the sweep's table on
its parent run) goes through :func:`runner.outputs.publishing.publish`, the path a run takes at its end: whatever
the store lacks is written, nothing twice, so a sync may be repeated, interrupted and repeated, or pointed at
another store.

Where: the store the run was made with (its view.json), or the default store (``tracking=sqlite``) for a run made
with ``tracking=off``; overrides of other keys (``tracking.experiment=...``, ``tracking.traces=false``) change those
keys of that store's config; overrides that choose a store (``tracking=server``, ``tracking.uri=...``) publish to the
config composed as a run composes it, those applied.
Exit status: 0 when every directory is published, 3 when one could not be (one line each, the others still go),
2 for a directory that holds no run, 1 for a config file refused before composing (one line).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf

from runner.core.errors import TRACKING_FAILED, ConfigurationError
from runner.core.run_settings import TrackingConfig

PROG = "judgesweep sync"
log = logging.getLogger("judgesweep")


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1])
    parser.add_argument("args", nargs="+", metavar="DIR | tracking override",
                        help="run or sweep directories, then tracking overrides (tracking.uri=..., tracking=server)")
    parser.add_argument("--config-dir", help="your conf/ directory (default: ./conf when it exists)")
    return parser


def run_dirs(path: Path) -> tuple[list[Path], bool]:
    """(the run directories under ``path``, whether it is a sweep): itself when it holds a run's view.json, else its
    job directories that do (a sweep)."""
    from runner.outputs.publishing import VIEW_NAME
    from runner.storage.store import METRICS_NAME

    def finished(d: Path) -> bool:  # view.json is written when a run starts, metrics.json when it ends
        return (d / VIEW_NAME).is_file() and (d / METRICS_NAME).is_file()

    if finished(path):
        return [path], False
    jobs = sorted((p.parent for p in path.glob(f"*/{VIEW_NAME}") if finished(p.parent)),
                  key=lambda p: (len(p.name), p.name))
    return jobs, bool(jobs)


def tracking_of(run_dir: Path, overrides: Sequence[str], config_dir: str | None) -> TrackingConfig:
    """The store to publish ``run_dir`` to (see the module docstring)."""
    from runner.outputs.publishing import VIEW_NAME

    recorded = json.loads((run_dir / VIEW_NAME).read_text(encoding="utf-8")).get("tracking")
    own = TrackingConfig(**recorded) if recorded and recorded.get("enabled") else None
    if own is not None and not overrides:
        return own
    from runner.app.aggregate_cli import compose_config

    dcfg, _ = compose_config(list(overrides), config_dir)
    cfg: TrackingConfig = OmegaConf.to_object(dcfg.tracking)  # type: ignore[assignment]
    if own is not None and not any(_key(o) in STORE_KEYS for o in overrides):
        # tracking.experiment=... and kin: the run's own store with those changed, not the working directory's default
        return dataclasses.replace(own, **{name: getattr(cfg, name) for name in _tracking_fields(overrides)})
    return dataclasses.replace(cfg, enabled=True)  # asked to sync: a run made with tracking off is published now


# The overrides that choose another store than the run's own: the tracking group (tracking=server) or its address.
STORE_KEYS = ("tracking", "tracking.uri")


def _key(override: str) -> str:
    """The key an override sets: ``tracking.uri`` of ``++tracking.uri=...``."""
    return override.split("=", 1)[0].lstrip("+~")


def _tracking_fields(overrides: Sequence[str]) -> list[str]:
    """The fields of TrackingConfig that ``overrides`` set (``experiment`` of ``tracking.experiment=x``)."""
    fields = {f.name for f in dataclasses.fields(TrackingConfig)}
    return [name for o in overrides if (name := _key(o).removeprefix("tracking.")) in fields
            and _key(o).startswith("tracking.")]


def _sync_one(run_dir: Path, cfg: TrackingConfig) -> bool:
    from runner.outputs import console, tracking
    from runner.outputs.publisher import describe
    from runner.outputs.publishing import publish

    try:
        with tracking.records_to(run_dir):  # MLflow's own records (a locked store's traceback): the run's log file
            result = publish(run_dir, cfg)
    except Exception as exc:  # noqa: BLE001 - one line per directory; the others still go
        sys.stderr.write(f"{PROG}: tracking failed: {describe(cfg)}: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:500]}; {run_dir} is unchanged, run this again once the store "
                         "is fixed\n")
        return False
    console.print_line(f"{run_dir}: MLflow run {result.run_id} ({'created' if result.created else 'completed'}, "
                       f"{result.traces} traces written) at {describe(cfg)}")
    return True


def _sync_sweep_table(sweep_dir: Path, cfg: TrackingConfig) -> bool:
    """The sweep's table and report on its parent run (as the multirun's end logs them)."""
    from runner.outputs import console, sweep, sweep_best, sweep_page, tracking
    from runner.outputs.publisher import describe

    rows = sweep.collect(sweep_dir)
    answer, best_files = sweep_best.settle(sweep_dir, rows)
    files = [*sweep.write(sweep_dir, rows), *best_files, *sweep_page.write_sweep_report(sweep_dir, rows,
                                                                                        answer=answer)]
    metrics, tags = sweep_best.tracking_values(answer)
    try:
        with tracking.records_to(sweep_dir):
                run_id = tracking.log_sweep(cfg, sweep_dir, files, {**sweep.summary_metrics(rows), **metrics},
                                        tags=tags)
    except Exception as exc:  # noqa: BLE001 - said in one line
        sys.stderr.write(f"{PROG}: tracking failed: {describe(cfg)}: the sweep table of {sweep_dir}: "
                         f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}\n")
        return False
    console.print_line(f"{sweep_dir}: sweep table on MLflow run {run_id}")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command (see the module docstring for the exit status)."""
    from runner.run.experiment import prepare_process

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    prepare_process()  # telemetry off before mlflow is imported
    paths = [Path(a) for a in args.args if "=" not in a or Path(a).exists()]
    overrides = [a for a in args.args if "=" in a and not Path(a).exists()]
    if not paths:
        parser.error("give one or more run or sweep directories")
    ok = True
    for path in paths:
        jobs, is_sweep = run_dirs(path.resolve())
        if not jobs:
            sys.stderr.write(f"{PROG}: {path} holds no finished run (no view.json and metrics.json in it or in its job "
                             "directories); "
                             f"a run killed before its end continues with resume={path}\n")
            return 2
        try:
            cfg = tracking_of(jobs[0], overrides, args.config_dir)
        except ConfigurationError as exc:  # a file of the user's conf/ refused (runner.run.config_guard)
            sys.stderr.write(f"{PROG}: {exc}\n")
            return 1
        for job in jobs:
            ok = _sync_one(job, cfg) and ok
        if is_sweep:
            ok = _sync_sweep_table(path.resolve(), cfg) and ok
    return 0 if ok else TRACKING_FAILED
