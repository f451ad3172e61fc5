"""The kind contributions: the DP distribution of rows per privacy unit (section
``contributions``), and the share of rows each candidate ``max_rows_per_unit`` would drop.

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, result, plot).
"""

from dppub.dp.pipeline.kinds.contributions.kind import ContributionsKind

__all__ = ["ContributionsKind"]
