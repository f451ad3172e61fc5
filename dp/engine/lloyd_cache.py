"""A projected, bounded-memory copy of a few numeric columns, for iterative stages.

DP k-means needs one pass over its features per Lloyd iteration. Rather than re-reading the
Parquet source each time, the run's shared scan also folds a :class:`ProjectionAggregate`: the
complete rows of the stage's columns as *weighted distinct rows* (rows equal on every column
merged into one, with how many there were). Declared domains are usually coarse (an age in
years, hours to a tenth), so 10^8 rows often reduce to 10^4-10^5 distinct ones. A statistic
that sums integers over rows (a Lloyd step's quantised counts and sums) is exactly the same
computed on the weighted rows.

Memory is bounded by :data:`PROJECTION_ROWS`: when the distinct rows outgrow it the aggregate
gives up (its result is ``None``) and the stage reads the source once per iteration as before.
A fragment's distinct rows are a subset of the whole source's, so once one fragment's partial
gives up, the others stop collecting too (the result is ``None`` either way).
Exact data: never log or persist a :class:`Projection`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dppub.dp.engine.batches import Batch, NumericArray
from dppub.dp.errors import ConfigError

__all__ = ["PROJECTION_ROWS", "Projection", "ProjectionAggregate"]

PROJECTION_ROWS = 1 << 22
"""Most distinct rows a projection holds (~100 MB for two columns) before it gives up."""

_WEIGHT = "__weight"
_Held = list[pa.Table] | None  # grouped tables (keys + weight); None: gave up


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Projection:
    """Distinct rows of some numeric columns and how many source rows each stands for."""

    values: Mapping[str, NumericArray]
    """Per column, the distinct rows' values (clamped, as the batches hold them)."""
    weights: npt.NDArray[np.int64]
    """Source rows per distinct row (all >= 1)."""

    @property
    def rows(self) -> int:
        """Source rows represented."""
        return int(self.weights.sum())


class _GaveUp:
    """Set once any partial of one projection outgrew its bound (a copy sent to another
    process starts unset: it only saves work)."""

    def __init__(self) -> None:
        self.value = False

    def __reduce__(self) -> tuple[type[_GaveUp], tuple[()]]:
        return _GaveUp, ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectionAggregate:
    """The weighted distinct complete rows of numeric ``columns`` (see the module docstring).
    One instance serves one scan: once it has given up, it stays given up."""

    columns: tuple[str, ...]
    """Numeric columns, without repeats."""
    max_rows: int = PROJECTION_ROWS
    """Distinct rows held at most; past this the result is ``None``."""
    _gave_up: _GaveUp = field(default_factory=_GaveUp, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.columns or len(set(self.columns)) != len(self.columns):
            raise ConfigError("a projection needs distinct columns (at least one)")

    def empty(self) -> _Held:
        """No rows."""
        return []

    def update(self, acc: _Held, batch: Batch) -> _Held:
        """Add the batch's rows, grouped (a no-op once given up)."""
        if acc is None or self._gave_up.value:
            return None
        if batch.num_rows == 0:
            return acc
        table = pa.table({c: batch.numeric[c] for c in self.columns})
        grouped = table.group_by(list(self.columns), use_threads=False).aggregate(
            [([], "count_all")]
        )
        return self._bounded([*acc, _named(grouped, self.columns, "count_all")])

    def merge(self, left: _Held, right: _Held) -> _Held:
        """Both sides' rows (``None`` if either gave up)."""
        if left is None or right is None:
            return None
        return self._bounded([*left, *right])

    def finish(self, acc: _Held) -> Projection | None:
        """The distinct rows, or ``None`` when they did not fit."""
        if acc is None:
            return None
        table = _regroup(acc, self.columns)
        return Projection(
            values={c: table.column(c).to_numpy() for c in self.columns},
            weights=np.asarray(table.column(_WEIGHT).to_numpy(), dtype=np.int64),
        )

    def _bounded(self, tables: list[pa.Table]) -> _Held:
        if sum(t.num_rows for t in tables) <= self.max_rows:
            return tables
        merged = _regroup(tables, self.columns)
        if merged.num_rows <= self.max_rows:
            return [merged]
        self._gave_up.value = True
        return None


def _regroup(tables: list[pa.Table], columns: tuple[str, ...]) -> pa.Table:
    """One table of distinct rows, the weights of equal rows added."""
    if not tables:
        empty = {c: pa.array([], pa.float64()) for c in columns}
        return pa.table({**empty, _WEIGHT: pa.array([], pa.int64())})
    if len(tables) == 1:
        return tables[0]
    table = pa.concat_tables(tables)
    grouped = table.group_by(list(columns), use_threads=False).aggregate([(_WEIGHT, "sum")])
    return _named(grouped, columns, f"{_WEIGHT}_sum")


def _named(grouped: pa.Table, columns: tuple[str, ...], weight: str) -> pa.Table:
    """The key columns, then the weight column as :data:`_WEIGHT` (whatever Arrow's order)."""
    return pa.table({**{c: grouped.column(c) for c in columns}, _WEIGHT: grouped.column(weight)})
