"""Exact aggregates of Parquet sources computed batch by batch (local stream or a cluster).

The data-touching steps of a publication -- validation, clamping, histograms, regression
sufficient statistics, k-anonymity leaf counts -- are single-pass folds, so they run over bounded
batches instead of a whole in-memory frame. Every function returns *exact* aggregates; DP noise
is added once by the caller, never here.
"""

from dp.engine.aggregate import (
    Aggregate,
    Backend,
    StreamingBackend,
    fragment_partial,
    merge_partials,
)
from dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, Scan, iter_batches, open_scan
from dp.engine.classes import LeafCounts, LeafCountsAggregate, leaf_counts_stream, node_class_sizes
from dp.engine.histogram import HistogramAggregate, axis_codes, histogram_stream
from dp.engine.regression import Response, StatisticsAggregate, regression_statistics_stream
from dp.engine.source import EngineName, TableSource, exact_histogram, make_backend

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Aggregate",
    "Backend",
    "Batch",
    "EngineName",
    "HistogramAggregate",
    "LeafCounts",
    "LeafCountsAggregate",
    "Response",
    "Scan",
    "StatisticsAggregate",
    "StreamingBackend",
    "TableSource",
    "axis_codes",
    "exact_histogram",
    "fragment_partial",
    "histogram_stream",
    "iter_batches",
    "leaf_counts_stream",
    "make_backend",
    "merge_partials",
    "node_class_sizes",
    "open_scan",
    "regression_statistics_stream",
]
