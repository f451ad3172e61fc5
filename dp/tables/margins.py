"""The cells of a table and the rows it publishes: cells, and with margins every sub-total.

A table's cells are the product of its *dimensions*, one per distinct key column, each over the
column's finest declared labels (C order). A dimension may carry coarser levels of a nested
hierarchy (``{column: region, level: 1}`` beside level 0): then its fine labels are ordered so
that each parent's children are contiguous, and every published row is an axis-aligned box of
cells -- a cell, a parent's block, or the whole axis (``*``) along each dimension. With
``margins: true`` the table publishes every combination of them, down to the grand total; the
rows are one matrix-mechanism workload (a union of Kronecker products of each dimension's cells,
total or parents' blocks), so they are estimated jointly from one measurement and the cells add
up exactly to every margin.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dppub.dp import matrix
from dppub.dp.errors import ConfigError
from dppub.dp.stopping import checked

__all__ = ["STAR", "Dimension", "Published", "published_rows"]

STAR = "*"
"""The label of a key a row sums out."""

_Block = tuple[int, int, tuple[str, ...]]  # first and last cell along the axis, its key labels


@dataclass(frozen=True, slots=True)
class Dimension:
    """One key column of the cells: its finest labels and, per coarser level (finest first),
    the parent of each fine label. Each parent's children must be contiguous."""

    labels: tuple[str, ...]
    coarser: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        for parents in self.coarser:
            if len(parents) != len(self.labels):
                raise ConfigError("a coarser level needs one parent per label")
            starts = [p for i, p in enumerate(parents) if i == 0 or parents[i - 1] != p]
            if len(starts) != len(set(starts)):
                raise ConfigError("a parent's children must be contiguous")

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def keys(self) -> int:
        """How many published key columns it has (the fine one and each coarser one)."""
        return 1 + len(self.coarser)

    def _labels(self, i: int, summed: int) -> tuple[str, ...]:
        """Key labels of a row holding cell ``i``'s ancestors, with the ``summed`` finest keys
        summed out."""
        full = (self.labels[i], *(c[i] for c in self.coarser))
        return tuple(STAR if k < summed else v for k, v in enumerate(full))

    def options(self, margins: bool) -> list[list[_Block]]:
        """The blocks of each way this dimension appears in a published row: its cells, then
        (with margins) each coarser level's parents and the whole axis."""
        out = [[(i, i, self._labels(i, 0)) for i in checked(range(self.size), "a table's rows")]]
        if not margins:
            return out
        for level, parents in enumerate(self.coarser, start=1):
            blocks: list[_Block] = []
            for i, p in enumerate(parents):
                if i > 0 and parents[i - 1] == p:
                    first, _, labels = blocks[-1]
                    blocks[-1] = (first, i, labels)
                else:
                    blocks.append((i, i, self._labels(i, level)))
            out.append(blocks)
        out.append([(0, self.size - 1, (STAR,) * self.keys)])
        return out


@dataclass(frozen=True, slots=True)
class Published:
    """The published rows: boxes ``lo <= cell <= hi`` and each row's key labels."""

    shape: tuple[int, ...]
    lo: npt.NDArray[np.int64]
    hi: npt.NDArray[np.int64]
    labels: tuple[tuple[str, ...], ...]
    margins: bool
    parts: tuple[tuple[tuple[tuple[int, int], ...], ...], ...] = ()
    """Per block of rows (one way each dimension appears): each dimension's ``(first, last)``
    cells, the rows being their product in C order."""

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape))

    def workload(self) -> matrix.Workload:
        """The rows as a matrix-mechanism workload (the cells alone: the identity)."""
        if not self.margins:
            return matrix.identity(self.cells)
        parts = [
            matrix.kron(*(_axis(n, blocks) for n, blocks in zip(self.shape, part, strict=True)))
            for part in self.parts
        ]
        return matrix.union(*parts)

    @property
    def matrix(self) -> sp.csr_matrix:
        """The rows as a 0/1 sparse matrix over the cells (C order)."""
        rows: list[npt.NDArray[np.int64]] = []
        cols: list[npt.NDArray[np.int64]] = []
        for r in range(len(self.labels)):
            axes = [np.arange(a, b + 1) for a, b in zip(self.lo[r], self.hi[r], strict=True)]
            flat = np.ravel_multi_index(np.meshgrid(*axes, indexing="ij"), self.shape).ravel()
            rows.append(np.full(len(flat), r))
            cols.append(flat)
        r_all, c_all = np.concatenate(rows), np.concatenate(cols)
        shape = (len(self.labels), self.cells)
        return sp.csr_matrix((np.ones(len(r_all)), (r_all, c_all)), shape=shape)


def published_rows(dims: Sequence[Dimension], margins: bool) -> Published:
    """Every published row (module doc): cells first, then the margins, the grand total last."""
    lo: list[list[int]] = []
    hi: list[list[int]] = []
    labels: list[tuple[str, ...]] = []
    parts: list[tuple[tuple[tuple[int, int], ...], ...]] = []
    for choice in itertools.product(*(d.options(margins) for d in dims)):
        parts.append(tuple(tuple((b[0], b[1]) for b in blocks) for blocks in choice))
        for blocks in checked(itertools.product(*choice), "listing a table's rows"):
            lo.append([b[0] for b in blocks])
            hi.append([b[1] for b in blocks])
            labels.append(tuple(v for b in blocks for v in b[2]))
    return Published(
        shape=tuple(d.size for d in dims),
        lo=np.asarray(lo, dtype=np.int64).reshape(-1, len(dims)),
        hi=np.asarray(hi, dtype=np.int64).reshape(-1, len(dims)),
        labels=tuple(labels),
        margins=margins,
        parts=tuple(parts),
    )


def _axis(n: int, blocks: Sequence[tuple[int, int]]) -> matrix.Workload:
    """One dimension's factor of a block of rows: its cells, its total, or parents' blocks."""
    if len(blocks) == n and all(a == b for a, b in blocks):
        return matrix.identity(n)
    if len(blocks) == 1 and blocks[0] == (0, n - 1):
        return matrix.total(n)
    lo, hi = zip(*blocks, strict=True)
    return matrix.range_boxes((n,), np.asarray(lo)[:, None], np.asarray(hi)[:, None])
