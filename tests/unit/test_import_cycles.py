"""No import cycle in runner/: the module graph (grimp's, import-linter's own graph library) has no strongly connected
component of more than one module.

Every import counts: module-level ones, imports inside a function (a lazy import still ties the two modules together:
it only moves the cycle from import time to call time) and ``if TYPE_CHECKING:`` ones (a type-only import is still
one module knowing another). The graph is static (grimp reads the source), so the test imports nothing of runner.
"""

from __future__ import annotations

import grimp
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

# Cycles known and not yet removed, as sorted tuples of their modules. Empty: every cycle found was removed.
KNOWN_CYCLES: frozenset[tuple[str, ...]] = frozenset()


def cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """The graph's import cycles: each strongly connected component of more than one module, its modules sorted."""
    modules = sorted(graph.modules)
    index = {name: i for i, name in enumerate(modules)}
    edges = [(index[a], index[b]) for a in modules for b in graph.find_modules_directly_imported_by(a)]
    rows, cols = zip(*edges, strict=True) if edges else ((), ())
    adjacency = csr_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(modules), len(modules)))
    _, labels = connected_components(adjacency, directed=True, connection="strong")
    members: dict[int, list[str]] = {}
    for name, label in zip(modules, labels, strict=True):
        members.setdefault(int(label), []).append(name)
    return sorted(tuple(group) for group in members.values() if len(group) > 1)


def describe(graph: grimp.ImportGraph, cycle: tuple[str, ...]) -> str:
    """Each import inside the cycle with its line, so the failure says which import to remove."""
    lines = [f"cycle of {len(cycle)} modules:"]
    for importer in cycle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & set(cycle)):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']} -> {imported}: {detail['line_contents']}")
    return "\n".join(lines)


def test_runner_has_no_import_cycle() -> None:
    graph = grimp.build_graph("runner", include_external_packages=False)
    found = [c for c in cycles(graph) if c not in KNOWN_CYCLES]
    assert found == [], "\n".join(describe(graph, c) for c in found)


def test_a_known_cycle_is_still_a_cycle() -> None:
    """An entry of KNOWN_CYCLES that is gone must leave the list (it would hide a new cycle of the same modules)."""
    graph = grimp.build_graph("runner", include_external_packages=False)
    assert KNOWN_CYCLES <= set(cycles(graph))


def test_a_lazy_or_type_only_import_that_closes_a_loop_is_found() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.base", "pkg.impl", "pkg.leaf", "pkg.types", "pkg.user"):
        graph.add_module(name)
    graph.add_import(importer="pkg.impl", imported="pkg.base", line_number=1, line_contents="from pkg.base import X")
    graph.add_import(importer="pkg.base", imported="pkg.impl", line_number=9, line_contents="    import pkg.impl")
    graph.add_import(importer="pkg.impl", imported="pkg.leaf", line_number=2, line_contents="import pkg.leaf")
    graph.add_import(importer="pkg.user", imported="pkg.types", line_number=3, line_contents="from pkg.types import T")
    graph.add_import(importer="pkg.types", imported="pkg.user", line_number=5,
                     line_contents="    from pkg.user import U")

    assert cycles(graph) == [("pkg.base", "pkg.impl"), ("pkg.types", "pkg.user")]
    assert "pkg.base:9 -> pkg.impl:     import pkg.impl" in describe(graph, ("pkg.base", "pkg.impl"))
