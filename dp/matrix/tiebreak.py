"""Which histogram to publish when several give the projected workload answers.

For a rank-deficient workload (marginals, totals) the projection of
:mod:`dp.matrix.project` fixes the answers ``W x`` but not the histogram. Among the
non-negative histograms with those answers, :func:`lexicographic_l1` takes, lexicographically,

1. the Laplace maximum-likelihood ones: least ``||r - A x||_1`` (Li et al., "The matrix
   mechanism", VLDB J. 2015; Ektelo, Zhang et al. SIGMOD 2018); skipped when the strategy
   measures the workload itself, since ``A x = W x`` is then fixed already;
2. among those, the one nearest the least-squares estimate ``x_hat`` in L1, plus a tiny fixed
   generic linear term so that the optimum is unique (a generic cost vector has one optimal
   vertex): the result never depends on which optimal vertex the solver visits first.

Both are linear programs over ``x = c + p - q`` with ``c = max(x_hat, 0)``, ``p >= 0`` and
``0 <= q <= c``, so ``|x - x_hat| = p + q`` (plus a constant) needs no extra rows. They are
passed to HiGHS directly (its interior-point method with crossover, pinned, which returns a
vertex): through cvxpy the same programs took minutes to compile at 72,000 cells. Stage 2
reuses stage 1's model restricted to its optimal face (:func:`_restrict_to_optimal_face`).
"""

from __future__ import annotations

from typing import Any

import highspy
import numpy as np
import scipy.sparse as sp

from dppub.dp.errors import SolverError
from dppub.dp.matrix.workload import FloatArray

__all__ = ["generic_cost", "lexicographic_l1"]

_TIE_SEED = 20100607
# Reduced costs above this are non-zero (HiGHS's default dual feasibility tolerance).
_SLACK = 1e-7


def generic_cost(n: int) -> FloatArray:
    """The fixed tiny generic cost vector of the tie-break (data-independent, seeded)."""
    return np.random.default_rng(_TIE_SEED).uniform(1.0, 2.0, n) * 1e-6


def _run(highs: Any, what: str) -> FloatArray:
    highs.run()
    status = highs.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        name = highs.modelStatusToString(status)
        raise SolverError(f"{what}: HiGHS returned status {name!r}, expected 'Optimal'")
    return np.asarray(highs.getSolution().col_value, dtype=np.float64)


def _restrict_to_optimal_face(highs: Any, upper: FloatArray) -> None:
    """Fix every variable whose reduced cost is non-zero at the bound it sits on.

    For any optimal dual solution, a feasible point is optimal exactly when it is complementary
    to it (Schrijver, Theory of Linear and Integer Programming, 1986, Sec. 7.9): every variable
    with a non-zero reduced cost stays at its bound. Fixing those variables turns the set of
    stage-1 optima into the feasible set of stage 2, without a dense "objective <= optimum" row;
    that row made HiGHS's interior-point method take ~4x as many iterations.
    """
    sol = highs.getSolution()
    reduced = np.asarray(sol.col_dual, dtype=np.float64)
    fixed = np.flatnonzero((reduced > _SLACK) | ((reduced < -_SLACK) & np.isfinite(upper)))
    at = np.where(reduced[fixed] > 0, 0.0, upper[fixed])
    highs.changeColsBounds(fixed.size, fixed.astype(np.int32), at, at)


def _highs(cost: FloatArray, upper: FloatArray, rows: sp.csc_matrix, rhs: FloatArray) -> Any:
    highs = highspy.Highs()  # type: ignore[no-untyped-call]
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("solver", "ipm")  # about 6x faster than simplex at 72,000 cells
    highs.setOptionValue("run_crossover", "on")  # a vertex, hence the unique generic optimum
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = rows.shape[1], rows.shape[0]
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(rows.shape[1])
    lp.col_upper_ = upper
    lp.row_lower_ = lp.row_upper_ = rhs
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = rows.shape[1], rows.shape[0]
    lp.a_matrix_.start_ = rows.indptr
    lp.a_matrix_.index_ = rows.indices
    lp.a_matrix_.value_ = rows.data
    highs.passModel(lp)
    return highs


def lexicographic_l1(
    *,
    fixed: sp.csr_matrix | FloatArray,
    target: FloatArray,
    strategy: sp.csr_matrix | None,
    measured: FloatArray,
    x_hat: FloatArray,
    unit: float,
) -> FloatArray:
    """The histogram of stages 1-2 above (see the module docstring).

    Args:
        fixed: rows ``F`` whose values must be kept (``F x = target``): ``W`` or a factor of
            ``W^T W``.
        target: ``F x_W`` for the projected histogram ``x_W``.
        strategy: ``A`` as a sparse matrix, or ``None`` to skip stage 1.
        measured: the noisy answers ``r`` (ignored when ``strategy`` is ``None``).
        x_hat: the least-squares estimate.
        unit: the noise scale; the programs work in these units so that their tolerances mean
            the same at any data scale.

    Returns:
        The selected non-negative histogram (its ``F x`` equals ``target`` up to HiGHS's
        feasibility tolerance, ``1e-7`` noise units).
    """
    n = x_hat.size
    c = np.maximum(x_hat, 0.0) / unit
    f_rows = sp.csr_matrix(fixed)
    blocks = [[f_rows, -f_rows]]
    rhs = [target / unit - f_rows @ c]
    inf = highspy.kHighsInf
    upper = [np.full(n, inf), c]
    m_a = 0
    if strategy is not None:
        m_a = strategy.shape[0]
        blocks = [
            [f_rows, -f_rows, None, None],
            [strategy, -strategy, sp.identity(m_a), -sp.identity(m_a)],
        ]
        rhs.append(measured / unit - strategy @ c)
        upper += [np.full(2 * m_a, inf)]
    rows = sp.csc_matrix(sp.bmat(blocks))
    bounds = np.concatenate(upper)
    generic = generic_cost(n)
    nearest = np.concatenate([1.0 + generic, 1.0 - generic, np.zeros(2 * m_a)])
    likelihood = np.concatenate([np.zeros(2 * n), np.ones(2 * m_a)])
    highs = _highs(nearest if strategy is None else likelihood, bounds, rows, np.concatenate(rhs))
    if strategy is not None:
        _run(highs, "non-negative L1 reconstruction")
        _restrict_to_optimal_face(highs, bounds)
        everything = np.arange(nearest.size, dtype=np.int32)
        highs.changeColsCost(everything.size, everything, nearest)
    sol = _run(highs, "L1 tie-break")
    return np.asarray(np.maximum(c + sol[:n] - sol[n : 2 * n], 0.0) * unit, dtype=np.float64)
