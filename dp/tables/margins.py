"""The cells of a table and its margins: which published rows sum which cells.

A table over ``d`` keys of sizes ``n_1 .. n_d`` has ``prod n_i`` cells (C order). With
``margins: true`` it also publishes every sub-total: for each subset ``S`` of the keys kept, the
sums over the keys left out (``*``), down to the grand total (``S`` empty). The rows are in the
order of :func:`margin_workload` (the union of the ``k``-way marginals for ``k = d .. 0``, each
in :func:`itertools.combinations` order, C order over the kept keys), so row ``i`` of
:func:`margin_matrix` is row ``i`` of the matrix-mechanism workload.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from dp import matrix

__all__ = ["margin_labels", "margin_matrix", "margin_subsets", "margin_workload"]

STAR = "*"
"""The label of a key a margin sums out."""


def margin_subsets(d: int, margins: bool) -> list[tuple[int, ...]]:
    """The kept keys of each block of rows: the cells only, or every subset, largest first."""
    if not margins:
        return [tuple(range(d))]
    return [s for k in range(d, -1, -1) for s in itertools.combinations(range(d), k)]


def margin_workload(shape: Sequence[int], margins: bool) -> matrix.Workload:
    """The linear queries a table publishes: its cells (identity), or every margin too."""
    n = int(np.prod(shape))
    if not margins:
        return matrix.identity(n)
    return matrix.union(*(matrix.marginals(tuple(shape), k) for k in range(len(shape), -1, -1)))


def margin_matrix(shape: Sequence[int], margins: bool) -> sp.csr_matrix:
    """The published rows as a 0/1 sparse matrix over the cells (row order as above)."""
    dims = tuple(int(s) for s in shape)
    cells = np.arange(int(np.prod(dims)))
    index = np.unravel_index(cells, dims)
    blocks = []
    for kept in margin_subsets(len(dims), margins):
        sizes = tuple(dims[i] for i in kept)
        rows = (
            np.ravel_multi_index(tuple(index[i] for i in kept), sizes)
            if kept
            else np.zeros(len(cells), dtype=np.int64)
        )
        m = int(np.prod(sizes)) if kept else 1
        blocks.append(sp.csr_matrix((np.ones(len(cells)), (rows, cells)), shape=(m, len(cells))))
    return sp.csr_matrix(sp.vstack(blocks, format="csr"))


def margin_labels(labels: Sequence[Sequence[str]], margins: bool) -> list[tuple[str, ...]]:
    """Each published row's key labels (``*`` where the row sums the key out)."""
    d = len(labels)
    out: list[tuple[str, ...]] = []
    for kept in margin_subsets(d, margins):
        for combo in itertools.product(*(labels[i] for i in kept)):
            row = [STAR] * d
            for i, value in zip(kept, combo, strict=True):
                row[i] = value
            out.append(tuple(row))
    return out
