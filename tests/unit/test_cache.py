"""Unit tests for runner.storage.cache: key canonicalisation, the SQLite response cache and its modes."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runner.core.choices import CacheMode
from runner.core.types import JudgeResponse, Message, Secret
from runner.storage.cache import CacheError, ResponseCache
from runner.storage.keys import cache_key

MODEL = "openai/gpt-4o-mini"
API_BASE = "http://127.0.0.1:8000/v1"
MESSAGES = (Message("system", "judge well"), Message("user", "Which is better? «Output (a)» or b"))
PARAMS: dict[str, Any] = {
    "temperature": 0.0,
    "max_tokens": 512,
    "seed": 7,
    "response_format": {"type": "json_object", "strict": True},
}


def key(**overrides: Any) -> str:
    args: dict[str, Any] = {
        "model": MODEL, "api_base": API_BASE, "messages": MESSAGES, "params": PARAMS, "repeat": 0,
    }
    args.update(overrides)
    return cache_key(**args)


def answer(text: str | None = "Output (a) — sûr. [[A]]", cost: float | None = 0.00042) -> JudgeResponse:
    return JudgeResponse(
        text=text, finish_reason="stop", prompt_tokens=120, completion_tokens=3,
        cost_usd=cost, latency_s=0.123456789,
    )


def served(response: JudgeResponse) -> JudgeResponse:
    """What a hit returns for a stored ``response``: the same answer, marked as served by the cache."""
    return replace(response, attempts=0, rate_limited=0, source="cache")


def row_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM responses").fetchone()[0]


# --- cache_key ---------------------------------------------------------------------------------


def test_key_is_sha256_of_the_canonical_json() -> None:
    blob = (
        '{"api_base":"http://127.0.0.1:8000/v1",'
        '"messages":[{"content":"judge well","role":"system"},'
        '{"content":"Which is better? «Output (a)» or b","role":"user"}],'
        '"model":"openai/gpt-4o-mini",'
        '"params":{"max_tokens":512,"response_format":{"strict":true,"type":"json_object"},'
        '"seed":7,"temperature":0.0},'
        '"repeat":0}'
    )
    assert json.loads(blob)  # the hand-written canonical form is valid JSON
    assert key() == hashlib.sha256(blob.encode("utf-8")).hexdigest()
    assert key() == key()


VARIANTS: dict[str, dict[str, Any]] = {
    "model": {"model": "openai/gpt-4o"},
    "api_base": {"api_base": "http://127.0.0.1:8001/v1"},
    "api_base_none": {"api_base": None},
    "message0_role": {"messages": (Message("user", "judge well"), MESSAGES[1])},
    "message0_content": {"messages": (Message("system", "judge well!"), MESSAGES[1])},
    "message1_role": {"messages": (MESSAGES[0], Message("assistant", MESSAGES[1].content))},
    "message1_content": {"messages": (MESSAGES[0], Message("user", "Which is better? b or a"))},
    "message_added": {"messages": (*MESSAGES, Message("user", ""))},
    "message_order": {"messages": tuple(reversed(MESSAGES))},
    "temperature": {"params": {**PARAMS, "temperature": 0.7}},
    "max_tokens": {"params": {**PARAMS, "max_tokens": 513}},
    "seed": {"params": {**PARAMS, "seed": 8}},
    "seed_none": {"params": {**PARAMS, "seed": None}},
    "response_format": {"params": {**PARAMS, "response_format": {"type": "text"}}},
    "param_added": {"params": {**PARAMS, "top_p": 1.0}},
    "param_removed": {"params": {k: v for k, v in PARAMS.items() if k != "seed"}},
    "repeat": {"repeat": 1},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_part_of_the_request_changes_the_key(name: str) -> None:
    assert key(**VARIANTS[name]) != key()


def test_all_variants_give_distinct_keys() -> None:
    keys = {key(**overrides) for overrides in VARIANTS.values()} | {key()}
    assert len(keys) == len(VARIANTS) + 1


def test_dict_order_does_not_change_the_key() -> None:
    reordered = {
        "response_format": {"strict": True, "type": "json_object"},
        "seed": 7,
        "max_tokens": 512,
        "temperature": 0.0,
    }
    assert list(reordered) != list(PARAMS)
    assert key(params=reordered) == key()
    assert key(messages=list(MESSAGES)) == key()  # any sequence of messages


def test_trailing_slash_of_api_base_does_not_change_the_key() -> None:
    assert key(api_base=API_BASE + "/") == key()
    assert key(api_base="") == key(api_base=None)


def test_credentials_and_unserialisable_params_are_refused() -> None:
    with pytest.raises(ValueError, match="api_key"):
        key(params={**PARAMS, "api_key": "sk-canary"})
    with pytest.raises(TypeError, match="Secret"):
        key(params={**PARAMS, "extra": Secret("sk-canary")})
    with pytest.raises(TypeError, match="JSON-serialisable"):
        key(params={**PARAMS, "stop": {"a", "b"}})


def test_enum_params_key_like_their_values() -> None:
    assert key(params={**PARAMS, "mode": CacheMode.off}) == key(params={**PARAMS, "mode": "off"})


# --- ResponseCache -----------------------------------------------------------------------------


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "cache.sqlite"
    full = replace(answer(), attempts=3, rate_limited=2, source="call")
    bare = JudgeResponse(text=None, finish_reason=None, prompt_tokens=0, completion_tokens=0,
                         cost_usd=None, latency_s=0.0)
    with ResponseCache(path, CacheMode.read_write) as cache:
        cache.put("full", full)
        cache.put("bare", bare)
        assert cache.get("full") == served(full)
        assert cache.get("bare") == served(bare)
        hit = cache.get("full")
        assert hit is not None and (hit.source, hit.attempts, hit.rate_limited) == ("cache", 0, 0)
    with ResponseCache(path, CacheMode.read_write) as reopened:  # persisted, not just in memory
        assert reopened.get("full") == served(full)
        assert reopened.get("bare") == served(bare)


def test_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path, CacheMode.read_write) as cache:
        cache.put("k", answer())
        with sqlite3.connect(path) as other:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize(
    "failed",
    [
        JudgeResponse(text=None, error_type="RateLimitError", error="429 Too Many Requests"),
        JudgeResponse(text="partial", error_type="Timeout", error="timed out", cost_usd=0.1),
        JudgeResponse(text=None, error="no error_type but an error"),
    ],
)
def test_errors_are_never_cached(tmp_path: Path, failed: JudgeResponse) -> None:
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path, CacheMode.read_write) as cache:
        cache.put("k", failed)
        assert cache.get("k") is None
        assert cache.writes == 0
    assert row_count(path) == 0


@pytest.mark.parametrize("noted", [replace(answer(), notes=("substituted: 1 lone surrogate(s) in the text replaced",)),
                                   replace(answer(), tokens_known=False, prompt_tokens=0, completion_tokens=0)])
def test_an_answer_kept_with_a_note_is_not_cached(tmp_path: Path, noted: JudgeResponse) -> None:
    """The cache has no column for a note or unknown tokens: a hit would serve the answer without them."""
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path, CacheMode.read_write) as cache:
        cache.put("k", noted)
        assert cache.get("k") is None and cache.writes == 0


def test_first_write_wins(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first, second = answer("first"), answer("second", cost=1.0)
    with ResponseCache(path, CacheMode.read_write) as cache:
        cache.put("k", first)
        cache.put("k", second)
        assert cache.writes == 1
        assert cache.get("k") == served(first)
    with ResponseCache(path, CacheMode.read_write) as other:
        other.put("k", second)
        assert other.writes == 0
        assert other.get("k") == served(first)
    assert row_count(path) == 1


def test_stats_count_hits_misses_writes_and_saved_dollars(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "cache.sqlite", CacheMode.read_write) as cache:
        cache.put("paid", answer(cost=0.25))
        cache.put("unpriced", answer(cost=None))
        cache.put("paid2", answer(cost=0.5))
        assert cache.get("paid") is not None
        assert cache.get("paid") is not None
        assert cache.get("unpriced") is not None
        assert cache.get("absent") is None
        assert cache.get("paid2") is not None
        assert (cache.hits, cache.misses, cache.writes) == (4, 1, 3)
        assert cache.saved_usd == pytest.approx(1.0)


def test_read_only_reads_but_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path, CacheMode.read_write) as writer:
        writer.put("old", answer("old"))
    before = path.read_bytes()
    with ResponseCache(path, CacheMode.read_only) as cache:
        assert cache.get("old") == served(answer("old"))
        cache.put("new", answer("new"))
        assert cache.get("new") is None
        assert (cache.hits, cache.misses, cache.writes) == (1, 1, 0)
    assert path.read_bytes() == before
    assert row_count(path) == 1


def test_read_only_sees_rows_another_writer_adds(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with ResponseCache(path, CacheMode.read_write) as writer:
        writer.put("a", answer("a"))
        with ResponseCache(path, CacheMode.read_only) as reader:
            writer.put("b", answer("b"))
            assert reader.get("b") == served(answer("b"))


def test_read_only_on_a_missing_file_misses_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "cache.sqlite"
    with ResponseCache(path, CacheMode.read_only) as cache:
        assert cache.get("k") is None
        cache.put("k", answer())
        assert (cache.hits, cache.misses, cache.writes) == (0, 1, 0)
    assert not path.parent.exists()


def test_off_never_touches_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "cache.sqlite"
    with ResponseCache(path, CacheMode.off) as cache:
        cache.put("k", answer())
        assert cache.get("k") is None
        assert (cache.hits, cache.misses, cache.writes, cache.saved_usd) == (0, 0, 0, 0.0)
    assert not path.parent.exists()


def test_mode_may_be_given_as_its_string(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite", "off")  # type: ignore[arg-type]
    assert cache.mode is CacheMode.off


@pytest.mark.parametrize("mode", [CacheMode.read_write, CacheMode.read_only])
def test_a_corrupt_file_is_a_cache_error_naming_the_path(tmp_path: Path, mode: CacheMode) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database\n" * 100)
    with pytest.raises(CacheError, match="cache.sqlite") as info:
        ResponseCache(path, mode)
    assert str(path) in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_an_unopenable_path_is_a_cache_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.mkdir()  # a directory where the file should be
    with pytest.raises(CacheError) as info:
        ResponseCache(path, CacheMode.read_write)
    assert str(path) in str(info.value)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    ResponseCache(path, CacheMode.read_write).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(CacheError, match="schema version 99"):
        ResponseCache(path, CacheMode.read_only)


def test_a_closed_cache_refuses_use(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite", CacheMode.read_write)
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(CacheError, match="closed"):
        cache.get("k")
    with pytest.raises(CacheError, match="closed"):
        cache.put("k", answer())


def test_ten_thousand_puts_and_gets(tmp_path: Path) -> None:
    # Speed is measured (pytest --durations), never asserted; this checks correctness at volume.
    path = tmp_path / "cache.sqlite"
    keys = [key(repeat=i) for i in range(10_000)]
    with ResponseCache(path, CacheMode.read_write) as cache:
        for i, k in enumerate(keys):
            cache.put(k, answer(f"answer {i}", cost=0.001))
        for i, k in enumerate(keys):
            got = cache.get(k)
            assert got is not None and got.text == f"answer {i}"
        assert (cache.hits, cache.misses, cache.writes) == (10_000, 0, 10_000)
        assert cache.saved_usd == pytest.approx(10.0)
    assert row_count(path) == 10_000


def _put_many(path: Path, prefix: str, count: int, barrier: Any) -> None:
    """Child process body: open its own cache and write ``count`` distinct keys."""
    barrier.wait(timeout=60)  # start writing at the same moment as the other process
    with ResponseCache(path, CacheMode.read_write) as cache:
        for i in range(count):
            cache.put(f"{prefix}-{i}", answer(f"{prefix} {i}"))
        if cache.writes != count:
            raise AssertionError(f"{prefix}: wrote {cache.writes} of {count}")


@pytest.mark.slow  # two spawned python processes
def test_two_processes_write_the_same_file_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "cache.sqlite"  # neither the file nor its directory exists yet
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    workers = [context.Process(target=_put_many, args=(path, p, 500, barrier)) for p in ("p1", "p2")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    with ResponseCache(path, CacheMode.read_only) as cache:
        for prefix in ("p1", "p2"):
            for i in range(500):
                assert cache.get(f"{prefix}-{i}") == served(answer(f"{prefix} {i}"))
        assert cache.hits == 1000
    assert row_count(path) == 1000
