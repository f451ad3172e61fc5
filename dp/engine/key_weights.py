"""The exact per-key aggregate private keys are selected from, folded in the shared scan.

For each key (the tuple of a row's ``by`` labels) present in the data: the number of distinct
privacy units with a row in it, and the sum of those units' weights
:func:`dp.tables.keys.unit_weight` ``(k)`` -- ``floor(2^20 / sqrt(k))`` for a unit with rows in
``k`` keys -- as exact integers. Row-level, every row is its own unit (weight ``2^20``, count 1).

Under a privacy unit, a unit's weight depends on all its keys, which a batch does not see whole:
the accumulator keeps the distinct (unit, key) pairs (a unit's id as stored,
:meth:`dp.engine.unit_bounding.UnitBound.ids`, and the key's labels: both compared exactly, never
by a hash; memory: distinct pairs, not rows), merged by set union, and
:meth:`KeyWeightsAggregate.finish` counts each unit's keys once all are in. Sets and integer sums
do not depend on the merge order, so every engine gives the same bits. Rows are read *after*
unit bounding (wrap in :class:`dp.engine.unit_bounding.Bounded`), which keeps a unit's rows in at
most ``max_partitions`` keys; the finish enforces that bound itself, by label: a unit found in
more keys (whatever let it through) counts in its ``max_partitions`` lowest labels only -- a
choice that depends on the unit's own keys alone -- so no unit ever weighs on more keys than the
selection rule is calibrated for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from dppub.dp.engine.batches import Batch
from dppub.dp.engine.row_filter import RowFilter
from dppub.dp.engine.unit_bounding import UnitBound
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.tables.keys import GRID, KeyWeights, unit_weight

__all__ = ["KEY_SEPARATOR", "KeyWeightsAggregate", "key_labels"]

_EMPTY = np.zeros(0, dtype=np.int64)

KEY_SEPARATOR = "\x1f"
"""Joins the labels of a multi-column key (the ASCII unit separator: not in any label)."""


@dataclass(slots=True)
class _Acc:
    rows: dict[str, int] = field(default_factory=dict)
    """Row-level: rows per key."""
    pairs: list[pd.DataFrame] = field(default_factory=list)
    """Under a unit: distinct (unit, key) pairs, per batch (deduplicated at the finish)."""


def _labels(batch: Batch, column: str) -> pd.Series:
    """Each row's label in ``column`` as text (an int by its digits, a float by ``repr``)."""
    if column in batch.text:
        col: pa.DictionaryArray = batch.text[column]
        return pd.Series(col.to_pandas(), copy=False).astype(str)
    if column in batch.numeric:
        values = batch.numeric[column]
        if values.dtype.kind == "i":
            return pd.Series(values, copy=False).astype(str)
        return pd.Series([repr(float(v)) for v in values])
    raise InvariantError(f"column {column!r} was not read")


def key_labels(batch: Batch, by: Sequence[str]) -> pd.Series:
    """Each row's key: its ``by`` labels joined by :data:`KEY_SEPARATOR`."""
    labels = [_labels(batch, c) for c in by]
    out = labels[0]
    for more in labels[1:]:
        out = out.str.cat(more, sep=KEY_SEPARATOR)
    return out


@dataclass(frozen=True, slots=True)
class KeyWeightsAggregate:
    """Per-key unit counts and quantised unit weights (see the module docstring)."""

    by: tuple[str, ...]
    """The table's ``by`` columns, in order."""
    unit: UnitBound | None = None
    """The privacy unit (``None``: row-level, each row a unit in one key); its
    ``max_partitions``: the most keys a unit counts in."""
    complete: tuple[str, ...] = ()
    """Further columns a row must have to count (a table's measured columns: the selection
    reads the rows its measures read)."""
    where: RowFilter | None = None
    """A ``where:`` filter: only the rows it keeps count."""

    def __post_init__(self) -> None:
        if not self.by:
            raise ConfigError("private keys need at least one by column")

    @property
    def columns(self) -> tuple[str, ...]:
        extra = () if self.unit is None else (self.unit.column,)
        where = () if self.where is None else self.where.columns
        return tuple(dict.fromkeys((*self.by, *extra, *self.complete, *where)))

    def empty(self) -> _Acc:
        return _Acc()

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        """Row-level: add the batch's rows per key. Unit: add its distinct (unit, key) pairs."""
        if self.where is not None:
            batch = batch.take(self.where.keep(batch))
        if batch.num_rows == 0:
            return acc
        keys = key_labels(batch, self.by)
        if self.unit is None:
            for key, n in keys.value_counts(sort=False).items():
                acc.rows[str(key)] = acc.rows.get(str(key), 0) + int(n)
            return acc
        pairs = pd.DataFrame({"unit": self.unit.ids(batch)[0], "key": keys.to_numpy()})
        acc.pairs.append(pairs.drop_duplicates())
        return acc

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        """Integer sums per key, or the union of pairs: independent of the order."""
        for key, n in right.rows.items():
            left.rows[key] = left.rows.get(key, 0) + n
        left.pairs.extend(right.pairs)
        return left

    def finish(self, acc: _Acc) -> KeyWeights:
        """Sorted keys with their unit counts and weight sums (exact int64)."""
        if self.unit is None:
            labels = tuple(sorted(acc.rows))
            counts = np.array([acc.rows[k] for k in labels], dtype=np.int64)
            return KeyWeights(labels=labels, units=counts, weights=counts * GRID)
        if not acc.pairs:
            return KeyWeights(labels=(), units=_EMPTY, weights=_EMPTY)
        pairs = pd.concat(acc.pairs, ignore_index=True).drop_duplicates()
        pairs = pairs.sort_values("key", kind="stable")
        pairs = pairs[pairs.groupby("unit", sort=False).cumcount() < self.unit.max_partitions]
        per_unit = pairs.groupby("unit", sort=False)["key"].transform("size").to_numpy()
        table = {k: unit_weight(int(k)) for k in np.unique(per_unit)}
        weight = np.array([table[k] for k in per_unit], dtype=np.int64)
        frame = pd.DataFrame({"key": pairs["key"].to_numpy(), "weight": weight})
        sums = frame.groupby("key", sort=True)["weight"].agg(["size", "sum"])
        units: npt.NDArray[np.int64] = sums["size"].to_numpy(dtype=np.int64)
        weights: npt.NDArray[np.int64] = sums["sum"].to_numpy(dtype=np.int64)
        single, spread_keys, spread_offsets = _memberships(pairs, per_unit, sums.index)
        return KeyWeights(
            labels=tuple(str(k) for k in sums.index),
            units=units,
            weights=weights,
            single=single,
            spread_keys=spread_keys,
            spread_offsets=spread_offsets,
        )


def _memberships(
    pairs: pd.DataFrame, per_unit: npt.NDArray[np.int64], labels: pd.Index
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per key the units in it alone; the units in more than one key by number of keys, then
    id (an order between two units that depends on those two alone), each with its keys'
    indices into ``labels`` -- what :func:`dp.tables.policy_keys.policy_weights` reads."""
    index = labels.get_indexer(pd.Index(pairs["key"]))
    alone = per_unit == 1
    single = np.bincount(index[alone], minlength=len(labels)).astype(np.int64)
    spread = pd.DataFrame(
        {"n": per_unit[~alone], "unit": pairs["unit"].to_numpy()[~alone], "key": index[~alone]}
    ).sort_values(["n", "unit", "key"], kind="stable")
    sizes = spread.groupby(["n", "unit"], sort=False).size().to_numpy(dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return single, spread["key"].to_numpy(dtype=np.int64), offsets
