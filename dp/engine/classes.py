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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dp.anonymity.hierarchy import Hierarchy
from dp.engine.aggregate import Backend, StreamingBackend
from dp.engine.batches import DEFAULT_BATCH_SIZE, Batch
from dp.errors import ConfigError
from dp.schema import TableSchema

__all__ = ["LeafCounts", "LeafCountsAggregate", "leaf_counts_stream", "node_class_sizes"]

IntArray = npt.NDArray[np.int64]
_Acc = tuple[IntArray, IntArray]  # (sorted unique mixed-radix keys, counts)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LeafCounts:
    """Distinct leaf-code tuples and how many records have each (exact: never publish)."""

    hierarchies: tuple[Hierarchy, ...]
    """One hierarchy per QI column, in column order."""
    rows: IntArray
    """``(m, d)`` leaf codes, sorted lexicographically."""
    counts: IntArray
    """Records per row of :attr:`rows` (all > 0)."""

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.counts.sum())


def node_class_sizes(leaf: LeafCounts, levels: Sequence[int]) -> IntArray:
    """Sizes of the non-empty equivalence classes of the node ``levels`` (sorted by class key)."""
    if len(levels) != len(leaf.hierarchies):
        raise ConfigError(f"levels must have {len(leaf.hierarchies)} entries, got {len(levels)}")
    key = np.zeros(len(leaf.counts), dtype=np.int64)
    for i, (h, lvl) in enumerate(zip(leaf.hierarchies, levels, strict=True)):
        key = key * len(h.labels(lvl)) + h.group_codes(lvl)[leaf.rows[:, i]]
    uniq, inverse = np.unique(key, return_inverse=True)
    return np.bincount(inverse, weights=leaf.counts, minlength=len(uniq)).astype(np.int64)


def _leaf_codes(h: Hierarchy, batch: Batch, column: str) -> IntArray:
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
        """The QI columns."""
        return self.qi

    def empty(self) -> _Acc:
        """No tuples."""
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        """Add the batch's leaf tuples (memory: distinct tuples, not rows)."""
        if batch.num_rows == 0:
            return acc
        key = np.zeros(batch.num_rows, dtype=np.int64)
        for h, column in zip(self.hierarchies, self.qi, strict=True):
            key = key * len(h.leaves) + _leaf_codes(h, batch, column)
        uniq, inverse = np.unique(key, return_inverse=True)
        return self.merge(acc, (uniq, np.bincount(inverse).astype(np.int64)))

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        """Union of the key sets, counts added (integer: exact in any order)."""
        keys = np.concatenate([left[0], right[0]])
        uniq, inverse = np.unique(keys, return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([left[1], right[1]]))
        return uniq, counts.astype(np.int64)

    def finish(self, acc: _Acc) -> LeafCounts:
        """Decode the mixed-radix keys back into leaf-code rows."""
        keys = acc[0].copy()
        rows = np.zeros((len(keys), len(self.qi)), dtype=np.int64)
        for i in range(len(self.qi) - 1, -1, -1):
            size = len(self.hierarchies[i].leaves)
            rows[:, i] = keys % size
            keys //= size
        return LeafCounts(hierarchies=self.hierarchies, rows=rows, counts=acc[1])


def leaf_counts_stream(
    source: str | Path,
    schema: TableSchema,
    hierarchies: Mapping[str, Hierarchy],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> LeafCounts:
    """Distinct QI leaf tuples of a Parquet source and their counts (see module docstring).

    Args:
        source: a Parquet file or a folder of Parquet files.
        schema: the declared :class:`~dp.schema.TableSchema`.
        hierarchies: QI column -> hierarchy, in QI order.
        batch_size: upper bound on rows held per batch (ignored when ``backend`` is given).
        backend: where to run; default a :class:`StreamingBackend` of ``batch_size``.

    Raises:
        InputError: as :func:`dp.io.read_table` would, or a value that is not a hierarchy leaf.
    """
    agg = LeafCountsAggregate(qi=tuple(hierarchies), hierarchies=tuple(hierarchies.values()))
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    result: LeafCounts = runner.run(agg, source, schema)
    return result
