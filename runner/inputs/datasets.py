"""Dataset loading: JSONL or JSON rows mapped onto template variables, candidates and gold labels.

Every problem is reported with the file and line (JSONL) or row index (JSON) it came from, before any
judge call is made. A bad row either stops the load (``on_bad_row: error``) or is left out and listed
(``on_bad_row: skip``); a file that is missing or not a list of rows always stops it. Reading the file is
:mod:`runner.inputs.rows`, what one row becomes :mod:`runner.inputs.items`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from runner.core import locations
from runner.core.choices import OnBadRow, PromptMode
from runner.core.config import DatasetConfig
from runner.core.errors import DatasetError
from runner.core.types import TIE, Item
from runner.inputs.items import Shape, annotator_labels, to_item
from runner.inputs.rows import RowError, read_rows
from runner.inputs.splits import check_split, split_of

__all__ = ["ItemRef", "LoadedDataset", "SkippedRow", "load_items", "resolve_path"]

PKG_PREFIX = "pkg://"
_PAIRWISE = Shape()  # the default shape: two candidates per row


@dataclass(frozen=True)
class SkippedRow:
    """A row left out under ``on_bad_row: skip``.

    Attributes:
        where: ``file:line`` (JSONL) or ``file[row i]`` (JSON).
        reason: Why it was left out, e.g. "missing field 'input' (fields present: [...])".
    """

    where: str
    reason: str


@dataclass(frozen=True, slots=True)
class ItemRef:
    """What a run keeps of every item while it streams the texts: id, labels and location."""

    id: str
    gold: str | None
    source: str
    tags: tuple[str, ...] = ()
    category: str | None = None
    human_score: float | None = None
    lengths: tuple[int, ...] = ()  # characters of each candidate as loaded (length-bias statistics)
    annotations: tuple[str | None, ...] = ()  # each human annotator's label (dataset.annotator_fields)


@dataclass(frozen=True)
class LoadedDataset:
    """A validated dataset. Texts are not kept: :meth:`iter_items` reads them again, one row at a time,
    so a dataset of any size costs memory only for its ids.

    Attributes:
        refs: The rows that loaded, in file order (at most max_items).
        skipped: Bad rows left out (always empty with ``on_bad_row: error``), in file order.
    """

    refs: tuple[ItemRef, ...]
    skipped: tuple[SkippedRow, ...]
    cfg: DatasetConfig
    path: Path
    _ordinals: frozenset[int]
    shape: Shape = Shape()

    def iter_items(self) -> Iterator[Item]:
        """Yield the loaded items in file order, reading the file again."""
        last = max(self._ordinals)
        for ordinal, (where, row) in enumerate(read_rows(self.path), start=1):
            if ordinal in self._ordinals:
                yield to_item(row, self.cfg, where, ordinal, self.shape)
            if ordinal >= last:
                return

    def only(self, ids: Collection[str]) -> LoadedDataset:
        """The same dataset cut to the items whose id is in ``ids``, in file order (an aborted run's summary covers
        the items it judged)."""
        kept = [(o, r) for o, r in zip(sorted(self._ordinals), self.refs, strict=True) if r.id in ids]
        return replace(self, refs=tuple(r for _, r in kept), _ordinals=frozenset(o for o, _ in kept))

    @property
    def items(self) -> list[Item]:
        """Every loaded item in memory (convenient for small datasets and tests)."""
        return list(self.iter_items())


def resolve_path(path: str, roots: Path | Sequence[Path]) -> Path:
    """Resolve a dataset path: ``pkg://runner/...`` (shipped data), absolute, or relative to the first of ``roots``
    where it exists (the first root's when it exists nowhere, so an error names that place)."""
    if path.startswith(PKG_PREFIX):
        package, _, rest = path[len(PKG_PREFIX) :].partition("/")
        return Path(str(resources.files(package).joinpath(rest)))
    found = locations.candidates(path, [roots] if isinstance(roots, Path) else roots)
    return next((p for p in found if p.exists()), found[0])


def check_systems(cfg: DatasetConfig, shape: Shape) -> None:
    """The dataset config names the systems its mode needs.

    Raises:
        DatasetError: Pairwise without two distinct systems (neither called "tie"), or pointwise
            without a candidate while no generator makes one.
    """
    if shape.mode is PromptMode.pairwise:
        if cfg.ours is None or cfg.baseline is None:
            raise DatasetError(f"dataset {cfg.name}: a pairwise prompt needs dataset.ours and dataset.baseline")
        if cfg.ours.name == cfg.baseline.name or TIE in (cfg.ours.name, cfg.baseline.name):
            raise DatasetError(f"dataset {cfg.name}: system names must differ and not be {TIE!r}")
    elif shape.with_candidate and cfg.candidate is None:
        raise DatasetError(f"dataset {cfg.name}: a pointwise prompt needs dataset.candidate (the output to judge) "
                           "or a generator to write it")


def load_items(
    cfg: DatasetConfig,
    path: Path,
    max_items: int | None = None,
    *,
    on_bad_row: OnBadRow = OnBadRow.error,
    shape: Shape = _PAIRWISE,
) -> LoadedDataset:
    """Load and validate every row of a dataset.

    Args:
        cfg: The dataset config (field mapping, systems, gold, tags, category, human score).
        path: The resolved dataset file (``.jsonl``, or ``.json`` holding a list or {"examples": [...]}).
        max_items: Keep only the first N items that load (skipped rows do not count).
        on_bad_row: ``error`` stops at the first bad row; ``skip`` leaves out rows that are not valid
            JSON, miss a field, hold a wrong type or an unknown gold value, or repeat an id, and lists them.
        shape: The mode (pairwise or pointwise) and whether rows carry the candidate output.

    Raises:
        DatasetError: Naming file and line: on the first bad row (``error``), when the file is missing or
            not a list of rows, or when no row loads.
    """
    skip = OnBadRow(on_bad_row) is OnBadRow.skip
    check_systems(cfg, shape)
    check_split(cfg)
    if max_items is not None and max_items < 1:
        raise DatasetError(f"max_items must be >= 1 (got {max_items})")
    refs: list[ItemRef] = []
    ordinals: set[int] = set()
    skipped: list[SkippedRow] = []
    seen: dict[str, str] = {}
    for ordinal, (where, row) in enumerate(read_rows(path), start=1):
        try:
            item = to_item(row, cfg, where, ordinal, shape)
            annotations = annotator_labels(row, cfg)
            if item.id in seen:
                raise RowError(f"duplicate id {item.id!r} (first at {seen[item.id]})")
        except RowError as exc:
            if not skip:
                raise DatasetError(f"{where}: {exc}") from None
            skipped.append(SkippedRow(where=where, reason=str(exc)))
            continue
        seen[item.id] = where
        if cfg.split is not None and split_of(item.id, cfg) != cfg.split:
            continue
        refs.append(ItemRef(id=item.id, gold=item.gold, source=where, tags=item.tags, category=item.category,
                            human_score=item.human_score, lengths=tuple(len(c.text) for c in item.candidates),
                            annotations=annotations))
        ordinals.add(ordinal)
        if max_items is not None and len(refs) >= max_items:
            break
    if not refs:
        if skipped:
            first = skipped[0]
            raise DatasetError(
                f"dataset file {path}: every row is bad ({len(skipped)} skipped; first {first.where}: {first.reason})"
            )
        raise DatasetError(f"dataset file {path} holds no rows")
    return LoadedDataset(refs=tuple(refs), skipped=tuple(skipped), cfg=cfg, path=path, _ordinals=frozenset(ordinals),
                         shape=shape)
