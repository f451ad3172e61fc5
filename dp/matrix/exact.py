"""A strategy's answers correctly rounded, and its sensitivity certified for its float matrix.

Why. A strategy's own structured product (``strategy @ x``) rounds in ways that depend on its
algorithm -- a weighted tree's CSR product rounds every weight times count and every partial
sum, OPT0 divides by its column scales and then multiplies by Theta -- so two neighbours'
computed answers can differ by more than ``||A||_1`` times a row's bound: by up to ``gamma_k``
(``k``: the terms of a row, up to the number of cells) times the answers' magnitude. And a
closed-form ``||A||_1`` evaluated in float64 can fall below the float matrix's true column
norm (OPT0's is ``1.0`` where its columns sum to ``1 + 2e-16``).

So the answers a mechanism adds noise to are computed from the strategy's explicit float64
matrix ``A`` (:func:`explicit`), every entry correctly rounded from the exact sum of exact
products (Dekker's error-free product, then ``math.fsum``): ``|y_i - (A x)_i| <= 2^-53
|(A x)_i|``, at most ``2^-53 ||A||_1 ||x||_1 <= 2^-53 ||A||_1 n M`` over all entries for ``n``
rows of per-row magnitude ``M``. Between neighbours that is one rounding's allowance
(:func:`dp.numerics.fixedpoint.float_allowance`) on ``||A||_1 M``, which
:func:`certified_sensitivity` adds to an upper bound on the matrix's column norm -- the
allowance the fixed-point sums have.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dppub.dp.errors import InvariantError
from dppub.dp.matrix.select import KronStrategy
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import FloatArray
from dppub.dp.numerics.fixedpoint import float_allowance

__all__ = ["certified_sensitivity", "exact_answers", "exact_rows", "explicit"]

_SPLIT = 134217729.0  # 2^27 + 1: Dekker's splitting constant for float64
_HUGE = 2.0**995  # beyond this, splitting could overflow
_TINY = 2.0**-960  # below this, a product's error could underflow


def explicit(strategy: Strategy) -> sp.csr_matrix:
    """The strategy's float64 matrix ``A`` (a Kronecker strategy's: its factors' product)."""
    if isinstance(strategy, KronStrategy):
        out = sp.csr_matrix(np.ones((1, 1)))
        for f in strategy.factors:
            out = sp.csr_matrix(sp.kron(out, explicit(f), format="csr"))
        return out
    held = getattr(strategy, "matrix", None)
    return sp.csr_matrix(strategy.dense() if held is None else held)


def _up(value: float) -> float:
    return float(np.nextafter(value, math.inf))


def certified_sensitivity(strategy: Strategy, *, l2: bool = False) -> float:
    """An upper bound on how far one row of magnitude 1 moves :func:`exact_answers` between
    neighbours, in L1 (or L2): the float matrix's largest column norm, bounded from above
    (a float64 sum of ``k`` terms is within ``gamma_k <= 2 k 2^-53`` of the exact one, so each
    column's computed norm times ``1 + 2 (k + 2) 2^-53`` is above its exact norm), plus one
    rounding's allowance on ``||A||_1`` (the answers' own rounding, whose L2 norm is at most
    its L1 norm)."""
    a = sp.csc_matrix(abs(explicit(strategy)))
    slack = 1.0 + 2.0 * (np.diff(a.indptr) + 2.0) * 2.0**-53
    l1 = _up(float(np.max(np.asarray(a.sum(axis=0)).ravel() * slack, initial=0.0)))
    allowance = _up(l1 * float_allowance(1))
    if not l2:
        return _up(l1 + allowance)
    squares = float(np.max(np.asarray(a.multiply(a).sum(axis=0)).ravel() * slack, initial=0.0))
    return _up(_up(_up(math.sqrt(_up(squares)))) + allowance)


def _two_product(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``p + e == a b`` exactly (Dekker 1971): ``p = fl(a b)`` and its error ``e``."""
    p = a * b
    if (
        np.any(np.abs(a) > _HUGE)
        or np.any(np.abs(b) > _HUGE)
        or np.any((p != 0) & (abs(p) < _TINY))
    ):
        raise InvariantError("a strategy product is outside the range it is exact in")
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def exact_answers(strategy: Strategy, x: npt.ArrayLike) -> FloatArray:
    """``A x`` with every entry correctly rounded from its exact value (module doc)."""
    return exact_rows(explicit(strategy), x)


def exact_rows(matrix: npt.ArrayLike | sp.spmatrix, x: npt.ArrayLike) -> FloatArray:
    """``matrix @ x`` (dense or sparse) with every entry correctly rounded from its exact value."""
    a = sp.csr_matrix(matrix)
    values = np.asarray(x, dtype=np.float64).ravel()
    if values.size != a.shape[1]:
        raise InvariantError(f"{values.size} cells for a strategy over {a.shape[1]}")
    p, e = _two_product(a.data, values[a.indices])
    lengths = np.diff(a.indptr)
    out = np.zeros(a.shape[0])
    one = lengths == 1
    out[one] = p[a.indptr[:-1][one]]  # one term: fl(a b) is already correctly rounded
    for i in np.flatnonzero(lengths > 1):
        start, stop = a.indptr[i], a.indptr[i + 1]
        out[i] = math.fsum(np.concatenate([p[start:stop], e[start:stop]]))
    return out
