"""Exact aggregates of Parquet sources computed batch by batch (local stream or a cluster).

The data-touching steps of a publication -- value policies and clamping, histograms, regression
sufficient statistics, k-anonymity leaf counts, DP k-means' per-iteration counts and sums (or a
projected, bounded copy of its rows folded once, :mod:`dp.engine.lloyd_cache`), the logistic loss
sums at each Newton iterate of objective perturbation -- are single-pass folds,
so they run over bounded batches instead of a whole in-memory frame; the k-anonymous table is
written batch by batch (:func:`anonymize_stream`). Every function returns *exact* aggregates; DP
noise is added once by the caller, never here.
"""

from dp.engine.aggregate import (
    Aggregate,
    Backend,
    Fused,
    Progress,
    StreamingBackend,
    fold,
    fragment_partial,
    merge_partials,
    with_progress,
)
from dp.engine.anonymity_counts import (
    DistinctValuesAggregate,
    LeafCounts,
    LeafCountsAggregate,
    batch_leaf_codes,
    distinct_values_stream,
    leaf_counts_stream,
    node_class_sizes,
)
from dp.engine.anonymize import anonymize_stream
from dp.engine.batches import (
    DEFAULT_BATCH_SIZE,
    Batch,
    Scan,
    batch_frame,
    iter_batches,
    open_scan,
)
from dp.engine.dask import DaskBackend
from dp.engine.histogram_counts import HistogramAggregate, axis_codes, histogram_stream
from dp.engine.lloyd_cache import Projection, ProjectionAggregate
from dp.engine.lloyd_sums import LloydAggregate, lloyd_statistics_stream, projected_lloyd_step
from dp.engine.logistic_sums import LogisticLossAggregate, logistic_sums_stream
from dp.engine.memory import MemoryBackend, estimate_bytes
from dp.engine.regression_sums import Response, StatisticsAggregate, regression_statistics_stream
from dp.engine.source import TableSource

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Aggregate",
    "Backend",
    "Batch",
    "DaskBackend",
    "DistinctValuesAggregate",
    "Fused",
    "HistogramAggregate",
    "LeafCounts",
    "LeafCountsAggregate",
    "LloydAggregate",
    "LogisticLossAggregate",
    "MemoryBackend",
    "Progress",
    "Projection",
    "ProjectionAggregate",
    "Response",
    "Scan",
    "StatisticsAggregate",
    "StreamingBackend",
    "TableSource",
    "anonymize_stream",
    "axis_codes",
    "batch_frame",
    "batch_leaf_codes",
    "distinct_values_stream",
    "estimate_bytes",
    "fold",
    "fragment_partial",
    "histogram_stream",
    "iter_batches",
    "leaf_counts_stream",
    "lloyd_statistics_stream",
    "logistic_sums_stream",
    "merge_partials",
    "node_class_sizes",
    "open_scan",
    "projected_lloyd_step",
    "regression_statistics_stream",
    "with_progress",
]
