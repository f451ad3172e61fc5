"""A private-keys table's exact counts and centred sums per key present in the data.

The counterpart of :mod:`dp.engine.folds.table_sums` when the groups are not declared: each row's
group is its key (:func:`dp.engine.key_weights.key_labels`), and the accumulator maps each key seen
to its row count (every row with the key) and, per measured column, the rows where it is
present and the exact integer sum over them of the row's value centred on the
declared mid-point and quantised as there (:func:`dp.numerics.fixedpoint.quantise`). Integer sums
keyed by label do not depend on batches, files or merge order: every engine gives the same bits.
Only the keys the selection releases are ever read off (:meth:`KeyedSums.take`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.engine.batches import Batch
from dppub.dp.engine.folds.table_sums import GroupSums
from dppub.dp.engine.key_weights import key_labels
from dppub.dp.engine.row_filter import RowFilter, rows_kept
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.numerics.fixedpoint import FRACTION_BITS, ONE, check_rows, quantise, to_float

__all__ = ["KeyedSums", "KeyedSumsAggregate"]

_EXACT_ROWS = 2 ** (53 - FRACTION_BITS)
_Acc = dict[str, list[int]]
"""key -> [rows, then per bounded column its present rows and centred sum] (Python integers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyedSums:
    """Every key present in the data with its exact count and centred sums (never published)."""

    labels: tuple[str, ...]
    counts: npt.NDArray[np.float64]
    centred: Mapping[str, npt.NDArray[np.float64]]
    present: Mapping[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    """Per bounded column: the rows of each key where it is present."""

    def take(self, labels: Sequence[str]) -> GroupSums:
        """The aggregates of ``labels`` (each present), in that order."""
        at = {k: i for i, k in enumerate(self.labels)}
        index = np.array([at[k] for k in labels], dtype=np.int64)
        return GroupSums(
            counts=self.counts[index],
            centred={c: v[index] for c, v in self.centred.items()},
            histograms={},
            present={c: v[index] for c, v in self.present.items()},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyedSumsAggregate:
    """See the module docstring."""

    by: tuple[str, ...]
    bounds: tuple[tuple[str, float, float], ...] = ()
    """``(column, lo, hi)`` of every column whose centred sum is wanted (declared bounds)."""
    where: RowFilter | None = None
    """A ``where:`` filter: only the rows it keeps are read."""
    counted: tuple[str, ...] = ()
    """Further columns (any type) whose present rows are counted per key (``count(col)``)."""
    marked: ClassVar[bool] = True
    """Receives marked batches: a row with a missing measured value still counts."""

    def __post_init__(self) -> None:
        if not self.by:
            raise ConfigError("a table needs at least one key")

    @property
    def columns(self) -> tuple[str, ...]:
        where = () if self.where is None else self.where.columns
        return tuple(
            dict.fromkeys([*self.by, *(c for c, _, _ in self.bounds), *self.counted, *where])
        )

    def empty(self) -> _Acc:
        return {}

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        if batch.num_rows > _EXACT_ROWS:
            raise InvariantError(f"a batch of {batch.num_rows} rows is too large to sum exactly")
        batch = rows_kept(batch, self.by, self.where)
        if batch.num_rows == 0:
            return acc
        codes, uniques = pd.factorize(key_labels(batch, self.by), sort=False)
        parts = [np.bincount(codes, minlength=len(uniques))]
        for column, lo, hi in self.bounds:
            has = batch.present([column])
            values = np.asarray(batch.numeric[column], dtype=np.float64)[has]
            q = quantise(values - (lo + hi) / 2.0, (hi - lo) / 2.0, rounding="nearest")
            parts.append(np.bincount(codes[has], minlength=len(uniques)))
            parts.append(np.bincount(codes[has], weights=q, minlength=len(uniques)))  # exact
        for column in self.counted:
            parts.append(np.bincount(codes[batch.present([column])], minlength=len(uniques)))
        for i, key in enumerate(uniques):
            now = [int(p[i]) for p in parts]
            old = acc.get(str(key))
            acc[str(key)] = now if old is None else [a + b for a, b in zip(old, now, strict=True)]
        return acc

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        for key, now in right.items():
            old = left.get(key)
            left[key] = now if old is None else [a + b for a, b in zip(old, now, strict=True)]
        return left

    def finish(self, acc: _Acc) -> KeyedSums:
        labels = tuple(sorted(acc))
        counts = np.array([acc[k][0] for k in labels], dtype=np.int64)
        check_rows(int(counts.sum()))
        centred = {
            c: to_float(
                np.array([acc[k][2 + 2 * j] for k in labels], dtype=object), (hi - lo) / 2 / ONE
            )
            for j, (c, lo, hi) in enumerate(self.bounds)
        }
        present = {
            c: np.array([acc[k][1 + 2 * j] for k in labels], dtype=np.float64)
            for j, (c, _, _) in enumerate(self.bounds)
        }
        start = 1 + 2 * len(self.bounds)
        for j, c in enumerate(self.counted):
            present[c] = np.array([acc[k][start + j] for k in labels], dtype=np.float64)
        return KeyedSums(
            labels=labels, counts=counts.astype(np.float64), centred=centred, present=present
        )
