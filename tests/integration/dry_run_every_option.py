"""Dry-run every packaged option of every config group, in one process: run by tests/integration/test_wheel_install.py
with the python of a venv that judgesweep's wheel is installed into (a process start imports litellm: seconds, so
the runs share one).

``python dry_run_every_option.py OUT.json [PROJECT_DIR]`` from an empty directory: every option of every group of
the installed package's conf/ (``hydra/launcher`` included), each through :func:`runner.run_experiment` with
``dry_run=true`` (composes, validates, renders and prices every request, calls nothing). With PROJECT_DIR (a
``judgesweep init`` project), every experiment preset again from inside it. OUT.json maps each override to its
outcome: ``{"ok": true, "overrides": [...]}`` or ``{"ok": false, "errors": [[overrides, error], ...]}``.

An option is tried as ``group=option`` with the default run, then with each experiment preset in turn (a pointwise
rubric needs a pointwise prompt and dataset: a preset brings them), until one dry-runs. Two groups are also used
another way, tried last: an ensemble's ``combine`` is an aggregation (``judge=ensemble
+aggregation@judge.combine=X``), and an option's mandatory value (``???``) is given from :data:`VALUES`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
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


def dry_run(overrides: list[str], run_dir: Path) -> str | None:
    """None when ``overrides`` dry-run, else the error."""
    try:
        quiet = [] if any(o.startswith("tracking=") for o in overrides) else ["tracking=off"]
        runner.run_experiment([*overrides, *quiet, "dry_run=true", f"max_items={MAX_ITEMS}",
                               f"hydra.run.dir={run_dir}"])
    except Exception as exc:  # noqa: BLE001 - every failure is the finding, with its type and message
        return f"{type(exc).__name__}: {exc}"
    except SystemExit as exc:
        return f"SystemExit: {exc.code}\n{traceback.format_exc()}"
    return None


def attempts(group: str, option: str, presets: list[str], values: dict[str, str]) -> list[list[str]]:
    """The ways to dry-run ``group=option``, most direct first."""
    if group == "experiment":
        return [[f"experiment={option}"]]
    raw = yaml.safe_load((locations.PACKAGED_CONF / group / f"{option}.yaml").read_text()) or {}
    given = [f"{key}={values[key]}" for key in mandatory(raw, group) if key in values]
    plain = [f"{group}={option}", *given]
    ways = [plain] + [[f"experiment={preset}", *plain] for preset in presets]
    return ways + [[form.format(option=option) for form in forms] for forms in FORMS.get(group, ())]


def main() -> None:
    """Dry-run every option from the working directory, then every preset from the project (argv[2]) if given."""
    out, work = Path(sys.argv[1]), Path(sys.argv[1]).with_suffix(".runs")
    values = {"judge.path": str(recordings(out.with_suffix(".recordings.jsonl")))}
    groups = options(locations.PACKAGED_CONF)
    presets = groups.get("experiment", [])
    results: dict[str, dict[str, object]] = {}
    runs = iter(range(10**6))
    places = [("", Path.cwd())] + ([("project: ", Path(sys.argv[2]))] if len(sys.argv) > 2 else [])
    for label, where in places:
        os.chdir(where)
        for group, names in groups.items():
            if label and group != "experiment":
                continue
            for option in names:
                errors = []
                for overrides in attempts(group, option, presets, values):
                    with contextlib.redirect_stdout(sys.stderr):
                        error = dry_run(overrides, work / str(next(runs)))
                    if error is None:
                        results[f"{label}{group}={option}"] = {"ok": True, "overrides": overrides}
                        break
                    errors.append([overrides, error])
                else:
                    results[f"{label}{group}={option}"] = {"ok": False, "errors": errors}
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
