"""``judgesweep init [DIR]``: write a small project of one's own that runs offline at once.

The project (``project_template/`` beside this module, plus two files copied from the package) has a conf/ with
one judge, prompt, rubric, dataset and experiment preset, prompts/ with its template, a small data file and a
README. Its judge replays GPT-4's recorded LLMBar answers, so its template is a copy of the packaged LLMBar
Vanilla prompt (the replay answers only the exact messages it recorded) and its data the first pairs of LLMBar
Natural. ``cd DIR && judgesweep`` then runs with no key and no network. Existing files are never overwritten; a
``.gitignore`` names what a run writes (:data:`GITIGNORE`), appended to one that exists, so a run in a git project is
not tagged ``git.dirty`` by its own outputs.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from runner.core import locations
from runner.outputs import console

__all__ = ["DEMO_PAIRS", "GITIGNORE", "build_parser", "main", "project_files", "write_gitignore",
           "write_project"]

TEMPLATE_DIR = Path(__file__).resolve().parent / "project_template"
DEMO_PAIRS = 8  # LLMBar Natural's first pairs: enough to show accuracy and a position flip, quick to replay
# What a run writes in the project: run and sweep directories, the MLflow store, its artifacts and the response cache
# (all under outputs/, conf/hydra/default.yaml and conf/tracking/sqlite.yaml), and MLflow's own default file store.
GITIGNORE = ("outputs/", "mlruns/")
_LLMBAR = Path(__file__).resolve().parents[1] / "data" / "llmbar"  # runner/data/llmbar, shipped as package data


def project_files() -> dict[Path, bytes]:
    """Every file of a new project, by its path relative to the project directory."""
    files = {path.relative_to(TEMPLATE_DIR): path.read_bytes()
             for path in sorted(TEMPLATE_DIR.rglob("*")) if path.is_file() and "__pycache__" not in path.parts}
    files[Path("prompts/my_prompt.j2")] = (locations.PACKAGED_PROMPTS / "llmbar_vanilla.j2").read_bytes()
    with (_LLMBAR / "natural.jsonl").open("rb") as pairs:
        files[Path("data/my_pairs.jsonl")] = b"".join(itertools.islice(pairs, DEMO_PAIRS))
    return files


def write_project(directory: Path) -> list[Path]:
    """Write a new project into ``directory`` (created when missing) and return the files written.

    Raises:
        FileExistsError: Some of the files exist already (all named in the message); nothing is written.
    """
    files = project_files()
    existing = sorted(str(directory / rel) for rel in files if (directory / rel).exists())
    if existing:
        raise FileExistsError(f"not overwriting existing files: {', '.join(existing)}")
    written = []
    for rel, content in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(path)
    return [*written, write_gitignore(directory)]


def write_gitignore(directory: Path) -> Path:
    """``directory``/.gitignore with every line of :data:`GITIGNORE`: written, or the missing ones appended to the
    file that exists (nothing in it is changed); returns its path."""
    path = directory / ".gitignore"
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    missing = [line for line in GITIGNORE if line not in existing.splitlines()]
    if missing:
        lead = "" if not existing or existing.endswith("\n") else "\n"
        header = "" if existing else "# written by judgesweep init: what a run writes\n"
        with path.open("a", encoding="utf-8") as out:
            out.write(lead + header + "".join(f"{line}\n" for line in missing))
    return path


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``judgesweep init``."""
    parser = argparse.ArgumentParser(prog="judgesweep init", description="Write a small judgesweep project into "
                                     "DIR (default: the current directory) that runs offline at once; existing "
                                     "files are never overwritten.")
    parser.add_argument("directory", nargs="?", default=".", type=Path, metavar="DIR", help="where to write it")
    return parser


def main(argv: list[str]) -> int:
    """``judgesweep init [DIR]``: write the project, say what to do next; 1 when files would be overwritten."""
    parser = build_parser()
    directory = parser.parse_args(argv).directory
    try:
        written = write_project(directory)
    except FileExistsError as exc:
        parser.exit(1, f"judgesweep init: {exc}\n")
    where = "" if directory == Path(".") else f"cd {directory} && "
    console.print_line(f"wrote {len(written)} files into {directory.resolve()}; run it: {where}judgesweep")
    return 0
