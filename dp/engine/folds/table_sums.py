"""A table's exact per-group counts and centred sums, folded batch by batch.

Each row's group is its cell over the table's declared axes (:func:`axis_codes`, as every
histogram here). One aggregate reads every column of the table, so every measure is computed on
the same rows (those with all of them). Per group it counts rows, counts each quantile column's
values over its fine declared grid (a histogram per group), and sums, per measured column, the
row's
value clamped to the declared ``[lo, hi]`` (clamped on read) and centred on ``mid = (lo + hi) /
2``, quantised to the nearest point (unbiased) of a grid of ``2^-16`` of ``half = (hi - lo) / 2``
(:func:`dp.numerics.fixedpoint.quantise`): integers of magnitude at most ``2^16``, summed exactly
(a batch's per-group float sums stay below ``2^53``; batches add as Python integers). Integer
sums do not depend on batch boundaries, files or merge order, so the memory, stream and Dask
backends agree bit for bit; each sum is rounded once to float64 when finished
(:func:`dp.numerics.fixedpoint.to_float`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.axes import Axis
from dppub.dp.engine.batches import Batch
from dppub.dp.engine.folds.histogram_counts import axis_codes
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


_Acc = tuple[npt.NDArray[np.int64], dict[str, IntArray], list[npt.NDArray[np.int64]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSumsAggregate:
    """See the module docstring."""

    axes: tuple[Axis, ...]
    bounds: tuple[tuple[str, float, float], ...] = ()
    """``(column, lo, hi)`` of every column whose centred sum is wanted (declared bounds)."""
    grids: tuple[Axis, ...] = ()
    """The fine grid of every quantile column (declared bins over its bounds)."""

    def __post_init__(self) -> None:
        if not self.axes:
            raise ConfigError("a table needs at least one key")
        for column, lo, hi in self.bounds:
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
                ]
            )
        )

    def empty(self) -> _Acc:
        counts = np.zeros(self.cells, dtype=np.int64)
        sums = {c: int_zeros(self.cells) for c, _, _ in self.bounds}
        return counts, sums, [np.zeros(self.cells * g.size, dtype=np.int64) for g in self.grids]

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        if batch.num_rows == 0:
            return acc
        if batch.num_rows > _EXACT_ROWS:
            raise InvariantError(f"a batch of {batch.num_rows} rows is too large to sum exactly")
        shape = tuple(a.size for a in self.axes)
        cell = np.ravel_multi_index([axis_codes(a, batch) for a in self.axes], shape)
        counts, sums, hists = acc
        counts += np.bincount(cell, minlength=self.cells)
        for column, lo, hi in self.bounds:
            values = np.asarray(batch.numeric[column], dtype=np.float64)
            q = quantise(values - (lo + hi) / 2.0, (hi - lo) / 2.0, rounding="nearest")
            part = np.bincount(cell, weights=q, minlength=self.cells)  # exact: module doc
            sums[column] = sums[column] + part.astype(np.int64).astype(object)
        for grid, hist in zip(self.grids, hists, strict=True):
            flat = cell * grid.size + axis_codes(grid, batch)
            hist += np.bincount(flat, minlength=len(hist))
        return acc

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        sums = {c: left[1][c] + right[1][c] for c in left[1]}
        hists = [a + b for a, b in zip(left[2], right[2], strict=True)]
        return left[0] + right[0], sums, hists

    def finish(self, acc: _Acc) -> GroupSums:
        counts, sums, hists = acc
        check_rows(int(counts.sum()))
        return GroupSums(
            counts=counts.astype(np.float64),
            centred={c: to_float(sums[c], (hi - lo) / 2.0 / ONE) for c, lo, hi in self.bounds},
            histograms={
                g.column: h.astype(np.float64) for g, h in zip(self.grids, hists, strict=True)
            },
        )
