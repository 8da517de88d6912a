"""Dawid & Skene (1979): each judge's confusion matrix and each item's true label from agreement alone.

Numpy EM: the maintained PyPI implementation (crowd-kit) hard-depends on transformers, nltk and pyarrow,
far too much for a ~40-line algorithm. With the default ``smoothing=0`` it is the standard EM of the paper and of
crowd-kit's ``DawidSkene``: its posteriors, priors and confusion matrices equal crowd-kit 1.4.2's run to
convergence (``n_iter=10000, tol=1e-12``; its own defaults stop up to 0.07 earlier) to 4 decimals on LLMBar's
replayed GPT-4 + ChatGPT votes (each subset and all five; largest difference 3.5e-5), and
tests/unit/test_dawid_skene_reference.py pins them against an EM written from the paper's equations.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from runner.stats.votes import Votes, cast_votes, item_keys, sorted_labels

logger = logging.getLogger(__name__)

# The floor of a probability before its log, crowd-kit's _EPS: unsmoothed, a confusion cell nobody filled is 0,
# and 0 x log 0 would turn an item's whole posterior into NaN; at 1e-10 such a vote still all but rules a class out.
FLOOR = 1e-10
# Who is one annotator: a judge (its orders and repeats pooled, the default), or every vote column (each
# member x order x repeat, the paper's model applied to correlated columns: the behaviour before issue 31).
ANNOTATORS = ("judge", "vote")


def dawid_skene(
    votes: Votes,
    labels: Sequence[Hashable] | None = None,
    max_iter: int = 1000,
    tol: float = 1e-6,
    smoothing: float = 0.0,
    groups: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Estimate each judge's confusion matrix and each item's true label from the judges' agreement alone.

    EM for the Dawid & Skene (1979) model: judges err independently given the true class, each with its
    own confusion matrix. It starts from the vote shares of each item (a soft majority vote), so it is
    deterministic and needs no seed. The default, ``smoothing=0``, is the maximum-likelihood EM of the paper
    (and crowd-kit's ``DawidSkene``; a cell is floored at :data:`FLOOR` before its log, as crowd-kit does).
    ``smoothing > 0`` adds that many pseudo-counts to every prior and confusion cell in each M-step (a MAP
    estimate under a symmetric Dirichlet prior): one disagreement with a so-far perfect judge cannot all but
    rule a class out, at the price of a pull toward chance where data are few (about 3 points at 30 items a
    class with ``smoothing=1``, negligible at hundreds).

    The model needs at least 3 informative judges to be identifiable, and it cannot see errors the judges
    share: on LLMBar's Natural subset it estimates GPT-4's and ChatGPT's accuracies (each order as its own
    judge) within a few points, on the adversarial subsets, built to mislead them alike, far too high (the
    README's ensemble section has the measured figures for both settings).

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.
        labels: The classes in matrix order; default: every label voted, sorted.
        max_iter: At most this many EM iterations.
        tol: Converged when no posterior probability moves by more than this in one iteration.
        smoothing: The Laplace pseudo-count (>= 0; 0 = standard EM).
        groups: Vote column -> the annotator it belongs to (a judge's orders and repeats are one annotator).
            An annotator's votes on an item then count as one vote shared evenly by the labels it gave (its
            counts sum to 1 per item, a soft label), because its orders' errors are not independent of each
            other; every column is its own annotator without it (the model of the paper).

    Returns:
        ``labels``, ``priors`` (label -> p), ``confusion`` (annotator -> K x K list, rows = true class, columns =
        voted class), ``accuracy`` (annotator -> sum over classes of prior x diagonal, ``None`` for one
        without votes), ``posteriors`` (item -> label -> p, only items with a vote), ``iterations``,
        ``converged``, ``log_likelihood`` (of the votes, final parameters), ``smoothing``.

    Raises:
        ValueError: If a vote is not in ``labels``, or a parameter is out of range (:func:`param_problems`).
    """
    problems = param_problems(max_iter=max_iter, tol=tol, smoothing=smoothing)
    if problems:
        raise ValueError("dawid_skene: " + "; ".join(f"{name} {why}" for name, why in problems.items()))
    judges = list(dict.fromkeys(groups[column] for column in votes)) if groups is not None else list(votes)
    if len(judges) < 3:
        logger.warning("dawid_skene with %d judges: the model is not identifiable below 3", len(judges))
    classes = list(labels) if labels is not None else sorted_labels(votes)
    items, counts = _one_hot(votes, judges, classes, groups)
    start = counts.sum(axis=1) / counts.sum(axis=(1, 2))[:, None]
    posterior, priors, confusion, log_likelihood, iterations, delta = _fit(counts, start, smoothing, max_iter, tol)
    if delta > tol:
        logger.warning("dawid_skene did not converge in %d iterations (last change %.2g)", max_iter, delta)
    accuracy = np.einsum("k,jkk->j", priors, confusion)
    voted = counts.sum(axis=(0, 2)) > 0
    return {
        "labels": classes,
        "priors": dict(zip(classes, priors.tolist(), strict=True)),
        "confusion": {judge: confusion[j].tolist() for j, judge in enumerate(judges)},
        "accuracy": {judge: float(accuracy[j]) if voted[j] else None for j, judge in enumerate(judges)},
        "posteriors": {
            key: dict(zip(classes, row, strict=True)) for key, row in zip(items, posterior.tolist(), strict=True)
        },
        "iterations": iterations,
        "converged": delta <= tol,
        "log_likelihood": log_likelihood,
        "smoothing": smoothing,
    }


def bootstrap_intervals(votes: Votes, fit: Mapping[str, Any], groups: Mapping[str, str] | None = None,
                        resamples: int = 100, level: float = 0.95, seed: int = 0, max_iter: int = 1000,
                        tol: float = 1e-6, smoothing: float = 0.0) -> dict[str, Any]:
    """Percentile bootstrap intervals over items for a :func:`dawid_skene` fit's accuracies and priors.

    Each resample draws the fitted items with replacement (seeded) and refits the EM, starting from the full
    fit's posteriors of the drawn items (the same optimum's neighbourhood, so label switching cannot swap
    classes between resamples).

    Args:
        votes, groups, max_iter, tol, smoothing: As given to :func:`dawid_skene`.
        fit: What :func:`dawid_skene` returned for them.
        resamples: How many resamples (0: no intervals).
        level: The two-sided coverage, in (0, 1).
        seed: The random generator's seed.

    Returns:
        ``accuracy`` (annotator -> ``[low, high]``), ``priors`` (label -> ``[low, high]``), ``unit`` ("item"),
        ``method`` ("percentile bootstrap"), ``level``, ``resamples``, ``seed``.
    """
    judges, classes = list(fit["confusion"]), list(fit["labels"])
    items, counts = _one_hot(votes, judges, classes, groups)
    start = np.array([[fit["posteriors"][key][label] for label in classes] for key in items]).reshape(
        len(items), len(classes))
    rng = np.random.default_rng(seed)
    accuracies, priors = [], []
    for _ in range(resamples if len(items) else 0):
        drawn = rng.integers(0, len(items), len(items))
        _, prior, confusion, _, _, _ = _fit(counts[drawn], start[drawn], smoothing, max_iter, tol)
        accuracies.append(np.einsum("k,jkk->j", prior, confusion))
        priors.append(prior)
    tails = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]

    def bounds(samples: list[np.ndarray], names: Sequence[Any]) -> dict[str, list[float] | None]:
        if not samples:
            return {str(name): None for name in names}
        low, high = np.percentile(np.array(samples), tails, axis=0)
        return {str(name): [float(lo), float(hi)] for name, lo, hi in zip(names, low, high, strict=True)}

    return {"accuracy": bounds(accuracies, judges), "priors": bounds(priors, classes), "unit": "item",
            "method": "percentile bootstrap", "level": level, "resamples": resamples, "seed": seed}


def param_problems(**params: Any) -> dict[str, str]:
    """What is wrong with the given :func:`dawid_skene` parameters (``max_iter``, ``tol``, ``smoothing``; and the
    ensemble's ``annotators``, ``resamples``, ``level``): parameter
    -> why, empty when they are fine. Also what start-up checks config against, before any call."""
    problems = {}
    if "max_iter" in params and not (isinstance(params["max_iter"], int) and params["max_iter"] >= 1):
        problems["max_iter"] = f"must be a whole number >= 1, got {params['max_iter']!r}"
    for name in ("tol", "smoothing"):
        value = params.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
            problems[name] = f"must be a finite number >= 0, got {value!r}"
    if "annotators" in params and params["annotators"] not in ANNOTATORS:
        problems["annotators"] = f"must be one of {', '.join(ANNOTATORS)}, got {params['annotators']!r}"
    if "resamples" in params and not (isinstance(params["resamples"], int) and params["resamples"] >= 0):
        problems["resamples"] = f"must be a whole number >= 0, got {params['resamples']!r}"
    level = params.get("level", 0.95)
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        problems["level"] = f"must be a number between 0 and 1, got {level!r}"
    return problems


def _fit(counts: np.ndarray, posterior: np.ndarray, smoothing: float, max_iter: int, tol: float
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int, float]:
    """EM from ``posterior``: (posterior, priors, confusion, log-likelihood, iterations, last change)."""
    iterations, delta, log_likelihood = 0, math.inf, math.nan
    priors, confusion = _m_step(posterior, counts, smoothing)
    while iterations < max_iter and delta > tol:
        priors, confusion = _m_step(posterior, counts, smoothing)
        new, log_likelihood = _e_step(priors, confusion, counts)
        delta, posterior, iterations = float(np.abs(new - posterior).max(initial=0.0)), new, iterations + 1
    return posterior, priors, confusion, log_likelihood, iterations, delta


def _m_step(posterior: np.ndarray, counts: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """Class priors (K) and confusion matrices (J x K true x K voted) given item posteriors."""
    n_classes = posterior.shape[1]
    priors = (posterior.sum(axis=0) + smoothing) / (posterior.shape[0] + n_classes * smoothing)
    confusion = np.einsum("ik,ijl->jkl", posterior, counts) + smoothing
    total = confusion.sum(axis=2, keepdims=True)
    # unsmoothed, a class no item leans to (a label only ``labels`` names) has an empty row: uniform, not 0/0
    uniform = np.full_like(confusion, 1.0 / max(n_classes, 1))
    return priors, np.divide(confusion, total, out=uniform, where=total > 0)


def _e_step(priors: np.ndarray, confusion: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, float]:
    """Item posteriors (I x K) and the log-likelihood of the votes given the parameters."""
    joint = np.log(np.maximum(priors, FLOOR)) + np.einsum("ijl,jkl->ik", counts, np.log(np.maximum(confusion, FLOOR)))
    peak = joint.max(axis=1, keepdims=True, initial=-np.inf)
    likelihood = np.exp(joint - peak)  # shifted so the largest term is 1: no underflow with many judges
    total = likelihood.sum(axis=1, keepdims=True)
    return likelihood / total, float((np.log(total) + peak).sum())


def _one_hot(votes: Votes, judges: Sequence[str], classes: Sequence[Hashable], groups: Mapping[str, str] | None = None
             ) -> tuple[list[str], np.ndarray]:
    """The items with at least one vote and their I x J x K vote counts: one-hot per column, or with ``groups``
    each annotator's votes on an item as shares summing to 1."""
    label_index, judge_index = {label: k for k, label in enumerate(classes)}, {j: i for i, j in enumerate(judges)}
    items = [key for key in item_keys(votes) if cast_votes(votes, key)]
    counts = np.zeros((len(items), len(judges), len(classes)))
    for i, key in enumerate(items):
        for judge, label in cast_votes(votes, key).items():
            if label not in label_index:
                raise ValueError(f"vote {label!r} of {judge!r} on {key!r} is not among the labels {list(classes)}")
            counts[i, judge_index[groups[judge] if groups is not None else judge], label_index[label]] += 1.0
    if groups is not None:
        total = counts.sum(axis=2, keepdims=True)
        counts = np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)
    return items, counts
