"""Dawid & Skene (1979): each judge's confusion matrix and each item's true label from agreement alone.

Numpy EM: the maintained PyPI implementation (crowd-kit) hard-depends on transformers, nltk and pyarrow,
far too much for a ~40-line algorithm (checked against it to 4 decimals on LLMBar).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from runner.stats.votes import Votes, cast_votes, item_keys, sorted_labels

logger = logging.getLogger(__name__)


def dawid_skene(
    votes: Votes,
    labels: Sequence[Hashable] | None = None,
    max_iter: int = 100,
    tol: float = 1e-6,
    smoothing: float = 1.0,
) -> dict[str, Any]:
    """Estimate each judge's confusion matrix and each item's true label from the judges' agreement alone.

    EM for the Dawid & Skene (1979) model: judges err independently given the true class, each with its
    own confusion matrix. It starts from the vote shares of each item (a soft majority vote), so it is
    deterministic and needs no seed. Laplace smoothing adds ``smoothing`` pseudo-counts to every prior and
    confusion cell in each M-step (a MAP estimate under a symmetric Dirichlet prior): no probability is
    ever 0, so one disagreement with a so-far perfect judge cannot make a class impossible. The price is a
    pull toward chance where data are few (about 3 points at 30 items a class, negligible at hundreds).

    The model needs at least 3 informative judges to be identifiable, and it cannot see errors the judges
    share: on LLMBar's Natural subset it estimates GPT-4's and ChatGPT's accuracies (each order as its own
    judge) within 2.3 points, on the adversarial subsets, built to mislead them alike, 6-19 points too high.

    Args:
        votes: Judge -> item key -> label, ``None`` for a missing vote.
        labels: The classes in matrix order; default: every label voted, sorted.
        max_iter: At most this many EM iterations.
        tol: Converged when no posterior probability moves by more than this in one iteration.
        smoothing: The Laplace pseudo-count (> 0).

    Returns:
        ``labels``, ``priors`` (label -> p), ``confusion`` (judge -> K x K list, rows = true class, columns =
        voted class), ``accuracy`` (judge -> sum over classes of prior x diagonal, ``None`` for a judge
        without votes), ``posteriors`` (item -> label -> p, only items with a vote), ``iterations``,
        ``converged``, ``log_likelihood`` (of the votes, final parameters), ``smoothing``.

    Raises:
        ValueError: If a vote is not in ``labels``, ``smoothing`` is not positive or ``max_iter`` < 1.
    """
    if smoothing <= 0 or max_iter < 1:
        raise ValueError(f"dawid_skene needs smoothing > 0 and max_iter >= 1, got {smoothing}, {max_iter}")
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


def _m_step(posterior: np.ndarray, counts: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed class priors (K) and confusion matrices (J x K true x K voted) given item posteriors."""
    n_classes = posterior.shape[1]
    priors = (posterior.sum(axis=0) + smoothing) / (posterior.shape[0] + n_classes * smoothing)
    confusion = np.einsum("ik,ijl->jkl", posterior, counts) + smoothing
    return priors, confusion / confusion.sum(axis=2, keepdims=True)


def _e_step(priors: np.ndarray, confusion: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, float]:
    """Item posteriors (I x K) and the log-likelihood of the votes given the parameters."""
    joint = np.log(priors) + np.einsum("ijl,jkl->ik", counts, np.log(confusion))
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
