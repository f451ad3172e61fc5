"""Causal strategies: what is measured each period so a series can be released as it arrives.

A strategy is a matrix ``A`` (measurements x periods); its row ``r`` is measured, with noise, in
the period of its last non-zero coefficient, once every period it reads has closed. It is
*causal* when, for every period ``t``, the rows measured by ``t`` determine periods ``0..t``
(their restriction to those columns has full column rank), so every period is estimable the
moment it closes. A square lower-triangular ``A`` with a non-zero diagonal is causal, and any
causal workload ``W`` then factors as ``W = B A`` with ``B = W A^-1`` causal too.

* :class:`Identity` measures each period's value (the per-period releases summed).
* :class:`BinaryTree` measures aligned dyadic blocks (the binary mechanism: Dwork, Naor, Pitassi
  & Rothblum, STOC 2010; Chan, Shi & Song, TISSEC 2011), estimated with Honaker's least squares
  (Honaker, "Efficient use of differentially private binary trees", TPDP 2015), in causal form.
* :class:`SquareRoot` is the Toeplitz square root of the prefix-sum matrix, coefficients of
  ``(1 - x)^(-1/2)`` (Fichtenberger, Henzinger & Upadhyay, ICML 2023; Henzinger, Upadhyay &
  Upadhyay, SODA 2023).
* :class:`dp.series.factorization.Optimized` is the optimised lower-triangular factorization of
  Denisov et al. (NeurIPS 2022).

>>> SquareRoot(horizon=3).matrix
array([[1.   , 0.   , 0.   ],
       [0.5  , 1.   , 0.   ],
       [0.375, 0.5  , 1.   ]])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.strategy import nested_blocks
from dppub.dp.matrix.workload import check_size
from dppub.dp.series.workloads import FloatArray, IntArray, frozen, last_nonzero

__all__ = [
    "BinaryTree",
    "CausalStrategy",
    "Identity",
    "SquareRoot",
    "lower_factor",
    "square_root_coefficients",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CausalStrategy:
    """Base class: a causal measurement matrix, rows sorted by the period they are measured in."""

    horizon: int
    """``T``, the number of periods."""
    matrix: FloatArray = field(init=False, repr=False)
    """``M x T``; row ``r`` is measured in period ``released[r]`` (rows in that order)."""
    released: IntArray = field(init=False, repr=False)
    """The period each row is measured in: its last non-zero coefficient (non-decreasing)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "horizon", check_size(self.horizon, name="horizon"))
        matrix = frozen(self._build(), what=f"strategy {self.name}")
        if matrix.shape[1] != self.horizon:
            raise ConfigError(
                f"strategy {self.name} has {matrix.shape[1]} periods, not {self.horizon}"
            )
        released = last_nonzero(matrix)
        order = np.argsort(released, kind="stable")
        matrix, released = frozen(matrix[order], what=self.name), released[order]
        released.setflags(write=False)
        _check_causal(matrix, released, self.name)
        object.__setattr__(self, "matrix", matrix)
        object.__setattr__(self, "released", released)

    @property
    def name(self) -> str:
        """The strategy's name in plans and tables."""
        return type(self).__name__

    def _build(self) -> FloatArray:
        raise NotImplementedError

    def measured_by(self, period: int) -> int:
        """How many rows are measured by the end of ``period`` (a prefix of the rows)."""
        return int(np.searchsorted(self.released, period, side="right"))


def _check_causal(matrix: FloatArray, released: IntArray, name: str) -> None:
    """Every period is determined by the rows measured by its end (full column rank)."""
    rows, periods = matrix.shape
    square = rows == periods and np.array_equal(released, np.arange(periods))
    if square and np.all(np.diag(matrix) != 0.0):  # lower-triangular, invertible
        return
    for t in range(periods):
        sub = matrix[: int(np.searchsorted(released, t, side="right")), : t + 1]
        if sub.shape[0] <= t or np.linalg.matrix_rank(sub) < t + 1:
            raise ConfigError(f"strategy {name} does not determine period {t} when it closes")


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity(CausalStrategy):
    """Each period's value, measured once (``A = I``): the per-period releases summed."""

    def _build(self) -> FloatArray:
        return np.eye(self.horizon)


@dataclass(frozen=True, slots=True, kw_only=True)
class BinaryTree(CausalStrategy):
    """Aligned dyadic blocks of ``1, 2, 4, ...`` periods, complete ones only, each measured when
    its last period closes: every running total is the sum of at most ``log2 T + 1`` blocks
    (Chan, Shi & Song 2011). Built with :func:`dp.matrix.nested_blocks`.
    Honaker's least-squares estimate (2015) is used in causal form: the estimate in period ``t``
    uses only the blocks completed by ``t`` (:mod:`dp.series.estimate`)."""

    def _build(self) -> FloatArray:
        top = 1 << (self.horizon.bit_length() - 1)  # the largest power of 2 <= T
        sizes = [top >> level for level in range(top.bit_length())]
        tree = nested_blocks(self.horizon, sizes, np.ones(len(sizes)), label="BinaryTree")
        # Only complete blocks are nodes of the binary mechanism (a level's partial last block
        # would measure again what finer levels measure).
        complete = (tree.hi - tree.lo) == np.asarray(sizes)[tree.depth]
        return np.asarray(tree.matrix.toarray()[complete], dtype=np.float64)


def square_root_coefficients(horizon: int) -> FloatArray:
    """The first ``horizon`` coefficients of ``(1 - x)^(-1/2)``: ``c_k = binom(2k, k) / 4^k``.

    >>> square_root_coefficients(4).tolist()
    [1.0, 0.5, 0.375, 0.3125]
    """
    k = np.arange(1, check_size(horizon, name="horizon"))
    return np.concatenate([[1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))])


@dataclass(frozen=True, slots=True, kw_only=True)
class SquareRoot(CausalStrategy):
    """The lower-triangular Toeplitz ``A`` with ``A A = `` the prefix-sum matrix (Fichtenberger
    et al. ICML 2023; Henzinger et al. SODA 2023): ``A[t, s] = c_{t - s}``, near-optimal for
    running totals (within a factor ``1 + o(1)`` of the best factorization's maximum error,
    Fichtenberger et al.). It is the same for every workload, unlike
    :class:`dp.series.factorization.Optimized`."""

    def _build(self) -> FloatArray:
        c = square_root_coefficients(self.horizon)
        return np.asarray(sla.toeplitz(c, np.zeros(self.horizon)), dtype=np.float64)


def lower_factor(gram: FloatArray) -> FloatArray:
    """The lower-triangular ``A`` with ``A^T A = gram`` (positive definite): the Cholesky factor
    of the reversed matrix, reversed (Denisov et al. 2022: any strategy's ``A^T A`` has a causal
    factor, so restricting to causal strategies costs nothing in this error measure)."""
    flip = np.asarray(gram, dtype=np.float64)[::-1, ::-1]
    try:
        chol = np.linalg.cholesky(flip)
    except np.linalg.LinAlgError as exc:
        raise ConfigError("the strategy's Gram matrix is not positive definite") from exc
    return np.ascontiguousarray(chol.T[::-1, ::-1])
