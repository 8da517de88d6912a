"""The docs a newcomer walks (issue 32 point 7): README.md stays short, the mkdocs site builds with --strict (every
link and anchor resolves), the config reference is the one generated from the schemas, and the docs' code blocks
hold: every YAML and JSON block parses, and every `judgesweep` command line composes into a valid config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from runner.app import config_reference, init_project
from runner.app.aggregate_cli import compose_config, split
from runner.core.addresses import check_addresses
from runner.core.values import check_values
from tests.docs_blocks import FENCE, PAGES, REPO, blocks, commands

# What a line of a bash block may not be composed for, and why (the test says which lines it left out).
SKIP = {"<": "a placeholder to fill in", "...": "an elided argument", "--": "a flag of the CLI, not an override"}
NOT_RUNS = ("init", "sync", "--help")  # judgesweep subcommands that take no run config of their own


def test_readme_is_at_most_150_lines_and_links_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    linked = set(re.findall(r"\]\((docs/[^)#]+)", readme))
    pages = {str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")}
    assert pages <= linked, sorted(pages - linked)


def test_the_docs_build_strictly(tmp_path, monkeypatch) -> None:
    """mkdocs --strict: a broken link or anchor, or a page missing from the nav, fails the build."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    config = load_config(str(REPO / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True)
    build(config)
    assert (tmp_path / "site" / "bring-your-own-data" / "index.html").is_file()
    assert not list((tmp_path / "site").rglob("*fonts.googleapis*"))
    assert "fonts.googleapis.com" not in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


def _rendered(page: Path) -> str:
    """The page's HTML as the docs site renders it: Python-Markdown (mkdocs' renderer) with mkdocs.yml's
    markdown_extensions, code blocks cut out (a "- " line in a code block is code)."""
    import markdown

    site = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    names = [e if isinstance(e, str) else next(iter(e)) for e in site["markdown_extensions"]]
    configs = {next(iter(e)): next(iter(e.values())) for e in site["markdown_extensions"] if isinstance(e, dict)}
    html = markdown.markdown(page.read_text(encoding="utf-8"), extensions=names, extension_configs=configs)
    return re.sub(r"<pre>.*?</pre>", "", html, flags=re.S)


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(REPO))) for p in PAGES])
def test_every_list_of_the_docs_renders_as_a_list(page: Path) -> None:
    """A Markdown list right under a paragraph line (no blank line between) renders as that paragraph with literal
    " - " in it; `mkdocs --strict` does not catch it (issue 44 point 7: 7 lists on 6 pages)."""
    lines = [line for line in _rendered(page).splitlines() if re.match(r"\s*([-*+]|\d+\.)\s", line)]
    assert lines == [], f"{page.relative_to(REPO)}: a list rendered as text (a blank line before it?): {lines[:3]}"


def test_the_config_reference_is_the_one_generated_from_the_schemas() -> None:
    page = (REPO / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    assert page == config_reference.render(), "run: python -m runner.app.config_reference"
    assert "| `gold_map` | dict[str, str] | `{}` | raw gold value -> system name or \"tie\" |" in page


def _reference_rows() -> dict[str, dict[str, str]]:
    """docs/reference/config.md as section -> key -> meaning."""
    sections: dict[str, dict[str, str]] = {}
    for part in (REPO / "docs" / "reference" / "config.md").read_text(encoding="utf-8").split("\n## ")[1:]:
        title, _, body = part.partition("\n")
        cells = [re.split(r"(?<!\\)\|", line)[1:-1] for line in body.splitlines() if line.startswith("| `")]
        sections[title] = {key.strip().strip("`"): meaning.strip() for key, _, _, meaning in cells}
    return sections


def test_every_key_of_the_config_reference_says_what_it_is() -> None:
    """Issue 44 point 7: 66 of 169 keys had no description, the generator's table listed judge-only keys and its
    price_as read as a note to developers."""
    sections = _reference_rows()
    assert sum(map(len, sections.values())) >= 160
    bare = [f"{title}.{key}" for title, rows in sections.items() for key, meaning in rows.items()
            if not meaning or meaning.startswith("See [")]
    assert bare == [], f"keys without a description (a comment beside or above the field): {bare}"
    generator = sections["generator"]
    assert {"template", "concurrency", "model", "rpm", "price_as"} <= set(generator)
    assert not {"members", "combine", "weights", "path", "family", "structured_output"} & set(generator)
    assert generator["price_as"].startswith("price the generation calls at this litellm model's list price")
    assert "identity" not in generator["price_as"] and "runner/" not in sections["judge"]["price_as"]


def test_the_cli_reference_is_generated_from_every_parser_and_linked() -> None:
    """docs/reference/cli.md is rendered from the real parsers (Hydra's for a run, each subcommand's build_parser):
    every `judgesweep` subcommand and every option of each is on it, and it is in the site's nav."""
    from hydra._internal.utils import get_args_parser

    from runner.app import cli, cli_reference

    page = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == cli_reference.render(), "run: python -m runner.app.cli_reference"
    parsers = {"[run]": get_args_parser(), **cli_reference.subcommand_parsers()}
    assert set(parsers) == {"[run]", *cli.SUBCOMMANDS} and {"aggregate", "compare", "init", "sync"} <= set(parsers)
    for name, parser in parsers.items():
        part = page.split(f"\n## judgesweep {name}\n")[1].split("\n## ")[0]
        for action in cli_reference.options(parser):
            assert f"`{cli_reference._name(action)}`" in part, (name, action.option_strings or action.dest)
    assert "--plan-alpha A" in page and "| `DIR` | `.` |" in page
    assert "reference/cli.md" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")


def test_every_yaml_and_json_block_parses() -> None:
    yamls, jsons = blocks("yaml"), blocks("json")
    assert len(yamls) >= 4 and jsons
    for page, text in yamls:
        assert isinstance(yaml.safe_load(text), dict), page
    for page, text in jsons:
        for line in text.splitlines():
            assert isinstance(json.loads(line), dict), (page, line)


def composable(args: list[str]) -> tuple[list[str] | None, str]:
    """The overrides to compose for a command line (a sweep's first value of each list), or None and why not."""
    if args and args[0] in NOT_RUNS:
        return None, f"`judgesweep {args[0]}` takes no run config"
    if args and args[0] == "aggregate":
        args = split(args[1:])[1]
    for word in args:
        for mark, why in SKIP.items():
            if word.startswith(mark) if mark == "--" else mark in word:
                return None, why
    overrides = []
    for word in (w for w in args if w != "-m"):
        key, _, value = word.partition("=")
        if "," in value and not re.search(r"[\[\]{}()'\"]", value):
            value = value.split(",")[0]
        overrides.append(f"{key}={value}" if _ else word)
    return overrides, ""


@pytest.fixture(scope="module")
def readme_project(tmp_path_factory) -> Path:
    """`judgesweep init` with the README's own-data example written into it (its dataset YAML and JSON line)."""
    project = tmp_path_factory.mktemp("readme") / "demo"
    init_project.write_project(project)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    dataset = next(text for kind, text in ((m.group(1), m.group(2)) for m in FENCE.finditer(readme))
                   if kind == "yaml" and "name: my_pairs" in text)
    row = next(m.group(2) for m in FENCE.finditer(readme) if m.group(1) == "json")
    (project / "conf" / "dataset" / "my_pairs.yaml").write_text(dataset, encoding="utf-8")
    (project / "data" / "my_pairs.jsonl").write_text(row, encoding="utf-8")
    return project


@pytest.mark.slow  # ~45 composes, ~7 s: `make test` runs it, `make test-fast` not
def test_every_judgesweep_command_line_of_the_docs_composes(readme_project, monkeypatch) -> None:
    """Each command is composed as a run composes it and its values checked (not run: what a run does is tested
    elsewhere). README.md's lines are composed from a `judgesweep init` project holding its example dataset."""
    monkeypatch.chdir(readme_project)
    checked, skipped = 0, []
    for page, args in commands():
        overrides, why = composable(args)
        if overrides is None:
            skipped.append(f"{page.name}: judgesweep {' '.join(args)} ({why})")
            continue
        config_dir = str(readme_project / "conf") if page.name == "README.md" else str(REPO / "conf")
        dcfg, _ = compose_config(overrides, config_dir)
        cfg = OmegaConf.to_object(dcfg)
        check_values(cfg)  # type: ignore[arg-type]
        check_addresses(cfg)  # type: ignore[arg-type]
        checked += 1
    print("\n".join(["left out:", *skipped]))
    assert checked >= 30 and checked > 2 * len(skipped)


def test_the_readme_example_on_your_own_data_dry_runs_without_a_key(readme_project, monkeypatch, capsys) -> None:
    """README "Your own data and your own model": its JSONL row and dataset YAML in a `judgesweep init` project,
    judged by gpt4o_mini as a dry run: rendered and priced, both orders, no key and no call."""
    import runner

    monkeypatch.chdir(readme_project)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outcome = runner.run_experiment(["dataset=my_pairs", "judge=gpt4o_mini", "dry_run=true", "tracking=off",
                                     f"output_dir={readme_project / 'outputs' / 'dry'}"],
                                    config_dir=readme_project / "conf")
    assert outcome is None
    out = capsys.readouterr().out
    assert "calls 2\n" in out and "cost: prompts $" in out
