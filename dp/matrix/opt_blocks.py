"""OPT0 for large 1-D domains: p-Identity with block-structured sparse rows.

Dense OPT0 (:func:`dp.matrix.optimize.opt0`) costs ``O(n p^2)`` per iteration with dense
``p x n`` products, which at ``n = 4096`` (``p ~ 300``) takes minutes. Optimized p-Identity rows
are local, though (HDMM, McKenna et al. VLDB 2018, Fig. 4): each is a weighted bump over a range.
Here every row starts as a block of the workload-tuned hierarchy
(:func:`dp.matrix.optimize.tuned_hierarchy`) and may place weight only inside a window ``widen``
times its size centred on that block, so ``Theta`` has ``O(n levels widen)`` non-zeros and an
iteration needs only sparse products, one structured ``W^T W`` product on ``n x p``, and
``O(p^3)`` for ``M = I + Theta Theta^T``. Centred windows let neighbouring rows overlap the way
dense OPT0's bumps do (aligned windows cannot cross their block boundary): at ``n = 4096``,
with the hat start of :func:`_pattern`, they reach 2.556 / 2.452 x the SVD bound (prefix / all
ranges) where aligned flat blocks stop at 2.584 / 2.492 for the same iterations. The loss and
gradient are those of the module :mod:`dp.matrix.optimize`, restricted to the sparsity pattern.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from dp.errors import ConfigError, SolverError
from dp.matrix.optimize import PIdentity, lbfgs, single_threaded_blas, tuned_hierarchy
from dp.matrix.strategy import IntArray, Tree, nested_blocks
from dp.matrix.workload import FloatArray, Workload

__all__ = ["block_start", "opt_blocks"]

# Finest internal block of the start hierarchy (see block_start).
_FINEST_BLOCK = 16


def _pattern(tree: Tree, widen: int) -> tuple[sp.csr_matrix, FloatArray]:
    """Sparsity pattern (rows = the hierarchy's blocks, widened) and the initial values.

    A block row starts as a hat of the same mass, peaking at the block's centre and reaching
    the small floor one block size away: closer to dense OPT0's overlapping bumps than the flat
    block (n = 4096, same iterations: 2.556 / 2.452 x the SVD bound instead of 2.563 / 2.468).
    """
    n = tree.size
    sizes = tree.hi - tree.lo
    internal = np.flatnonzero(sizes > 1)
    leaf_w = float(tree.weight[sizes == 1].max())
    rows, cols, vals = [], [], []
    for r, v in enumerate(internal):
        lo, hi = int(tree.lo[v]), int(tree.hi[v])
        pad = ((hi - lo) * (widen - 1)) // 2
        support = np.arange(max(0, lo - pad), min(n, hi + pad))
        hat = np.maximum(0.0, 1.0 - np.abs(support - (lo + hi - 1) / 2) / (hi - lo))
        rows.append(np.full(support.size, r))
        cols.append(support)
        vals.append(tree.weight[v] / leaf_w * hat + 1e-3)
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


def _theta_gram(
    values: FloatArray,
    pattern: sp.csr_matrix,
    workload: Workload,
    s: FloatArray,
    groups: list[tuple[int, int, IntArray]],
) -> FloatArray:
    """``Theta C`` (``p x n``) for ``C = S W^T W S``, ``S = diag(s)``.

    For prefix and range workloads ``(W^T W)[a, b] = u[min(a, b)] v[max(a, b)]``, so a row with
    support ``[start, stop)`` needs running sums over its support only and is a multiple of ``u``
    left of it and of ``v`` right of it: ``O(nnz)`` work plus one pass to write the output.
    """
    scaled = values * s[pattern.indices]
    ss = workload.semiseparable()
    if ss is None:
        theta = sp.csr_matrix((scaled, pattern.indices, pattern.indptr), shape=pattern.shape)
        return s * workload.gram_rows(theta.toarray())
    u, v = ss
    us, vs = u * s, v * s
    out = np.empty(pattern.shape)
    for start, stop, rows in groups:
        sub = scaled[pattern.indptr[rows][:, None] + np.arange(stop - start)]
        left = np.cumsum(sub * u[start:stop], axis=1)
        cum_v = np.cumsum(sub * v[start:stop], axis=1)
        out[rows, start:stop] = vs[start:stop] * left + us[start:stop] * (cum_v[:, -1:] - cum_v)
        out[rows, :start] = cum_v[:, -1:] * us[:start]
        out[rows, stop:] = left[:, -1:] * vs[stop:]
    return out


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
    tc = _theta_gram(values, pattern, workload, s, groups)  # Theta C, p x n
    # Theta C Theta^T, a row group at a time (scipy would copy tc.T to C order first).
    tct = np.empty((p, p))
    for start, stop, rows in groups:
        sub = values[pattern.indptr[rows][:, None] + np.arange(stop - start)]
        tct[:, rows] = tc[:, start:stop] @ sub.T
    diag_c = s * s * diag_g
    loss = float(np.sum(diag_c) - np.sum(k_inv * tct))
    # Pattern entries of T Y C Y = M^-1 Theta C - M^-1 Theta C Theta^T M^-1 Theta: with
    # K = M^-1 and Q = K tct K, row i is (K Theta C)[i] - (Q Theta)[i] on its support, and
    # diag(C Y) = diag(C) - sum_l Theta[l] * (K Theta C)[l]. Rows sharing a support share one
    # small product, so this costs O(nnz p), not O(n p^2).
    q = k_inv @ tct @ k_inv
    dense = theta.toarray()
    tycy = np.empty(values.size)
    diag_cy = diag_c.copy()
    for start, stop, rows in groups:
        idx = pattern.indptr[rows][:, None] + np.arange(stop - start)
        ktc = k_inv[rows] @ tc[:, start:stop]
        tycy[idx] = ktc - q[rows] @ dense[:, start:stop]
        diag_cy[start:stop] -= np.sum(values[idx] * ktc, axis=0)
    grad = -2.0 * tycy + 2.0 * (diag_cy / s)[pattern.indices]
    return loss, grad


def block_start(tree: Tree) -> Tree:
    """The hierarchy :func:`opt_blocks` starts from: ``tree`` (a nested-block hierarchy such as
    :func:`tuned_hierarchy`) with its finest internal level split into blocks of
    ``_FINEST_BLOCK`` cells when it is coarser.

    The hierarchy's own optimum is not OPT0's: dense OPT0's local bumps are 30-50 cells wide at a
    stride of ~16 (n = 1024), and at n = 4096 prefix the tuned hierarchy's 32-cell level gives
    2.556 x the SVD bound, split into 16-cell blocks 2.537 (same work, p = 146 -> 274).
    """
    sizes = tree.hi - tree.lo
    levels = [int(d) for d in np.unique(tree.depth)]
    block = [int(sizes[tree.depth == d].max()) for d in levels]
    if len(block) < 2 or block[-1] != 1 or block[-2] <= _FINEST_BLOCK:
        return tree
    if block[-2] % _FINEST_BLOCK or any(a % b for a, b in itertools.pairwise(block)):
        return tree  # not a nested-block hierarchy of this kind: keep it as it is
    weight = [float(tree.weight[tree.depth == d].max()) for d in levels]
    block[-2] = _FINEST_BLOCK
    name = "Blocks(" + ",".join(str(b) for b in block) + ")"
    return nested_blocks(tree.size, block, weight, label=name)


def opt_blocks(
    workload: Workload, *, widen: int = 3, maxiter: int = 300, start: Tree | None = None
) -> PIdentity:
    """p-Identity strategy with block-local rows, optimized for a 1-D workload (large ``n``).

    Args:
        workload: a workload over a 1-D domain.
        widen: each row may use the window ``widen`` times larger than its start block, centred
            on it (clipped to the domain).
        maxiter: L-BFGS iterations.
        start: the hierarchy to start from (default :func:`block_start` of
            :func:`tuned_hierarchy`).

    Returns:
        The optimized strategy (deterministic and data-independent).
    """
    if len(workload.domain) != 1:
        raise ConfigError(f"opt_blocks needs a 1-D workload, got domain {workload.domain}")
    if isinstance(widen, bool) or not isinstance(widen, int) or widen < 1:
        raise ConfigError(f"widen must be a positive integer, got {widen!r}")
    tree = block_start(tuned_hierarchy(workload)) if start is None else start
    if tree.size != workload.n:
        raise ConfigError(f"start hierarchy has {tree.size} cells, the workload {workload.n}")
    pattern, init = _pattern(tree, widen)
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
