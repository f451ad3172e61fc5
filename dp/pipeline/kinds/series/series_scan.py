"""A series' exact values: per period and group, counts and sums of the bounded rows.

**Bounding across periods** (with the dataset's privacy unit, column ``u``): a unit keeps rows
in its first ``k = max_periods_per_unit`` periods of the horizon (in time order) and, in each,
its ``m = max_rows_per_unit`` rows of lowest priority; the priority is a keyed hash (SipHash,
key fixed by the series' name) of the unit, the period and the row's own values. Which rows a
unit keeps depends on that unit's rows alone, so the bounded tables of two neighbours (one unit
added or removed) differ by at most ``m`` rows in each of at most ``k`` periods: the relation
:class:`dp.series.Relation` ``(k, m)`` certifies noise for. The choice is deterministic and a
later period never displaces an earlier one (its first ``k`` periods are the same whatever comes
after), so the rows a unit keeps in a past period never change between runs.

A sum ``{sum: c}`` over bounds ``[0, hi]`` is measured as the sum of ``c / hi`` (each row
within ``[0, 1]``, the same relation) and scaled back by ``hi`` after the noise. Each row's
``c / hi`` is rounded down to a multiple of ``2^-20`` (a per-row, data-independent map: still
within ``[0, 1]``; at most ``2^-20 hi`` less per row), so every sum of fewer than ``2^33`` rows
is exact in float64 (:func:`math.fsum` adds them without rounding): the exact values the
certified sensitivity of :mod:`dp.series.period_release` assumes. Rows outside the horizon's
periods so far, or without a parseable date, a unit, a key or a value, are not read.

The accumulator keeps one small record per row read (its period, group, unit and values): a
series' table is a period's records; memory grows with the rows of the periods read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from dppub.dp.engine.batches import Batch
from dppub.dp.pipeline.kinds.series.series_calendar import Per, row_ordinals

__all__ = ["SeriesAggregate", "SeriesExact", "bounded_values"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesExact:
    """Exact values: one ``periods x groups`` matrix per measure (sums divided by ``hi``)."""

    values: tuple[FloatArray, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesAggregate:
    """The engine aggregate of one series run (periods ``0..last`` of the horizon)."""

    name: str
    date: str
    per: Per
    first: int
    """The ordinal of the horizon's period 0."""
    last: int
    """The last period read (an index of the horizon)."""
    keys: tuple[tuple[str, tuple[str, ...]], ...]
    """Each ``by`` column and its declared categories, in order."""
    sums: tuple[tuple[str, float], ...]
    """Each measure's column and scale (``("", 1.0)``: a count)."""
    unit: str | None = None
    max_periods: int = 1
    max_rows: int = 1

    @property
    def columns(self) -> tuple[str, ...]:
        cols = [self.date, *(k for k, _ in self.keys), *(c for c, _ in self.sums if c)]
        if self.unit is not None:
            cols.append(self.unit)
        return tuple(dict.fromkeys(cols))

    @property
    def groups(self) -> int:
        return math.prod(len(c) for _, c in self.keys)

    def empty(self) -> list[pd.DataFrame]:
        return []

    def update(self, acc: list[pd.DataFrame], batch: Batch) -> list[pd.DataFrame]:
        b = batch.complete(self.columns)
        if b.num_rows == 0:
            return acc
        number, ok = row_ordinals(b.text[self.date], self.per)
        index = number - self.first
        keep = ok & (index >= 0) & (index <= self.last)
        group = np.zeros(b.num_rows, dtype=np.int64)
        for column, categories in self.keys:
            codes = _codes(b.text[column], categories)
            keep &= codes >= 0
            group = group * len(categories) + codes
        frame = pd.DataFrame({"period": index, "group": group})
        for j, (column, scale) in enumerate(self.sums):
            if column:
                raw = np.asarray(b.numeric[column], dtype=np.float64)
                frame[f"v{j}"] = _quantised(raw / scale)
            else:
                frame[f"v{j}"] = 1.0
        if self.unit is not None:
            frame["unit"] = _units(b, self.unit)
        acc.append(frame[keep])
        return acc

    def merge(self, left: list[pd.DataFrame], right: list[pd.DataFrame]) -> list[pd.DataFrame]:
        return [*left, *right]

    def finish(self, acc: list[pd.DataFrame]) -> SeriesExact:
        frame = pd.concat(acc, ignore_index=True) if acc else None
        shape = (self.last + 1, self.groups)
        if frame is None or frame.empty:
            return SeriesExact(values=tuple(np.zeros(shape) for _ in self.sums))
        if self.unit is not None:
            frame = bounded_values(frame, self.name, self.max_periods, self.max_rows)
        out = []
        for j in range(len(self.sums)):
            sums = frame.groupby(["period", "group"])[f"v{j}"].agg(math.fsum)
            cells = np.zeros(shape)
            where = sums.index.to_frame(index=False).to_numpy(dtype=np.int64)
            cells[where[:, 0], where[:, 1]] = sums.to_numpy(dtype=np.float64)
            out.append(cells)
        return SeriesExact(values=tuple(out))


def bounded_values(frame: pd.DataFrame, name: str, max_periods: int, max_rows: int) -> pd.DataFrame:
    """The rows each unit keeps (module doc): its first ``max_periods`` periods, in each its
    ``max_rows`` rows of lowest keyed priority."""
    key = (name.encode("utf-8") + b"dppub-series-key")[:16].ljust(16, b"_").decode("latin-1")
    content = frame.drop(columns=["unit"]).astype(str).agg("\x1f".join, axis=1)
    text = frame["unit"].astype(str) + "\x1e" + content
    priority = pd.util.hash_pandas_object(text, index=False, hash_key=key).to_numpy()
    work = frame.assign(_priority=priority).sort_values(
        ["unit", "period", "_priority"], kind="stable"
    )
    rank = work.groupby("unit")["period"].rank(method="dense")
    within = work.groupby(["unit", "period"]).cumcount()
    kept = work[(rank <= max_periods) & (within < max_rows)]
    return kept.drop(columns=["_priority"])


_GRID = 2.0**20


def _quantised(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``values`` (within ``[0, 1]``) rounded down to multiples of ``2^-20`` (module doc)."""
    return np.asarray(np.floor(values * _GRID) / _GRID, dtype=np.float64)


def _codes(column: pa.DictionaryArray, categories: tuple[str, ...]) -> npt.NDArray[np.int64]:
    """Each row's index among the declared categories (-1: none)."""
    position = {c: i for i, c in enumerate(categories)}
    lookup = np.array(
        [position.get(str(v), -1) for v in column.dictionary.to_pylist()] + [-1], dtype=np.int64
    )
    idx = column.indices.to_numpy(zero_copy_only=False)
    nulls = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    idx = np.where(nulls, len(lookup) - 1, np.nan_to_num(idx, nan=len(lookup) - 1))
    return lookup[idx.astype(np.int64)]


def _units(batch: Batch, unit: str) -> npt.NDArray[np.object_]:
    if unit in batch.keys:
        return batch.keys[unit].astype(str).astype(object)
    column = batch.text[unit]
    return np.asarray(column.dictionary_decode().to_pylist(), dtype=object)
