"""A table's exact per-group counts and centred sums, folded batch by batch.

Each row's group is its cell over the table's declared axes (:func:`axis_codes`, as every
histogram here); a row with a missing key is in no group, and with a ``where:`` filter
(:mod:`dp.engine.row_filter`) only the rows it keeps are read. Per group it counts every row
(``count``) and, per measured column, only the rows where that column is present: their number
(``count(col)``), each quantile column's values over its fine declared grid (a histogram per
group), and, per summed column, the row's value clamped to the declared ``[lo, hi]`` (clamped
on read) and centred on ``mid = (lo + hi) / 2``, quantised to the nearest point (unbiased) of a
grid of ``2^-16`` of ``half = (hi - lo) / 2`` (:func:`dp.numerics.fixedpoint.quantise`):
integers of magnitude at most ``2^16``, summed exactly (a batch's per-group float sums stay
below ``2^53``; batches add as Python integers); a squared column's ``(v - mid)^2 - half^2 / 2``
the same way on a grid of ``2^-16`` of ``half^2 / 2``. With ``unit``, the number of distinct
privacy units (their ids as stored, never hashes) with a row in each group, each unit counted
in at most ``max_groups`` groups: those of its groups whose (group, unit) pair has the lowest
public hash (a choice that depends on the unit's own groups alone, so removing a unit changes
no other unit's counts; a unit whose rows were bounded to that many groups keeps them all).
Integer sums do not depend on batch boundaries, files or merge order, so the memory, stream and
Dask backends agree bit for bit; each sum is rounded once to float64 when finished
(:func:`dp.numerics.fixedpoint.to_float`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.axes import Axis
from dppub.dp.engine.batches import Batch
from dppub.dp.engine.folds.histogram_counts import axis_codes
from dppub.dp.engine.row_filter import RowFilter, rows_kept
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.numerics.fixedpoint import (
    FRACTION_BITS,
    ONE,
    IntArray,
    check_rows,
    int_zeros,
    quantise,
    to_float,
)

__all__ = ["GroupSums", "TableSumsAggregate"]

FloatArray = npt.NDArray[np.float64]
_EXACT_ROWS = 2 ** (53 - FRACTION_BITS)  # a batch's per-group float sum stays exact below this


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSums:
    """Per group (cells in C order): the row count and each column's exact centred sum."""

    counts: FloatArray
    centred: Mapping[str, FloatArray]
    histograms: Mapping[str, FloatArray]
    """Per quantile column: ``groups x bins`` counts, flattened in C order."""
    present: Mapping[str, FloatArray] = field(default_factory=dict)
    """Per measured column: the rows where it is present (absent: every row counted)."""
    squares: Mapping[str, FloatArray] = field(default_factory=dict)
    """Per squared column: the exact sum of ``(v - mid)^2 - half^2 / 2``."""
    distinct: FloatArray | None = None
    """The distinct privacy units with a row in each group (``count_distinct``)."""

    def vectors(self) -> dict[str, FloatArray]:
        """Every vector by its name as a component reads it: ``count``, ``count(col)``,
        ``centred_sum(col)``, ``centred_square(col)``, ``distinct``."""
        out = {"count": self.counts}
        out.update({f"count({c})": v for c, v in self.present.items()})
        out.update({f"centred_sum({c})": v for c, v in self.centred.items()})
        out.update({f"centred_square({c})": v for c, v in self.squares.items()})
        if self.distinct is not None:
            out["distinct"] = self.distinct
        return out


@dataclass(slots=True)
class _Acc:
    counts: npt.NDArray[np.int64]
    present: dict[str, npt.NDArray[np.int64]]
    sums: dict[str, IntArray]
    squares: dict[str, IntArray]
    hists: list[npt.NDArray[np.int64]]
    pairs: list[pd.DataFrame]
    """(cell, unit) pairs seen, deduplicated as they are merged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSumsAggregate:
    """See the module docstring."""

    axes: tuple[Axis, ...]
    bounds: tuple[tuple[str, float, float], ...] = ()
    """``(column, lo, hi)`` of every column whose centred sum is wanted (declared bounds)."""
    grids: tuple[Axis, ...] = ()
    """The fine grid of every quantile column (declared bins over its bounds)."""
    counted: tuple[str, ...] = ()
    """Columns whose present rows are counted per group (``count(col)``)."""
    squared: tuple[tuple[str, float, float], ...] = ()
    """``(column, lo, hi)`` of every column whose centred squares are summed."""
    unit: str | None = None
    """The privacy unit column, whose distinct ids are counted per group."""
    max_groups: int = 1
    """The most groups a unit is counted in by ``distinct`` (module doc)."""
    where: RowFilter | None = None
    """Only the rows this filter keeps are read."""
    marked: ClassVar[bool] = True
    """Receives marked batches: a missing measured value leaves its row in the count."""

    def __post_init__(self) -> None:
        if not self.axes:
            raise ConfigError("a table needs at least one key")
        for column, lo, hi in (*self.bounds, *self.squared):
            if not hi > lo:
                raise ConfigError(f"column {column!r}: bounds [{lo}, {hi}] enclose no interval")

    @property
    def cells(self) -> int:
        return int(np.prod([a.size for a in self.axes]))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(
                [
                    *(a.column for a in self.axes),
                    *(c for c, _, _ in self.bounds),
                    *(g.column for g in self.grids),
                    *self.counted,
                    *(c for c, _, _ in self.squared),
                    *(() if self.unit is None else (self.unit,)),
                    *(() if self.where is None else self.where.columns),
                ]
            )
        )

    def empty(self) -> _Acc:
        def zeros() -> npt.NDArray[np.int64]:
            return np.zeros(self.cells, dtype=np.int64)

        return _Acc(
            counts=zeros(),
            present={c: zeros() for c in self.counted},
            sums={c: int_zeros(self.cells) for c, _, _ in self.bounds},
            squares={c: int_zeros(self.cells) for c, _, _ in self.squared},
            hists=[np.zeros(self.cells * g.size, dtype=np.int64) for g in self.grids],
            pairs=[],
        )

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        if batch.num_rows > _EXACT_ROWS:
            raise InvariantError(f"a batch of {batch.num_rows} rows is too large to sum exactly")
        keys = [a.column for a in self.axes]
        batch = rows_kept(batch, [*keys, *(() if self.unit is None else (self.unit,))], self.where)
        if batch.num_rows == 0:
            return acc
        shape = tuple(a.size for a in self.axes)
        cell = np.ravel_multi_index([axis_codes(a, batch) for a in self.axes], shape)
        acc.counts += np.bincount(cell, minlength=self.cells)
        for column in self.counted:
            acc.present[column] += np.bincount(cell[_has(batch, column)], minlength=self.cells)
        for column, lo, hi in self.bounds:
            acc.sums[column] = acc.sums[column] + _sum(batch, cell, self.cells, column, lo, hi)
        for column, lo, hi in self.squared:
            part = _sum(batch, cell, self.cells, column, lo, hi, squared=True)
            acc.squares[column] = acc.squares[column] + part
        for grid, hist in zip(self.grids, acc.hists, strict=True):
            has = _has(batch, grid.column)
            rows = batch if has.all() else batch.take(has)
            flat = cell[has] * grid.size + axis_codes(grid, rows)
            hist += np.bincount(flat, minlength=len(hist))
        if self.unit is not None:
            ids = _unit_ids(batch, self.unit)
            acc.pairs.append(pd.DataFrame({"cell": cell, "unit": ids}).drop_duplicates())
        return acc

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        pairs = left.pairs + right.pairs
        if pairs:
            pairs = [pd.concat(pairs, ignore_index=True).drop_duplicates()]
        return _Acc(
            counts=left.counts + right.counts,
            present={c: left.present[c] + right.present[c] for c in left.present},
            sums={c: left.sums[c] + right.sums[c] for c in left.sums},
            squares={c: left.squares[c] + right.squares[c] for c in left.squares},
            hists=[a + b for a, b in zip(left.hists, right.hists, strict=True)],
            pairs=pairs,
        )

    def finish(self, acc: _Acc) -> GroupSums:
        check_rows(int(acc.counts.sum()))
        distinct = None
        if self.unit is not None:
            pairs = pd.concat(acc.pairs, ignore_index=True) if acc.pairs else None
            cells = (
                np.zeros(0, dtype=np.int64) if pairs is None else _capped(pairs, self.max_groups)
            )
            distinct = np.bincount(cells, minlength=self.cells).astype(np.float64)
        return GroupSums(
            counts=acc.counts.astype(np.float64),
            centred={c: to_float(acc.sums[c], (hi - lo) / 2.0 / ONE) for c, lo, hi in self.bounds},
            histograms={
                g.column: h.astype(np.float64) for g, h in zip(self.grids, acc.hists, strict=True)
            },
            present={c: v.astype(np.float64) for c, v in acc.present.items()},
            squares={
                c: to_float(acc.squares[c], ((hi - lo) / 2.0) ** 2 / 2.0 / ONE)
                for c, lo, hi in self.squared
            },
            distinct=distinct,
        )


def _capped(pairs: pd.DataFrame, limit: int) -> npt.NDArray[np.int64]:
    """The cells of the distinct (cell, unit) pairs, each unit in at most ``limit`` cells: its
    pairs of lowest public hash (ties by cell), a choice by the unit's own cells alone."""
    pairs = pairs.drop_duplicates()
    order = pd.DataFrame(
        {
            "unit": pd.factorize(pairs["unit"])[0],
            "hash": pd.util.hash_pandas_object(pairs, index=False).to_numpy(),
            "cell": pairs["cell"].to_numpy(np.int64),
        }
    ).sort_values(["unit", "hash", "cell"], kind="stable")
    kept = order[order.groupby("unit", sort=False).cumcount() < limit]
    return np.asarray(kept["cell"].to_numpy(np.int64))


def _has(batch: Batch, column: str) -> npt.NDArray[np.bool_]:
    """Where ``column`` is present (not marked missing)."""
    return batch.present([column])


def _sum(
    batch: Batch,
    cell: npt.NDArray[np.intp],
    cells: int,
    column: str,
    lo: float,
    hi: float,
    *,
    squared: bool = False,
) -> IntArray:
    """Per group, the exact quantised sum of the present values of ``column`` centred on
    ``mid`` (or of their squares less ``half^2 / 2``) (module doc)."""
    has = _has(batch, column)
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    values = np.asarray(batch.numeric[column], dtype=np.float64)[has] - mid
    if squared:
        q = quantise(values**2 - half**2 / 2.0, half**2 / 2.0, rounding="nearest")
    else:
        q = quantise(values, half, rounding="nearest")
    part = np.bincount(cell[has], weights=q, minlength=cells)  # exact: module doc
    out: IntArray = part.astype(np.int64).astype(object)
    return out


def _unit_ids(batch: Batch, unit: str) -> npt.NDArray[np.generic]:
    """Each row's privacy unit as stored: an ``int`` id exactly, a text id by its characters."""
    if unit in batch.keys:
        return np.asarray(batch.keys[unit])
    column = batch.text[unit]
    words = np.asarray(column.dictionary.to_pylist(), dtype=object)
    return np.asarray(words[column.indices.to_numpy(zero_copy_only=False)], dtype=object)
