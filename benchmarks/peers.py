"""The peers of the ``tracking`` scenario, promptfoo and inspect-ai, installed by benchmarks/peers.sh into
benchmarks/.peers/ (git-ignored; ``PEERS_DIR`` moves it) and driven here on the same fake server and the same
request as judgesweep (benchmarks/request.py). Absent peers are reported "not measured" with the install command.

Both run offline: no telemetry, no update check, no sharing, their state in the scenario's temp dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks.harness import REPO
from benchmarks.request import JUDGE_PARAMS, SYSTEM, build_messages, load_rows

PEERS_DIR = Path(os.environ.get("PEERS_DIR") or REPO / "benchmarks" / ".peers")
INSTALL = "bash benchmarks/peers.sh  # promptfoo and inspect-ai into benchmarks/.peers/ (git-ignored)"
PROMPTFOO = PEERS_DIR / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
INSPECT = PEERS_DIR / "inspect-venv" / "bin" / "inspect"
PEERS = ("promptfoo", "inspect_ai")
VERDICT_REGEX = r"\[\[([ABC])\]\]"


def versions() -> dict[str, str | None]:
    """Each peer's installed version, or None when it is not installed (nothing is run to find out)."""
    found: dict[str, str | None] = dict.fromkeys(PEERS)
    package = PEERS_DIR / "promptfoo" / "node_modules" / "promptfoo" / "package.json"
    if PROMPTFOO.exists() and package.is_file():
        found["promptfoo"] = json.loads(package.read_text(encoding="utf-8")).get("version")
    if INSPECT.exists():
        dist = sorted((PEERS_DIR / "inspect-venv").glob("lib/python*/site-packages/inspect_ai-*.dist-info"))
        found["inspect_ai"] = dist[-1].name.removeprefix("inspect_ai-").removesuffix(".dist-info") if dist else "?"
    return found


def write_requests(data: Path, n: int, path: Path) -> Path:
    """``{"id", "system", "user"}`` for the first ``n`` rows of ``data``: the request every contender sends."""
    with path.open("w", encoding="utf-8") as fh:
        for k, row in enumerate(load_rows(str(data), n)):
            system, user = (m["content"] for m in build_messages(row))
            fh.write(json.dumps({"id": row.get("id", k), "system": system, "user": user}) + "\n")
    return path


def _rows(requests: Path, n: int) -> list[dict]:
    with requests.open(encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(n), fh, strict=False)]


def promptfoo_config(requests: Path, n: int, api_base: str, path: Path) -> Path:
    """A promptfoo config (JSON is YAML): ``openai:chat:fake-judge`` at ``api_base``, one test per request, the
    messages built by benchmarks/peer_promptfoo_prompt.js from the test's vars, the verdict checked by a regex."""
    config = {
        "description": "judgesweep bench: tracking scenario peer",
        "prompts": [f"file://{REPO / 'benchmarks' / 'peer_promptfoo_prompt.js'}"],
        "providers": [{"id": "openai:chat:fake-judge",
                       "config": {"apiBaseUrl": api_base, "apiKey": "x", "temperature": JUDGE_PARAMS["temperature"],
                                  "max_tokens": JUDGE_PARAMS["max_tokens"], "seed": JUDGE_PARAMS["seed"]}}],
        "defaultTest": {"vars": {"system": SYSTEM}, "assert": [{"type": "regex", "value": VERDICT_REGEX}]},
        "tests": [{"vars": {"user": r["user"]}} for r in _rows(requests, n)],
        "sharing": False,
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def promptfoo_cmd(config: Path, out: Path, concurrency: int = 32) -> list[str]:
    """``promptfoo eval``: no cache, ``concurrency`` at once, no progress bar or table, results to ``out``."""
    return [str(PROMPTFOO), "eval", "-c", str(config), "--no-cache", "--max-concurrency", str(concurrency),
            "--no-progress-bar", "--no-table", "-o", str(out)]


def promptfoo_env(home: Path) -> dict[str, str]:
    """Offline: no telemetry, update check or sharing; its database and logs in ``home`` (not ~/.promptfoo)."""
    return {"PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1", "PROMPTFOO_DISABLE_SHARING": "1",
            "PROMPTFOO_DISABLE_REMOTE_GENERATION": "true", "PROMPTFOO_SELF_HOSTED": "1",
            "PROMPTFOO_CONFIG_DIR": str(home), "PROMPTFOO_CACHE_ENABLED": "false", "OPENAI_API_KEY": "x",
            "DO_NOT_TRACK": "1", "NO_UPDATE_NOTIFIER": "1", "NPM_CONFIG_UPDATE_NOTIFIER": "false", "CI": "1"}


def inspect_cmd(requests: Path, n: int, api_base: str, log_dir: Path, concurrency: int = 32) -> list[str]:
    """``inspect eval`` of benchmarks/peer_inspect_task.py: ``openai-api/fake/fake-judge`` at ``api_base``
    (chat completions), ``n`` samples, ``concurrency`` connections, the log in ``log_dir``."""
    return [str(INSPECT), "eval", "benchmarks/peer_inspect_task.py", "-T", f"requests={requests}",
            "--model", "openai-api/fake/fake-judge", "--model-base-url", api_base, "--limit", str(n),
            "--max-connections", str(concurrency), "--temperature", str(JUDGE_PARAMS["temperature"]),
            "--max-tokens", str(JUDGE_PARAMS["max_tokens"]), "--seed", str(JUDGE_PARAMS["seed"]),
            "--log-dir", str(log_dir), "--display", "none", "--max-retries", "0"]


def inspect_env() -> dict[str, str]:
    """The key its openai-api/fake/ provider reads (its base URL is on the command line)."""
    return {"FAKE_API_KEY": "x", "DO_NOT_TRACK": "1"}
