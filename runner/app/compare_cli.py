"""``judgesweep compare``: paired comparison of judge runs on the same items.

Takes MLflow run ids or a Hydra sweep directory, fetches each run's ``results.jsonl``, compares every pair
of runs (:mod:`runner.outputs.compare`), prints a table, optionally writes the comparison as JSON, and logs it as
an MLflow run of its own (tag ``judgesweep.kind=comparison``, artifact ``comparison.json``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from runner.core.run_settings import TrackingConfig
from runner.outputs import compare, tracking
from runner.outputs.compare_outcomes import RunResults, read_rows
from runner.storage import store

log = logging.getLogger(__name__)

RESULTS_ARTIFACT = "results.jsonl"
ALPHA = 0.05


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``judgesweep compare``."""
    parser = argparse.ArgumentParser(
        prog="judgesweep compare",
        description="Paired comparison of judgesweep runs on the same items, the item as the unit (its orders and "
                    "repeats averaged): per pair of runs the difference B - A, McNemar's exact test (0/1 "
                    "correctness per item), else the exact sign-flip test, else the paired t-test; its CI "
                    "unadjusted and simultaneous over all pairs (Bonferroni); Holm-corrected p-values over all "
                    "pairs; with --plan, the items needed to detect a difference.")
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="MLflow run ids to compare (two or more)")
    parser.add_argument("--sweep", metavar="DIR", help="compare every job of this Hydra multirun directory")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="MLflow store (default: sqlite:///<cwd>/outputs/mlflow.db, as conf/tracking/sqlite.yaml)")
    parser.add_argument("--experiment", default="judgesweep", help="experiment the comparison run is logged to")
    parser.add_argument("--level", type=float, default=0.95,
                        help="confidence level of the differences' unadjusted CIs (simultaneous: 1 - (1 - level) / "
                             "pairs)")
    parser.add_argument("--plan", action="store_true",
                        help="also the items each pair needs to detect --plan-diff at --power and --plan-alpha")
    parser.add_argument("--plan-diff", type=float, metavar="D", help="difference to detect (default: the observed one)")
    parser.add_argument("--power", type=float, default=0.8, help="power of the plan (default 0.8)")
    parser.add_argument("--plan-alpha", type=float, metavar="A",
                        help=f"two-sided level of the plan (default {ALPHA} / pairs: significant after Holm "
                             "whatever the other pairs)")
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="also write the comparison as JSON here")
    parser.add_argument("--no-log", action="store_true", help="do not log the comparison to MLflow")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point; exits 1 with a message on input that cannot be compared."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.sweep) == bool(args.run_ids):
        parser.error("give either --sweep DIR or two or more RUN_IDs")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # MLflow draws a progress bar per downloaded artifact on stderr; one per run is noise here.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    console = Console(width=None if sys.stdout.isatty() else 250)
    try:
        run(args, console)
    except (LookupError, ValueError) as exc:
        Console(stderr=True).print(f"judgesweep compare: error: {exc}", markup=False, highlight=False,
                                   soft_wrap=True)
        sys.exit(1)


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Find and load the runs, compare them, print, write and log the comparison; return it."""
    cfg = tracking_config(args.tracking_uri, args.experiment)
    found = tracking.find_sweep_runs(cfg, args.sweep) if args.sweep else tracking.get_runs(cfg, args.run_ids)
    runs = load_runs(cfg, found)
    plan = {"difference": args.plan_diff, "power": args.power, "alpha": args.plan_alpha} if args.plan else None
    comparison = compare.compare_runs(runs, level=args.level, alpha=ALPHA, plan=plan)
    comparison["sweep"] = found[0].tags.get(tracking.SWEEP_TAG) if args.sweep else None
    comparison["tracking_uri"] = cfg.uri
    render_table(comparison, console)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        store.write_json(args.json, comparison)
        console.print(f"wrote {args.json}", markup=False, highlight=False)
    if not args.no_log:
        run_id = log_comparison(cfg, comparison)
        comparison["mlflow_run_id"] = run_id
        console.print(f"logged comparison run {run_id} to experiment {cfg.experiment!r}", markup=False,
                      highlight=False)
    return comparison


def tracking_config(uri: str | None, experiment: str) -> TrackingConfig:
    """The store to read; the default sqlite store under ./outputs must exist (nothing to compare otherwise).

    Raises:
        LookupError: The sqlite file of the store does not exist (MLflow would silently create it).
    """
    artifact_location = None
    if uri is None:
        outputs = Path.cwd() / "outputs"
        uri, artifact_location = f"sqlite:///{outputs / 'mlflow.db'}", str(outputs / "mlartifacts")
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise LookupError(f"no MLflow store at {uri} (pass --tracking-uri)")
    return TrackingConfig(uri=uri, experiment=experiment, artifact_location=artifact_location)


def load_runs(cfg: TrackingConfig, found: Sequence[tracking.TrackedRun]) -> list[RunResults]:
    """Download each run's ``results.jsonl`` and pair it with the run's choices."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="judgesweep-compare-") as tmp:
        for tracked in found:
            path = tracking.download_artifact(cfg, tracked.run_id, RESULTS_ARTIFACT, Path(tmp) / tracked.run_id)
            choices = {k.removeprefix("choice."): v for k, v in tracked.params.items() if k.startswith("choice.")}
            runs.append(RunResults(run_id=tracked.run_id, choices=choices, rows=read_rows(path),
                                           ours=tracked.params.get("dataset.ours.name") or None))
    return runs


def log_comparison(cfg: TrackingConfig, comparison: dict[str, Any]) -> str:
    """Log the comparison as a new MLflow run; return its id."""
    ids = [run["run_id"] for run in comparison["runs"]]
    source = f"sweep {Path(comparison['sweep']).name}" if comparison["sweep"] else f"{len(ids)} runs"
    params = {"compare.dataset": comparison["dataset"], "compare.metric": comparison["metric"],
              "compare.test": comparison["test"], "compare.level": comparison["level"],
              "compare.simultaneous_level": comparison["simultaneous_level"],
              "compare.alpha": comparison["alpha"], "compare.sweep": comparison["sweep"] or "",
              "compare.runs": ",".join(ids)}
    metrics = {"compare/runs": len(ids), "compare/pairs": comparison["n_pairs"],
               "compare/significant_holm": comparison["n_significant"]}
    inter = comparison.get("inter_judge") or {}
    for key in ("fleiss_kappa", "krippendorff_alpha", "mean_pairwise_kappa"):
        if inter.get(key) is not None:
            metrics[f"agreement/inter_judge_{key}"] = inter[key]
    return tracking.log_comparison(cfg, comparison, ids, f"compare {source}", params, metrics)


def render_table(comparison: dict[str, Any], console: Console) -> None:
    """Print one row per pair: A, B, n, metric A, metric B, diff [CI], simultaneous CI, test, p, p Holm (and the
    items needed, with --plan)."""
    level, simultaneous = comparison["level"], comparison["simultaneous_level"]
    pairs = comparison["n_pairs"]
    title = (f"{comparison['metric']} on {comparison['dataset']}, per item: B - A with its unadjusted {level:.0%} CI "
             f"and its simultaneous CI over {pairs} pairs (Bonferroni: each at level {simultaneous:.4g}), "
             f"Holm over {pairs} pairs")
    planned = comparison.get("plan") is not None
    table = Table(title=title, title_justify="left")
    columns = ["A", "B", "n", "metric A", "metric B", "diff [CI]", "simultaneous CI", "test", "p", "p Holm"]
    for name in columns + (["items needed"] if planned else []):
        table.add_column(name, justify="left" if name in ("A", "B", "test") else "right")
    for pair in comparison["pairs"]:
        dropped = pair["dropped_a"] + pair["dropped_b"]
        cells = [pair["label_a"], pair["label_b"], f"{pair['n']}" + (f" (-{dropped})" if dropped else ""),
                 _number(pair["metric_a"]), _number(pair["metric_b"]), _difference(pair),
                 _interval(pair["simultaneous_ci_low"], pair["simultaneous_ci_high"]), TEST_NAMES[pair["test"]],
                 _p(pair["p_value"]), _p(pair["p_holm"]) + (" *" if pair["significant"] else "")]
        if planned:
            cells.append("-" if pair["plan"]["items"] is None else f"{pair['plan']['items']:,}")
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
    console.print(f"n: paired outcomes, one per {comparison['unit']}; (-k): keys only one run has; * = p Holm < "
                  f"{comparison['alpha']}; {comparison['n_significant']} of {comparison['n_pairs']} pairs "
                  f"significant", markup=False, highlight=False)
    if planned:
        plan = comparison["plan"]
        wanted = "the observed difference" if plan["difference"] is None else f"a difference of {plan['difference']:g}"
        console.print(f"items needed: to detect {wanted} with power {plan['power']:g} at two-sided alpha "
                      f"{plan['alpha']:.3g} (0/1 outcomes: Connor 1987 from the observed discordance; otherwise the "
                      f"paired t-test from the observed SD of the differences)", markup=False, highlight=False)
    inter = comparison.get("inter_judge")
    if inter:
        def fmt(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.3f}"
        console.print(f"agreement among all {len(inter['judges'])} runs' verdicts: Fleiss kappa "
                      f"{fmt(inter['fleiss_kappa'])} (n={inter['fleiss_n']}), Krippendorff alpha "
                      f"{fmt(inter['krippendorff_alpha'])}, mean pairwise kappa {fmt(inter['mean_pairwise_kappa'])}",
                      markup=False, highlight=False)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _difference(pair: dict[str, Any]) -> str:
    if pair["difference"] is None:
        return "-"
    ci = "" if pair["ci_low"] is None else " " + _interval(pair["ci_low"], pair["ci_high"])
    return f"{_signed(pair['difference'])}{ci}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{_signed(low)}, {_signed(high)}]"


def _signed(value: float) -> str:
    """3 decimals, but a non-zero value that would round to 0.000 in scientific notation, so that its sign shows
    (an interval excluding 0 never prints a bound of -0.000 or +0.000) and 0 itself as 0."""
    if value == 0:
        return "0"
    text = f"{value:+.3f}"
    return text if float(text) != 0 else f"{value:+.1e}"


TEST_NAMES = {"mcnemar_exact": "McNemar exact", "sign_flip_exact": "sign-flip exact", "paired_t": "paired t"}


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


if __name__ == "__main__":
    main()
