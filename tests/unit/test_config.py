"""Unit tests for runner.core.config + conf/: every option composes through Hydra into a typed RunConfig.

Uses Hydra's compose API on the real conf/ tree; nothing is run.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hydra import compose
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from runner.core.choices import OrderPolicy, PromptMode, Strategy
from runner.core.config import JudgeConfig, PromptConfig, RunConfig
from runner.core.config_store import register_configs
from tests.builders import CONF, PROMPTS, to_run_config

GROUPS = ("judge", "prompt", "rubric", "aggregation", "dataset", "tracking")
DEFAULT_CHOICES = {
    "judge": "replay_gpt4",
    "prompt": "llmbar_vanilla",
    "rubric": "llmbar",
    "aggregation": "majority_vote",
    "dataset": "llmbar_natural",
    "tracking": "sqlite",
}
CONFIG_ERRORS = (ConfigCompositionException, OmegaConfBaseException)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


# --- the default config ----------------------------------------------------------------------------


def test_default_config_becomes_a_typed_run_config(hydra_conf: None) -> None:
    cfg = to_run_config([])
    assert isinstance(cfg.judge, JudgeConfig)
    assert isinstance(cfg.prompt, PromptConfig)
    assert (cfg.judge.name, cfg.judge.model, cfg.judge.api_key_env) == ("replay_gpt4", "replay/gpt-4", None)
    assert (cfg.prompt.name, cfg.prompt.template, cfg.prompt.mode) == (
        "llmbar_vanilla", "llmbar_vanilla", PromptMode.pairwise,
    )
    assert cfg.prompt.strategy is Strategy.single
    assert (cfg.rubric.name, cfg.rubric.labels, cfg.rubric.parser.name) == ("llmbar", ["A", "B"], "llmbar_output")
    assert cfg.aggregation.name == "majority_vote"
    assert (cfg.dataset.name, cfg.dataset.path) == ("llmbar_natural", "pkg://runner/data/llmbar/natural.jsonl")
    assert cfg.dataset.gold_map == {"1": "output_1", "2": "output_2"}
    assert cfg.tracking.enabled is True
    assert cfg.tracking.uri == f"sqlite:///{Path.cwd()}/outputs/mlflow.db"
    assert (cfg.seed, cfg.concurrency, cfg.repeats, cfg.max_items, cfg.max_error_rate) == (0, 16, 1, None, 0.05)
    assert cfg.order is OrderPolicy.both
    assert cfg.prompts_dir == "prompts"


def test_default_choices(hydra_conf: None) -> None:
    choices = compose(config_name="config", return_hydra_config=True).hydra.runtime.choices
    assert {group: choices[group] for group in GROUPS} == DEFAULT_CHOICES
    assert choices["experiment"] is None


def test_typed_overrides_are_converted(hydra_conf: None) -> None:
    cfg = to_run_config(["order=swap_random", "concurrency=4", "max_items=10", "judge.temperature=0.7"])
    assert cfg.order is OrderPolicy.swap_random
    assert (cfg.concurrency, cfg.max_items, cfg.judge.temperature) == (4, 10, 0.7)


# --- mistakes fail at compose / convert time -------------------------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        "judge.bogus=1",
        "bogus_knob=1",
        "concurrency=abc",
        "order=sideways",
        "prompt.mode=listwise",
        "prompt.strategy=vote",
        "judge.max_tokens=lots",
        "tracking.enabled=maybe",
        "repeats=1.5",
    ],
)
def test_bad_override_fails_when_composing(hydra_conf: None, override: str) -> None:
    with pytest.raises(CONFIG_ERRORS):
        to_run_config([override])


def test_unknown_group_option_fails_when_composing(hydra_conf: None) -> None:
    with pytest.raises(ConfigCompositionException, match="replay_gpt5"):
        compose(config_name="config", overrides=["judge=replay_gpt5"])


def test_missing_required_value_fails_when_converting(hydra_conf: None) -> None:
    cfg = compose(config_name="config", overrides=["judge.model=???"])
    with pytest.raises(OmegaConfBaseException, match="judge.model"):
        OmegaConf.to_object(cfg)


# --- every option composes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "option"), [(group, option) for group in GROUPS for option in options(group)]
)
def test_every_group_option_composes(hydra_conf: None, group: str, option: str) -> None:
    cfg = to_run_config([f"{group}={option}"])
    node = getattr(cfg, group)
    raw = OmegaConf.load(CONF / group / f"{option}.yaml")
    if group == "tracking":  # tracking options carry no name; compare what they set
        assert (node.enabled, node.experiment) == (raw.enabled, raw.experiment)
        assert all(value is None or "${" not in value for value in (node.uri, node.artifact_location))
    else:
        assert node.name == option


@functools.cache
def _default_run_config(cwd: str) -> RunConfig:
    """The default config as a RunConfig, composed once per working directory (only compared, never changed)."""
    return to_run_config([])


@pytest.mark.parametrize("stem", options("experiment"))
def test_every_experiment_preset_composes(hydra_conf: None, stem: str) -> None:
    composed = compose(config_name="config", overrides=[f"experiment={stem}"], return_hydra_config=True)
    assert composed.hydra.runtime.choices["experiment"] == stem
    with open_dict(composed):
        del composed["hydra"]
    cfg = OmegaConf.to_object(composed)
    assert isinstance(cfg, RunConfig)
    assert cfg != _default_run_config(str(Path.cwd()))  # a preset that changes nothing has rotted


def test_llmbar_chatgpt_swap_preset_selects_its_judge_and_prompt(hydra_conf: None) -> None:
    cfg = to_run_config(["experiment=llmbar_chatgpt_swap"])
    assert (cfg.judge.name, cfg.prompt.name, cfg.prompt.strategy) == (
        "replay_chatgpt", "llmbar_swap", Strategy.swap_synthesize,
    )
    assert cfg.prompt.synthesis_template == "llmbar_swap_synthesize"


def test_robust_pairwise_preset_overrides_groups_and_run_knobs(hydra_conf: None) -> None:
    cfg = to_run_config(["experiment=robust_pairwise"])
    assert (cfg.prompt.name, cfg.rubric.name, cfg.judge.name, cfg.dataset.name) == (
        "mtbench_pair", "mtbench_verdict", "gpt4o_mini", "chat_vs_simple",
    )
    assert (cfg.repeats, cfg.order) == (3, OrderPolicy.swap_random)


def test_command_line_override_beats_preset(hydra_conf: None) -> None:
    cfg = to_run_config(["experiment=robust_pairwise", "repeats=5"])
    assert cfg.repeats == 5


# --- file names agree with the names inside --------------------------------------------------------


@pytest.mark.parametrize("stem", options("prompt"))
def test_prompt_option_names_an_existing_template(stem: str) -> None:
    prompt = OmegaConf.load(CONF / "prompt" / f"{stem}.yaml")
    assert prompt.name == stem
    assert (PROMPTS / f"{prompt.template}.j2").is_file() or (PROMPTS / f"{prompt.template}.txt").is_file()
    if prompt.get("strategy") == Strategy.swap_synthesize.value:
        assert prompt.get("synthesis_template")
    if prompt.get("synthesis_template"):
        assert (PROMPTS / f"{prompt.synthesis_template}.j2").is_file()


@pytest.mark.parametrize(
    ("group", "stem"),
    [(group, stem) for group in ("judge", "rubric", "aggregation", "dataset") for stem in options(group)],
)
def test_named_option_file_stem_equals_its_name(group: str, stem: str) -> None:
    assert OmegaConf.load(CONF / group / f"{stem}.yaml").name == stem


def test_register_configs_is_idempotent(hydra_conf: None) -> None:
    register_configs()
    register_configs()
    assert isinstance(to_run_config([]), RunConfig)


# --- Hydra's config store is shared, not copied (runner.core.config.register_configs) ------------------------------


def test_composing_shares_the_config_store_and_leaves_its_schemas_unchanged(hydra_conf: None) -> None:
    """Every compose deep-copies Hydra's repository; the ConfigStore in it is now the live one, so a schema
    registered after a compose is seen by the next (upstream's behaviour since facebookresearch/hydra#2928),
    and a composed config that is changed does not change what the store hands out next time."""
    import copy

    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    assert copy.deepcopy(store) is store
    first = compose(config_name="config", overrides=["max_items=3"])
    first.judge.model = "changed/in-place"

    store.store(group="judge", name="late_registered", node={"name": "late", "model": "late/registered"})
    try:
        again = compose(config_name="config", overrides=["judge=late_registered"])
    finally:
        del store.repo["judge"]["late_registered.yaml"]
    assert again.judge.model == "late/registered"
    default = compose(config_name="config")
    assert default.judge.model != "changed/in-place"
    assert default.max_items != 3
