"""Non-negative least squares for wide workloads, by an interior-point method in answer space.

Solves ``min_{x >= 0} 1/2 ||S (x - x_ls)||^2`` for a sparse ``S`` with few rows and many
columns: a marginal workload over ``n`` = 72,000 cells asks ``m`` = 999 queries. The primal-dual
path-following method with Mehrotra's predictor-corrector (Nocedal & Wright, Numerical
Optimization, 2nd ed., Alg. 16.4; Wright, Primal-Dual Interior-Point Methods, 1997, ch. 10)
needs 15-30 Newton steps whatever the data. Each step solves ``(S^T S + D) dx = v`` with ``D``
diagonal; by the Woodbury identity

    ``(D + S^T S)^-1 = D^-1 - D^-1 S^T (I + S D^-1 S^T)^-1 S D^-1``

that is one Cholesky factorization of an ``m x m`` matrix, so a step costs
``O(nnz(S) k + m^3)`` (``k`` non-zeros per column) instead of anything in ``n^2``. An active-set
QP solver on the same problem (HiGHS, through cvxpy) did not finish in 10 minutes at
``n`` = 3,600; projected gradient needed 10^4 iterations at 72,000 cells.

The iterate is interior (every cell slightly positive); :func:`interior_nnls` zeroes the cells
whose dual slack exceeds their value (strict complementarity identifies the zero cells) and
returns the result. Its optimality is *not* trusted: the caller polishes it on its support and
certifies what it needs (:mod:`dp.matrix.project`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from dppub.dp.matrix.optimize import single_threaded_blas
from dppub.dp.matrix.workload import FloatArray

__all__ = ["interior_nnls"]

# Stop when the complementarity gap and the dual residual are this small relative to the
# problem's scale (in units where the largest |x_ls| is 1); 60 steps are never needed in
# practice (15-30), but bound the time whatever happens.
_TOL = 1e-11
_MAX_STEPS = 60
# Fraction of the distance to the boundary a step may go (keeps iterates interior).
_STEP_BACK = 0.99


def _max_step(v: FloatArray, dv: FloatArray) -> float:
    """Largest ``a <= 1`` with ``v + a dv >= 0``."""
    neg = dv < 0
    return min(1.0, float(np.min(-v[neg] / dv[neg]))) if neg.any() else 1.0


def interior_nnls(mat: sp.csr_matrix, x_ls: FloatArray) -> FloatArray:
    """Approximately ``argmin_{x >= 0} ||mat (x - x_ls)||_2`` (see the module docstring).

    Args:
        mat: the sparse ``m x n`` workload matrix ``S``.
        x_ls: the unconstrained estimate, length ``n``.

    Returns:
        A non-negative vector of length ``n`` (cells judged zero are exactly zero).
    """
    s_mat = sp.csr_matrix(mat)
    used = np.asarray(abs(s_mat).sum(axis=0))[0] > 0
    if not used.all():  # cells no query reads: any value is optimal, keep the clipped estimate
        out = np.maximum(x_ls, 0.0)
        out[used] = interior_nnls(s_mat[:, used], x_ls[used])
        return out
    s_t = sp.csr_matrix(s_mat.T)
    n = s_mat.shape[1]
    # Units where the estimate is O(1): the tolerances then mean the same at any data scale.
    unit = max(1.0, float(np.max(np.abs(x_ls))))
    b = s_t @ (s_mat @ (x_ls / unit))

    def gram(v: FloatArray) -> FloatArray:
        return np.asarray(s_t @ (s_mat @ v), dtype=np.float64)

    scale = max(1.0, float(np.max(np.abs(b))))
    x, z = np.ones(n), np.ones(n)
    with single_threaded_blas():  # m x m factorizations: threads only add contention
        for _ in range(_MAX_STEPS):
            r_dual = gram(x) - b - z
            gap = float(x @ z)
            if gap <= _TOL * n and float(np.max(np.abs(r_dual))) <= _TOL * scale:
                break
            d_inv = x / z
            normal = (s_mat.multiply(d_inv) @ s_t).toarray()
            normal[np.diag_indices_from(normal)] += 1.0
            try:
                factor = sla.cho_factor(normal, check_finite=False)
            except np.linalg.LinAlgError:
                break  # the barrier is as sharp as doubles allow: the iterate is final
            mu = gap / n
            dx = _woodbury(s_mat, s_t, d_inv, factor, -z - r_dual)  # affine (predictor) step
            dz = gram(dx) + r_dual
            a_p, a_d = _max_step(x, dx), _max_step(z, dz)
            sigma = (float((x + a_p * dx) @ (z + a_d * dz)) / n / mu) ** 3
            rhs = -z + (sigma * mu - dx * dz) / x - r_dual
            dx = _woodbury(s_mat, s_t, d_inv, factor, rhs)  # corrector
            dz = gram(dx) + r_dual
            x = x + _STEP_BACK * _max_step(x, dx) * dx
            z = z + _STEP_BACK * _max_step(z, dz) * dz
    return np.asarray(np.where(x > z, x, 0.0) * unit, dtype=np.float64)


def _woodbury(
    s_mat: sp.csr_matrix, s_t: sp.csr_matrix, d_inv: FloatArray, factor: Any, rhs: FloatArray
) -> FloatArray:
    """``(S^T S + D)^-1 rhs`` from the Cholesky factor of ``I + S D^-1 S^T``."""
    t = d_inv * rhs
    back = s_t @ sla.cho_solve(factor, s_mat @ t, check_finite=False)
    return np.asarray(t - d_inv * back, dtype=np.float64)
