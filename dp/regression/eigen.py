"""The smallest eigenvalue of a symmetric float64 matrix, certified in exact arithmetic.

AdaSSP (:mod:`dp.regression.adassp`) releases ``lambda_min`` of the gram matrix with the
sensitivity Weyl's inequality gives for *exact* eigenvalues. A float64 eigensolver is only
backward stable: its error grows like ``p u ||G||``, i.e. with the row count, and no sensitivity
covers it. :func:`certified_min_eigenvalue` instead treats the float64 matrix as the exact
rational matrix it is and returns a value provably within ``tolerance`` of its smallest
eigenvalue:

* an upper bound is the Rayleigh quotient ``v^T G v / v^T v`` of any vector (the float
  eigensolver's eigenvector, evaluated exactly);
* a lower bound ``t`` holds when ``G - t I`` is positive definite, which exact fraction-free
  elimination decides (all leading principal minors > 0: Sylvester's criterion);
* bisection on that test shrinks the interval to ``tolerance / 2`` (usually the float estimate
  already is that close: one exact test suffices), and the midpoint is rounded once
  (``u |m| <= tolerance / 2`` is checked).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InvariantError

__all__ = ["certified_min_eigenvalue"]

FloatArray = npt.NDArray[np.float64]
_U = 2.0**-53


def _positive_definite(matrix: list[list[Fraction]], shift: Fraction) -> bool:
    """Whether ``matrix - shift I`` is positive definite, exactly.

    The entries and the shift are dyadic rationals (floats and their bisection midpoints),
    so the matrix times a power of two is an integer matrix; fraction-free Gaussian
    elimination (Bareiss 1968) keeps it in integers, and its ``k``-th pivot is the ``k``-th
    leading principal minor: all positive iff positive definite (Sylvester's criterion).
    """
    p = len(matrix)
    scale = max(
        max(v.denominator for row in matrix for v in row), shift.denominator
    )  # a power of two, divisible by every denominator
    scaled = [
        [(matrix[i][j] - (shift if i == j else 0)) * scale for j in range(p)] for i in range(p)
    ]
    if any(v.denominator != 1 for row in scaled for v in row):
        raise InvariantError("the exact eigenvalue test needs dyadic entries")
    a = [[int(v) for v in row] for row in scaled]
    prev = 1
    for k in range(p):
        pivot, row_k = a[k][k], a[k]
        if pivot <= 0:
            return False
        for i in range(k + 1, p):
            row_i, factor = a[i], a[i][k]
            for j in range(k + 1, p):
                row_i[j] = (row_i[j] * pivot - factor * row_k[j]) // prev
        prev = pivot
    return True


def certified_min_eigenvalue(matrix: FloatArray, *, tolerance: float) -> float:
    """A float within ``tolerance`` of the smallest eigenvalue of symmetric ``matrix``.

    Raises:
        InvariantError: ``matrix`` is not symmetric, or its eigenvalue is too large for the
            final rounding to stay within ``tolerance / 2``.

    >>> value = certified_min_eigenvalue(np.array([[2.0, 1.0], [1.0, 2.0]]), tolerance=1e-9)
    >>> abs(value - 1.0) <= 1e-9
    True
    """
    G = np.asarray(matrix, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or not np.array_equal(G, G.T):
        raise InvariantError("certified_min_eigenvalue needs a symmetric matrix")
    exact = [[Fraction(float(v)) for v in row] for row in G]
    mu, vecs = np.linalg.eigh(G)
    v = [Fraction(float(x)) for x in vecs[:, 0]]
    p = len(v)
    num = sum((v[i] * exact[i][j] * v[j] for i in range(p) for j in range(p)), Fraction(0))
    quotient = num / sum((x * x for x in v), Fraction(0))
    # Every bound stays dyadic (so the exact test works in integers): the Rayleigh quotient
    # is rounded up on a grid of tolerance / 8, which keeps it an upper bound.
    half = Fraction(float(tolerance)) / 2
    grid = half / 4
    upper = math.ceil(quotient / grid) * grid
    # Optimistic first (the float estimate is usually far closer than the tolerance), then
    # doubling steps down until the exact test confirms a lower bound.
    step = half / 2
    lower = Fraction(float(mu[0])) - step
    while not _positive_definite(exact, lower):
        step *= 2
        lower -= step
    while upper - lower > half:
        mid = (lower + upper) / 2
        if _positive_definite(exact, mid):
            lower = mid
        else:
            upper = mid
    middle = (lower + upper) / 2
    out = float(middle)
    if not _U * abs(out) <= float(tolerance) / 2:
        raise InvariantError("the eigenvalue is too large to round within the tolerance")
    return out
