"""The kind tables: statistical tables, counts, sums, means and quantiles by group (section
``tables``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, planning, result, plot).
"""

from dppub.dp.pipeline.kinds.tables.kind import TableKind

__all__ = ["TableKind"]
