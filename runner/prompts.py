"""Prompt templates: loading, checking and rendering them into chat messages.

A template is a Jinja2 file in prompts/ whose ``system`` and ``user`` blocks become chat messages.
Dataset fields and candidate outputs are passed as variables, so their text reaches the judge
verbatim: Jinja never renders a variable's value as a template.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2 import meta

from runner.types import Message

ROLES = ("system", "user")
TEMPLATE_SUFFIX = ".j2"


class TemplateError(ValueError):
    """A template is missing, malformed, or needs variables nobody provides."""


@dataclass(frozen=True)
class Template:
    """A loaded prompt template.

    Attributes:
        name: The file stem (equals the conf/prompt ``template`` value).
        path: Where it was read from.
        source: The file's text.
        sha256: Hash of the file's bytes, recorded with every run.
        variables: Every variable the template reads.
    """

    name: str
    path: Path
    source: str
    sha256: str
    variables: frozenset[str]
    _compiled: jinja2.Template

    def render(self, variables: Mapping[str, str]) -> tuple[Message, ...]:
        """Render each role block into one message with stripped content.

        Raises:
            TemplateError: If a variable the template reads is missing.
        """
        missing = self.variables - set(variables)
        if missing:
            raise TemplateError(f"template {self.path}: missing variable(s) {sorted(missing)}")
        context = self._compiled.new_context(dict(variables))
        messages = []
        for role in ROLES:
            block = self._compiled.blocks.get(role)
            if block is None:
                continue
            messages.append(Message(role=role, content="".join(block(context)).strip()))
        return tuple(messages)


def _environment(directory: Path) -> jinja2.Environment:
    # autoescape off: prompts are plain text, and escaping would change what the judge reads.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


def load_template(directory: Path, name: str) -> Template:
    """Load ``<directory>/<name>.j2`` and check it has a ``user`` block.

    Raises:
        TemplateError: If the file is missing, does not parse, or has no user block.
    """
    path = directory / f"{name}{TEMPLATE_SUFFIX}"
    if not path.is_file():
        known = sorted(p.stem for p in directory.glob(f"*{TEMPLATE_SUFFIX}"))
        raise TemplateError(f"prompt template {path} not found; templates in {directory}: {known}")
    source = path.read_text(encoding="utf-8")
    env = _environment(directory)
    try:
        ast = env.parse(source)
        compiled = env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {path}, line {exc.lineno}: {exc.message}") from None
    if "user" not in compiled.blocks:
        raise TemplateError(f"template {path} has no {{% block user %}}")
    return Template(
        name=name,
        path=path,
        source=source,
        sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        variables=frozenset(meta.find_undeclared_variables(ast)),
        _compiled=compiled,
    )


def check_variables(template: Template, provided: set[str], where: str) -> None:
    """Fail before any call when the template reads a variable nobody provides.

    Args:
        template: The loaded template.
        provided: Variable names the dataset mapping and the runner will supply.
        where: What provides them (named in the error, e.g. the dataset config).

    Raises:
        TemplateError: Naming the template file and each missing variable.
    """
    missing = template.variables - provided
    if missing:
        raise TemplateError(
            f"template {template.path} uses variable(s) {sorted(missing)} that {where} does not provide "
            f"(provided: {sorted(provided)})"
        )
