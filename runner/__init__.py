"""judgesweep: config-driven LLM-as-a-judge experiments."""

import os

# litellm downloads a model price list when it is imported unless this is set. The package must never
# reach the internet on its own, whichever entry point (CLI, tests, benchmarks) imports it first, so the
# default is set here, before any submodule can import litellm. An explicit user setting wins.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: the public names, imported on first use (not on `import runner`)
    if name == "run_experiment":
        from runner.run.experiment import run_experiment

        return run_experiment
    if name == "results":  # `from runner import results`: the results API of README "Sweeps and analysis"
        from runner.outputs import results

        return results
    raise AttributeError(f"module 'runner' has no attribute {name!r}")


__all__ = ["__version__", "results", "run_experiment"]
