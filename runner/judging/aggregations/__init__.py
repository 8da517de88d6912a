"""Every aggregation in one registry (runner.judging.aggregations.registry), the shipped ones registered.

Importing the package registers the shipped aggregations (builtin), so any reader of :data:`REGISTRY` sees all.
"""

from runner.judging.aggregations import builtin  # noqa: F401 - registers the shipped aggregations
from runner.judging.aggregations.records import (
    CONFIDENCES,
    MAJORITY,
    NO_CONSENSUS,
    UNANIMOUS,
    EnsembleItem,
    EnsembleResult,
)
from runner.judging.aggregations.registry import (
    BOTH,
    ENSEMBLE_ONLY,
    REGISTRY,
    AggregationRef,
    AggregationRegistry,
    AggregationSpec,
    AggregationView,
    Kind,
    Use,
    aggregation_ref,
)

__all__ = [
    "BOTH", "CONFIDENCES", "ENSEMBLE_ONLY", "MAJORITY", "NO_CONSENSUS", "REGISTRY", "UNANIMOUS", "AggregationRef",
    "AggregationRegistry", "AggregationSpec", "AggregationView", "EnsembleItem", "EnsembleResult", "Kind", "Use",
    "aggregation_ref",
]
