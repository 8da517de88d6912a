"""A run of the default experiment imports what it uses and nothing else (issue 43: start-up and end of run at the
floor its dependencies set).

One fresh interpreter runs ``python -X importtime -m runner`` (the default experiment as ``make run`` runs it: replayed
GPT-4, default tracking into a sqlite store of this test, figures drawn) and its import tree is read back: each
third-party package is attributed to the import that brought it in, i.e. the module judgesweep's own code imported
(``runner.*`` importing ``sklearn.metrics`` brings pandas: that is sklearn's), or the import made inside a function at
run time. Those packages must be the ones below, each with what the run uses it for: a package a change starts
importing fails here until it is listed with its use (or the import goes). And the run's own process never imports
mlflow: its publishing process does (tests/integration/test_publisher_start.py).

What is asserted is which modules are loaded, never how long anything takes (speed is for benchmarks/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import REPO

pytestmark = pytest.mark.slow

# What judgesweep's own code imports in a default run, and what for.
USED = {
    "hydra": "composes the config (the CLI is a Hydra app)",
    "omegaconf": "the composed config (Hydra's)",
    "antlr4": "Hydra's override grammar, loaded by Hydra when it parses the command line",
    "litellm": "every judge call, token count and price (the replay judge comes through its custom provider)",
    "numpy": "the judgments' columns and every statistic",
    "scipy": "bootstrap intervals (scipy.stats) and the binomial tail (scipy.special)",
    "sklearn": "Cohen's kappa, macro-F1 and the confusion matrix against the gold labels",
    "krippendorff": "Krippendorff's alpha (chance-corrected agreement with gold)",
    "matplotlib": "the report's figures",
    "PIL": "matplotlib's PNG writer loads its image plugins when a figure is saved",
    "jinja2": "the prompt templates",
    "rich": "the console summary's tables",
    "filelock": "the run directory's and the budget ledger's locks",
}
# Imported only where they are installed: Hydra imports every installed launcher plugin's config when it scans for
# plugins (hydra-ray-launcher comes with the dev extras, not with `make run`'s install).
INSTALLED_PLUGINS = {"hydra_plugins"}

# the interpreter's own import machinery (frozen, not in sys.stdlib_module_names)
FROZEN = {"_frozen_importlib", "_frozen_importlib_external"}
ROW = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$")


def entries(importtime: str) -> dict[str, set[str]]:
    """Top-level third-party package -> the modules through which the run brought it in: for each imported module,
    the outermost import on its chain that judgesweep's own code made (the module a ``runner.*`` module imported), or
    the chain's root (an import made inside a function)."""
    rows = [(len(m.group(1)) // 2, m.group(2)) for line in importtime.splitlines() if (m := ROW.match(line))]
    found: dict[str, set[str]] = {}
    for i, (depth, name) in enumerate(rows):
        path = [name]  # this module, then each module that imported it, innermost first (-X importtime prints a
        for later_depth, later in rows[i + 1:]:  # module after everything it imported, one level less indented)
            if later_depth < depth:
                path.append(later)
                depth = later_depth
            if depth == 0:
                break
        entry = next((path[k] for k in range(len(path) - 1)
                      if path[k + 1].startswith("runner.") and not path[k].startswith("runner")), path[-1])
        top = entry.split(".")[0]
        if top.lstrip("_") not in sys.stdlib_module_names and top not in {"runner", "sitecustomize"} | FROZEN:
            found.setdefault(top, set()).add(entry)
    return found


def test_entries_follow_the_import_tree():
    tree = "\n".join(f"import time: 1 | 1 | {'  ' * depth}{name}" for depth, name in [
        (2, "pandas"), (1, "sklearn.utils"), (0, "sklearn.metrics"),  # imported inside a function: sklearn's
        (2, "pydantic"), (1, "litellm"), (0, "runner.llm.client"),  # litellm brought pydantic: litellm's
        (0, "json")])
    assert entries(tree) == {"sklearn": {"sklearn.metrics"}, "litellm": {"litellm"}}


def test_the_default_experiment_imports_only_what_it_uses(tmp_path):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HYDRA_FULL_ERROR": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runner", f"hydra.run.dir={tmp_path / 'run'}",
         f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"tracking.artifact_location={tmp_path / 'art'}",
         f"cache.path={tmp_path / 'cache.sqlite'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "written by publishing process" in proc.stdout + proc.stderr  # the default tracking was on
    assert (Path(tmp_path) / "run" / "report.html").is_file()
    found = entries(proc.stderr)
    unlisted = {top: sorted(via)[:3] for top, via in found.items() if top not in USED.keys() | INSTALLED_PLUGINS}
    assert not unlisted, f"imported by the default run, not listed with a use in USED: {unlisted}"
    unused = USED.keys() - found.keys()
    assert not unused, f"listed in USED, not imported by the default run (drop them): {sorted(unused)}"
    modules = {m.group(2).split(".")[0] for line in proc.stderr.splitlines() if (m := ROW.match(line))}
    assert "mlflow" not in modules
