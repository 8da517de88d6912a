"""Hydra instantiate keys (``_target_`` and its kin) refused before Hydra composes anything.

Hydra instantiates ``hydra.callbacks`` (and the launcher and sweeper) right after composing the config, before the
job function runs: ``+hydra.callbacks.evil._target_=os.makedirs`` would run ``os.makedirs`` before any check in the
job could see it. So the command line's overrides and the user's YAML files are read here first, and any
instantiate key is refused, naming it, except under the nodes whose plugins judgesweep ships configs for
(``hydra.launcher`` and ``hydra.sweeper``) and judgesweep's own callbacks (:data:`SHIPPED_CALLBACKS`). The packaged
conf/ is judgesweep's own and is not read here; tests/unit/test_config_guard.py checks that it passes. The job's own
config is checked again, composed, by :func:`runner.run.job_context.check_keys`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from runner.core import input_limits
from runner.run.job_context import INSTANTIATE_KEYS, ForbiddenKey

__all__ = ["ALLOWED_PREFIXES", "SHIPPED_CALLBACKS", "check_overrides", "check_user_conf"]

# Launcher and sweeper plugins are chosen by their config's _target_ (hydra/launcher=joblib, an Optuna sweeper).
ALLOWED_PREFIXES = ("hydra.launcher.", "hydra.sweeper.")
# judgesweep's own Hydra callbacks (conf/hydra/default.yaml, conf/experiment/calibrate_llmbar.yaml): a user's copy of
# a packaged file that names one of them passes.
SHIPPED_CALLBACKS = frozenset({"runner.app.cli.RunDirectory", "runner.app.cli.SweepSummary",
                               "runner.app.calibration.HeldOutTest"})
_SHIPPED_CALLBACK_KEY = re.compile(r"^hydra\.callbacks\.[^.]+\._target_$")
_PACKAGE_HEADER = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)


def _refusal(key: str, where: str = "") -> ForbiddenKey:
    # worded as check_keys words the same refusal of a composed job config
    prefix = f"{where}: " if where else ""
    allowed = " and ".join(p.rstrip(".") for p in ALLOWED_PREFIXES)
    return ForbiddenKey(f"{prefix}instantiate keys are not allowed in judgesweep configs: [{key!r}] (only under "
                        f"{allowed}, and judgesweep's own callbacks)")


def _instantiate_paths(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every instantiate key in ``node`` (a parsed YAML or override value) below ``path``."""
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key in INSTANTIATE_KEYS:
                yield where, value
            yield from _instantiate_paths(value, where)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _instantiate_paths(value, f"{path}[{index}]")


def _allowed(path: str, value: Any) -> bool:
    if path.startswith(ALLOWED_PREFIXES):
        return True
    return bool(_SHIPPED_CALLBACK_KEY.match(path)) and value in SHIPPED_CALLBACKS


def _forbidden(found: Iterator[tuple[str, Any]]) -> list[str]:
    return [path for path, value in found if not _allowed(path, value)]


def check_overrides(overrides: Sequence[str]) -> None:
    """Refuse an instantiate key in a command-line override, as a key or inside a dict value.

    Overrides that do not parse are left for Hydra to report.

    Raises:
        ForbiddenKey: Naming the first such key.
    """
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - Hydra reports a malformed override itself, with its own message
        return
    for override in parsed:
        key = override.key_or_group
        value = None if override.is_sweep_override() else override.value()
        found = [(key, value)] if set(key.split(".")) & INSTANTIATE_KEYS else []
        found += list(_instantiate_paths(value, key))
        if bad := _forbidden(iter(found)):
            raise _refusal(bad[0])


def _package(text: str, group: str) -> str:
    """Where a YAML file's keys land: its ``# @package`` header, else its group (Hydra's default package)."""
    match = _PACKAGE_HEADER.search(text)
    package = match.group(1) if match else "_group_"
    package = package.replace("_group_", group).replace("_global_", "")
    return package.strip(".")


def check_user_conf(conf_dir: Path | None) -> None:
    """Refuse an instantiate key in any YAML file of the user's config directory, naming the file and the key.

    Each file is first held to the caps of :mod:`runner.core.input_limits` (aliases, depth, integer digits, no
    ``!!python/`` tag, no duplicate key, valid YAML), so no file can hang or crash the loading.

    Raises:
        ForbiddenKey: Naming the file and the key (as Hydra would place it) of the first one.
        UnsafeFile: Naming the file and line of the first file over a cap.
    """
    if conf_dir is None:
        return
    for path in sorted(conf_dir.rglob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # Hydra reports a file it cannot read when the file is used
        input_limits.check_yaml(path, text)  # every file, used or not: Hydra scans the groups, and so does this
        try:
            node = yaml.safe_load(text)
        except yaml.YAMLError:
            continue  # Hydra reports a file it cannot load (two documents in one) when the file is used
        group = ".".join(path.parent.relative_to(conf_dir).parts)
        if bad := _forbidden(_instantiate_paths(node, _package(text, group))):
            raise _refusal(bad[0], str(path))
