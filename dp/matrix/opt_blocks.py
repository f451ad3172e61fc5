"""OPT0 for large 1-D domains: p-Identity with block-structured sparse rows.

Dense OPT0 (:func:`dp.matrix.optimize.opt0`) costs ``O(n p^2)`` per iteration with dense
``p x n`` products, which at ``n = 4096`` (``p ~ 300``) takes minutes. Optimized p-Identity rows
are local, though (HDMM, McKenna et al. VLDB 2018, Fig. 4): each is a weighted bump over a range.
Here every row starts as a block of the workload-tuned hierarchy
(:func:`dp.matrix.optimize.tuned_hierarchy`) and may place weight only inside the aligned block
``widen`` times larger, so ``Theta`` has ``O(n levels widen)`` non-zeros and an iteration needs
only sparse products, one structured ``W^T W`` product on ``n x p``, and ``O(p^3)`` for
``M = I + Theta Theta^T``. The loss and gradient are those of the module
:mod:`dp.matrix.optimize`, restricted to the sparsity pattern.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from dp.errors import ConfigError, SolverError
from dp.matrix.optimize import PIdentity, lbfgs, single_threaded_blas, tuned_hierarchy
from dp.matrix.strategy import IntArray
from dp.matrix.workload import FloatArray, Workload

__all__ = ["opt_blocks"]


def _pattern(workload: Workload, widen: int) -> tuple[sp.csr_matrix, FloatArray]:
    """Sparsity pattern (rows = tuned-hierarchy blocks, widened) and the initial values."""
    tree = tuned_hierarchy(workload)
    n = workload.n
    sizes = tree.hi - tree.lo
    internal = np.flatnonzero(sizes > 1)
    leaf_w = float(tree.weight[sizes == 1].max())
    rows, cols, vals = [], [], []
    for r, v in enumerate(internal):
        lo, hi = int(tree.lo[v]), int(tree.hi[v])
        span = min(n, (hi - lo) * widen)
        start = (lo // span) * span
        support = np.arange(start, min(n, start + span))
        inside = (support >= lo) & (support < hi)
        rows.append(np.full(support.size, r))
        cols.append(support)
        vals.append(np.where(inside, tree.weight[v] / leaf_w, 0.0) + 1e-3)
    if not rows:  # a tuned "hierarchy" of leaves only: one free row over the whole domain
        return sp.csr_matrix(np.ones((1, n))), np.full(n, 1e-3)
    pattern = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(internal.size, n),
    )
    pattern.sort_indices()
    return pattern, pattern.data.copy()


def _groups(pattern: sp.csr_matrix) -> list[tuple[int, int, IntArray]]:
    """Rows grouped by their (contiguous) support ``[start, stop)``."""
    out: dict[tuple[int, int], list[int]] = {}
    for i in range(pattern.shape[0]):
        cols = pattern.indices[pattern.indptr[i] : pattern.indptr[i + 1]]
        out.setdefault((int(cols[0]), int(cols[-1]) + 1), []).append(i)
    return [(a, b, np.array(rows)) for (a, b), rows in out.items()]


def _loss_grad(
    values: FloatArray,
    pattern: sp.csr_matrix,
    workload: Workload,
    diag_g: FloatArray,
    groups: list[tuple[int, int, IntArray]],
) -> tuple[float, FloatArray]:
    theta = sp.csr_matrix((values, pattern.indices, pattern.indptr), shape=pattern.shape)
    p = theta.shape[0]
    s = 1.0 + np.asarray(theta.sum(axis=0)).ravel()
    chol = sla.cho_factor(np.eye(p) + (theta @ theta.T).toarray())
    k_inv = sla.cho_solve(chol, np.eye(p))
    theta_t = sp.csr_matrix(theta.T)
    tc = s * workload.gram_rows(theta.toarray() * s)  # Theta C, p x n (row-major scans)
    ct = tc.T
    tct = np.asarray(theta @ ct)  # Theta C Theta^T
    diag_c = s * s * diag_g
    loss = float(np.sum(diag_c) - np.sum(k_inv * tct))
    # Pattern entries of T Y C Y = M^-1 Theta C - M^-1 Theta C Theta^T M^-1 Theta: with
    # K = M^-1 and Q = K tct K, entry (i, j) is (C Theta^T K)[j, i] - (Theta^T Q)[j, i]. Rows
    # sharing a support share one small product, so this costs O(nnz p), not O(n p^2).
    q = k_inv @ tct @ k_inv
    both = np.asarray(theta_t @ np.hstack([q, k_inv]))
    theta_q, theta_k = both[:, :p], both[:, p:]
    tycy = np.empty(values.size)
    for start, stop, rows in groups:
        block = ct[start:stop] @ k_inv[:, rows] - theta_q[start:stop, rows]
        for col, i in enumerate(rows):
            tycy[pattern.indptr[i] : pattern.indptr[i + 1]] = block[:, col]
    diag_cy = diag_c - np.einsum("ij,ji->j", tc, theta_k)
    grad = -2.0 * tycy + 2.0 * (diag_cy / s)[pattern.indices]
    return loss, grad


def opt_blocks(workload: Workload, *, widen: int = 4, maxiter: int = 300) -> PIdentity:
    """p-Identity strategy with block-local rows, optimized for a 1-D workload (large ``n``).

    Args:
        workload: a workload over a 1-D domain.
        widen: each row may use the aligned block ``widen`` times larger than its start block.
        maxiter: L-BFGS iterations.

    Returns:
        The optimized strategy (deterministic and data-independent).
    """
    if len(workload.domain) != 1:
        raise ConfigError(f"opt_blocks needs a 1-D workload, got domain {workload.domain}")
    if isinstance(widen, bool) or not isinstance(widen, int) or widen < 1:
        raise ConfigError(f"widen must be a positive integer, got {widen!r}")
    pattern, init = _pattern(workload, widen)
    groups = _groups(pattern)
    diag_g = workload.gram_diag()
    scale = _loss_grad(init, pattern, workload, diag_g, groups)[0]

    def fun(phi: FloatArray) -> tuple[float, FloatArray]:
        loss, g = _loss_grad(phi * phi, pattern, workload, diag_g, groups)
        return loss / scale, 2.0 * phi * g / scale

    with single_threaded_blas():
        phi = lbfgs(fun, np.sqrt(init), maxiter=maxiter)
    if not np.all(np.isfinite(phi)):
        raise SolverError(f"block OPT0 optimization diverged for {workload.name}")
    values = phi * phi
    values[values < 1e-6 * max(1.0, float(values.max()))] = 0.0
    theta = sp.csr_matrix((values, pattern.indices, pattern.indptr), shape=pattern.shape)
    return PIdentity(theta=theta.toarray(), label=f"OPT0-blocks(p={pattern.shape[0]})")
