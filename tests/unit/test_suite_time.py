"""benchmarks/suite_time.py (`make test-time`): the pytest plugin's row per test and what the rows say."""

from __future__ import annotations

import pytest

from benchmarks.suite_time import CPU_DIR_VAR, read_rows, row, split

pytest_plugins = ["pytester"]


@pytest.mark.slow  # its second test starts a python process
def test_the_plugin_writes_each_tests_own_cpu_and_the_cpu_of_the_processes_it_waited_for(pytester, tmp_path,
                                                                                        monkeypatch) -> None:
    monkeypatch.setenv(CPU_DIR_VAR, str(tmp_path))
    pytester.makepyfile(test_two="""
        import subprocess, sys

        def test_spins():
            sum(range(2_000_000))

        def test_starts_a_process():
            subprocess.run([sys.executable, "-c", "sum(range(5_000_000))"], check=True)
        """)
    pytester.runpytest_inprocess("-p", "benchmarks.suite_time").assert_outcomes(passed=2)
    rows = {r["test"]: r for r in read_rows(tmp_path)}
    assert set(rows) == {"test_two.py::test_spins", "test_two.py::test_starts_a_process"}
    assert rows["test_two.py::test_spins"]["own_cpu_s"] > 0
    assert rows["test_two.py::test_spins"]["child_cpu_s"] == 0
    assert rows["test_two.py::test_starts_a_process"]["child_cpu_s"] > 0


def test_without_the_variable_the_plugin_writes_nothing(pytester, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(CPU_DIR_VAR, raising=False)
    pytester.makepyfile(test_one="def test_nothing():\n    pass\n")
    pytester.runpytest_inprocess("-p", "benchmarks.suite_time").assert_outcomes(passed=1)
    assert read_rows(tmp_path) == []


def test_the_split_sums_own_and_child_cpu_and_divides_by_the_cores() -> None:
    rows = [{"test": "tests/a.py::t1", "wall_s": 10.0, "own_cpu_s": 1.0, "child_cpu_s": 8.0},
            {"test": "tests/a.py::t2", "wall_s": 2.0, "own_cpu_s": 2.0, "child_cpu_s": 0.0},
            {"test": "tests/b.py::t1", "wall_s": 5.0, "own_cpu_s": 5.0, "child_cpu_s": 0.0}]
    s = split(rows, cores=2, top=1)
    assert (s["tests"], s["own_cpu_s"], s["child_cpu_s"]) == (3, 8.0, 8.0)
    assert (s["floor_s"], s["child_floor_s"]) == (8.0, 4.0)
    assert s["modules"] == [{"module": "tests/a.py", "wall_s": 12.0, "own_cpu_s": 3.0, "child_cpu_s": 8.0,
                             "tests": 2}]


def test_a_row_names_the_target_commit_time_cpu_yardstick_count_and_load() -> None:
    run = {"wall_s": 365.4, "cpu_s": 702.2, "pytest": "2253 passed, 3 skipped in 360.1s", "load_before": 0.5,
           "load_after": 1.25}
    line = row("make test", "abc1234", run, 3.4)
    assert line.startswith("| `make test` | ") and ", abc1234 | 6 min 5 s, 702 CPU-s (`import litellm` 3.40 CPU-s)" \
        " | 2253 passed | 0.50 -> 1.25 |" in line
