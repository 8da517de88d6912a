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
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from runner.stats.votes import Votes, cast_votes, item_keys, sorted_labels

logger = logging.getLogger(__name__)

# The floor of a probability before its log, crowd-kit's _EPS: unsmoothed, a confusion cell nobody filled is 0,
# and 0 x log 0 would turn an item's whole posterior into NaN; at 1e-10 such a vote still all but rules a class out.
FLOOR = 1e-10


def dawid_skene(
    votes: Votes,
    labels: Sequence[Hashable] | None = None,
    max_iter: int = 1000,
    tol: float = 1e-6,
    smoothing: float = 0.0,
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

    Returns:
        ``labels``, ``priors`` (label -> p), ``confusion`` (judge -> K x K list, rows = true class, columns =
        voted class), ``accuracy`` (judge -> sum over classes of prior x diagonal, ``None`` for a judge
        without votes), ``posteriors`` (item -> label -> p, only items with a vote), ``iterations``,
        ``converged``, ``log_likelihood`` (of the votes, final parameters), ``smoothing``.

    Raises:
        ValueError: If a vote is not in ``labels``, or a parameter is out of range (:func:`param_problems`).
    """
    problems = param_problems(max_iter=max_iter, tol=tol, smoothing=smoothing)
    if problems:
        raise ValueError("dawid_skene: " + "; ".join(f"{name} {why}" for name, why in problems.items()))
    judges = list(votes)
    if len(judges) < 3:
        logger.warning("dawid_skene with %d judges: the model is not identifiable below 3", len(judges))
    classes = list(labels) if labels is not None else sorted_labels(votes)
    items, counts = _one_hot(votes, judges, classes)
    posterior = counts.sum(axis=1) / counts.sum(axis=(1, 2))[:, None]
    iterations, delta = 0, math.inf
    while iterations < max_iter and delta > tol:
        priors, confusion = _m_step(posterior, counts, smoothing)
        new, log_likelihood = _e_step(priors, confusion, counts)
        delta, posterior, iterations = float(np.abs(new - posterior).max(initial=0.0)), new, iterations + 1
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


def param_problems(**params: Any) -> dict[str, str]:
    """What is wrong with the given :func:`dawid_skene` parameters (``max_iter``, ``tol``, ``smoothing``): parameter
    -> why, empty when they are fine. Also what start-up checks config against, before any call."""
    problems = {}
    if "max_iter" in params and not (isinstance(params["max_iter"], int) and params["max_iter"] >= 1):
        problems["max_iter"] = f"must be a whole number >= 1, got {params['max_iter']!r}"
    for name in ("tol", "smoothing"):
        value = params.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
            problems[name] = f"must be a finite number >= 0, got {value!r}"
    return problems


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


def _one_hot(votes: Votes, judges: Sequence[str], classes: Sequence[Hashable]) -> tuple[list[str], np.ndarray]:
    """The items with at least one vote and their I x J x K one-hot vote counts."""
    label_index, judge_index = {label: k for k, label in enumerate(classes)}, {j: i for i, j in enumerate(judges)}
    items = [key for key in item_keys(votes) if cast_votes(votes, key)]
    counts = np.zeros((len(items), len(judges), len(classes)))
    for i, key in enumerate(items):
        for judge, label in cast_votes(votes, key).items():
            if label not in label_index:
                raise ValueError(f"vote {label!r} of {judge!r} on {key!r} is not among the labels {list(classes)}")
            counts[i, judge_index[judge], label_index[label]] = 1.0
    return items, counts
