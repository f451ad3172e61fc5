"""Workload-norm projection onto non-negative histograms (the reconstruction's final step).

Given the unbiased least-squares estimate ``x_ls``, return

    ``x_W = argmin_{x >= 0} ||W (x - x_ls)||_2^2``

i.e. the projection of ``x_ls`` onto the non-negative orthant in the norm that the workload's
own error is measured in. The true histogram is non-negative, and projecting onto a convex set
that contains the truth never increases the distance to it (Bertsekas, Nonlinear Programming,
Prop. 2.1.3), so for *every* noise draw ``||W x_W - W x||_2 <= ||W x_ls - W x||_2``: the workload's
total squared error can only improve on least squares, unlike a plain non-negative fit, whose
upward bias on empty cells accumulates in range sums. The projection is still non-negative, so it
zeroes empty regions and keeps most of the per-cell gain.

Structured cases are solved exactly in ``O(n)`` or ``O(n log)``: prefix (isotonic regression of
the cumulative sums, PAVA), all ranges (the same plus a scalar shift, since
``||W e||^2 = (n + 1) Var(cumsum e)``), identity (clipping). Everything else is a convex QP solved
exactly by an active-set NNLS on a dense factor of ``W^T W`` (up to 2048 cells) or by cvxpy on
the sparse ``W``; a tiny ridge ``1e-9 tr(W^T W) / n`` makes the minimizer unique when ``W`` is
rank-deficient, so the result never depends on the solver's path.
"""

from __future__ import annotations

import contextlib
from typing import Any

import cvxpy
import numpy as np
import scipy.optimize as sopt
import scipy.sparse as sp

from dp.errors import ConfigError, SolverError
from dp.matrix.product import Kron, Union
from dp.matrix.workload import AllRange, FloatArray, Identity, Prefix, Total, Workload

# cvxpy ships incomplete type information (atoms are re-exported dynamically): treat it as Any.
cp: Any = cvxpy

__all__ = ["projection_supported", "sparse_workload", "workload_factor", "workload_projection"]

_RIDGE = 1e-9
# Generic workloads up to this many cells use a dense factor of W^T W and an exact active-set NNLS.
_DENSE_MAX_N = 2048
# Larger ones need W itself as a sparse matrix with at most this many non-zeros.
_MAX_EXPLICIT = 1 << 24


def _monotone_nonneg(y: FloatArray) -> FloatArray:
    """``argmin ||c - y||`` over non-decreasing ``c >= 0`` (isotonic regression, then clip)."""
    return np.asarray(np.maximum(sopt.isotonic_regression(y).x, 0.0), dtype=np.float64)


def _prefix(x_ls: FloatArray) -> FloatArray:
    # ||W e||^2 = ||cumsum e||^2 and x >= 0 <=> cumsum x is non-decreasing and >= 0.
    c = _monotone_nonneg(np.cumsum(x_ls))
    return np.diff(c, prepend=0.0)


def _all_range(x_ls: FloatArray) -> FloatArray:
    # With C_0 = 0 and C_k = x_1 + ... + x_k, sum_{i<j} (C_j - C_i)^2 = (n+1) ||d - mean(d)||^2 for
    # d = C(x) - C(x_ls): minimize jointly over a shift t (convex after partial minimization).
    y = np.cumsum(x_ls)

    def value(t: float) -> float:
        c = _monotone_nonneg(y + t)
        return float(np.sum((c - y - t) ** 2) + t * t)

    span = float(np.max(np.abs(y))) + 1.0
    res = sopt.minimize_scalar(
        value, bounds=(-span, span), method="bounded", options={"xatol": 1e-10 * span}
    )
    c = _monotone_nonneg(y + float(res.x))
    return np.diff(c, prepend=0.0)


def _nnz_bound(workload: Workload) -> float:
    """Upper bound on the non-zeros of ``W`` (without building it)."""
    if isinstance(workload, Identity | Total):
        return float(workload.n)
    if isinstance(workload, Kron):
        return float(np.prod([_nnz_bound(f) for f in workload.factors]))
    if isinstance(workload, Union):
        return float(sum(_nnz_bound(p) for p in workload.parts))
    return float(workload.m) * float(workload.n)


def sparse_workload(workload: Workload) -> sp.csr_matrix | None:
    """``W`` as a sparse matrix when that is small (identity/total products, marginals...)."""
    if _nnz_bound(workload) > _MAX_EXPLICIT:
        return None
    if isinstance(workload, Identity):
        return sp.identity(workload.n, format="csr")
    if isinstance(workload, Total):
        return sp.csr_matrix(np.ones((1, workload.n)))
    if isinstance(workload, Kron):
        parts = [sparse_workload(f) for f in workload.factors]
        if any(p is None for p in parts):
            return None
        out = sp.csr_matrix(np.ones((1, 1)))
        for p in parts:
            out = sp.csr_matrix(sp.kron(out, p))
        return out
    if isinstance(workload, Union):
        stacked = [sparse_workload(p) for p in workload.parts]
        if any(s is None for s in stacked):
            return None
        pairs = zip(stacked, workload.weights, strict=True)
        return sp.csr_matrix(sp.vstack([w * s for s, w in pairs if s is not None]))
    return sp.csr_matrix(workload.dense())


def workload_factor(workload: Workload) -> FloatArray | sp.csr_matrix | None:
    """``F`` with ``F^T F = W^T W`` exactly (no ridge): a dense eigen-factor or sparse ``W``."""
    if workload.n <= _DENSE_MAX_N:
        lam, vec = np.linalg.eigh(workload.gram())
        keep = lam > 1e-10 * max(float(lam.max()), 1e-300)
        return np.asarray(np.sqrt(lam[keep])[:, None] * vec[:, keep].T, dtype=np.float64)
    return sparse_workload(workload)


def projection_supported(workload: Workload) -> bool:
    """Whether :func:`workload_projection` can handle ``workload`` (size limits)."""
    if isinstance(workload, Identity | Prefix | AllRange) or workload.n <= _DENSE_MAX_N:
        return True
    return _nnz_bound(workload) <= _MAX_EXPLICIT


def _dense_projection(workload: Workload, x_ls: FloatArray) -> FloatArray:
    # Lawson-Hanson active set on [F; sqrt(ridge) I]: exact, deterministic, no tolerances to tune.
    g = workload.gram()
    ridge = _RIDGE * float(np.trace(g)) / workload.n
    f = np.linalg.cholesky(g + ridge * np.eye(workload.n)).T
    x, _ = sopt.nnls(f, f @ x_ls, maxiter=100 * workload.n)
    return np.asarray(x, dtype=np.float64)


def _sparse_projection(mat: sp.csr_matrix, x_ls: FloatArray) -> FloatArray:
    # Work in units of the data so that the solver's absolute tolerances mean the same at any scale.
    n = mat.shape[1]
    unit = max(1.0, float(np.max(np.abs(x_ls))))
    ridge = _RIDGE * float(mat.multiply(mat).sum()) / n
    x = cp.Variable(n)
    diff = x - x_ls / unit
    prob = cp.Problem(
        cp.Minimize(cp.sum_squares(mat @ diff) + ridge * cp.sum_squares(diff)), [x >= 0]
    )
    # HiGHS first (the pinned solver); its QP code occasionally reports spurious infeasibility,
    # so Clarabel (interior point, deterministic) is the pinned fallback.
    for solver in ("HIGHS", "CLARABEL"):
        with contextlib.suppress(cp.error.SolverError):
            prob.solve(solver=solver)
            if prob.status == cp.OPTIMAL:
                return np.asarray(np.maximum(np.asarray(x.value), 0.0) * unit, dtype=np.float64)
    raise SolverError(
        f"non-negative projection: no solver returned 'optimal' (last {prob.status!r})"
    )


def workload_projection(workload: Workload, x_ls: FloatArray) -> FloatArray:
    """``argmin_{x >= 0} ||W (x - x_ls)||^2`` (see the module docstring).

    Args:
        workload: the workload whose norm defines the projection.
        x_ls: least-squares histogram estimate (any sign), length ``n``.

    Returns:
        The non-negative projection, length ``n``.
    """
    x_ls = np.asarray(x_ls, dtype=np.float64)
    if x_ls.shape != (workload.n,):
        raise ConfigError(f"x_ls must have shape ({workload.n},), got {x_ls.shape}")
    if isinstance(workload, Identity):
        return np.maximum(x_ls, 0.0)
    if isinstance(workload, Prefix):
        return _prefix(x_ls)
    if isinstance(workload, AllRange):
        return _all_range(x_ls)
    if workload.n <= _DENSE_MAX_N:
        return _dense_projection(workload, x_ls)
    mat = sparse_workload(workload)
    if mat is None:
        raise ConfigError(f"workload {workload.name} is too large for the non-negative projection")
    return _sparse_projection(mat, x_ls)
