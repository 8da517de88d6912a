"""Prompt templates: loading, checking and rendering them into chat messages.

A template is a Jinja2 file in prompts/ whose ``system`` and ``user`` blocks become chat messages (a Jinja file
without blocks, or a plain-text ``.txt`` file with ``{placeholders}``, is one user message).
Dataset fields and candidate outputs are passed as variables, so their text reaches the judge
verbatim: Jinja never renders a variable's value as a template. What Jinja cannot stop is a value
that contains the template's own framing lines (``</response_a>``, ``# Output (b):``) and so closes
its block and speaks as the instructions; :func:`runner.inputs.delimiters.neutralize` defangs those inside
inserted values.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2 import meta, nodes

from runner.core.types import Message
from runner.inputs import text_templates as texts
from runner.inputs.delimiters import derive_delimiters, neutralize
from runner.inputs.text_templates import JINJA_SUFFIXES, TEXT_SUFFIXES

logger = logging.getLogger(__name__)

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
        delimiters: The template's framing lines (stripped), derived from its text at load time; any
            occurrence inside an inserted value is neutralized by :meth:`render`.
    """

    name: str
    path: Path
    source: str
    sha256: str
    variables: frozenset[str]
    delimiters: frozenset[str]
    _compiled: jinja2.Template

    def find_delimiters_in(self, value: str) -> list[str]:
        """Return, sorted, each of this template's delimiters that occurs in ``value`` (or a lookalike of it, see
        :func:`neutralize`).

        Lets a caller count how many inserted values :meth:`render` neutralized.
        """
        return sorted(d for d in self.delimiters if neutralize(value, (d,)) != value)

    def render(self, variables: Mapping[str, object], neutralize: bool = True) -> tuple[Message, ...]:
        """Render each role block into one message with stripped content.

        Args:
            variables: Values for every variable the template reads; text is inserted verbatim (other
                values, such as the rubric's criteria, are runner-built and used by the template's logic).
            neutralize: Defang this template's delimiters inside each value (see :func:`neutralize`).
                A value that holds no delimiter is inserted byte-identical either way.

        Raises:
            TemplateError: If a variable the template reads is missing.
        """
        missing = self.variables - set(variables)
        if missing:
            raise TemplateError(f"template {self.path}: missing variable(s) {sorted(missing)}")
        values = _neutralize_values(variables, self.delimiters) if neutralize else dict(variables)
        context = self._compiled.new_context(values)
        messages = []
        for role in ROLES:
            block = self._compiled.blocks.get(role)
            if block is None:
                continue
            messages.append(Message(role=role, content="".join(block(context)).strip()))
        return tuple(messages)


def _neutralize_values(variables: Mapping[str, object], delimiters: frozenset[str]) -> dict[str, object]:
    # Only text is data from outside; runner-built values (the rubric's criteria list) pass through.
    return {name: neutralize(value, delimiters) if isinstance(value, str) else value
            for name, value in variables.items()}


def _environment(directories: Sequence[Path]) -> jinja2.Environment:
    # autoescape off: prompts are plain text, and escaping would change what the judge reads.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in directories]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


def _find(dirs: Sequence[Path], name: str) -> Path:
    """The template file ``name`` stands for: ``<name>.j2`` or ``<name>.txt`` (or ``name`` itself when it has one
    of the suffixes) in the first directory that holds one."""
    suffixes = JINJA_SUFFIXES + TEXT_SUFFIXES
    names = [name] if name.endswith(suffixes) else [f"{name}{suffix}" for suffix in suffixes]
    for directory in dirs:
        found = [directory / n for n in names if (directory / n).is_file()]
        if len(found) > 1:
            raise TemplateError(f"prompt template {name!r} is ambiguous: {[str(p) for p in found]}; "
                                "keep one of them, or name the file with its suffix")
        if found:
            return found[0]
    known = sorted({p.name if p.suffix != TEMPLATE_SUFFIX else p.stem for directory in dirs
                    for suffix in suffixes for p in directory.glob(f"*{suffix}")})
    where = ", ".join(str(d) for d in dirs)
    raise TemplateError(f"prompt template {dirs[0] / names[0]} not found; templates in {where}: {known}")


def _jinja_source(path: Path, source: str) -> str:
    """The Jinja source of the file: itself, or a plain-text file's translation (one user message)."""
    if path.suffix not in TEXT_SUFFIXES:
        return source
    try:
        return texts.txt_to_jinja(source, path)
    except texts.PlainTextError as exc:
        raise TemplateError(str(exc)) from None


def load_template(directories: Path | Sequence[Path], name: str) -> Template:
    """Load the template ``name`` from the first of ``directories`` that holds it (a user's prompts/ before the
    packaged one), check it has a ``user`` block and derive its delimiters. ``{% extends %}`` and ``{% include %}``
    look in every directory, in the same order.

    ``<name>.j2`` is Jinja with ``system`` and ``user`` blocks; a Jinja file without any block is one user message;
    ``<name>.txt`` is plain text with ``str.format`` placeholders (``{question}``), one user message, or, when it
    has none but holds Jinja syntax, Jinja (runner.inputs.text_templates.txt_to_jinja).

    Raises:
        TemplateError: If no directory holds the file, or it does not parse, or has no user block.
    """
    dirs = [directories] if isinstance(directories, Path) else list(directories)
    path = _find(dirs, name)
    source = path.read_text(encoding="utf-8")
    env = _environment(dirs)
    jinja_source = _jinja_source(path, source)
    try:
        ast = env.parse(jinja_source)
        if next(ast.find_all((nodes.Block, nodes.Extends)), None) is None:  # the users' own Jinja prompt: one message
            jinja_source = texts.wrap_blockless(jinja_source)
            ast = env.parse(jinja_source)
        compiled = env.from_string(jinja_source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {path}, line {exc.lineno}: {exc.message}") from None
    if "user" not in compiled.blocks:
        raise TemplateError(f"template {path} has no {{% block user %}}")
    delimiters = derive_delimiters(ast)
    logger.debug("template %s: delimiters %s", path, sorted(delimiters))
    return Template(
        name=name,
        path=path,
        source=source,
        sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        variables=frozenset(meta.find_undeclared_variables(ast)),
        delimiters=delimiters,
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
