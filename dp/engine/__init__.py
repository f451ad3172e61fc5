"""Exact aggregates of Parquet sources computed batch by batch (local stream or a cluster).

The data-touching steps of a publication -- value policies and clamping, histograms, regression
sufficient statistics, k-anonymity leaf counts, DP k-means' per-iteration counts and sums (or a
projected, bounded copy of its rows folded once, :mod:`dp.engine.lloyd_cache`), the logistic loss
sums at each Newton iterate of objective perturbation -- are single-pass folds,
so they run over bounded batches instead of a whole in-memory frame; the k-anonymous table is
written batch by batch (:func:`anonymize_stream`). Every function returns *exact* aggregates; DP
noise is added once by the caller, never here.
"""

from dppub.dp.engine.aggregate import Aggregate, Fused, StreamingBackend, with_progress
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.engine.folds.anonymity_counts import (
    DistinctValuesAggregate,
    LeafCountsAggregate,
    distinct_values_stream,
    leaf_counts_stream,
    node_class_sizes,
)
from dppub.dp.engine.folds.histogram_counts import HistogramAggregate, histogram_stream
from dppub.dp.engine.folds.k_anonymous_table import anonymize_stream
from dppub.dp.engine.folds.lloyd_sums import lloyd_statistics_stream, projected_lloyd_step
from dppub.dp.engine.folds.logistic_sums import LogisticLossAggregate, logistic_sums_stream
from dppub.dp.engine.folds.marginal_counts import MarginalsAggregate
from dppub.dp.engine.folds.regression_sums import StatisticsAggregate, regression_statistics_stream
from dppub.dp.engine.lloyd_cache import Projection, ProjectionAggregate
from dppub.dp.engine.memory import MemoryBackend, estimate_bytes
from dppub.dp.engine.source import TableSource

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Aggregate",
    "DaskBackend",
    "DistinctValuesAggregate",
    "Fused",
    "HistogramAggregate",
    "LeafCountsAggregate",
    "LogisticLossAggregate",
    "MarginalsAggregate",
    "MemoryBackend",
    "Projection",
    "ProjectionAggregate",
    "StatisticsAggregate",
    "StreamingBackend",
    "TableSource",
    "anonymize_stream",
    "distinct_values_stream",
    "estimate_bytes",
    "histogram_stream",
    "leaf_counts_stream",
    "lloyd_statistics_stream",
    "logistic_sums_stream",
    "node_class_sizes",
    "projected_lloyd_step",
    "regression_statistics_stream",
    "with_progress",
]
