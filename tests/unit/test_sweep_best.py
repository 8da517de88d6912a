"""The sweep's answer (issue 31, Deliver 2; issue 45, Deliver 0): the best configuration and those not shown worse.

runner.stats.best on hand-built outcomes (its exact test against scipy's binomial test and a full enumeration), and
runner.outputs.sweep_best on small sweep directories built here (job directories as a multirun leaves them).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from runner.outputs import sweep, sweep_best, sweep_page
from runner.stats import best


@pytest.mark.parametrize("seed", range(5))
def test_on_0_1_outcomes_the_sign_flip_test_is_mcnemar_s_exact_test(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 2, 80), rng.integers(0, 2, 80)
    p, test = best.sign_flip_test(a - b)
    better, worse = int(np.sum(a > b)), int(np.sum(a < b))
    assert test == best.EXACT
    assert p == pytest.approx(stats.binomtest(better, better + worse, 0.5).pvalue, rel=1e-12)


def test_on_shares_of_two_orders_the_sign_flip_test_is_the_full_enumeration():
    # per item, the share of its two judgments that are right: 0, 1/2 or 1, so differences on a lattice of 1/2
    d = np.array([1, 0.5, 0.5, -0.5, 1, 0, 0.5, 1, -1, 0.5, 0.5, 1])
    p, test = best.sign_flip_test(d)
    flips = np.array(list(itertools.product((1, -1), repeat=d.size)))
    enumerated = np.mean(np.abs(flips @ np.abs(d)) >= abs(d.sum()) - 1e-12)
    assert test == best.EXACT and p == pytest.approx(enumerated, rel=1e-12)


def test_the_p_value_is_not_floored_by_a_resample_count():
    # 60 of 300 items better, none worse: far beyond what 2,000 or 100,000 resamples could resolve
    p, test = best.sign_flip_test([1.0] * 60 + [0.0] * 240)
    assert test == best.EXACT and p == pytest.approx(2 * 0.5 ** 60, rel=1e-9)


def test_differences_on_no_small_lattice_get_the_paired_t_test_and_say_so():
    d = np.array([np.sqrt(2), -1 / np.pi, np.e / 3, 0.1234567, np.sqrt(3) / 7] * 8)
    p, test = best.sign_flip_test(d)
    assert test == best.T_TEST
    assert p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)


def test_a_clear_winner_is_tied_with_nothing():
    items = 100
    a = [1.0] * 90 + [0.0] * 10
    b = [1.0] * 60 + [0.0] * 40
    c = [0.0] * 45 + [1.0] * 55
    ranked = best.best_set({"b": b, "a": a, "c": c})
    assert [r.name for r in ranked] == ["a", "b", "c"] and ranked[0].mean == 0.9
    assert [r.tied_with_best for r in ranked] == [True, False, False]
    assert [r.against for r in ranked] == [None, "a", "a"] and ranked[0].p_holm is None
    # McNemar exact, one-sided: b is worse than a on 30 discordant items of 30, c on 45 of 55 (and than b on 45 of
    # 85, weaker evidence); x 2 (each has k - 1 = 2 rivals), then Holm over the 3 configurations
    p_b, p_c = stats.binomtest(0, 30).pvalue / 2, stats.binomtest(10, 55).pvalue / 2
    assert [r.p_value for r in ranked[1:]] == pytest.approx([p_b, p_c], rel=1e-9)
    assert [r.p_holm for r in ranked[1:]] == pytest.approx([3 * 2 * p_b, 2 * 2 * p_c], rel=1e-9)
    assert len(a) == items


def test_two_configurations_one_item_apart_are_tied_and_the_cheaper_of_equals_is_the_best():
    a = [1.0] * 80 + [0.0] * 20
    b = [1.0] * 79 + [0.0] * 21
    ranked = best.best_set({"a": a, "b": b, "worse": [1.0] * 50 + [0.0] * 50})
    assert [(r.name, r.tied_with_best) for r in ranked] == [("a", True), ("b", True), ("worse", False)]
    assert ranked[1].p_value == 0.5 and ranked[1].p_holm == 1.0 and ranked[1].difference == pytest.approx(-0.01)
    same = best.best_set({"dear": a, "cheap": a}, costs={"dear": 2.0, "cheap": 1.0})
    assert [r.name for r in same] == ["cheap", "dear"] and same[1].tied_with_best
    assert same[1].against is None and same[1].p_holm is None  # an equal mean is no evidence either way


def test_the_adjustment_counts_every_configuration_not_only_the_comparisons_with_the_best():
    # each of b and c: 6 items worse than a, none better: one-sided p = 1 / 2^6; x 2 rivals each, then Holm over the
    # 3 configurations (a's own hypothesis included, as which one is best is not known): 3 x 2 / 64 = 0.09375
    base = [1.0] * 6 + [0.0] * 4
    worse = [0.0] * 6 + [0.0] * 4
    ranked = best.best_set({"a": base, "b": worse, "c": worse})
    assert [r.p_value for r in ranked[1:]] == pytest.approx([1 / 64, 1 / 64])
    assert [r.p_holm for r in ranked[1:]] == pytest.approx([0.09375, 0.09375])
    assert all(r.tied_with_best for r in ranked)


def test_a_configuration_can_be_shown_worse_by_one_other_than_the_best():
    # a is best (30 of 40) but differs from b both ways (20 items to 10); c (28) is right wherever b (20) is and on 8
    # more: b is called worse on c's test (one-sided 2^-8, x 2, x 3 = 0.023), and c, behind a, stays tied
    b = [1.0] * 20 + [0.0] * 20
    c = [1.0] * 28 + [0.0] * 12
    a = [1.0] * 10 + [0.0] * 10 + [1.0] * 20
    ranked = {r.name: r for r in best.best_set({"a": a, "b": b, "c": c})}
    assert ranked["b"].against == "c" and ranked["b"].p_value == pytest.approx(0.5 ** 8)
    assert ranked["b"].p_holm == pytest.approx(3 * 2 * 0.5 ** 8)
    assert not ranked["b"].tied_with_best and ranked["c"].tied_with_best and ranked["c"].against == "a"


@pytest.mark.parametrize("k", [2, 6, 12])
def test_the_first_configuration_called_worse_needs_alpha_over_k_k_minus_1_and_the_last_alpha_over_2_k_minus_1(k):
    # the rule's cost in power (docs/methods.md): one-sided p below alpha / (k (k - 1)) for the first configuration
    # eliminated (the old rule: two-sided p below alpha / (k - 1), i.e. one-sided below alpha / (2 (k - 1))); once
    # k - 2 are out, the last one needs alpha / (2 (k - 1)), the old rule's first threshold
    alpha, means = 0.05, np.arange(k, 0, -1, dtype=float)
    for factor, eliminated in ((0.99, True), (1.01, False)):
        p = np.ones((k, k))
        p[0, 1] = p[1, 0] = 2 * factor * alpha / (k * (k - 1))  # two-sided: the one-sided p is half of it
        adjusted, against, _ = best.decide(means, p)
        assert bool(adjusted[1] < alpha) is eliminated and against[1] == 0
        p = np.full((k, k), 1e-12)
        np.fill_diagonal(p, 1.0)
        p[0, 1] = p[1, 0] = 2 * factor * alpha / (2 * (k - 1))
        adjusted, _, _ = best.decide(means, p)
        assert bool(adjusted[1] < alpha) is eliminated and (adjusted[2:] < alpha).all() and adjusted[0] == 1.0


def _holm_over_ordered_pairs(means: np.ndarray, p: np.ndarray, alpha: float) -> np.ndarray:
    """Configurations eliminated by Holm over the k (k - 1) one-sided hypotheses "i is not better than j"."""
    k = means.size
    one_sided = np.where(means[:, None] > means[None, :], p / 2, 1.0)
    off = ~np.eye(k, dtype=bool)
    rejected = np.zeros((k, k), dtype=bool)
    rejected[off] = best.holm(one_sided[off]) < alpha
    return rejected.any(axis=0)


@pytest.mark.parametrize("seed", range(20))
def test_every_configuration_holm_over_ordered_pairs_eliminates_is_eliminated(seed):
    # docs/methods.md: the rule is at least as powerful as Holm over the k (k - 1) ordered pairs
    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 13))
    means = rng.random(k)
    p = 10 ** -rng.uniform(0, 4, (k, k))
    p = np.triu(p, 1) + np.triu(p, 1).T + np.eye(k)
    adjusted, _, _ = best.decide(means, p)
    pairs = _holm_over_ordered_pairs(means, p, 0.05)
    assert not (pairs & (adjusted >= 0.05)).any()


@pytest.mark.parametrize("lattice", ["0/1", "halves", "sixths", "mixed", "off"])
def test_all_pairs_at_once_give_each_pair_the_p_value_and_test_compare_gives_it(lattice):
    rng = np.random.default_rng(31)
    draw = {"0/1": lambda: rng.integers(0, 2, (6, 50)) / 1, "halves": lambda: rng.integers(0, 3, (6, 50)) / 2,
            "sixths": lambda: rng.integers(0, 7, (6, 50)) / 6,
            "mixed": lambda: np.vstack([rng.integers(0, 3, (3, 50)) / 2, rng.integers(0, 4, (3, 50)) / 3]),
            "off": lambda: rng.random((6, 50))}
    x = draw[lattice]()
    x[1] = x[0]  # a pair with every difference 0
    p, exact = best.pairwise_p(x)
    for i, j in itertools.permutations(range(6), 2):
        one, test = best.sign_flip_test(x[j] - x[i])
        assert p[i, j] == pytest.approx(one, rel=1e-12) and exact[i, j] == (test == best.EXACT)
    assert p[0, 1] == 1.0 and (np.diag(p) == 1.0).all()
    batch, _ = best.pairwise_p(np.stack([x, x[::-1]]))  # many sweeps at once: each its own
    assert np.array_equal(batch[0], p) and np.array_equal(batch[1], p[::-1, ::-1])


def _job(sweep_dir: Path, number: int, overrides: dict[str, str], correct: dict[str, list[bool]],
         cost: float) -> None:
    """A finished pairwise job with gold: per item, one judgment per order, right or wrong as ``correct`` says."""
    job = sweep_dir / str(number)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"{k}={v}" for k, v in overrides.items()]))
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"dataset": {"ours": {"name": "output_1"}}}))
    rows = [{"item_id": item, "repeat": 0, "order": order, "stage": "judge", "status": "scored", "gold": "output_1",
             "winner": "output_1" if right else "output_2"}
            for item, orders in correct.items() for order, right in zip(("ab", "ba"), orders, strict=True)]
    (job / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    judged = sum(map(len, correct.values()))
    right = sum(sum(v) for v in correct.values())
    (job / "metrics.json").write_text(json.dumps({"agreement/accuracy_all": right / judged, "cost/usd_list": cost,
                                                  "cost/usd_total": 0.0}))


def _items(prefix: str, right: int, total: int) -> dict[str, list[bool]]:
    return {f"{prefix}-{i}": [i < right, i < right] for i in range(total)}


def test_configurations_pool_their_datasets_and_pair_items_by_dataset_and_id(tmp_path):
    # the two datasets use the same item ids: they are different items
    judges = {"strong": (40, 38), "weak": (20, 18), "close": (39, 38)}
    for n, (judge, (first, second)) in enumerate(judges.items()):
        for m, (dataset, right) in enumerate((("d1", first), ("d2", second))):
            _job(tmp_path, 2 * n + m, {"judge": judge, "dataset": dataset}, _items("x", right, 40), 1.0 + n)
    rows = sweep.collect(tmp_path)
    answer = sweep_best.answer(tmp_path, rows)
    assert answer is not None
    assert answer["grouping"] == sweep_best.BY_CONFIG and answer["items"] == 80 and answer["metric"] == "accuracy"
    assert answer["best"] == "judge=strong" and answer["tied_with_best"] == ["judge=close"]
    by_config = {c["config"]: c for c in answer["configurations"]}
    assert by_config["judge=strong"]["jobs"] == [0, 1] and by_config["judge=strong"]["value"] == 78 / 80
    assert by_config["judge=weak"]["cost_usd_list"] == 2 * 2.0 and not by_config["judge=weak"]["tied_with_best"]
    assert by_config["judge=weak"]["test"] == best.EXACT
    assert answer["method"] == best.METHOD and answer["alpha"] == 0.05
    text = "\n".join(sweep_best.lines(answer))
    assert text.startswith("best: judge=strong (accuracy 0.975, list $2.00); tied with best: judge=close (accuracy "
                           "0.963, list $6.00)")
    assert "one as good as the best is called worse in at most 0.05 of sweeps" in text
    assert by_config["judge=weak"]["against"] == "judge=strong" and by_config["judge=close"]["p_holm"] == 1.0
    metrics, tags = sweep_best.tracking_values(answer)
    assert tags["sweep/best_config"] == "judge=strong" and tags["sweep/tied_with_best"] == "judge=close"
    assert metrics["sweep/tied_with_best"] == 1.0 and metrics["sweep/best_value"] == 78 / 80


def test_an_ambiguous_grouping_falls_back_to_one_configuration_per_job(tmp_path):
    # two jobs with the same overrides on the same dataset: which of them is "the" configuration is not clear
    for n, right in enumerate((30, 10, 29)):
        _job(tmp_path, n, {"judge": "same" if n < 2 else "other", "dataset": "d1"}, _items("x", right, 30), 1.0)
    answer = sweep_best.answer(tmp_path, sweep.collect(tmp_path))
    assert answer is not None and answer["grouping"] == sweep_best.BY_JOB
    assert answer["best"] == "job 0" and answer["tied_with_best"] == ["job 2"]
    assert [c["jobs"] for c in answer["configurations"]] == [[0], [2], [1]]


def test_a_configuration_with_a_failed_job_is_not_compared(tmp_path):
    for n, judge in enumerate(("a", "b", "c")):
        _job(tmp_path, n, {"judge": judge}, _items("x", 10 + n, 20), 1.0)
    sweep.write_failure(tmp_path / "2", "boom")
    answer = sweep_best.answer(tmp_path, sweep.collect(tmp_path))
    assert answer is not None and answer["best"] == "judge=b" and answer["not_compared"] == ["judge=c"]
    assert "not compared (a failed job or another kind of outcome): judge=c" in "\n".join(sweep_best.lines(answer))


def test_the_sweep_report_shows_the_answer_first(tmp_path):
    for n, judge in enumerate(("a", "b")):
        _job(tmp_path, n, {"judge": judge}, _items("x", 20 - n, 20), 1.0)
    rows = sweep.collect(tmp_path)
    answer, files = sweep_best.settle(tmp_path, rows)
    assert answer is not None and files == [tmp_path / sweep_best.BEST_JSON]
    assert json.loads(files[0].read_text())["best"] == "judge=a"
    page = sweep_page.write_sweep_report(tmp_path, rows, answer=answer)[-1].read_text()
    assert page.index("<h2>Best configuration</h2>") < page.index("<h2>Jobs (2)</h2>")
    assert "best: judge=a (accuracy 1.000, list $1.00); tied with best: judge=b (accuracy 0.950" in page
    assert "<th>better one</th><th>p (one-sided)</th><th>p (adjusted)</th>" in page


def test_only_the_items_every_configuration_judged_count_and_dataset_keys_tell_datasets_apart(tmp_path):
    # dataset.path is a dataset too: a, b over two files; b judged 5 items fewer of the second file
    files = {"one.jsonl": (10, 10), "two.jsonl": (10, 9)}
    for n, (judge, path) in enumerate(itertools.product(("a", "b"), files)):
        total = 20 if judge == "a" or path == "one.jsonl" else 15
        _job(tmp_path, n, {"judge": judge, "dataset.path": path}, _items("x", files[path][judge == "b"], total), 1.0)
    answer = sweep_best.answer(tmp_path, sweep.collect(tmp_path))
    assert answer is not None and answer["grouping"] == sweep_best.BY_CONFIG
    assert answer["items"] == 35 and answer["items_left_out"] == 5
    assert [c["jobs"] for c in answer["configurations"]] == [[0, 1], [2, 3]]


def _rows_job(sweep_dir: Path, number: int, judge: str, rows: list[dict]) -> None:
    job = sweep_dir / str(number)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"judge={judge}"]))
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"dataset": {"ours": {"name": "mine"}}}))
    (job / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (job / "metrics.json").write_text(json.dumps({"cost/usd_list": 1.0}))


def test_without_gold_the_metric_is_the_win_score_of_ours_or_the_mean_score(tmp_path):
    pairwise, pointwise = tmp_path / "pairwise", tmp_path / "pointwise"
    for n, wins in enumerate((8, 2)):
        _rows_job(pairwise, n, f"j{n}", [{"item_id": f"i{i}", "repeat": 0, "order": "ab", "status": "scored",
                                          "winner": "mine" if i < wins else "theirs"} for i in range(10)])
        _rows_job(pointwise, n, f"j{n}", [{"item_id": f"i{i}", "repeat": 0, "order": None, "status": "scored",
                                           "score": 4.0 if i < wins else 2.0} for i in range(10)])
    won = sweep_best.answer(pairwise, sweep.collect(pairwise))
    scored = sweep_best.answer(pointwise, sweep.collect(pointwise))
    assert won is not None and won["metric"] == "win score" and won["best"] == "judge=j0"
    assert won["configurations"][0]["value"] == 0.8
    assert scored is not None and scored["metric"] == "mean score" and scored["configurations"][0]["value"] == 3.6


def test_a_configuration_whose_jobs_have_different_kinds_of_outcome_is_not_compared(tmp_path):
    _job(tmp_path, 0, {"judge": "a", "dataset": "gold"}, _items("x", 9, 10), 1.0)
    _job(tmp_path, 1, {"judge": "b", "dataset": "gold"}, _items("x", 8, 10), 1.0)
    _rows_job(tmp_path, 2, "a", [{"item_id": "y", "repeat": 0, "order": None, "status": "scored", "score": 3.0}])
    (tmp_path / "2" / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["judge=a", "dataset=scores"]))
    _job(tmp_path, 3, {"judge": "c", "dataset": "gold"}, _items("x", 7, 10), 1.0)
    answer = sweep_best.answer(tmp_path, sweep.collect(tmp_path))
    assert answer is not None and answer["not_compared"] == ["judge=a"] and answer["best"] == "judge=b"
