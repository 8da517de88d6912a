"""The floor Hydra sets under any ``@hydra.main`` app: a one-key config from the ConfigStore, a body that
returns at once. `benchmarks.scenarios.scenario_startup` times this process beside ``python -c pass`` and
``judgesweep --cfg job``, so the start-up row shows how much of judgesweep's lead over bare litellm is Hydra's
own (its import, its job config, the run directory and logging it sets up) rather than judgesweep's.

    python -m benchmarks.hydra_floor hydra.run.dir=<tmp>
"""

from __future__ import annotations

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

ConfigStore.instance().store(name="floor", node={"key": 1})


@hydra.main(config_path=None, config_name="floor", version_base="1.3")
def main(cfg: DictConfig) -> None:  # noqa: D103
    assert cfg.key == 1


if __name__ == "__main__":
    main()
