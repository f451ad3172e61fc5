"""The Haar wavelet strategy of Privelet (Xiao, Wang & Gehrke, ICDE 2010), for any ``n``.

Rows: the total, plus for each internal node ``v`` of the binary split used by
:func:`dp.matrix.strategy.intervals` the row ``|v|/2 (1_L/|L| - 1_R/|R|)``. Each such row sums
to zero over its support, so all rows are orthogonal even when ``n`` is not a power of two, and
least squares is ``A^+ = A^T diag(1 / ||a_k||^2)``. For ``n = 2^k`` the rows are the classic
``1_L - 1_R``; for ``n = 2`` this is ``[[1, 1], [1, -1]]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dppub.dp.matrix.strategy import SparseStrategy, check_1d, intervals, quad_forms
from dppub.dp.matrix.workload import FloatArray, Workload, check_size

__all__ = ["Wavelet", "wavelet"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Wavelet(SparseStrategy):
    """Haar wavelet strategy: the total plus, per internal node of a binary split, the row
    ``|v|/2 (1_L/|L| - 1_R/|R|)``. Rows are orthogonal even for uneven splits (each row sums to
    zero over its support), so ``A^+ = A^T diag(1/||a_k||^2)``; for ``n = 2^k`` the rows are the
    classic ``1_L - 1_R`` (Xiao, Wang & Gehrke, Privelet, ICDE 2010)."""

    size: int
    """Domain size ``n``."""
    _norm_sq: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        lo, hi, _, _ = intervals(self.size, 2)
        internal = (hi - lo) > 1
        rows, cols, vals = (
            [np.zeros(self.size, np.int64)],
            [np.arange(self.size)],
            [np.ones(self.size)],
        )
        for r, (a, z) in enumerate(zip(lo[internal], hi[internal], strict=True), start=1):
            mid = a + (z - a) // 2  # the same split as _intervals, so rows stay orthogonal
            half = (z - a) / 2.0
            rows.append(np.full(z - a, r))
            cols.append(np.arange(a, z))
            vals.append(np.where(np.arange(a, z) < mid, half / (mid - a), -half / (z - mid)))
        mat = sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(self.size, self.size),
        )
        object.__setattr__(self, "_matrix", mat)
        object.__setattr__(self, "_norm_sq", np.asarray(mat.multiply(mat).sum(axis=1)).ravel())

    @property
    def name(self) -> str:
        return "Haar"

    def _lstsq(self, r: FloatArray) -> FloatArray:
        return np.asarray(self._matrix.T @ (r / self._norm_sq[:, None]))

    def squared_error_factor(self, workload: Workload) -> float:
        # A^+ = A^T D^-1 with D = diag(||a_k||^2), so ||W A^+||_F^2 = sum_k a_k^T G a_k / ||a_k||^4.
        check_1d(workload, self.size, self.name)
        return float(np.sum(quad_forms(workload, self._matrix) / self._norm_sq**2))


def wavelet(n: int) -> Wavelet:
    """Haar wavelet strategy over ``n`` cells (any ``n``)."""
    return Wavelet(size=check_size(n))
