"""No module under tests/ imports a test module (tests/**/test_*.py): what several modules share lives where shared
things live (tests/builders.py, tests/fakes/, tests/integration/shared.py, a conftest.py), so a test module can be
renamed, split or run alone without breaking another, and importing one never collects another's tests.

Every import counts: module-level ones, imports inside a function or a fixture, ``if TYPE_CHECKING:`` ones,
absolute (``from tests.integration.test_x import y``, ``import tests.integration.test_x``,
``from tests.integration import test_x``) and relative (``from .test_x import y``, ``from . import test_x``). The
source is read with ast: nothing is imported and no process started.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` (under ``root``, the directory that holds the tests package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def names_of_test_modules(tests: Path) -> set[str]:
    """The dotted names of the test modules under the ``tests`` package directory."""
    return {module_name(path, tests.parent) for path in tests.rglob("test_*.py")}


def imported_names(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool) -> list[str]:
    """Every module name the import statement ``node`` in module ``importer`` may import: the module itself and, for
    ``from X import a``, ``X.a`` too (``a`` may be a submodule). Relative imports resolved as Python resolves them."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        anchor = ".".join(package[:len(package) - node.level + 1])
        base = f"{anchor}.{base}" if base else anchor
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def imports_of_test_modules(source: str, importer: str, test_modules: set[str],
                            is_package: bool = False) -> list[tuple[int, str]]:
    """(line, test module) for each import in ``source`` (module ``importer``) of a test module other than itself."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in dict.fromkeys(imported_names(node, importer, is_package)):
                if name in test_modules and name != importer:
                    found.append((node.lineno, name))
    return sorted(found)


def test_no_module_under_tests_imports_a_test_module() -> None:
    test_modules = names_of_test_modules(TESTS)
    assert len(test_modules) > 100  # the glob found them
    found = [f"{path.relative_to(TESTS.parent)}:{line} imports {name}"
             for path in sorted(TESTS.rglob("*.py"))
             for line, name in imports_of_test_modules(path.read_text(encoding="utf-8"),
                                                       module_name(path, TESTS.parent), test_modules,
                                                       is_package=path.name == "__init__.py")]
    assert found == [], "move what they share to tests/builders.py, tests/integration/shared.py, tests/fakes/ or a " \
                        "conftest.py:\n" + "\n".join(found)


def test_every_form_of_importing_a_test_module_is_found() -> None:
    test_modules = {"tests.integration.test_a", "tests.integration.test_b", "tests.unit.test_c"}
    source = "\n".join([
        "from tests.integration.test_a import helper",  # 1: absolute, from
        "import tests.unit.test_c",  # 2: absolute, import
        "from tests.integration import test_a",  # 3: the module as a name of its package
        "from .test_a import helper",  # 4: relative
        "from . import test_a, conftest",  # 5: relative, the module as a name
        "from ..unit.test_c import X",  # 6: relative, up a package
        "def f():",
        "    from tests.integration.test_a import helper",  # 8: inside a function
        "from tests.integration.test_b import itself",  # 9: the module's own name: not another module
        "from tests.integration.conftest import live_judge",  # 10: not a test module
        "from tests.builders import to_run_config",  # 11: not a test module
        "import test_a",  # 12: no such top-level module here
    ])
    assert imports_of_test_modules(source, "tests.integration.test_b", test_modules) == [
        (1, "tests.integration.test_a"), (2, "tests.unit.test_c"), (3, "tests.integration.test_a"),
        (4, "tests.integration.test_a"), (5, "tests.integration.test_a"), (6, "tests.unit.test_c"),
        (8, "tests.integration.test_a")]
    # in a package's __init__, "." is the package itself
    assert imports_of_test_modules("from .test_a import x", "tests.integration", test_modules, is_package=True) == [
        (1, "tests.integration.test_a")]
