"""The eigenbasis that every marginal shares, and strategies made of weighted marginals.

On each axis ``R^{n_i}`` splits into ``span(1)`` and its orthogonal complement, and both ``I`` and
``J = 1 1^T`` act on each part as a scalar. So on a ``d``-attribute domain every Kronecker
product of ``I`` and ``J`` factors is diagonal in one orthogonal decomposition of the histogram
space into ``2^d`` subspaces ``U_P``, one per attribute subset ``P`` (the axes on which a vector
is orthogonal to ``1``), of dimension ``mult_P = prod_{i in P} (n_i - 1)``. The marginal on the
subset ``S`` (sum out the attributes not in ``S``) has Gram ``(x)_{i in S} I (x)_{i not in S} J``,
which is ``N_S = prod_{i not in S} n_i`` on ``U_P`` when ``P`` is a subset of ``S`` and ``0``
otherwise (McKenna et al., HDMM, VLDB 2018, Sec. 6; the same basis underlies ResidualPlanner,
Xiao et al., NeurIPS 2023).

A *weighted marginals* strategy measures marginal ``S`` scaled by ``theta_S >= 0``. Its Gram is
``lambda_P = sum_{S >= P} theta_S^2 N_S`` on ``U_P``, and for a workload with
``c_P = tr(W^T W Pi_P)`` (``Pi_P`` the projector on ``U_P``) the matrix-mechanism error is
``||W A^+||_F^2 = sum_P c_P / lambda_P``: ``2^d`` numbers instead of an ``n x n`` inverse.
Subsets are bit masks: attribute ``i`` is bit ``1 << i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.product import Kron, Union
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import FloatArray, Identity, Total, Workload

__all__ = [
    "MarginalsStrategy",
    "complement_sizes",
    "diagonal_error_factor",
    "marginal_spectrum",
    "marginals_strategy",
    "multiplicities",
    "pattern_weights",
    "subset_sum",
    "superset_mobius",
    "superset_sum",
]

# Pattern weights below this fraction of the largest are rounding noise of tr(G) - 1'G1/n.
_ZERO = 1e-12


def _cube(v: FloatArray) -> tuple[npt.NDArray[np.float64], int]:
    d = int(v.size).bit_length() - 1
    if v.ndim != 1 or v.size != 1 << d:
        raise ConfigError(f"a subset vector needs 2^d entries, got {v.size}")
    return np.array(v, dtype=np.float64).reshape((2,) * d), d


def _sweep(v: FloatArray, *, upward: bool, sign: float) -> FloatArray:
    """One pass per attribute over the ``2 x ... x 2`` cube (index 0: attribute absent):
    ``absent += sign * present`` (downward) or ``present += sign * absent`` (upward)."""
    t, d = _cube(v)
    for axis in range(d):
        absent = (slice(None),) * axis + (0,)
        present = (slice(None),) * axis + (1,)
        src, dst = (absent, present) if upward else (present, absent)
        t[dst] += sign * t[src]
    return t.ravel()


def superset_sum(v: FloatArray) -> FloatArray:
    """``out[P] = sum_{S >= P} v[S]`` in ``O(d 2^d)``."""
    return _sweep(v, upward=False, sign=1.0)


def subset_sum(v: FloatArray) -> FloatArray:
    """``out[S] = sum_{P <= S} v[P]`` (the adjoint of :func:`superset_sum`)."""
    return _sweep(v, upward=True, sign=1.0)


def superset_mobius(v: FloatArray) -> FloatArray:
    """Inverse of :func:`superset_sum`: ``out[S] = sum_{P >= S} (-1)^{|P - S|} v[P]``."""
    return _sweep(v, upward=False, sign=-1.0)


def _bits(d: int) -> npt.NDArray[np.bool_]:
    """``bits[S, i]``: whether attribute ``i`` is in subset ``S``."""
    return ((np.arange(1 << d)[:, None] >> np.arange(d)) & 1).astype(bool)


def complement_sizes(dims: tuple[int, ...]) -> FloatArray:
    """``N_S = prod_{i not in S} n_i``: how many cells each cell of marginal ``S`` sums."""
    n = np.asarray(dims, dtype=np.float64)
    return np.asarray(np.prod(np.where(_bits(len(dims)), 1.0, n), axis=1), dtype=np.float64)


def multiplicities(dims: tuple[int, ...]) -> FloatArray:
    """``mult_P = prod_{i in P} (n_i - 1)``, the dimension of ``U_P``."""
    n = np.asarray(dims, dtype=np.float64)
    return np.asarray(np.prod(np.where(_bits(len(dims)), n - 1.0, 1.0), axis=1), dtype=np.float64)


def _axis_traces(factor: Workload) -> tuple[float, float] | None:
    """``(tr(G Q0), tr(G Q1))`` of a 1-D factor: ``Q0 = J / n`` and ``Q1 = I - J / n``."""
    if len(factor.domain) != 1:
        return None
    n = factor.n
    mean_part = float(np.sum(factor.gram_matmul(np.ones(n)))) / n  # 1^T G 1 / n
    return mean_part, max(0.0, factor.frobenius_sq - mean_part)


def _raw_pattern_weights(workload: Workload) -> FloatArray | None:
    if isinstance(workload, Union):
        total = np.zeros(1 << len(workload.domain))
        for part, w in zip(workload.parts, workload.weights, strict=True):
            c = _raw_pattern_weights(part)
            if c is None:
                return None
            total += w * w * c
        return total
    factors = workload.factors if isinstance(workload, Kron) else (workload,)
    table = []
    for f in factors:
        t = _axis_traces(f)
        if t is None:
            return None
        table.append(t)
    t2 = np.array(table)  # d x 2: (mean part, complement part) per axis
    return np.asarray(
        np.prod(np.where(_bits(len(factors)), t2[:, 1], t2[:, 0]), axis=1), dtype=np.float64
    )


def pattern_weights(workload: Workload) -> FloatArray | None:
    """``c_P = tr(W^T W Pi_P)`` for every attribute subset ``P`` (``None`` if not available).

    Available for 1-D workloads, Kronecker products of 1-D workloads and weighted unions of
    those (marginals included): ``tr((x) G_i Pi_P) = prod_i tr(G_i Q_i)`` with
    ``Q_i = I - J / n_i`` on the axes in ``P`` and ``J / n_i`` elsewhere.
    """
    raw = _raw_pattern_weights(workload)
    if raw is None:
        return None
    out = np.array(raw, dtype=np.float64)
    out[out <= _ZERO * float(np.max(out, initial=0.0))] = 0.0
    return out


def _diagonal(workload: Workload) -> bool:
    """Whether ``W^T W`` is diagonal in the shared basis: unions of products of I and 1^T."""
    if isinstance(workload, Union):
        return all(_diagonal(p) for p in workload.parts)
    factors = workload.factors if isinstance(workload, Kron) else (workload,)
    return all(isinstance(f, Identity | Total) for f in factors)


def marginal_spectrum(workload: Workload) -> tuple[FloatArray, FloatArray] | None:
    """``(lambda_P, mult_P)``: the eigenvalues of ``W^T W`` on each ``U_P`` and their
    multiplicities, for unions of Kronecker products of ``Identity`` and ``Total`` (marginals);
    ``None`` otherwise. The singular values of ``W`` are ``sqrt(lambda_P)``, ``mult_P`` times
    each, so the SVD bound and the rank cost ``O(2^d)`` even for 10^8 cells.
    """
    c = pattern_weights(workload) if _diagonal(workload) else None
    if c is None:
        return None
    mult = multiplicities(workload.domain)
    lam = np.zeros_like(c)
    lam[mult > 0] = c[mult > 0] / mult[mult > 0]  # c_P = tr(lambda_P Pi_P) = lambda_P mult_P
    return lam, mult


def diagonal_error_factor(strategy: Strategy, workload: Workload, eig: FloatArray) -> float:
    """``||W A^+||_F^2 = sum_P c_P / lambda_P`` for a strategy whose ``A^T A`` is ``lambda_P`` on
    each ``U_P``; refuses workloads that need a subspace the strategy does not measure."""
    if workload.domain != strategy.domain:
        raise ConfigError(
            f"workload domain {workload.domain} does not match strategy domain {strategy.domain}"
        )
    c = pattern_weights(workload)
    if c is None:
        raise ConfigError(f"strategy {strategy.name} cannot evaluate workload {workload.name}")
    need = c > 0
    if np.any(need & (eig <= 0)):
        raise ConfigError(
            f"strategy {strategy.name} does not measure everything workload {workload.name} asks"
        )
    return float(np.sum(c[need] / eig[need]))


def _check_dims(dims: object) -> tuple[int, ...]:
    if not isinstance(dims, tuple) or len(dims) < 1:
        raise ConfigError(f"dims must be a non-empty tuple of sizes, got {dims!r}")
    if any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1 for n in dims):
        raise ConfigError(f"dims must be positive integers, got {dims!r}")
    return tuple(int(n) for n in dims)


@dataclass(frozen=True, slots=True, kw_only=True)
class MarginalsStrategy(Strategy):
    """Every marginal ``S`` with ``theta_S > 0``, each scaled by ``theta_S`` (HDMM's Marginals).

    One individual changes one cell by one, and every cell lies in exactly one cell of each
    marginal, so the measurement moves by ``theta_S`` in one row of each block: the L1
    sensitivity is ``sum_S theta_S`` and the L2 sensitivity ``sqrt(sum_S theta_S^2)``, for every
    column. Measurement, least squares and error analysis never form an ``n x n`` matrix.
    """

    dims: tuple[int, ...]
    """Domain shape (one size per attribute)."""
    weights: FloatArray
    """``theta_S >= 0`` for each of the ``2^d`` subsets, indexed by bit mask."""
    label: str = "Marginals"
    """Name shown in plans (the number of measured marginals is appended)."""
    _support: tuple[int, ...] = field(init=False, repr=False)
    _eig: FloatArray = field(init=False, repr=False)
    _pinv: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        dims = _check_dims(self.dims)
        w = np.array(self.weights, dtype=np.float64)
        if w.shape != (1 << len(dims),) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ConfigError(
                f"weights must be {1 << len(dims)} finite numbers >= 0, got shape {w.shape}"
            )
        if not np.any(w > 0):
            raise ConfigError("weights must measure at least one marginal, got all zeros")
        bits = _bits(len(dims))
        support = sorted(
            (int(s) for s in np.flatnonzero(w > 0)),
            key=lambda s: (int(bits[s].sum()), tuple(np.flatnonzero(bits[s]).tolist())),
        )
        eig = superset_sum(w * w * complement_sizes(dims))
        # (A^T A)^+ = sum_P Pi_P / lambda_P = sum_T b_T E_T with E_T = "average out the
        # attributes not in T" and b the signed superset transform of 1 / lambda.
        inv = np.where(eig > 0, 1.0 / np.where(eig > 0, eig, 1.0), 0.0)
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "_support", tuple(support))
        object.__setattr__(self, "_eig", eig)
        object.__setattr__(self, "_pinv", superset_mobius(inv))

    @property
    def name(self) -> str:
        return f"{self.label}({len(self._support)} of {1 << len(self.dims)})"

    @property
    def domain(self) -> tuple[int, ...]:
        return self.dims

    @property
    def subsets(self) -> tuple[tuple[int, ...], ...]:
        """The measured marginals, as attribute-index tuples (rows come in this order)."""
        return tuple(self._attrs(s) for s in self._support)

    def _attrs(self, s: int) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.dims)) if s >> i & 1)

    def _summed(self, s: int) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.dims)) if not s >> i & 1)

    def _block_shape(self, s: int) -> list[int]:
        return [n if s >> i & 1 else 1 for i, n in enumerate(self.dims)]

    @property
    def m(self) -> int:
        return sum(math.prod(self._block_shape(s)) for s in self._support)

    @property
    def sensitivity(self) -> float:
        return math.fsum(float(self.weights[s]) for s in self._support)

    @property
    def l2_sensitivity(self) -> float:
        return math.sqrt(math.fsum(float(self.weights[s]) ** 2 for s in self._support))

    @property
    def eigenvalues(self) -> FloatArray:
        """``lambda_P``: ``A^T A`` on each subspace ``U_P`` (indexed by bit mask)."""
        return self._eig.copy()

    def _matmat(self, x: FloatArray) -> FloatArray:
        t = x.reshape(*self.dims, x.shape[1])
        blocks = [
            self.weights[s] * t.sum(axis=self._summed(s)).reshape(-1, x.shape[1])
            for s in self._support
        ]
        return np.vstack(blocks)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        k = y.shape[1]
        out = np.zeros((*self.dims, k))
        start = 0
        for s in self._support:
            shape = self._block_shape(s)
            size = math.prod(shape)
            out += self.weights[s] * y[start : start + size].reshape(*shape, k)
            start += size
        return out.reshape(-1, k)

    def inv_gram(self, z: FloatArray) -> FloatArray:
        """``(A^T A)^+ Z`` for an ``n x k`` block, in ``O(n)`` per non-zero coefficient."""
        k = z.shape[1]
        t = z.reshape(*self.dims, k)
        out = np.zeros_like(t)
        for s in np.flatnonzero(self._pinv):
            out += self._pinv[s] * t.mean(axis=self._summed(int(s)), keepdims=True)
        return out.reshape(-1, k)

    def _lstsq(self, r: FloatArray) -> FloatArray:
        return self.inv_gram(self._rmatmat(r))

    @property
    def matrix(self) -> sp.csr_matrix:
        """``A`` as a sparse matrix (one non-zero per cell and marginal), for linear programs."""
        coords = np.unravel_index(np.arange(self.n), self.dims)
        rows, offset = [], 0
        for s in self._support:
            shape = self._block_shape(s)
            zero = np.zeros(self.n, np.int64)
            kept = tuple(coords[i] if s >> i & 1 else zero for i in range(len(shape)))
            idx = np.ravel_multi_index(kept, shape)
            rows.append(offset + idx)
            offset += math.prod(shape)
        vals = np.concatenate([np.full(self.n, self.weights[s]) for s in self._support])
        cols = np.tile(np.arange(self.n), len(self._support))
        return sp.csr_matrix((vals, (np.concatenate(rows), cols)), shape=(self.m, self.n))

    def squared_error_factor(self, workload: Workload) -> float:
        return diagonal_error_factor(self, workload, self._eig)


def marginals_strategy(
    dims: tuple[int, ...], weights: dict[tuple[int, ...], float], *, label: str = "Marginals"
) -> MarginalsStrategy:
    """Weighted marginals strategy from ``{attribute subset: weight}``.

    >>> a = marginals_strategy((2, 3), {(0,): 1.0, (1,): 1.0})
    >>> a.shape, a.sensitivity
    ((5, 6), 2.0)
    """
    dims = _check_dims(dims)
    w = np.zeros(1 << len(dims))
    for subset, value in weights.items():
        if any(not 0 <= i < len(dims) for i in subset) or len(set(subset)) != len(subset):
            raise ConfigError(f"subset must list distinct attributes of {dims}, got {subset!r}")
        w[sum(1 << i for i in subset)] = value
    return MarginalsStrategy(dims=dims, weights=w, label=label)
