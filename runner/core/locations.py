"""Where judgesweep finds its configs, prompt templates and relative data paths: the user's project first, then the
package.

judgesweep ships its default ``conf/`` and ``prompts/``. In the repository they sit at the top level, beside
``runner/``; a wheel or a non-editable install carries them inside the package as ``runner/conf`` and
``runner/prompts`` (pyproject.toml maps them there). :data:`PACKAGED_ROOT` is whichever of the two holds them, so
the same code works from a checkout, an editable install and an installed wheel.

A user's project is a directory with its own ``conf/`` (``./conf``, or the directory given by ``--config-dir``):
Hydra composes from it as the primary config directory, with the packaged ``conf/`` after it on the search path
(as Hydra's ``--config-dir`` puts a directory there: runner/app/cli.py, runner/run/experiment.py), so the user's
files win and the packaged options stay selectable. Templates and
relative paths resolve against the user's project, then the working directory, then the package
(:func:`input_roots`, :func:`candidates`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from runner.core.errors import ConfigurationError

__all__ = ["PACKAGED_CONF", "PACKAGED_PROMPTS", "PACKAGED_ROOT", "UnwritableDirectory", "candidates",
           "check_writable", "directories", "input_roots", "is_packaged_conf", "user_conf_dir"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # runner/


def _packaged_root() -> Path:
    # Installed (wheel, non-editable): runner/conf. A checkout or an editable install: conf/ beside runner/.
    return _PACKAGE_DIR if (_PACKAGE_DIR / "conf").is_dir() else _PACKAGE_DIR.parent


PACKAGED_ROOT = _packaged_root()
PACKAGED_CONF = PACKAGED_ROOT / "conf"
PACKAGED_PROMPTS = PACKAGED_ROOT / "prompts"

def is_packaged_conf(directory: Path) -> bool:
    """Whether ``directory`` is judgesweep's own ``conf/`` (a checkout's ``./conf`` is not a user's overlay)."""
    return directory.resolve() == PACKAGED_CONF.resolve()


def user_conf_dir(cwd: Path, config_dir: str | Path | None = None) -> Path | None:
    """The user's config directory: ``config_dir`` when given (relative to ``cwd``), else ``cwd/conf`` when it
    exists; None when there is none or it is the packaged ``conf/`` itself.

    Raises:
        FileNotFoundError: ``config_dir`` was given and is not a directory (named in the message).
    """
    if config_dir is not None:
        chosen = (cwd / config_dir).resolve()
        if not chosen.is_dir():
            raise FileNotFoundError(f"config directory {chosen} not found")
    else:
        chosen = (cwd / "conf").resolve()
        if not chosen.is_dir():
            return None
    return None if is_packaged_conf(chosen) else chosen


def input_roots(cwd: Path, user_conf: Path | None) -> tuple[Path, ...]:
    """Where relative template and dataset paths are looked up, in order: the user's project (their config
    directory's parent), the working directory, the package's root."""
    roots = [user_conf.parent] if user_conf is not None else []
    roots += [cwd, PACKAGED_ROOT]
    unique: list[Path] = []
    for root in roots:
        if root.resolve() not in {u.resolve() for u in unique}:
            unique.append(root)
    return tuple(unique)


def candidates(path: str | Path, roots: Sequence[Path]) -> list[Path]:
    """``path`` itself when absolute, else ``path`` under each root, in order."""
    candidate = Path(path)
    return [candidate] if candidate.is_absolute() else [root / candidate for root in roots]


def directories(path: str | Path, roots: Sequence[Path]) -> list[Path]:
    """Every existing directory ``path`` names under ``roots``, in order (a template is read from the first that
    holds it); the first candidate alone when none exists, so an error names where it was looked for."""
    found = candidates(path, roots)
    return [p for p in found if p.is_dir()] or found[:1]


class UnwritableDirectory(ConfigurationError):
    """A run or sweep directory that cannot be created or written in; the message names it."""


def directory_key(output_dir: str | None, directory: str, hydra_key: str) -> str:
    """The config key that chose a run or sweep ``directory``, for messages: ``output_dir`` when the directory is its
    value (it was given and nothing overrode it), else ``hydra_key`` (``hydra.run.dir``, ``hydra.sweep.dir``)."""
    return "output_dir" if output_dir is not None and output_dir == directory else hydra_key


def check_writable(directory: Path, key: str) -> None:
    """Create ``directory`` (and its parents) and write and delete a file in it, so a read-only place fails here,
    in one line, rather than as a traceback from Hydra's mkdir or its log file, or from the first write of a run.

    Args:
        directory: The run (or sweep) directory.
        key: The config key that chose it (``hydra.run.dir``), for the message.

    Raises:
        UnwritableDirectory: Naming the directory, the key and the OS's reason.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".judgesweep-write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UnwritableDirectory(f"the output directory {directory} cannot be written ({reason}); choose a writable "
                                  f"one with {key}=<dir> (or resume=<dir>)") from None
