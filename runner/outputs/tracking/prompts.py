"""A run's prompts in MLflow's prompt registry, and its dataset as a run input.

One registered prompt per conf/prompt option (its name), a new version only when the template's text changed
since the latest version; the version is linked to the run. The dataset is logged as a run input
(``mlflow.data``) with the digest of its items, so the run's Datasets column and the experiment's dataset list
show it. mlflow is imported inside the functions, as everywhere in this package.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from runner.core.run_settings import TrackingConfig
from runner.outputs.tracking import connection

NOT_A_NAME = re.compile(r"[^A-Za-z0-9_.-]")  # MLflow's prompt names: letters, digits, '_', '-', '.'


def prompt_name(option: str) -> str:
    """The registry name of a conf/prompt option (MLflow's allowed characters only)."""
    return NOT_A_NAME.sub("_", option)


def register_prompt(cfg: TrackingConfig, run_id: str, option: str, template: str, sha256: str) -> int:
    """Register ``template`` under the option's name unless the latest version has the same text; link the
    version to the run.

    Returns:
        The version the run used.
    """
    from mlflow.tracking import MlflowClient

    # the registry of this store, not MLflow's process-wide default registry URI
    client = MlflowClient(tracking_uri=cfg.uri, registry_uri=cfg.uri) if cfg.uri else connection.client(cfg)
    from mlflow.exceptions import MlflowException

    name = prompt_name(option)
    for attempt in range(3):  # a parallel job (joblib, Ray) may register the same new prompt between our two calls
        latest = _latest(client, name)
        if latest is not None and latest.template == template:
            break
        try:
            latest = client.register_prompt(name=name, template=template, tags={"judgesweep.sha256": sha256},
                                            commit_message=f"judgesweep: template sha256 {sha256[:12]}")
            break
        except MlflowException as exc:
            if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code) or attempt == 2:
                raise
    _link(client, run_id, latest)
    return int(latest.version)


def _link(client: Any, run_id: str, version: Any) -> None:
    """Link a prompt version to the run as MLflow's own link does (the ``mlflow.linkedPrompts`` run tag), with
    this store's client: ``MlflowClient.link_prompt_version_to_run`` writes through the process-wide default
    tracking store instead, which is not the run's when a tracking URI is given (MLflow 3.17)."""
    from mlflow.tracing.constant import TraceTagKey
    from mlflow.tracing.utils.prompt import update_linked_prompts_tag

    current = client.get_run(run_id).data.tags.get(TraceTagKey.LINKED_PROMPTS)
    updated = update_linked_prompts_tag(current, [version])
    if updated != current:
        client.set_tag(run_id, TraceTagKey.LINKED_PROMPTS, updated)


def _latest(client: Any, name: str) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_prompt_versions(name, max_results=1000)
    except MlflowException:  # no such prompt yet
        return None
    found = list(getattr(versions, "prompt_versions", versions) or [])
    return max(found, key=lambda v: int(v.version)) if found else None


def log_dataset(cfg: TrackingConfig, run_id: str, name: str, source: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Log the run's items (id, gold, human score) as a run input named ``name`` read from ``source`` (a local
    path: MLflow resolves it as a file source)."""
    import mlflow.data
    import pandas as pd
    from mlflow.entities import DatasetInput

    frame = pd.DataFrame(list(rows))
    with warnings.catch_warnings():  # MLflow registers its local-file source twice ("local" and "file") and says so
        warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted in multiple ways")
        dataset = mlflow.data.from_pandas(frame, source=source, name=name)
    client = connection.client(cfg)
    entity = dataset._to_mlflow_entity()
    have = client.get_run(run_id).inputs.dataset_inputs
    if not any(d.dataset.name == entity.name and d.dataset.digest == entity.digest for d in have):
        client.log_inputs(run_id, datasets=[DatasetInput(dataset=entity)])
