"""The kind series: a series published period by period under one budget (section ``series``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), `item` (its config
model), `planning` (the period due, the strategy, the charge), `series_calendar` (period
labels), `series_scan` (the exact values, units bounded per period), `publishing` (the noise
and the figures), `series_store` (what earlier runs published, sealed by the ledger),
`result` and `plot`.
"""

from dppub.dp.pipeline.kinds.series.kind import SeriesKind

__all__ = ["SeriesKind"]
