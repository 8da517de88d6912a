"""Hand-built records and configs that several test modules use, in one place (their fixtures are in
tests/conftest.py): composed RunConfigs, pairwise and pointwise judgments, item refs, the round trip of a report
document, an event loop on virtual time. Nothing here runs a judge or touches a socket. What only integration
modules share (overrides for the loopback server, reply policies, published numbers) is in
tests/integration/shared.py."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import json
import selectors
from pathlib import Path
from typing import Any

from hydra import compose
from omegaconf import OmegaConf

from runner.core.config import CriterionConfig, RubricConfig, RunConfig
from runner.core.types import TIE, JudgeRequest, JudgeResponse, Judgment, Order, Status, Verdict
from runner.inputs.datasets import ItemRef
from runner.judging.scoring import Scoring

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CONF = PROJECT_ROOT / "conf"
PROMPTS = PROJECT_ROOT / "prompts"

OURS, BASE = "ours", "base"
AB, BA = Order.AB, Order.BA


# --- configs (Hydra initialised on conf/: the hydra_conf fixture) ----------------------------------------------


def to_run_config(overrides: list[str]) -> RunConfig:
    """conf/config.yaml with ``overrides``, composed and typed: a copy of the first composition of the same
    overrides in this test process and working directory (a compose is ~0.1 s of CPU; many tests build the same few
    configs)."""
    return copy.deepcopy(_composed(tuple(overrides), str(Path.cwd())))


@functools.cache
def _composed(overrides: tuple[str, ...], cwd: str) -> RunConfig:
    cfg = compose(config_name="config", overrides=list(overrides))
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, RunConfig)
    return obj


def pairwise_cfg(*overrides: str, family: str | None = None) -> RunConfig:
    """The default run (or an ensemble's) on systems named ours / base; ``family``: ours' model family."""
    cfg = to_run_config(list(overrides))
    assert cfg.dataset.ours is not None and cfg.dataset.baseline is not None
    dataset = dataclasses.replace(cfg.dataset, ours=dataclasses.replace(cfg.dataset.ours, name=OURS, family=family),
                                  baseline=dataclasses.replace(cfg.dataset.baseline, name=BASE, family=None))
    return dataclasses.replace(cfg, dataset=dataset, judge=dataclasses.replace(cfg.judge, family="openai"))


def ensemble_cfg(*overrides: str) -> RunConfig:
    """judge=ensemble on a dataset whose systems are named ours / base."""
    cfg = to_run_config(["judge=ensemble", *overrides])
    if cfg.dataset.ours is None or cfg.dataset.baseline is None:
        return cfg
    dataset = dataclasses.replace(cfg.dataset, ours=dataclasses.replace(cfg.dataset.ours, name=OURS),
                                  baseline=dataclasses.replace(cfg.dataset.baseline, name=BASE))
    return dataclasses.replace(cfg, dataset=dataset)


# --- pairwise judgments ---------------------------------------------------------------------------------------


def shown(order: Order, ours: str = OURS, base: str = BASE) -> tuple[str, str]:
    """System names as (A, B) for one order."""
    return (ours, base) if order is AB else (base, ours)


def judgment(item_id: str, order: Order, label: str | None, *, repeat: int = 0, stage: str = "judge",
             status: Status | None = None, ours: str = OURS, base: str = BASE) -> Judgment:
    """A hand-built judgment whose winner follows from the positional ``label`` (None: unscored)."""
    if label is None:
        verdict, winner, status = Verdict(None, "no_match"), None, status or Status.UNSCORED
    else:
        a, b = shown(order, ours, base)
        verdict, winner, status = Verdict(label), {"A": a, "B": b, TIE: TIE}[label], Status.SCORED
    return Judgment(JudgeRequest(item_id, repeat, order, stage, ""), JudgeResponse(text="..."), verdict,
                    winner, status)


def picking(item_id: str, system: str, order: Order, **kw) -> Judgment:
    """A scored judgment naming ``system`` as the winner in ``order``."""
    return judgment(item_id, order, "A" if shown(order)[0] == system else "B", **kw)


def won(item_id: str, winner: str | None, order: Order = AB, *, label: str | None = "A", repeat: int = 0,
        stage: str = "judge", status: Status | None = None, reason: str | None = "no_label",
        response: JudgeResponse | None = None, messages_hash: str = "") -> Judgment:
    """A hand-built judgment by its ``winner`` (None: unscored, for ``reason``), its verdict's ``label`` as given;
    SCORED when it has a winner, else UNSCORED, unless ``status`` says otherwise."""
    if status is None:
        status = Status.SCORED if winner is not None else Status.UNSCORED
    verdict = Verdict(label, None) if winner is not None else Verdict(None, reason)
    request = JudgeRequest(item_id, repeat, order, stage, messages_hash)
    return Judgment(request, response or JudgeResponse(text="..."), verdict, winner, status)


def ref(item_id: str, gold: str | None = None, lengths: tuple[int, ...] = (100, 100)) -> ItemRef:
    return ItemRef(item_id, gold, f"test:{item_id}", lengths=lengths)


def refs(gold: bool, groups: bool = False, annotations: bool = False) -> list[ItemRef]:
    """Eight items, ours the gold winner of most; optionally tags and categories, human annotations."""
    out = []
    for n in range(8):
        label = (OURS if n % 3 else BASE) if gold else None
        out.append(ItemRef(f"i{n}", label, f"test:{n}", tags=("hard",) if groups and n % 2 else (),
                           category=("math" if n < 4 else "code") if groups else None, lengths=(100 + 80 * n, 300),
                           annotations=(OURS, BASE if n % 4 == 0 else OURS, OURS) if annotations else ()))
    return out


def both_orders(n: int = 8) -> list[Judgment]:
    """Ours wins most items in both orders; one inconsistent item, one tie, one unreadable answer."""
    js = [j for i in range(n) for j in (picking(f"i{i}", OURS if i % 3 else BASE, AB),
                                        picking(f"i{i}", OURS if i % 3 else BASE, BA))]
    return js + [judgment("i1", AB, "A", repeat=1), judgment("i1", BA, "A", repeat=1),
                 judgment("i2", AB, TIE, repeat=1), judgment("i2", BA, None, repeat=1)]


# --- pointwise judgments --------------------------------------------------------------------------------------

CRITERIA = ("accuracy", "completeness")


def make_scoring(threshold: float | None = 3.5) -> Scoring:
    """Two equally weighted criteria scored 1-5, and a pass threshold."""
    return Scoring.from_config(RubricConfig(
        name="t", criteria=[CriterionConfig(name=n, min=1.0, max=5.0) for n in CRITERIA], pass_threshold=threshold))


def scored(item_id: str, repeat: int, accuracy: float, completeness: float, **extras: Any) -> Judgment:
    """A scored judgment; the overall is the plain mean of the two equally weighted criteria."""
    verdict = Verdict(None, scores={"accuracy": accuracy, "completeness": completeness}, extras=extras)
    return Judgment(JudgeRequest(item_id, repeat, None, "judge", "h"), JudgeResponse(text="{}"), verdict, None,
                    Status.SCORED, score=(accuracy + completeness) / 2)


def unscored(item_id: str, repeat: int, reason: str = "no_json") -> Judgment:
    return Judgment(JudgeRequest(item_id, repeat, None, "judge", "h"), JudgeResponse(text="I think it is fine"),
                    Verdict(None, reason=reason), None, Status.UNSCORED)


def errored(item_id: str, repeat: int) -> Judgment:
    response = JudgeResponse(text=None, error_type="RateLimitError", error="429")
    return Judgment(JudgeRequest(item_id, repeat, None, "judge", "h"), response,
                    Verdict(None, reason="call_failed: RateLimitError"), None, Status.ERROR)


# --- a report document read back -----------------------------------------------------------------------------

GATES = [{"name": "gate.min_agreement", "passed": True, "value": 0.9, "threshold": 0.8, "message": "ok"}]


def same(doc: dict[str, Any], back: dict[str, Any]) -> bool:
    """The same JSON text: keys, their order and values (as summary.json writes it)."""
    return json.dumps(back, indent=2, ensure_ascii=False) == json.dumps(doc, indent=2, ensure_ascii=False)


def as_written(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as a run writes it: the skipped rows added to the summary, the gates at the end."""
    out = copy.deepcopy(doc)
    out["summary"]["skipped_rows"] = ["data.jsonl:3: no candidate"]
    out["gates"] = GATES
    return out


def round_trips(doc: dict[str, Any]) -> None:
    """Both the builder's document and the one a run writes read strictly and write back identically; the
    mode reads them the same leniently (the HTML views) and its consumers run on them."""
    from runner.modes.catalog import mode_named
    from runner.modes.summary import judge_metrics

    name = "pointwise" if "detailed_results" in doc else "pairwise"
    mode = mode_named(name)
    for variant in (doc, as_written(doc)):
        typed = mode.read(variant)
        assert same(variant, typed.to_json())
        assert mode.read(variant, lenient=True) == typed
        assert mode.console_lines(variant, judge_metrics([]))
        assert mode.views(variant) is not None and mode.summary_metrics(variant)
        assert len(mode.items(variant)) == len(variant.get("aggregated_results") or variant.get("detailed_results"))
        json.dumps(typed.to_json(), allow_nan=False)


# --- time ---------------------------------------------------------------------------------------------------


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: where a real loop would block in select() until its next timer, this one
    moves the clock forward by that much at once, so minutes of pacing run in milliseconds, deterministically."""

    def __init__(self) -> None:
        clock = self.clock = FakeClock()

        class Selector(selectors.SelectSelector):
            def select(self, timeout: float | None = None) -> list:
                if timeout:
                    clock.advance(timeout)
                return []

        super().__init__(Selector())

    def time(self) -> float:
        return self.clock()
