"""Workloads of linear counting queries as implicit linear operators.

A workload ``W`` (``m x n``) asks ``W x`` of a histogram ``x`` over ``n`` cells (Li et al., "The
matrix mechanism", VLDB J. 2015). Range workloads have up to ``n (n + 1) / 2`` rows, so they are
never materialized: every product goes through prefix sums, and the Gram matrix ``W^T W``, which
drives all error analysis, is applied in ``O(n)`` per column (HDMM, McKenna et al. VLDB 2018, uses
the same trick of working with ``W^T W`` only).

>>> prefix(3) @ np.array([1.0, 2.0, 3.0])
array([1., 3., 6.])
>>> all_range(3).shape
(6, 3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError

__all__ = [
    "AllRange",
    "Identity",
    "LinearOperator",
    "Prefix",
    "Total",
    "WidthRange",
    "Workload",
    "all_range",
    "identity",
    "prefix",
    "total",
    "width_range",
]

FloatArray = npt.NDArray[np.float64]
# Dense views are for tests and small domains; beyond this they would exhaust memory.
_MAX_DENSE = 1 << 26


def check_size(n: object, *, name: str = "n") -> int:
    """Return ``n`` as an int if it is a positive integer domain size."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or int(n) < 1:
        raise ConfigError(f"{name} must be a positive integer, got {n!r}")
    return int(n)


def as_columns(x: npt.ArrayLike, rows: int, *, what: str) -> tuple[FloatArray, bool]:
    """Return ``x`` as a 2-D float array with ``rows`` rows, and whether it was a vector."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[0] != rows:
        raise ConfigError(f"{what} needs an operand with {rows} rows, got shape {arr.shape}")
    return (arr[:, None], True) if arr.ndim == 1 else (arr, False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearOperator:
    """What workloads and strategies share: an ``m x n`` operator over a histogram domain,
    applied to a vector or an ``n x k`` block; subclasses implement ``_matmat``/``_rmatmat``."""

    _kind = "operator"  # used in error messages ("workload", "strategy")

    @property
    def name(self) -> str:
        """Short human-readable name, used in plans and reports."""
        raise NotImplementedError

    @property
    def domain(self) -> tuple[int, ...]:
        """Domain shape; ``n`` is the product of its entries."""
        raise NotImplementedError

    @property
    def n(self) -> int:
        """Number of histogram cells."""
        return math.prod(self.domain)

    @property
    def m(self) -> int:
        """Number of rows (queries or measurements)."""
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)``."""
        return (self.m, self.n)

    def _matmat(self, x: FloatArray) -> FloatArray:
        raise NotImplementedError

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        raise NotImplementedError

    def __matmul__(self, x: npt.ArrayLike) -> FloatArray:
        cols, vec = as_columns(x, self.n, what=f"{self._kind} {self.name}")
        out = self._matmat(cols)
        return out[:, 0] if vec else out

    def rmatvec(self, y: npt.ArrayLike) -> FloatArray:
        """The transpose applied to a vector (length ``m``) or an ``m x k`` matrix."""
        cols, vec = as_columns(y, self.m, what=f"transpose of {self._kind} {self.name}")
        out = self._rmatmat(cols)
        return out[:, 0] if vec else out


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload(LinearOperator):
    """Base class: a linear workload ``W`` over a (possibly multi-dimensional) domain.

    Subclasses implement :meth:`_matmat` and :meth:`_rmatmat`; the rest is derived. ``W @ X``
    accepts a vector of length ``n`` or an ``n x k`` matrix.
    """

    _kind = "workload"

    def _gram_matmat(self, x: FloatArray) -> FloatArray:
        return self._rmatmat(self._matmat(x))

    def gram_rows(self, xt: FloatArray) -> FloatArray:
        """``(W^T W X^T)^T`` for a ``k x n`` block of row vectors (same as :meth:`gram_matmul`
        on ``X^T``; range workloads override it to scan contiguous memory)."""
        return np.ascontiguousarray(self._gram_matmat(np.ascontiguousarray(xt.T)).T)

    def gram_matmul(self, x: npt.ArrayLike) -> FloatArray:
        """``W^T W X`` without forming ``W`` (``O(n)`` per column for range workloads)."""
        cols, vec = as_columns(x, self.n, what=f"Gram of workload {self.name}")
        out = self._gram_matmat(cols)
        return out[:, 0] if vec else out

    def gram(self) -> FloatArray:
        """Dense ``W^T W`` (``n x n``)."""
        _check_dense(self.n * self.n, self.name)
        return self._gram_matmat(np.eye(self.n))

    def dense(self) -> FloatArray:
        """Dense ``W`` (``m x n``); small workloads only (tests, debugging)."""
        _check_dense(self.m * self.n, self.name)
        return self._matmat(np.eye(self.n))

    @property
    def key(self) -> str:
        """Identifies the workload's queries (used to cache data-independent computations)."""
        return self.name

    def semiseparable(self) -> tuple[FloatArray, FloatArray] | None:
        """``(u, v)`` with ``(W^T W)[a, b] = u[min(a, b)] v[max(a, b)]`` if the Gram matrix has
        that form (prefix and range workloads), else ``None``. Quadratic forms with sparse rows
        then cost ``O(nnz)`` instead of ``O(n)`` per row."""
        return None

    def gram_diag(self) -> FloatArray:
        """``diag(W^T W)``: squared column norms (closed forms where known, else batched)."""
        out = np.empty(self.n)
        for start in range(0, self.n, 512):
            stop = min(self.n, start + 512)
            block = np.zeros((self.n, stop - start))
            block[np.arange(start, stop), np.arange(stop - start)] = 1.0
            out[start:stop] = np.einsum("ij,ij->j", block, self._gram_matmat(block))
        return out

    @property
    def frobenius_sq(self) -> float:
        """``||W||_F^2`` (the trace of the Gram matrix)."""
        return float(np.sum(self.gram_diag()))

    @property
    def sensitivity(self) -> float:
        """Exact L1 sensitivity ``||W||_1`` (maximum column L1 norm); workloads are >= 0."""
        return float(np.max(self._rmatmat(np.ones((self.m, 1)))))

    def singular_values(self) -> FloatArray:
        """Singular values of ``W`` (closed forms where known, else from the Gram matrix)."""
        eig = np.linalg.eigvalsh(self.gram())
        return np.asarray(np.sqrt(np.clip(eig, 0.0, None)), dtype=np.float64)


def _check_dense(size: int, name: str) -> None:
    if size > _MAX_DENSE:
        raise ConfigError(f"workload {name} is too large to materialize ({size} entries)")


def _cumsum0(x: FloatArray) -> FloatArray:
    """Prefix sums with a leading zero row: ``c[j] = sum(x[:j])``."""
    out = np.zeros((x.shape[0] + 1, x.shape[1]))
    np.cumsum(x, axis=0, out=out[1:])
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _OneDim(Workload):
    size: int
    """Domain size ``n``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", check_size(self.size))

    @property
    def domain(self) -> tuple[int, ...]:
        return (self.size,)


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity(_OneDim):
    """Every cell count (``W = I``)."""

    @property
    def m(self) -> int:
        return self.size

    @property
    def name(self) -> str:
        return f"Identity({self.size})"

    def _matmat(self, x: FloatArray) -> FloatArray:
        return x.copy()

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return y.copy()

    def singular_values(self) -> FloatArray:
        return np.ones(self.size)

    def gram_diag(self) -> FloatArray:
        return np.ones(self.size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Total(_OneDim):
    """The single total count (``W = 1^T``)."""

    @property
    def m(self) -> int:
        return 1

    @property
    def name(self) -> str:
        return f"Total({self.size})"

    def _matmat(self, x: FloatArray) -> FloatArray:
        return np.asarray(x.sum(axis=0, keepdims=True), dtype=np.float64)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return np.repeat(y, self.size, axis=0)

    def singular_values(self) -> FloatArray:
        return np.array([math.sqrt(self.size)])

    def gram_diag(self) -> FloatArray:
        return np.ones(self.size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prefix(_OneDim):
    """Prefix sums / the empirical CDF: row ``j`` is ``x[0] + ... + x[j]``."""

    @property
    def m(self) -> int:
        return self.size

    @property
    def name(self) -> str:
        return f"Prefix({self.size})"

    def _matmat(self, x: FloatArray) -> FloatArray:
        return np.cumsum(x, axis=0)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return np.cumsum(y[::-1], axis=0)[::-1]

    @property
    def sensitivity(self) -> float:
        return float(self.size)

    def gram_diag(self) -> FloatArray:
        return np.arange(self.size, 0, -1, dtype=np.float64)

    def semiseparable(self) -> tuple[FloatArray, FloatArray]:
        # Prefixes j >= max(a, b) hold both cells.
        return np.ones(self.size), self.size - np.arange(self.size, dtype=np.float64)

    def singular_values(self) -> FloatArray:
        # W is lower-triangular ones; W^-1 is the first-difference matrix, whose spectrum is known.
        k = np.arange(1, self.size + 1)
        return np.asarray(1.0 / (2.0 * np.sin((2 * k - 1) * np.pi / (4 * self.size + 2))))


@dataclass(frozen=True, slots=True, kw_only=True)
class AllRange(_OneDim):
    """All ``n (n + 1) / 2`` ranges ``[i, j]``, rows ordered by ``i`` then ``j``."""

    @property
    def m(self) -> int:
        return self.size * (self.size + 1) // 2

    @property
    def name(self) -> str:
        return f"AllRange({self.size})"

    def _matmat(self, x: FloatArray) -> FloatArray:
        # Row block i holds ranges [i, i..n-1] = c[i+1:] - c[i]; slicing beats fancy indexing.
        c = _cumsum0(x)
        return np.concatenate([c[i + 1 :] - c[i] for i in range(self.size)])

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        # Range [i, j] adds y to cells i..j: scatter +y at i and -y at j + 1, then prefix-sum.
        n = self.size
        i, j = np.triu_indices(n)
        diff = np.zeros((n + 1, y.shape[1]))
        np.add.at(diff, i, y)
        np.add.at(diff, j + 1, -y)
        return np.cumsum(diff[:n], axis=0)

    def _gram_matmat(self, x: FloatArray) -> FloatArray:
        return np.ascontiguousarray(self.gram_rows(np.ascontiguousarray(x.T)).T)

    def gram_rows(self, xt: FloatArray) -> FloatArray:
        # (W^T W)[a, b] = (min(a, b) + 1) (n - max(a, b)): the number of ranges holding a and b.
        # Prefix sums run along contiguous rows (several times faster than down columns).
        n = self.size
        a = np.arange(n, dtype=np.float64)
        left = np.cumsum((a + 1.0) * xt, axis=1)
        right = np.cumsum(((n - a) * xt)[:, ::-1], axis=1)[:, ::-1]
        out = (n - a) * left
        out[:, :-1] += (a[:-1] + 1.0) * right[:, 1:]
        return out

    @property
    def sensitivity(self) -> float:
        a = np.arange(self.size)
        return float(np.max((a + 1) * (self.size - a)))

    def gram_diag(self) -> FloatArray:
        a = np.arange(self.size, dtype=np.float64)
        return (a + 1.0) * (self.size - a)

    def semiseparable(self) -> tuple[FloatArray, FloatArray]:
        a = np.arange(self.size, dtype=np.float64)
        return a + 1.0, self.size - a

    def singular_values(self) -> FloatArray:
        # W^T W = (n + 1) T^-1 with T = tridiag(-1, 2, -1), the Dirichlet Laplacian's Green matrix.
        k = np.arange(1, self.size + 1)
        lam = (self.size + 1) / (4.0 * np.sin(k * np.pi / (2 * self.size + 2)) ** 2)
        return np.asarray(np.sqrt(lam))


@dataclass(frozen=True, slots=True, kw_only=True)
class WidthRange(_OneDim):
    """All ranges of exactly ``width`` consecutive cells (sliding windows)."""

    width: int
    """Window width ``k``, ``1 <= k <= n``."""

    def __post_init__(self) -> None:
        _OneDim.__post_init__(self)
        w = check_size(self.width, name="width")
        if w > self.size:
            raise ConfigError(f"width must be <= n = {self.size}, got {w}")
        object.__setattr__(self, "width", w)

    @property
    def m(self) -> int:
        return self.size - self.width + 1

    @property
    def name(self) -> str:
        return f"WidthRange({self.size}, {self.width})"

    def _matmat(self, x: FloatArray) -> FloatArray:
        c = _cumsum0(x)
        return np.asarray(c[self.width :] - c[: self.m])

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        c = _cumsum0(y)
        a = np.arange(self.size)
        lo = np.clip(a - self.width + 1, 0, self.m)
        hi = np.clip(a + 1, 0, self.m)
        return np.asarray(c[hi] - c[lo])


def identity(n: int) -> Identity:
    """Workload of all cell counts (``W = I_n``)."""
    return Identity(size=n)


def total(n: int) -> Total:
    """Workload of the single total count."""
    return Total(size=n)


def prefix(n: int) -> Prefix:
    """Workload of the ``n`` prefix sums (the CDF)."""
    return Prefix(size=n)


def all_range(n: int) -> AllRange:
    """Workload of all ``n (n + 1) / 2`` range queries, kept implicit."""
    return AllRange(size=n)


def width_range(n: int, width: int) -> WidthRange:
    """Workload of all ranges of ``width`` consecutive cells."""
    return WidthRange(size=n, width=width)
