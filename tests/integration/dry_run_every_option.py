"""Dry-run every packaged option of every config group, and make a few real runs, in one process: run by
tests/integration/test_wheel_install.py with the python of a venv that judgesweep's wheel is installed into (a process
start imports litellm: seconds, so the runs share one).

``python dry_run_every_option.py OUT.json [--project DIR] [--runs RUNS.json]`` from an empty directory: every option
of every group of the installed package's conf/ (``hydra/launcher`` included), each through
:func:`runner.run_experiment` with ``dry_run=true`` (composes, validates, renders and prices every request, calls
nothing). With ``--project`` (a ``judgesweep init`` project), every experiment preset again from inside it. With
``--runs``, the runs it names (``{label: {"cwd": DIR, "overrides": [...]}}``) for real, each from its directory.
OUT.json holds ``dry_runs``, mapping each override to its outcome (``{"ok": true, "overrides": [...], "output":
what it printed}`` or ``{"ok": false, "errors": [[overrides, error], ...]}``), and ``runs``, mapping each label to
``{"ok": ..., "output": ..., "error": ...}``.

An option is tried as ``group=option`` with the default run, then with each experiment preset in turn (a pointwise
rubric needs a pointwise prompt and dataset: a preset brings them), until one dry-runs: first the presets that pick
that option themselves, then those an earlier option of the group dry-ran with (the latest first), then the others in
order. A group also used another way is tried that way last: an ensemble's ``combine`` is an aggregation
(``judge=ensemble +aggregation@judge.combine=X``). An option's mandatory value (``???``) is given from ``values``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import traceback
from collections.abc import Sequence
from pathlib import Path

import yaml

import runner
from runner.core import locations

MAX_ITEMS = 2  # every file is still loaded and checked; only the requests rendered and priced are fewer
FORMS = {"aggregation": (("judge=ensemble", "+aggregation@judge.combine={option}"),)}


def recordings(path: Path) -> Path:
    """A recordings file (README "Score recorded judge outputs") for the default run: the packaged GPT-4 replay of
    LLMBar Natural with the Vanilla prompt, one line per item and order."""
    replay = Path(runner.__file__).parent / "data" / "llmbar" / "replay" / "gpt-4.jsonl"
    with replay.open() as lines, path.open("w") as out:
        for line in lines:
            record = json.loads(line)
            if record["strategy"] == "vanilla" and record["stage"] == "judge":
                out.write(json.dumps({"id": record["item"], "order": record["order"], "output": record["text"]}) + "\n")
    return path


def mandatory(node: object, prefix: str) -> list[str]:
    """Dotted keys of the ``???`` values in an option file (a value the user must give)."""
    if isinstance(node, dict):
        return [key for k, v in node.items() for key in mandatory(v, f"{prefix}.{k}")]
    return [prefix] if node == "???" else []


def options(conf: Path) -> dict[str, list[str]]:
    """Every group of ``conf`` (its directories holding YAML files, ``hydra/launcher`` style) and its options."""
    groups: dict[str, list[str]] = {}
    for path in sorted(conf.rglob("*.yaml")):
        if path.parent != conf:
            groups.setdefault(path.parent.relative_to(conf).as_posix(), []).append(path.stem)
    return groups


def run(overrides: Sequence[str], run_dir: Path) -> tuple[str | None, str]:
    """Run ``overrides`` through run_experiment: (None, what it printed) when it went through, else (the error, what
    it printed); a run that failed or could not be tracked did not go through."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            outcome = runner.run_experiment([*overrides, f"hydra.run.dir={run_dir}"])
        if outcome is not None and (outcome.failed or outcome.tracking_error):
            return f"failed: {outcome.reason} {outcome.tracking_error or ''}", printed.getvalue()
    except Exception as exc:  # noqa: BLE001 - every failure is the finding, with its type and message
        return f"{type(exc).__name__}: {exc}", printed.getvalue()
    except SystemExit as exc:
        return f"SystemExit: {exc.code}\n{traceback.format_exc()}", printed.getvalue()
    return None, printed.getvalue()


def dry_run(overrides: list[str], run_dir: Path) -> tuple[str | None, str]:
    """:func:`run` with ``dry_run=true`` on MAX_ITEMS items, untracked unless ``overrides`` say otherwise."""
    quiet = [] if any(o.startswith("tracking=") for o in overrides) else ["tracking=off"]
    return run([*overrides, *quiet, "dry_run=true", f"max_items={MAX_ITEMS}"], run_dir)


def picks(preset: str, group: str, option: str) -> bool:
    """True when the experiment preset chooses ``option`` for ``group`` itself."""
    doc = yaml.safe_load((locations.PACKAGED_CONF / "experiment" / f"{preset}.yaml").read_text()) or {}
    return {f"override /{group}": option} in doc.get("defaults", [])


def attempts(group: str, option: str, presets: list[str], values: dict[str, str],
             worked: Sequence[str] = ()) -> list[list[str]]:
    """The ways to dry-run ``group=option``, most direct first; ``worked``: the presets that earlier options of the
    group dry-ran with, the latest first."""
    if group == "experiment":
        return [[f"experiment={option}"]]
    raw = yaml.safe_load((locations.PACKAGED_CONF / group / f"{option}.yaml").read_text()) or {}
    given = [f"{key}={values[key]}" for key in mandatory(raw, group) if key in values]
    plain = [f"{group}={option}", *given]
    forms = [[form.format(option=option) for form in forms] for forms in FORMS.get(group, ())]
    first = [preset for preset in presets if picks(preset, group, option)]
    first += [preset for preset in worked if preset not in first]
    ordered = first + [preset for preset in presets if preset not in first]
    return [plain, *([f"experiment={preset}", *plain] for preset in ordered), *forms]


def dry_run_all(places: list[tuple[str, Path]], work: Path, values: dict[str, str]) -> dict[str, dict[str, object]]:
    """Every option from the first place, every preset from the others (``label`` prefixes their keys)."""
    groups = options(locations.PACKAGED_CONF)
    presets = groups.get("experiment", [])
    results: dict[str, dict[str, object]] = {}
    runs = iter(range(10**6))
    for label, where in places:
        os.chdir(where)
        for group, names in groups.items():
            if label and group != "experiment":
                continue
            worked: list[str] = []
            for option in names:
                errors = []
                for overrides in attempts(group, option, presets, values, worked):
                    error, printed = dry_run(overrides, work / str(next(runs)))
                    if error is None:
                        results[f"{label}{group}={option}"] = {"ok": True, "overrides": overrides, "output": printed}
                        if overrides[0].startswith("experiment="):
                            worked.insert(0, overrides[0].removeprefix("experiment="))
                        break
                    errors.append([overrides, error])
                else:
                    results[f"{label}{group}={option}"] = {"ok": False, "errors": errors}
    return results


def main() -> None:
    """Dry-run every option from the working directory, every preset from the project, then the real runs."""
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--project", type=Path)
    parser.add_argument("--runs", type=Path)
    args = parser.parse_args()
    work = args.out.with_suffix(".runs")
    values = {"judge.path": str(recordings(args.out.with_suffix(".recordings.jsonl")))}
    places = [("", Path.cwd())] + ([("project: ", args.project)] if args.project else [])
    dry_runs = dry_run_all(places, work, values)
    real: dict[str, dict[str, object]] = {}
    for label, spec in (json.loads(args.runs.read_text()) if args.runs else {}).items():
        os.chdir(spec["cwd"])
        error, printed = run(spec["overrides"], work / label)
        real[label] = {"ok": error is None, "output": printed, "error": error}
    args.out.write_text(json.dumps({"dry_runs": dry_runs, "runs": real}, indent=1))


if __name__ == "__main__":
    main()
