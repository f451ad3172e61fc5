"""Equivalence classes of a full-domain generalization, counted on integer codes.

The table is encoded once: every quasi-identifier (QI) becomes leaf codes, records with equal leaf
codes are collapsed into *base rows* with a count, and for each attribute and level a lookup gives
the group code of every base row. Evaluating a lattice node is then a handful of numpy gathers and
one ``bincount``/``factorize`` over the base rows -- no per-node DataFrame groupby. Attributes are
packed into small *blocks* whose every level combination is pre-factorized, so a node key is the
mixed-radix sum of 2-3 block codes instead of one term per QI (the same idea as ARX's
snapshot/roll-up of class counts, Kohlmayer et al. 2012, traded for memory instead of a cache).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.errors import InvariantError

__all__ = ["CodedTable", "LDiversity", "NodeClasses"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_BLOCK_NODES = 64  # max level combinations pre-factorized per block (memory ~ m * 8 B each)
_DENSE_KEYS = 1 << 12  # up to max(this, 8 * rows) keys, count with bincount instead of hashing


def _densify(key: IntArray) -> tuple[IntArray, int]:
    codes, uniques = pd.factorize(key, sort=False)
    return codes.astype(np.int64, copy=False), len(uniques)


def _first_index(codes: IntArray) -> IntArray:
    """Position of the first occurrence of each code of a ``pd.factorize`` result.

    Factorize numbers codes by first appearance, so a new code starts where the running max grows.
    """
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    runmax = np.maximum.accumulate(codes)
    return np.flatnonzero(np.r_[True, runmax[1:] > runmax[:-1]])


def _combine(parts: Sequence[tuple[IntArray, int]]) -> tuple[IntArray, int]:
    """Mixed-radix combination of code arrays, re-densifying before int64 could overflow."""
    key, space = parts[0]
    for codes, size in parts[1:]:
        if space * size >= 1 << 62:
            key, space = _densify(key)
        key = key * size + codes
        space *= size
    return key, space


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeClasses:
    """Class counts of one node, per base row (all arrays have one entry per base row)."""

    class_id: IntArray
    """Class of each base row (ids may be sparse)."""
    class_size: FloatArray
    """Size of the class of each base row."""
    bad: BoolArray
    """Base rows whose class violates k (or l) and is suppressed."""
    bad_rows: IntArray
    """The same as indices (metrics gather through it: cheap when few rows are suppressed)."""
    suppressed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CodedTable:
    """A table's QIs as leaf codes, collapsed to weighted base rows (see module docstring).

    Base rows are numbered by first appearance in the records. A table built from streamed leaf
    counts (:meth:`from_counts`) given in that order
    (:attr:`dp.engine.folds.anonymity_counts.LeafCounts.first`) is identical array for array, so
    every metric is computed with the same float operations.
    """

    hierarchies: tuple[Hierarchy, ...]
    record_row: IntArray | None
    """Base row of every record (``None`` when built from counts: there are no records)."""
    rows: IntArray
    """``(m, d)`` leaf codes of the base rows."""
    counts: IntArray
    group: tuple[tuple[IntArray, ...], ...]
    """``group[i][l]``: group code at level ``l`` of attribute ``i``, per base row."""
    blocks: tuple[tuple[int, ...], ...]
    block_codes: tuple[tuple[tuple[IntArray, int], ...], ...]
    pair_row: IntArray | None
    """With a sensitive column: base row of each distinct (base row, sensitive value) pair."""
    pair_value: IntArray | None
    pair_count: IntArray | None

    @classmethod
    def build(
        cls, leaf_codes: IntArray, hierarchies: Sequence[Hierarchy], sensitive: IntArray | None
    ) -> CodedTable:
        """Collapse ``(n, d)`` leaf codes (and optional sensitive codes) into base rows."""
        hs = tuple(hierarchies)
        parts = [(leaf_codes[:, i], len(h.leaves)) for i, h in enumerate(hs)]
        record_row, m = _densify(_combine(parts)[0])
        rows = leaf_codes[_first_index(record_row)]
        counts = np.bincount(record_row, minlength=m).astype(np.int64)
        pairs = None
        if sensitive is not None:
            n_sens = int(sensitive.max()) + 1 if len(sensitive) else 1
            pair_key, _ = _densify(record_row * n_sens + sensitive)
            pair_first = _first_index(pair_key)
            pairs = (
                record_row[pair_first],
                sensitive[pair_first],
                np.bincount(pair_key).astype(np.int64),
            )
        return cls.from_counts(rows, counts, hs, record_row=record_row, pairs=pairs)

    @classmethod
    def from_counts(
        cls,
        rows: IntArray,
        counts: IntArray,
        hierarchies: Sequence[Hierarchy],
        *,
        record_row: IntArray | None = None,
        pairs: tuple[IntArray, IntArray, IntArray] | None = None,
    ) -> CodedTable:
        """A table from distinct leaf-code rows and their counts, e.g. streamed from a Parquet
        source (:class:`dp.engine.folds.anonymity_counts.LeafCounts`)."""
        hs = tuple(hierarchies)
        if rows.ndim != 2 or rows.shape != (len(counts), len(hs)):
            raise InvariantError("leaf rows must be (m, d) with one count per row")
        group = tuple(
            tuple(h.group_codes(lvl)[rows[:, i]] for lvl in range(h.height))
            for i, h in enumerate(hs)
        )
        blocks = _make_blocks([h.height for h in hs])
        block_codes = tuple(_block_table(group, hs, b) for b in blocks)
        pair_row, pair_value, pair_count = pairs if pairs is not None else (None, None, None)
        return cls(
            hierarchies=hs,
            record_row=record_row,
            rows=rows,
            counts=counts,
            group=group,
            blocks=blocks,
            block_codes=block_codes,
            pair_row=pair_row,
            pair_value=pair_value,
            pair_count=pair_count,
        )

    def records(self) -> IntArray:
        """Base row of every record (only for a table built from records)."""
        if self.record_row is None:
            raise InvariantError("this table was built from counts and has no records")
        return self.record_row

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.counts.sum())

    def classes(self, levels: Sequence[int], k: int, l_check: LDiversity | None) -> NodeClasses:
        """Count the equivalence classes of node ``levels`` and mark those to suppress."""
        parts = []
        for block, table in zip(self.blocks, self.block_codes, strict=True):
            idx = 0
            for i in block:
                idx = idx * self.hierarchies[i].height + levels[i]
            parts.append(table[idx])
        key, space = _combine(parts)
        if space > max(_DENSE_KEYS, 8 * len(key)):
            key, space = _densify(key)
        sizes = np.asarray(np.bincount(key, weights=self.counts, minlength=space), np.float64)
        row_size = sizes[key]
        bad = row_size < k
        if l_check is not None:
            bad |= l_check.violates(self, key, space, sizes)[key]
        bad_rows = np.flatnonzero(bad)
        suppressed = int(self.counts[bad_rows].sum())
        return NodeClasses(
            class_id=key,
            class_size=row_size,
            bad=bad,
            bad_rows=bad_rows,
            suppressed=suppressed,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LDiversity:
    """l-diversity of a sensitive column (Machanavajjhala et al., ICDE 2006)."""

    l: int  # noqa: E741 -- the standard name of the parameter
    kind: str  # "distinct" or "entropy"

    def violates(
        self, table: CodedTable, key: IntArray, space: int, sizes: FloatArray
    ) -> BoolArray:
        if table.pair_row is None or table.pair_value is None or table.pair_count is None:
            raise InvariantError("l-diversity needs a table encoded with its sensitive column")
        pair_class = key[table.pair_row]
        n_sens = int(table.pair_value.max()) + 1
        pair_key, _ = _densify(pair_class * n_sens + table.pair_value)
        weight = np.bincount(pair_key, weights=table.pair_count)
        owner = pair_class[_first_index(pair_key)]
        if self.kind == "distinct":
            distinct = np.bincount(owner, minlength=space)
            return np.asarray(distinct < self.l)
        p = weight / sizes[owner]
        entropy = np.bincount(owner, weights=-p * np.log(p), minlength=space)
        # Small tolerance: a class with exactly l equally frequent values must pass.
        return np.asarray(entropy < math.log(self.l) - 1e-12)


def _make_blocks(heights: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    blocks: list[tuple[int, ...]] = []
    current: list[int] = []
    size = 1
    for i, h in enumerate(heights):
        if current and size * h > _BLOCK_NODES:
            blocks.append(tuple(current))
            current, size = [], 1
        current.append(i)
        size *= h
    blocks.append(tuple(current))
    return tuple(blocks)


def _block_table(
    group: tuple[tuple[IntArray, ...], ...], hs: tuple[Hierarchy, ...], block: tuple[int, ...]
) -> tuple[tuple[IntArray, int], ...]:
    out = []
    for combo in itertools.product(*(range(hs[i].height) for i in block)):
        parts = [
            (group[i][lvl], len(hs[i].labels(lvl))) for i, lvl in zip(block, combo, strict=True)
        ]
        key, space = _combine(parts)
        # Re-number only when it shrinks the key space: a small space stays bincount-able as is.
        out.append(_densify(key) if space > len(key) else (key, space))
    return tuple(out)
