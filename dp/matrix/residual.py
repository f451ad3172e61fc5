"""Residual strategies for Gaussian noise (ResidualPlanner; Xiao, He, Zhang & Kifer, NeurIPS 2023).

In the eigenbasis shared by all marginals (:mod:`dp.matrix.marginal_basis`), a strategy may
measure each subspace ``U_P`` on its own: with ``H_n`` the ``(n - 1) x n`` Helmert matrix
(orthonormal rows orthogonal to ``1``), the block ``sqrt(a_P) (x)_{i in P} H_{n_i}
(x)_{i not in P} 1^T / sqrt(n_i)`` has orthonormal rows spanning ``U_P`` (scaled), so
``A^T A = sum_P a_P Pi_P``: any non-negative eigenvalue per subspace, not only those a sum of
weighted marginals can reach. Every column of ``H_n`` has squared norm ``1 - 1/n``, so every
column of ``A`` has the same squared L2 norm ``sum_P a_P mult_P / n`` (the L2 sensitivity), and
for a workload with pattern weights ``c_P`` the error is ``sum_P c_P / a_P``. By Cauchy-Schwarz

    ``min_a (sum_P a_P mult_P / n) (sum_P c_P / a_P) = (sum_P sqrt(c_P mult_P))^2 / n``

at ``a_P ~ sqrt(n c_P / mult_P)``. For marginal workloads ``c_P = mult_P lambda_P(W^T W)``,
so this is ``(sum_i sigma_i(W))^2 / n``: the SVD lower bound (Li & Miklau, VLDB 2012) is reached
exactly under Gaussian noise (under Laplace noise the best strategies found stay 2.0-7.2x above
it on the demo and Adult, ``bench/marginals.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.marginal_basis import diagonal_error_factor, multiplicities, pattern_weights
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import FloatArray, Workload

__all__ = ["ResidualStrategy", "helmert", "residual_planner"]


def helmert(n: int) -> FloatArray:
    """The ``(n - 1) x n`` Helmert matrix: row ``j`` is ``(1, ..., 1, -j, 0, ...) / sqrt(j (j+1))``.

    >>> h = helmert(3)
    >>> bool(np.allclose(h @ h.T, np.eye(2))), bool(np.allclose(h @ np.ones(3), 0))
    (True, True)
    """
    j = np.arange(1, n, dtype=np.float64)
    out = np.tril(np.ones((n - 1, n)), k=0)
    out[np.arange(n - 1), np.arange(1, n)] = -j
    return np.asarray(out / np.sqrt(j * (j + 1))[:, None], dtype=np.float64)


def _helmert_apply(x: FloatArray) -> FloatArray:
    """``H x`` along the first axis in ``O(n)``: row ``j`` is ``(x_0 + ... + x_{j-1} - j x_j)``."""
    n = x.shape[0]
    j = np.arange(1, n, dtype=np.float64).reshape(-1, *([1] * (x.ndim - 1)))
    c = np.cumsum(x, axis=0)
    return np.asarray((c[:-1] - j * x[1:]) / np.sqrt(j * (j + 1)), dtype=np.float64)


def _helmert_adjoint(y: FloatArray) -> FloatArray:
    """``H^T y`` along the first axis: cell ``l`` gets ``sum_{j > l} z_j - l z_l``."""
    n = y.shape[0] + 1
    j = np.arange(1, n, dtype=np.float64).reshape(-1, *([1] * (y.ndim - 1)))
    z = np.concatenate([np.zeros((1, *y.shape[1:])), y / np.sqrt(j * (j + 1))])
    suffix = np.cumsum(z[::-1], axis=0)[::-1]
    after = np.concatenate([suffix[1:], np.zeros((1, *y.shape[1:]))])
    lvec = np.arange(n, dtype=np.float64).reshape(-1, *([1] * (y.ndim - 1)))
    return np.asarray(after - lvec * z, dtype=np.float64)


def _helmert_max_l1(n: int) -> float:
    """Maximum column L1 norm of ``H_n`` (``0`` for ``n = 1``)."""
    if n == 1:
        return 0.0
    return float(np.max(np.abs(helmert(n)).sum(axis=0)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResidualStrategy(Strategy):
    """Orthonormal residual measurements of the subspaces ``U_P``, block ``P`` scaled by
    ``sqrt(a_P)`` (see the module docstring); built by :func:`residual_planner`."""

    dims: tuple[int, ...]
    """Domain shape."""
    eigenvalues: FloatArray
    """``a_P >= 0``: ``A^T A`` on each subspace, indexed by bit mask (``0``: not measured)."""
    label: str = "ResidualPlanner"
    """Name shown in plans."""
    _support: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        a = np.array(self.eigenvalues, dtype=np.float64)
        d = len(self.dims)
        if a.shape != (1 << d,) or not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ConfigError(f"eigenvalues must be {1 << d} finite numbers >= 0, got {a.shape}")
        support = np.flatnonzero((a > 0) & (multiplicities(self.dims) > 0))
        if support.size == 0:
            raise ConfigError("eigenvalues must measure at least one subspace, got none")
        object.__setattr__(self, "eigenvalues", a)
        object.__setattr__(self, "_support", tuple(int(p) for p in support))

    @property
    def name(self) -> str:
        return self.label

    @property
    def domain(self) -> tuple[int, ...]:
        return self.dims

    def _shape(self, p: int) -> list[int]:
        return [n - 1 if p >> i & 1 else 1 for i, n in enumerate(self.dims)]

    @property
    def m(self) -> int:
        return sum(math.prod(self._shape(p)) for p in self._support)

    def _scale(self, p: int) -> float:
        """Per-column factor of the ``1^T / sqrt(n_i)`` axes of block ``p``."""
        return math.prod(1.0 / math.sqrt(n) for i, n in enumerate(self.dims) if not p >> i & 1)

    @property
    def sensitivity(self) -> float:
        # A column's L1 norm is sum_P sqrt(a_P) prod_{i in P} |H_i col|_1 prod_{i not in P}
        # n_i^-1/2; every term grows with each axis's column norm and the axes are chosen
        # independently, so the maximum takes each axis's heaviest column.
        h = [_helmert_max_l1(n) for n in self.dims]
        return math.fsum(
            math.sqrt(self.eigenvalues[p])
            * self._scale(p)
            * math.prod(h[i] for i in range(len(self.dims)) if p >> i & 1)
            for p in self._support
        )

    @property
    def l2_sensitivity(self) -> float:
        mult = multiplicities(self.dims)
        return math.sqrt(math.fsum(self.eigenvalues[p] * mult[p] / self.n for p in self._support))

    def _matmat(self, x: FloatArray) -> FloatArray:
        k = x.shape[1]
        blocks = []
        for p in self._support:
            t = x.reshape(*self.dims, k)
            for i in range(len(self.dims)):
                if p >> i & 1:
                    t = np.moveaxis(_helmert_apply(np.moveaxis(t, i, 0)), 0, i)
                else:
                    t = t.sum(axis=i, keepdims=True)
            blocks.append(math.sqrt(self.eigenvalues[p]) * self._scale(p) * t.reshape(-1, k))
        return np.vstack(blocks)

    def _adjoint(self, y: FloatArray, power: float) -> FloatArray:
        """``sum_P a_P^power B_P^T y_P`` with ``B_P`` the orthonormal block of subspace ``P``."""
        k = y.shape[1]
        out = np.zeros((*self.dims, k))
        start = 0
        for p in self._support:
            shape = self._shape(p)
            size = math.prod(shape)
            t = y[start : start + size].reshape(*shape, k)
            start += size
            for i in range(len(self.dims)):
                if p >> i & 1:
                    t = np.moveaxis(_helmert_adjoint(np.moveaxis(t, i, 0)), 0, i)
            out += self.eigenvalues[p] ** power * self._scale(p) * t
        return out.reshape(-1, k)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return self._adjoint(y, 0.5)

    def _lstsq(self, r: FloatArray) -> FloatArray:
        # (A^T A)^+ A^T r = sum_P B_P^T r_P / sqrt(a_P): the blocks are orthonormal up to scale.
        return self._adjoint(r, -0.5)

    @property
    def matrix(self) -> sp.csr_matrix:
        """``A`` as a sparse matrix (for linear programs; Helmert blocks are half dense)."""
        blocks = []
        for p in self._support:
            out = sp.csr_matrix(np.ones((1, 1)))
            for i, n in enumerate(self.dims):
                axis = helmert(n) if p >> i & 1 else np.full((1, n), 1.0 / math.sqrt(n))
                out = sp.csr_matrix(sp.kron(out, sp.csr_matrix(axis)))
            blocks.append(math.sqrt(self.eigenvalues[p]) * out)
        return sp.csr_matrix(sp.vstack(blocks))

    def squared_error_factor(self, workload: Workload) -> float:
        return diagonal_error_factor(self, workload, self.eigenvalues)


def residual_planner(workload: Workload) -> ResidualStrategy:
    """The residual strategy minimizing Gaussian error for ``workload`` (L2 sensitivity 1).

    Args:
        workload: marginals, a Kronecker product of 1-D workloads, or a union of those.

    Returns:
        ``a_P = sqrt(c_P n / mult_P)``, scaled so that the L2 sensitivity is 1; optimal among all
        strategies for marginal workloads (it attains the SVD bound).
    """
    c = pattern_weights(workload)
    if c is None:
        raise ConfigError(f"workload {workload.name} has no marginal structure to plan for")
    mult = multiplicities(workload.domain)
    a = np.zeros_like(c)
    need = c > 0
    a[need] = np.sqrt(c[need] / mult[need])
    a /= float(np.sum(a * mult)) / workload.n
    return ResidualStrategy(dims=workload.domain, eigenvalues=a)
