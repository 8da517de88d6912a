"""``judgesweep aggregate FILE [FILE ...] [overrides]`` (also ``judgesweep-aggregate``): re-aggregate existing
evaluation files without any judge call.

The files are the users' per-run evaluation JSON files, judgesweep's own results.jsonl or generic JSONL votes
(runner.inputs.evaluation_files). The overrides are Hydra's, composed with the compose API over the same config
a run uses (``aggregation=weighted``, ``aggregation.params.weights=...``, ``experiment=robust_pairwise``,
``tracking=off``), plus four of this command's own: ``output_dir=DIR``, ``ours=NAME`` and ``baseline=NAME`` (the
compared systems' names; the role words ``ours`` / ``baseline`` in a file always mean them) and
``members=true|false|NAME,...`` (the files as an ensemble's members: runner.run.reaggregation_members), and
``overwrite=true`` (write into an ``output_dir`` that holds files; refused otherwise). Files that are copies of each
other (the same bytes, or the same raw answers to some items) are named in one warning line each.
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hydra import compose
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from runner.core import locations
from runner.core.config import RunConfig
from runner.core.errors import TRACKING_FAILED, ConfigurationError, DatasetError
from runner.core.registry import UnknownNameError
from runner.inputs.evaluation_files import Systems
from runner.inputs.evaluation_sets import copies, read_evaluation_set
from runner.inputs.prompts import TemplateError
from runner.judging.scoring import RubricError
from runner.run import job_context, open_mappings
from runner.run.experiment import _hydra_initialized, prepare_process

if TYPE_CHECKING:
    from runner.run.reaggregation import AggregateJob

__all__ = ["OWN_KEYS", "build_parser", "main", "script"]

# this command's keys; every other override is Hydra's
OWN_KEYS = ("output_dir", "ours", "baseline", "members", "overwrite")
ERRORS = (ConfigurationError, DatasetError, TemplateError, UnknownNameError, RubricError, HydraException,
          OmegaConfBaseException)
PROG = "judgesweep aggregate"


def build_parser() -> argparse.ArgumentParser:
    """The command line: files and overrides in any order (an argument with ``=`` that is no file is an override)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Re-aggregate existing evaluation files without any judge call: the users' per-run "
        "evaluation JSON files (k files = k votes per item), judgesweep's results.jsonl from several runs, or "
        "generic JSONL votes. Writes summary.json, results.jsonl, metrics.json, report.html and an MLflow run.",
        epilog="overrides: aggregation=majority_vote|weighted|dawid_skene|mean|median, aggregation.params.<p>=..., "
               "experiment=..., tracking=off, output_dir=DIR, overwrite=true, ours=NAME, baseline=NAME, "
               "members=true|false|NAME,NAME,... (the files as an ensemble's members; weighted and dawid_skene "
               "always take them so)")
    parser.add_argument("args", nargs="+", metavar="FILE|OVERRIDE", help="evaluation files and key=value overrides")
    parser.add_argument("--config-dir", metavar="DIR", help="your conf/ (default: ./conf when it exists)")
    return parser


def split(args: Sequence[str]) -> tuple[list[Path], list[str], dict[str, str]]:
    """(files, Hydra overrides, this command's own keys) from the positional arguments."""
    files: list[Path] = []
    overrides: list[str] = []
    own: dict[str, str] = {}
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq or Path(arg).exists():
            files.append(Path(arg))
        elif key in OWN_KEYS:
            own[key] = value
        else:
            overrides.append(arg)
    if "ours" in own:
        overrides.append(f"dataset.ours.name={own['ours']}")
    if "baseline" in own:
        overrides.append(f"dataset.baseline.name={own['baseline']}")
    return files, overrides, own


def compose_config(overrides: Sequence[str], config_dir: str | None) -> tuple[DictConfig, DictConfig]:
    """(the job's config, the full config with its hydra node), composed as a run composes it."""
    prepare_process()
    with _hydra_initialized(config_dir):
        full = compose(config_name="config", overrides=open_mappings.opened(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(full)  # resolves ${hydra:runtime.cwd} in the tracking store's address
    dcfg = copy.deepcopy(full)
    with read_write(dcfg), open_dict(dcfg):
        del dcfg["hydra"]
    job_context.check_keys(dcfg)
    return dcfg, full


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; 0 when done, 1 on input that cannot be aggregated or a failed gate, 3 (TRACKING_FAILED) when
    the files are written but MLflow could not be."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    files, overrides, own = split(args.args)
    if not files:
        parser.error("give one or more evaluation files")
    try:
        _check_output_dir(own)
        dcfg, full = compose_config(overrides, args.config_dir)
        cfg: RunConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
        ours, baseline = cfg.dataset.ours, cfg.dataset.baseline  # a pointwise dataset has neither
        systems = Systems(ours.name if ours else "ours", baseline.name if baseline else "baseline")
        evaluation = read_evaluation_set(files, systems)
        for line in copies(evaluation.files):
            sys.stderr.write(f"{PROG}: warning: {line}\n")
        # Only once the files are read: the report's modules (the statistics, litellm's cost map, MLflow's
        # publishing path) take seconds to import, and a file that cannot be aggregated is refused without them.
        from runner.run.reaggregation import reaggregate

        outcome = reaggregate(cfg, evaluation, _job(dcfg, full, own, len(files), args.config_dir))
    except ERRORS as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    if outcome.failed:
        sys.stderr.write(f"{PROG}: gate failed: {outcome.reason}\n")
        return 1
    if outcome.tracking_error:
        sys.stderr.write(f"{PROG}: {outcome.tracking_error}\n")
        return TRACKING_FAILED
    return 0


def _check_output_dir(own: dict[str, str]) -> None:
    """Refuse an ``output_dir`` that already holds files (another aggregate's, a run's) unless ``overwrite=true``."""
    if own.get("overwrite", "false").lower() not in ("true", "false"):
        raise ConfigurationError(f"overwrite={own['overwrite']}: must be true or false")
    out = own.get("output_dir")
    if out and Path(out).is_dir() and any(Path(out).iterdir()) and own.get("overwrite", "").lower() != "true":
        raise ConfigurationError(f"output_dir={out} already holds files (an earlier aggregate's?): give another "
                                 "output_dir, or overwrite=true to write over them")


def _job(dcfg: DictConfig, full: DictConfig, own: dict[str, str], n_files: int, config_dir: str | None
         ) -> AggregateJob:
    from runner.run.reaggregation import AggregateJob

    cwd = Path.cwd()
    run_dir = Path(own.get("output_dir") or cwd / "outputs" / "aggregate" / datetime.now().strftime(
        "%Y-%m-%d_%H-%M-%S-%f"))
    roots = locations.input_roots(cwd, locations.user_conf_dir(cwd, config_dir))
    choices = {k: str(v) for k, v in full.hydra.runtime.choices.items() if not k.startswith("hydra") and v is not None}
    name = f"aggregate {n_files} file{'s' if n_files > 1 else ''} ({dcfg.aggregation.name})"
    return AggregateJob(run_dir=run_dir, run_name=name, resolved_config_yaml=OmegaConf.to_yaml(dcfg, resolve=True),
                        prompts_dirs=tuple(locations.directories(str(dcfg.prompts_dir), roots)), choices=choices,
                        members=own.get("members"))


def script() -> None:
    """Console-script entry point ``judgesweep-aggregate``."""
    sys.exit(main())


if __name__ == "__main__":
    script()
