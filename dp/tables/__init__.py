"""Statistical tables: counts, sums, means and quantiles by group (the ``tables:`` kind's math).

:mod:`~dp.tables.split` (measures, components, the epsilon split), :mod:`~dp.tables.margins`
(cells and sub-totals), :mod:`~dp.tables.cells_and_margins` (counts and centred sums through the
matrix mechanism), :mod:`~dp.tables.quantiles` (hierarchical CDFs), :mod:`~dp.tables.rounding`
(consistent integers), :mod:`~dp.tables.table` (a table from its exact aggregates).
"""
