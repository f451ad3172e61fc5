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

The guarantee is *certified* for the returned point, whichever solver produced it
(:func:`certify`): for ``p >= 0`` and ``h = W^T W (p - x_ls)``,

    ``||W (p - x)||^2 - ||W (x_ls - x)||^2 = ||W p||^2 - ||W x_ls||^2 - 2 x^T h``,

so ``||W (p - x)|| <= ||W (x_ls - x)||`` holds for every ``x >= 0`` if and only if ``h >= 0`` and
``||W p|| <= ||W x_ls||`` (take ``x = 0`` and ``x = t e_i``, ``t -> inf``, for "only if"). The
exact projection meets both (its optimality conditions), an approximate one nearly; the
certificate repairs the small violations by raising the offending cells (``W >= 0``, so raising
cell ``i`` by ``-h_i / G_ii`` makes ``h_i >= 0`` and lowers no other ``h_j``) and checks the norm.
Nothing therefore depends on a solver's tolerance.

Structured cases are solved exactly in ``O(n)`` or ``O(n log)``: prefix (isotonic regression of
the cumulative sums, PAVA), all ranges (the same plus a scalar shift, since
``||W e||^2 = (n + 1) Var(cumsum e)``), identity (clipping). Other workloads over at most
:data:`MAX_DENSE_CELLS` cells use an exact active-set NNLS on a dense factor of ``W^T W``; larger
ones, asking at most :data:`MAX_PROJECTION_QUERIES` queries, an interior-point method in the
space of the answers (:mod:`dp.matrix.interior`; all 2-way marginals of 72,000 cells, 999
queries, take seconds). Anything bigger is refused before any budget is spent
(:func:`check_projection`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.optimize as sopt
import scipy.sparse as sp

from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.interior import interior_nnls
from dppub.dp.matrix.optimize import single_threaded_blas
from dppub.dp.matrix.product import Kron, Union
from dppub.dp.matrix.workload import AllRange, FloatArray, Identity, Prefix, Total, Workload

__all__ = [
    "MAX_DENSE_CELLS",
    "MAX_PROJECTION_CELLS",
    "MAX_PROJECTION_QUERIES",
    "certify",
    "check_projection",
    "sparse_workload",
    "workload_factor",
    "workload_projection",
]

MAX_DENSE_CELLS = 2048
"""Workloads over at most this many cells are projected by an exact NNLS on a dense factor."""
MAX_PROJECTION_QUERIES = 2048
"""Larger workloads (other than 1-D identity, prefix and all ranges) must ask at most this many
queries: the interior-point method factorizes an ``m x m`` matrix per step."""
MAX_PROJECTION_CELLS = 1 << 22
"""...and cover at most this many cells (the method keeps about 20 vectors of ``n`` doubles)."""

_RIDGE = 1e-9
# A failed interior-point certificate falls back to an exact NNLS on W itself up to this size.
_MAX_DENSE_ANSWERS = 1 << 24
# The interior-point method needs W as a sparse matrix with at most this many non-zeros.
_MAX_EXPLICIT = 1 << 24
# Floating-point rounding allowed in the certificate, relative to the terms summed (the sums of
# squares in ||W p||^2 <= ||W x_ls||^2, the products in each h_i).
_ROUNDING = 1e-12


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
    t = float(res.x)
    # value(t) is quadratic while the set K of cells clipped to 0 stays the same (elsewhere
    # c - y - t does not depend on t): its exact minimizer is t = -sum(y[K]) / (|K| + 1).
    for _ in range(8):
        clipped = _monotone_nonneg(y + t) <= 0
        exact = -float(np.sum(y[clipped])) / (int(np.count_nonzero(clipped)) + 1)
        if exact == t:
            break
        t = exact if value(exact) <= value(t) else t
        if t != exact:
            break
    c = _monotone_nonneg(y + t)
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
        out = sp.csr_matrix(sp.vstack([w * s for s, w in pairs if s is not None]))
        out.eliminate_zeros()
        return out
    return sp.csr_matrix(workload.dense())


def workload_factor(workload: Workload) -> FloatArray | sp.csr_matrix | None:
    """Rows ``F`` with ``F x = F x'`` exactly when ``W x = W x'``: sparse ``W`` when small enough,
    else a dense eigen-factor of ``W^T W`` (up to :data:`MAX_DENSE_CELLS` cells), else ``None``."""
    mat = sparse_workload(workload)
    if mat is not None or workload.n > MAX_DENSE_CELLS:
        return mat
    lam, vec = np.linalg.eigh(workload.gram())
    keep = lam > 1e-10 * max(float(lam.max()), 1e-300)
    return np.asarray(np.sqrt(lam[keep])[:, None] * vec[:, keep].T, dtype=np.float64)


def check_projection(workload: Workload) -> None:
    """Raise a one-line :class:`ConfigError` if :func:`workload_projection` refuses ``workload``
    (call it when planning: the refusal then comes before any budget is spent)."""
    if isinstance(workload, Identity | Prefix | AllRange) or workload.n <= MAX_DENSE_CELLS:
        return
    limit = (
        f"nonneg-l1 reconstruction of workload {workload.name} ({workload.m} queries over "
        f"{workload.n} cells) needs at most {MAX_DENSE_CELLS} cells, or at most "
    )
    if workload.m > MAX_PROJECTION_QUERIES:
        raise ConfigError(
            f"{limit}{MAX_PROJECTION_QUERIES} queries (MAX_PROJECTION_QUERIES); "
            "use reconstruction: least-squares"
        )
    if workload.n > MAX_PROJECTION_CELLS or _nnz_bound(workload) > _MAX_EXPLICIT:
        raise ConfigError(
            f"{limit}{MAX_PROJECTION_CELLS} cells (MAX_PROJECTION_CELLS) with at most "
            f"{_MAX_EXPLICIT} non-zeros; use reconstruction: least-squares"
        )


def _dense_projection(workload: Workload, x_ls: FloatArray) -> FloatArray:
    # Lawson-Hanson active set on [F; sqrt(ridge) I]: exact, deterministic, no tolerances to tune.
    g = workload.gram()
    ridge = _RIDGE * float(np.trace(g)) / workload.n
    f = np.linalg.cholesky(g + ridge * np.eye(workload.n)).T
    x, _ = sopt.nnls(f, f @ x_ls, maxiter=100 * workload.n)
    return np.asarray(x, dtype=np.float64)


def _polish(
    workload: Workload, x_ls: FloatArray, p: FloatArray, mat: sp.csr_matrix | None
) -> FloatArray:
    """Exact least squares on the support ``F`` of an approximate projection ``p``.

    One Newton step, ``p_F -= pinv(G_FF) h_F``, makes the gradient vanish on ``F`` up to
    rounding: the solvers' own tolerances (the interior point's complementarity, the ridge of
    the dense NNLS) would otherwise sit in the certificate's margin, which is ~0 when the
    least-squares answers are nearly consistent already. With sparse ``W`` the step is taken in
    answer space, ``W_F^T pinv(W_F W_F^T) W (x_ls - p)``, an ``m x m`` eigendecomposition.
    """
    free = np.flatnonzero(p > 0)
    if free.size == 0:
        return p
    out = p.copy()
    with single_threaded_blas():
        if mat is not None and mat.shape[0] <= free.size:
            s_f = mat[:, free]
            lam, vec = np.linalg.eigh((s_f @ s_f.T).toarray())
            rhs = vec.T @ (mat @ (x_ls - p))
            step = s_f.T @ (vec @ _pinv_apply(lam, rhs))
        elif free.size <= MAX_DENSE_CELLS:
            cols = np.zeros((workload.n, free.size))
            cols[free, np.arange(free.size)] = 1.0
            lam, vec = np.linalg.eigh(workload.gram_matmul(cols)[free])
            rhs = vec.T @ workload.gram_matmul(x_ls - p)[free]
            step = vec @ _pinv_apply(lam, rhs)
        else:
            return p
    out[free] += step
    return np.maximum(out, 0.0)


def _pinv_apply(lam: FloatArray, rhs: FloatArray) -> FloatArray:
    keep = lam > 1e-12 * max(float(lam.max()), 1e-300)
    return np.where(keep, rhs / np.where(keep, lam, 1.0), 0.0)


def certify(
    workload: Workload, x_ls: FloatArray, x: FloatArray, *, mat: sp.csr_matrix | None = None
) -> FloatArray:
    """``x`` (clipped at 0), with cells raised so that it is never worse than ``x_ls``.

    Returns ``p >= 0`` with ``h = W^T W (p - x_ls) >= 0`` and ``||W p|| <= ||W x_ls||``, both
    evaluated in floating point, which is exactly the condition for
    ``||W (p - x)|| <= ||W (x_ls - x)||`` at every true histogram ``x >= 0`` (module
    docstring), up to the rounding of the sums involved (relative ``1e-12``). Cells with
    ``h_i`` below that rounding are raised by ``-h_i / G_ii``; for a near-optimal ``x`` these
    raises are at the solver's tolerance.

    Args:
        workload: the workload ``W`` (non-negative entries).
        x_ls: the least-squares estimate.
        x: a candidate, e.g. an approximate projection.
        mat: ``W`` as a sparse matrix, if at hand (faster products).

    Raises:
        SolverError: if ``x`` is too far from the projection to be certified.
    """
    fwd: Callable[[FloatArray], FloatArray] = workload.__matmul__
    adj: Callable[[FloatArray], FloatArray] = workload.rmatvec
    if mat is not None:
        fwd, adj = mat.__matmul__, mat.T.__matmul__
    diag = workload.gram_diag() if mat is None else np.asarray(mat.multiply(mat).sum(axis=0))[0]
    p = np.maximum(np.asarray(x, dtype=np.float64), 0.0)
    for attempt in range(4):
        # d = W (x_ls - p) is formed from cell differences: no cancellation of large counts.
        d = fwd(x_ls - p)
        h = -adj(d)
        # Size of the terms behind each h_i (the solvers work with x_ls and p themselves): its
        # rounding error is a tiny multiple of it.
        tol = _ROUNDING * np.abs(adj(fwd(np.abs(x_ls) + p)))
        low = (h < -tol) & (diag > 0)
        if not low.any() or attempt == 3:
            break
        p[low] -= h[low] / diag[low]
    if np.any(h < -tol):
        raise SolverError("non-negative projection: the workload gradient stays negative")
    # ||W x_ls||^2 - ||W p||^2 = ||d||^2 - 2 p^T h: compared without forming the large norms,
    # up to the rounding of p^T h.
    if 2.0 * float(p @ (h - tol)) > float(d @ d) * (1.0 + _ROUNDING):
        raise SolverError("non-negative projection: the result is not certified (||W x|| grew)")
    return p


def workload_projection(workload: Workload, x_ls: FloatArray) -> FloatArray:
    """``argmin_{x >= 0} ||W (x - x_ls)||^2``, certified (see the module docstring).

    Args:
        workload: the workload whose norm defines the projection.
        x_ls: least-squares histogram estimate (any sign), length ``n``.

    Returns:
        The non-negative projection, length ``n``; never worse than ``x_ls`` in the workload's
        norm at any non-negative truth.
    """
    x_ls = np.asarray(x_ls, dtype=np.float64)
    if x_ls.shape != (workload.n,):
        raise ConfigError(f"x_ls must have shape ({workload.n},), got {x_ls.shape}")
    if np.all(x_ls >= 0):
        return x_ls.copy()  # already its own projection
    mat = None
    if isinstance(workload, Identity):
        x = np.maximum(x_ls, 0.0)
    elif isinstance(workload, Prefix):
        x = _prefix(x_ls)
    elif isinstance(workload, AllRange):
        x = _all_range(x_ls)
    elif workload.n <= MAX_DENSE_CELLS:
        mat = sparse_workload(workload)
        x = _polish(workload, x_ls, _dense_projection(workload, x_ls), mat)
    else:
        check_projection(workload)
        mat = sparse_workload(workload)
        if mat is None:  # pragma: no cover - check_projection bounds the non-zeros
            raise ConfigError(f"workload {workload.name} is too large for the projection")
        x = _polish(workload, x_ls, interior_nnls(mat, x_ls), mat)
        try:
            return certify(workload, x_ls, x, mat=mat)
        except SolverError:
            if mat.shape[0] * mat.shape[1] > _MAX_DENSE_ANSWERS:
                raise
            # The interior point stopped short of the certificate (about one noise draw in
            # five on 3,600-cell marginals): solve exactly by an active set in answer space.
            dense = mat.toarray()
            exact, _ = sopt.nnls(dense, dense @ x_ls, maxiter=50 * workload.n)
            x = _polish(workload, x_ls, np.asarray(exact, dtype=np.float64), mat)
    return certify(workload, x_ls, x, mat=mat)
