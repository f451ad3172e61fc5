"""Nuclear-norm least squares on (noisy) sufficient statistics, and the low-rank refit.

Both functions only read released statistics: post-processing (see :mod:`dp.regression.trace`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import SolverError

__all__ = ["SOLVER", "refit_in_subspace", "solve_nuclear"]

FloatArray = npt.NDArray[np.float64]


def _cvxpy() -> Any:
    """cvxpy, imported on first use (planning never needs it). It ships incomplete type
    information (atoms are re-exported dynamically): treated as Any."""
    import cvxpy

    return cvxpy


SOLVER = "CLARABEL"
"""Pinned conic solver (ships with cvxpy); results depend on it only to solver tolerance."""
FALLBACK = "SCS"
FALLBACK_OPTIONS = {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000}
"""Where CLARABEL stalls short of its tolerances (``optimal_inaccurate``, seen on rare noisy
problems), SCS (also shipped with cvxpy) finishes the same problem."""
# Singular values below this fraction of the largest, or below _ZERO_TOL outright, are solver
# round-off (CLARABEL's tolerances are ~1e-8); coefficients live in the scaled frame, O(1).
_RANK_TOL = 1e-3
_ZERO_TOL = 1e-6


def solve_nuclear(
    grams: Sequence[FloatArray],
    moments: Sequence[FloatArray],
    *,
    shape: tuple[int, int],
    lam: float,
    per_column: bool,
) -> FloatArray:
    """Minimise ``sum_k (v_k^T G_k v_k - 2 m_k^T v_k) + lam ||B||_*`` over ``d x T`` matrices ``B``.

    ``per_column``: ``T`` blocks of size ``d``, ``v_k`` is column ``k`` of ``B``; otherwise one
    block of size ``d T`` over ``v = vec(B)`` (column-major). Every ``G_k`` must be positive
    semidefinite.

    >>> B = solve_nuclear([np.eye(2)] * 2, [np.array([1.0, 0.0])] * 2, shape=(2, 2), lam=0.0,
    ...                   per_column=True)
    >>> np.round(B, 4).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    True
    """
    cp = _cvxpy()
    d, t = shape
    B = cp.Variable((d, t))
    scale = max(1.0, max(float(np.linalg.norm(g, 2)) for g in grams))  # conditioning only
    terms = []
    columns = [B[:, k] for k in range(t)] if per_column else [cp.vec(B, order="F")]
    for g, m, v in zip(grams, moments, columns, strict=True):
        mu, vecs = np.linalg.eigh((g + g.T) / 2.0)
        root = vecs * np.sqrt(np.maximum(mu, 0.0) / scale)
        terms.append(cp.sum_squares(root.T @ v) - 2.0 * (m / scale) @ v)
    problem = cp.Problem(cp.Minimize(cp.sum(terms) + (lam / scale) * cp.normNuc(B)))
    for solver, options in ((SOLVER, {}), (FALLBACK, FALLBACK_OPTIONS)):
        try:
            problem.solve(solver=solver, **options)
        except cp.error.SolverError as exc:
            raise SolverError(f"trace regression: {solver} failed ({exc})") from None
        if problem.status != cp.OPTIMAL_INACCURATE:
            break
    if problem.status != cp.OPTIMAL or B.value is None:
        raise SolverError(f"trace regression: {solver} returned status {problem.status!r}")
    return np.asarray(B.value, dtype=np.float64)


def refit_in_subspace(
    B: FloatArray,
    grams: Sequence[FloatArray],
    moments: Sequence[FloatArray],
    *,
    per_column: bool,
) -> tuple[FloatArray, int]:
    """Refit without the penalty inside the subspace the nuclear norm selected.

    Soft-thresholding the singular values shrinks the ones it keeps as well (the nuclear norm's
    bias, as the lasso's); refitting on the selected support removes that bias (Belloni &
    Chernozhukov 2013 for the lasso; Candes & Plan 2011 for low rank). Multi-task: each task is
    re-solved within the column space ``U`` (``b_t = U c_t``); matrix covariates: within
    ``B = U S V^T``. ``grams`` are the positive definite (shrunk, floored) noisy matrices the
    penalised problem used, so their projections are positive definite too. Post-processing of
    the noisy statistics only.
    """
    u, sv, vt = np.linalg.svd(B, full_matrices=False)
    cut = max(_RANK_TOL * float(sv[0]), _ZERO_TOL) if sv.size else 0.0
    rank = int((sv > cut).sum())
    if rank == 0:
        return np.zeros_like(B), 0
    u, vt = u[:, :rank], vt[:rank]
    if per_column:
        cols = [
            u @ np.linalg.solve(u.T @ g @ u, u.T @ m) for g, m in zip(grams, moments, strict=True)
        ]
        return np.column_stack(cols), rank
    basis = np.kron(vt.T, u)  # vec(U S V^T) = (V kron U) vec(S), column-major
    s_vec = np.linalg.solve(basis.T @ grams[0] @ basis, basis.T @ moments[0])
    return u @ s_vec.reshape((rank, rank), order="F") @ vt, rank
