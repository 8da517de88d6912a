"""runner.run.job_context.check_keys: a key a ``+`` override appends where the schema has no field is refused,
named by its path; keys under a free-form field (a dict of anything) are the user's."""

from __future__ import annotations

import re

import pytest
from hydra import compose

from runner.run.job_context import ForbiddenKey, check_keys
from tests.builders import CONF


@pytest.mark.parametrize(("overrides", "path", "schema"), [
    (["+judge.temprature=0.5"], "judge.temprature", "JudgeConfig"),
    (["+tracking.x=1"], "tracking.x", "TrackingConfig"),
    (["+nope=1"], "nope", "RunConfig"),
    (["+judge.extra_body.foo=1"], "judge.extra_body", "JudgeConfig"),
    (["experiment=agent_rubric", "+rubric.criteria.0.extra=1"], "rubric.criteria[0].extra", "CriterionConfig"),
])
def test_an_appended_key_the_schema_lacks_is_refused_by_its_path(hydra_conf, overrides, path, schema) -> None:
    message = f"unknown config key '{path}': Key '{path.split('.')[-1]}' not in '{schema}'"
    with pytest.raises(ForbiddenKey, match=f"^{re.escape(message)}$"):
        check_keys(compose(config_name="config", overrides=overrides))


@pytest.mark.parametrize("overrides", [
    ["+dataset.variables.anything=1"],  # dataset.variables: the user's own template variables
    *([f"experiment={p.stem}"] for p in sorted((CONF / "experiment").glob("*.yaml"))),
], ids=str)
def test_a_free_form_fields_keys_and_every_preset_pass(hydra_conf, overrides) -> None:
    check_keys(compose(config_name="config", overrides=overrides))


def test_an_instantiate_key_is_refused_first(hydra_conf) -> None:
    with pytest.raises(ForbiddenKey, match=re.escape("instantiate keys are not allowed in judgesweep configs: "
                                                     "['nope._target_']")):
        check_keys(compose(config_name="config", overrides=["+nope._target_=os.getcwd"]))

