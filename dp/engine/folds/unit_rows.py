"""The rows-per-unit histogram's exact counts, folded in the shared scan: each unit (a value of
the counted column, as stored) once, in the bin of its number of rows
(:func:`dp.contributions.bin_counts`).

A unit's rows may lie in every batch and file, so the accumulator keeps rows per unit
(memory: distinct units, not rows), merged by adding per unit, and the finish bins them. Unit
ids are compared exactly (an ``int`` privacy unit as stored, a text value by its characters;
:meth:`dp.engine.unit_bounding.UnitBound.ids`), never by a hash, so two units never merge.
Integer sums per unit do not depend on the merge order: every engine gives the same counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.contributions import bin_counts
from dppub.dp.engine.batches import Batch
from dppub.dp.engine.unit_bounding import UnitBound

__all__ = ["UnitRowsAggregate"]

_COMPACT = 64
"""Per-batch partials held before they are added up per unit."""


def _sum(parts: list[pd.Series]) -> list[pd.Series]:
    return [pd.concat(parts).groupby(level=0, sort=False).sum()] if parts else []


@dataclass(frozen=True, slots=True)
class UnitRowsAggregate:
    """Units per bin of their row counts (see the module docstring)."""

    column: str
    """The counted column: the privacy unit, or (without one) any declared column."""
    edges: tuple[int, ...]
    """The declared bins' lower edges (the first 1)."""
    cap: int
    """The top bin: ``cap`` rows or more."""

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def empty(self) -> list[pd.Series]:
        return []

    def _ids(self, batch: Batch) -> npt.NDArray[np.generic]:
        if self.column in batch.numeric and self.column not in batch.keys:
            # a value column as read (row-level neighbours: rows counted per value)
            return np.asarray(batch.numeric[self.column])
        # a privacy unit by its id as stored (never its clamped value), a text by its characters
        ids: npt.NDArray[np.generic] = UnitBound(column=self.column, max_rows=1).ids(batch)[0]
        return ids

    def update(self, acc: list[pd.Series], batch: Batch) -> list[pd.Series]:
        if batch.num_rows:
            acc.append(pd.Series(self._ids(batch)).value_counts(sort=False))
            if len(acc) >= _COMPACT:
                acc[:] = _sum(acc)
        return acc

    def merge(self, left: list[pd.Series], right: list[pd.Series]) -> list[pd.Series]:
        return _sum([*left, *right])

    def finish(self, acc: list[pd.Series]) -> npt.NDArray[np.int64]:
        rows = _sum(acc)
        counts = rows[0].to_numpy(dtype=np.int64) if rows else np.zeros(0, dtype=np.int64)
        return bin_counts(counts, self.edges, self.cap)
