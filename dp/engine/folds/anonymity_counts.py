"""Counts of leaf-code tuples of the quasi-identifiers, accumulated batch by batch.

k-anonymity's lattice search only ever needs the class sizes of full-domain generalizations, and
every node's classes are unions of *leaf* classes (records with equal leaf codes on all QIs). So
the table can be reduced, in one streaming pass, to its distinct leaf tuples and their counts --
the base rows of :class:`dp.anonymity.classes.CodedTable` -- whose size is bounded by the product
of the hierarchies' leaf counts, not by the row count. :func:`node_class_sizes` then gives any
node's class sizes from those counts alone.

Leaves are encoded by the very :meth:`dp.anonymity.Hierarchy.encode` of the in-memory path, once
per distinct value of a batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.engine.aggregate import Backend, StreamingBackend
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.schema import TableSchema

__all__ = [
    "DistinctValuesAggregate",
    "LeafCounts",
    "LeafCountsAggregate",
    "batch_leaf_codes",
    "distinct_values_stream",
    "leaf_counts_stream",
    "node_class_sizes",
]

IntArray = npt.NDArray[np.int64]
# (sorted unique mixed-radix keys, their counts, their first record positions, records folded)
_Acc = tuple[IntArray, IntArray, IntArray, int]


_DENSE_KEYS = 1 << 22
"""Key spaces up to this size (or twice the keys at hand) are counted and looked up densely."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LeafCounts:
    """Distinct leaf-code tuples and how many records have each (exact: never publish)."""

    hierarchies: tuple[Hierarchy, ...]
    """One hierarchy per QI column, in column order."""
    rows: IntArray
    """``(m, d)`` leaf codes, sorted lexicographically."""
    counts: IntArray
    """Records per row of :attr:`rows` (all > 0)."""
    first: IntArray
    """Position of the first record with each row's tuple, in source order (fragment by fragment,
    row by row). Ordering the rows by it numbers them as
    :meth:`dp.anonymity.classes.CodedTable.build` does on the whole table (first appearance)."""
    _keys: IntArray = field(init=False, repr=False)
    _dense: IntArray | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        keys = _mixed_keys(self.rows, self.hierarchies)
        space = _key_space(self.hierarchies)
        dense = None
        if space <= max(_DENSE_KEYS, 2 * len(keys)):
            dense = np.full(space, -1, dtype=np.int64)
            dense[keys] = np.arange(len(keys), dtype=np.int64)
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_dense", dense)

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.counts.sum())

    def row_of(self, codes: IntArray) -> IntArray:
        """Index into :attr:`rows` of each ``(n, d)`` leaf-code tuple (each must be counted)."""
        wanted = _mixed_keys(codes, self.hierarchies)
        if self._dense is not None:
            found = self._dense[wanted]
            if len(found) and found.min() < 0:
                raise InvariantError("a leaf tuple that was not counted")
            return found
        found = np.searchsorted(self._keys, wanted)
        if len(wanted) and (
            found.max() >= len(self._keys) or not np.array_equal(self._keys[found], wanted)
        ):
            raise InvariantError("a leaf tuple that was not counted")
        return found.astype(np.int64, copy=False)


def _key_space(hierarchies: Sequence[Hierarchy]) -> int:
    return math.prod(len(h.leaves) for h in hierarchies)


def _mixed_keys(codes: IntArray, hierarchies: Sequence[Hierarchy]) -> IntArray:
    """Mixed-radix key of each leaf-code row (sorts like the rows; < 2^62 by construction)."""
    key = np.zeros(len(codes), dtype=np.int64)
    for i, h in enumerate(hierarchies):
        key = key * len(h.leaves) + codes[:, i]
    return key


def _sum_by_key(
    keys: IntArray, weights: IntArray | None, first: IntArray, space: int
) -> tuple[IntArray, IntArray, IntArray]:
    """Sorted distinct ``keys``, their summed ``weights`` (their counts when None; exact, as
    counts stay far below 2^53) and smallest ``first``. A small key space is counted densely."""
    if space <= max(_DENSE_KEYS, 2 * len(keys)):
        total = np.bincount(keys, weights=weights, minlength=space)
        uniq = np.flatnonzero(total).astype(np.int64, copy=False)
        earliest = np.full(space, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(earliest, keys, first)
        return uniq, total[uniq].astype(np.int64), earliest[uniq]
    uniq, inverse = np.unique(keys, return_inverse=True)
    earliest = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(earliest, inverse, first)
    return uniq, np.bincount(inverse, weights=weights).astype(np.int64), earliest


def node_class_sizes(leaf: LeafCounts, levels: Sequence[int]) -> IntArray:
    """Sizes of the non-empty equivalence classes of the node ``levels`` (sorted by class key)."""
    if len(levels) != len(leaf.hierarchies):
        raise ConfigError(f"levels must have {len(leaf.hierarchies)} entries, got {len(levels)}")
    key = np.zeros(len(leaf.counts), dtype=np.int64)
    for i, (h, lvl) in enumerate(zip(leaf.hierarchies, levels, strict=True)):
        key = key * len(h.labels(lvl)) + h.group_codes(lvl)[leaf.rows[:, i]]
    uniq, inverse = np.unique(key, return_inverse=True)
    return np.bincount(inverse, weights=leaf.counts, minlength=len(uniq)).astype(np.int64)


def batch_leaf_codes(h: Hierarchy, batch: Batch, column: str) -> IntArray:
    """Leaf code of every row of ``batch`` in ``column`` (:meth:`Hierarchy.encode` once per
    distinct value). Raises :class:`~dp.errors.InputError` for a value that is not a leaf."""
    if column in batch.numeric:
        encoded = pc.dictionary_encode(pa.array(batch.numeric[column]))
    else:
        encoded = batch.text[column]
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    used = np.flatnonzero(np.bincount(indices, minlength=len(encoded.dictionary)))
    lookup = np.full(len(encoded.dictionary), -1, dtype=np.int64)
    if len(used):
        distinct = encoded.dictionary.take(pa.array(used)).to_pandas().rename(column)
        lookup[used] = h.encode(distinct)
    return lookup[indices]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeafCountsAggregate:
    """Counts of distinct leaf tuples over the QI ``columns``."""

    qi: tuple[str, ...]
    """QI columns, in order."""
    hierarchies: tuple[Hierarchy, ...]
    """Their hierarchies, in the same order."""
    also: tuple[str, ...] = ()
    """Further columns the release reads: read too, so rows a policy drops for them are left
    out here as in every other pass of the release."""

    def __post_init__(self) -> None:
        if not self.qi or len(self.qi) != len(self.hierarchies):
            raise ConfigError("give one hierarchy per quasi-identifier (at least one)")
        space = 1
        for h in self.hierarchies:
            space *= len(h.leaves)
        if space >= 1 << 62:
            raise ConfigError("the quasi-identifiers' leaf domain is too large to count (>= 2^62)")

    @property
    def columns(self) -> tuple[str, ...]:
        """The QI columns, then the others the release reads."""
        return tuple(dict.fromkeys((*self.qi, *self.also)))

    def empty(self) -> _Acc:
        """No tuples."""
        none = np.zeros(0, dtype=np.int64)
        return none, none, none, 0

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        """Add the batch's leaf tuples (memory: distinct tuples, not rows)."""
        if batch.num_rows == 0:
            return acc
        key = np.zeros(batch.num_rows, dtype=np.int64)
        for h, column in zip(self.hierarchies, self.qi, strict=True):
            key = key * len(h.leaves) + batch_leaf_codes(h, batch, column)
        n = batch.num_rows
        keys, counts, first = _sum_by_key(
            key, None, np.arange(n, dtype=np.int64), _key_space(self.hierarchies)
        )
        return self.merge(acc, (keys, counts, first, n))

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        """Union of the key sets, counts added (integer: exact in any order); ``right``'s records
        come after ``left``'s (the backend merges in source order)."""
        keys = np.concatenate([left[0], right[0]])
        counts = np.concatenate([left[1], right[1]])
        first = np.concatenate([left[2], right[2] + left[3]])
        return (*_sum_by_key(keys, counts, first, _key_space(self.hierarchies)), left[3] + right[3])

    def finish(self, acc: _Acc) -> LeafCounts:
        """Decode the mixed-radix keys back into leaf-code rows."""
        keys = acc[0].copy()
        rows = np.zeros((len(keys), len(self.qi)), dtype=np.int64)
        for i in range(len(self.qi) - 1, -1, -1):
            size = len(self.hierarchies[i].leaves)
            rows[:, i] = keys % size
            keys //= size
        return LeafCounts(hierarchies=self.hierarchies, rows=rows, counts=acc[1], first=acc[2])


def leaf_counts_stream(
    source: str | Path,
    schema: TableSchema,
    hierarchies: Mapping[str, Hierarchy],
    *,
    also: Sequence[str] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> LeafCounts:
    """Distinct QI leaf tuples of a Parquet source and their counts (see module docstring);
    ``also``: the release's other columns (rows a policy drops for them are left out).

    Args:
        source: a Parquet file or a folder of Parquet files.
        schema: the declared :class:`~dp.schema.TableSchema`.
        hierarchies: QI column -> hierarchy, in QI order.
        batch_size: upper bound on rows held per batch (ignored when ``backend`` is given).
        backend: where to run; default a :class:`StreamingBackend` of ``batch_size``.

    Raises:
        InputError: as :func:`dp.reference.frame.read_table` would, or a value that is not a
            hierarchy leaf.
    """
    agg = LeafCountsAggregate(
        qi=tuple(hierarchies), hierarchies=tuple(hierarchies.values()), also=tuple(also)
    )
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    result: LeafCounts = runner.run(agg, source, schema)
    return result


@dataclass(frozen=True, slots=True)
class DistinctValuesAggregate:
    """The distinct values of one column, as text (for a prefix-mask hierarchy's leaves).

    Only the k-anonymity release (not DP) may take a hierarchy from the data; a DP release's
    domains come from the config alone.
    """

    column: str
    also: tuple[str, ...] = ()
    """Further columns of the release: rows a policy drops for them are left out here too."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The column, then the others the release reads."""
        return tuple(dict.fromkeys((self.column, *self.also)))

    def empty(self) -> set[str]:
        """No values."""
        return set()

    def update(self, acc: set[str], batch: Batch) -> set[str]:
        """Add the batch's distinct values (looked up once per dictionary entry in use)."""
        if batch.num_rows == 0:
            return acc
        if self.column in batch.numeric:
            values = pd.Series(np.unique(batch.numeric[self.column]))
        else:
            encoded = batch.text[self.column]
            indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            used = np.flatnonzero(np.bincount(indices, minlength=len(encoded.dictionary)))
            values = encoded.dictionary.take(pa.array(used)).to_pandas()
        acc.update(values.astype(str).tolist())
        return acc

    def merge(self, left: set[str], right: set[str]) -> set[str]:
        """Union."""
        left |= right
        return left

    def finish(self, acc: set[str]) -> list[str]:
        """Sorted, as ``sorted(frame[column].astype(str).unique())`` on the whole table."""
        return sorted(acc)


def distinct_values_stream(
    source: str | Path,
    schema: TableSchema,
    column: str,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> list[str]:
    """Sorted distinct values (as text) of ``column`` of a Parquet file or folder."""
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    result: list[str] = runner.run(DistinctValuesAggregate(column), source, schema)
    return result
