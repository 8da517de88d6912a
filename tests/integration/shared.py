"""What several integration test modules use, in one place (a test module imports nothing from another:
tests/unit/test_test_modules.py): override lists that point a run at the loopback server, the fake server's reply
policies that know the shipped presets, datasets and rubrics, the published LLMBar numbers to compare with, and
checks of what a run printed or wrote. Their fixtures are in tests/integration/conftest.py; hand-built records and
configs in tests/builders.py; generic reply policies (any prompt, any rubric) in tests/fakes/openai_server.py.
Nothing here starts a server or a run."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

from omegaconf import OmegaConf

from runner.core.choices import PromptMode
from runner.core.config import DatasetConfig
from runner.core.types import Item
from runner.inputs.datasets import load_items, resolve_path
from runner.inputs.items import Shape
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.integration.conftest import REPO, live_judge

# ----------------------------------------------------------------- what a run prints (test_make_run, test_default_run)

LOG_RECORD = re.compile(r"^\[[\d\- :,]+\]\[([\w.]+)\]\[(\w+)\] - ")  # conf/hydra/default.yaml's job log format


def assert_only_what_a_user_reads(output: str) -> None:
    """No warning, deprecation, error or traceback; log records only judgesweep's own, at INFO (a library's record,
    litellm's, MLflow's or alembic's, would be noise)."""
    lines = output.splitlines()
    assert [line for line in lines if re.search(r"warn|traceback|deprecat|error:", line, re.IGNORECASE)] == []
    records = [m for m in map(LOG_RECORD.match, lines) if m]
    assert records and {(m.group(1).split(".")[0], m.group(2)) for m in records} == {("runner", "INFO")}


# ------------------------------------------- LLMBar's published numbers (test_default_run, test_replay_sweep, compare)

STATS = REPO / "runner" / "data" / "llmbar" / "statistics"


def published(name: str) -> dict[str, float]:
    """LLMBar's statistics.json as fractions: correct_False/True/average/both and equal."""
    raw = json.loads((STATS / f"{name}.json").read_text())

    def pct(text: str) -> float:
        return round(float(text.rsplit("=", 1)[-1].strip().rstrip("%")) / 100, 4)

    return {
        "accuracy_ab": pct(raw["correct_False"]),
        "accuracy_ba": pct(raw["correct_True"]),
        "accuracy_mean": pct(raw["correct_average"]),
        "correct_both": pct(raw["correct_both"]),
        "positional_agreement": pct(raw["equal"]),
    }


def ours(gold: dict) -> dict[str, float]:
    """Our gold metrics, rounded like the published ones."""
    return {k: round(gold[k], 4) for k in ("accuracy_ab", "accuracy_ba", "accuracy_mean", "correct_both",
                                           "positional_agreement")}


def exact_sign_flip_p(differences: list[float]) -> Fraction:
    """The exact two-sided sign-flip p-value in integers: the share of the 2^n sign vectors whose |sum| reaches the
    observed one, counted by multiplying out prod_i (x^-d_i + x^d_i) (differences of shares of 2 judgments)."""
    ints = [round(2 * d) for d in differences]
    counts = {0: 1}
    for d in ints:
        grown: dict[int, int] = {}
        for total, ways in counts.items():
            for step in (d, -d):
                grown[total + step] = grown.get(total + step, 0) + ways
        counts = grown
    observed = abs(sum(ints))
    return Fraction(sum(ways for total, ways in counts.items() if abs(total) >= observed), 2 ** len(ints))


def sweep_items_blob(report: str) -> dict:
    """The sweep report's item view as its page holds it (the JSON its script draws from)."""
    found = re.search(r'<div id="sweep-items">.*?<script type="application/json">(.*?)</script>', report, re.S)
    assert found, "no item view in the sweep report"
    return json.loads(found.group(1))


# ------------------------------------------------------------- an ensemble on the loopback server (test_ensemble, ...)


def live_members(server, seeds=(1, 2)) -> list[str]:
    """An ensemble of two local_openai members on the fake server, told apart by their seed."""
    out = ["judge=ensemble", "~judge@judge.members.replay_gpt4", "~judge@judge.members.replay_chatgpt",
           "~judge.weights.replay_gpt4", "~judge.weights.replay_chatgpt"]
    for name, seed in zip(("a", "b"), seeds, strict=True):
        out += [f"+judge@judge.members.{name}=local_openai", f"judge.members.{name}.api_base={server.base_url}",
                f"judge.members.{name}.model=openai/fake-judge", f"judge.members.{name}.seed={seed}"]
    return out


# ------------------------------------------------- every preset's judge and generator (test_presets, test_results_api)

# 4 of 5 on the agent rubric, 8 of 10 on reply quality: both presets' gates pass.
SCORES = {**{name: 4 for name in ("accuracy", "completeness", "format_compliance", "scope_adherence",
                                  "context_usage", "tool_usage")},
          **{name: 8 for name in ("naturalness", "appropriateness", "intent_match")}}


def answer(body: dict) -> str:
    """A generated output for the generator, a score object for pointwise judges, [[A]] otherwise."""
    if body.get("model") == "fake-generator":
        return "A generated answer."
    prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    return json.dumps({"scores": SCORES, "reasoning": "Fine."}) if '"scores"' in prompt else "[[A]]"


# -------------------------------------------- pairs by topic, per category and tag (test_statistics, test_sweep_table)

# id, category, tags, gold; the judge prefers ours (A) on math and the baseline (B) on code
TOPIC_ROWS = [("q0", "math", ["hard"], "chat"), ("q1", "math", [], "simple-chat"), ("q2", "code", ["hard"], "chat"),
              ("q3", "code", [], "chat")]


def write_topic_dataset(path) -> None:
    """TOPIC_ROWS as a chat_vs_simple JSONL dataset at ``path``, with category, tags and gold."""
    with path.open("w") as fh:
        for item_id, category, tags, gold in TOPIC_ROWS:
            fh.write(json.dumps({"id": item_id, "prompt": f"a {category} question", "chat": f"chat {item_id}",
                                 "simple_chat": f"simple {item_id}", "category": category, "tags": tags,
                                 "gold": gold}) + "\n")


def by_topic(body: dict) -> str:
    """A reply policy: ours (A) on a math question, the baseline (B) otherwise."""
    text = " ".join(str(m.get("content")) for m in body["messages"])
    return "[[A]]" if "a math question" in text else "[[B]]"


def topic_overrides(server, dataset, tmp_path, job: int) -> list[str]:
    """A pairwise run of the fake server's judge on the topic dataset at ``dataset``, one fixed order, as job
    ``job`` of a sweep under tmp_path/sweep (its seed the job number)."""
    return [*live_judge(server), "prompt=mtbench_pair", "rubric=mtbench_verdict", "dataset=chat_vs_simple",
            f"dataset.path={dataset}", "dataset.category_field=category", "dataset.tags_field=tags",
            "dataset.gold_field=gold", "order=fixed", f"hydra.run.dir={tmp_path / 'sweep' / str(job)}",
            f"seed={job}"]


# ------------------------------------- the agent rubric's generator and judge (test_rubric_judging, test_genai_traces)

AGENT_CRITERIA = ("accuracy", "completeness", "format_compliance", "scope_adherence", "context_usage")
JUDGE_SAYS_FAIL = {"agent-004"}  # the judge's own "pass" is false here (and true everywhere else)
NOT_GENERATED = "agent-005"  # its generation request is answered 400


def loaded(dataset: str) -> list[Item]:
    """A shipped dataset as the runner maps it onto template variables (to recognise its prompts)."""
    node = OmegaConf.merge(OmegaConf.structured(DatasetConfig),
                           OmegaConf.load(REPO / "conf" / "dataset" / f"{dataset}.yaml"))
    cfg: DatasetConfig = OmegaConf.to_object(node)  # type: ignore[assignment]
    return load_items(cfg, resolve_path(cfg.path, REPO), shape=Shape(mode=PromptMode.pointwise)).items


class Router:
    """Tells which item a chat request is about, and counts the calls per (model, item)."""

    def __init__(self, markers: dict[str, str]) -> None:
        self.markers = markers
        self.calls: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    @classmethod
    def agent(cls) -> Router:
        """Agent examples: their input text is in both the generation and the judge prompt."""
        return cls({item.id: item.variables["input"] for item in loaded("agent_examples")})

    @classmethod
    def reply_quality(cls) -> Router:
        """Reply-quality rows: the message replied to, in its tags (short messages recur in conversations)."""
        return cls({item.id: f"<latest_message>\n{item.variables['message']}\n</latest_message>"
                    for item in loaded("reply_quality")})

    def route(self, body: dict) -> tuple[str, str, int]:
        """(model, item id, how many earlier calls this model got for this item)."""
        text = body["messages"][-1]["content"]
        hits = [item_id for item_id, marker in self.markers.items() if marker in text]
        if len(hits) != 1:  # a broken script must fail loudly (the server answers 500), never guess
            raise LookupError(f"request matches items {hits}")
        with self._lock:
            n = self.calls[body["model"], hits[0]]
            self.calls[body["model"], hits[0]] += 1
        return body["model"], hits[0], n


def agent_answer(item_id: str, scores: tuple[int, ...]) -> str:
    """The judge's JSON for an agent example: scores for all six criteria, reasoning, suggestions, pass."""
    return json.dumps({
        "scores": dict(zip((*AGENT_CRITERIA, "tool_usage"), scores, strict=True)),
        "reasoning": f"{item_id}: one-sentence verdict.\nSecond line with the details.",
        "improvement_suggestions": [f"tighten {item_id}", "cite the context"],
        "pass": item_id not in JUDGE_SAYS_FAIL,
    })


def generated_text(item_id: str) -> str:
    """What fake-gen writes for an item."""
    return f"GENERATED-ANSWER-{item_id}: a distinctive output written by fake-gen."


def generator_and_judge() -> Callable[[dict], Reply | str]:
    """fake-gen writes a distinctive output per item (400 for NOT_GENERATED); fake-judge gives 4s."""
    router = Router.agent()

    def reply(body: dict) -> Reply | str:
        model, item_id, _ = router.route(body)
        if model == "fake-gen":
            if item_id == NOT_GENERATED:
                return Reply(status=400, error_message="scripted bad request")
            return generated_text(item_id)
        return agent_answer(item_id, (4,) * 6)
    return reply


def generation_overrides(server: FakeOpenAIServer) -> list[str]:
    """The generate-then-judge preset with both the generator and the judge on the loopback server."""
    return ["experiment=agent_rubric_generate", *live_judge(server), "generator=local_openai",
            f"generator.api_base={server.base_url}", "generator.model=openai/fake-gen",
            "generator.template=generate_agent"]
