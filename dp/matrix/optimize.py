"""Workload-optimized strategies: HDMM's p-Identity (OPT0) and tuned nested-block hierarchies.

p-Identity (McKenna, Miklau, Hay & Machanavajjhala, "Optimizing error of high-dimensional
statistical queries under differential privacy", VLDB 2018, Sec. 5) measures
``A(Theta) = [I; Theta] D`` with ``Theta >= 0`` (``p x n``) and ``D = diag(1 / (1 + 1^T Theta))``,
so every column has L1 norm exactly 1. The error ``||W A^+||_F^2 = tr(C (I + Theta^T Theta)^-1)``
with ``C = D^-1 W^T W D^-1`` is minimized over ``Theta`` by L-BFGS-B.

Unlike HDMM's reference implementation, which touches the dense ``n x n`` Gram matrix several
times per iteration (``O(n^2 p)``), we use the push-through identity
``Theta (I + Theta^T Theta)^-1 = M^-1 Theta`` with ``M = I + Theta Theta^T`` (``p x p``) and the
workload's structured ``W^T W`` product (``O(n)`` per column for prefix and range workloads), so an
iteration costs ``O(n p^2)``: n = 4096 optimizes in seconds instead of minutes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.optimize as sopt
import scipy.sparse as sp

from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.strategy import Strategy, Tree, gram_diag, nested_blocks, quad_forms
from dppub.dp.matrix.workload import FloatArray, Workload
from dppub.dp.stopping import check_stop

__all__ = ["PIdentity", "lbfgs", "opt0", "p_identity", "tuned_hierarchy"]

try:  # optional: caps BLAS threads during optimization (requested as a dependency)
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - depends on the environment
    threadpool_limits = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run BLAS on one thread: the optimizer's many small products (p x n by n x p) are
    20-30x *slower* with OpenBLAS's spinning worker threads on a loaded 2-core machine."""
    if threadpool_limits is None:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# Fixed seed of the optimizer's random start: strategy selection must not depend on the data,
# and a fixed start makes a plan reproducible.
_INIT_SEED = 20180801
# OPT0 stops after this many L-BFGS iterations in a row with a relative decrease below 1e-9,
# not the first: on the p-Identity loss's plateaus one such step is often followed by real
# progress (prefix, n = 256, random start: the first stopped at 2.1112 x the SVD bound in 375
# iterations, three give 2.1058 in 1,000, +0.6 s; no candidate at other sizes got worse).
_PATIENCE = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class PIdentity(Strategy):
    """HDMM's p-Identity strategy ``[I; Theta] D`` (columns normalized to L1 norm 1)."""

    theta: FloatArray
    """Non-negative ``p x n`` matrix of extra measurements (before column scaling)."""
    label: str = "PIdentity"
    """Name shown in plans."""
    _scale: FloatArray = field(init=False, repr=False)
    _chol: tuple[FloatArray, bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        t = self.theta
        if t.ndim != 2 or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise ConfigError(f"theta must be a finite non-negative p x n matrix, got {t.shape}")
        object.__setattr__(self, "_scale", 1.0 + t.sum(axis=0))
        object.__setattr__(self, "_chol", sla.cho_factor(np.eye(t.shape[0]) + t @ t.T))

    @property
    def name(self) -> str:
        return self.label

    @property
    def domain(self) -> tuple[int, ...]:
        return (int(self.theta.shape[1]),)

    @property
    def m(self) -> int:
        return int(self.theta.shape[0] + self.theta.shape[1])

    @property
    def matrix(self) -> sp.csr_matrix:
        """``A`` as a sparse matrix (for the L1 fit)."""
        a = sp.vstack([sp.identity(self.n), sp.csr_matrix(self.theta)]) @ sp.diags(1 / self._scale)
        return sp.csr_matrix(a)

    @property
    def sensitivity(self) -> float:
        return float(np.max((1.0 + np.abs(self.theta).sum(axis=0)) / self._scale))

    def _matmat(self, x: FloatArray) -> FloatArray:
        xs = x / self._scale[:, None]
        return np.vstack([xs, self.theta @ xs])

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return (y[: self.n] + self.theta.T @ y[self.n :]) / self._scale[:, None]

    def _lstsq(self, r: FloatArray) -> FloatArray:
        # (A^T A)^-1 A^T r = S (u - Theta^T M^-1 Theta u) with u = r_I + Theta^T r_Theta.
        u = r[: self.n] + self.theta.T @ r[self.n :]
        v = u - self.theta.T @ sla.cho_solve(self._chol, self.theta @ u)
        return np.asarray(self._scale[:, None] * v)

    def squared_error_factor(self, workload: Workload) -> float:
        if workload.domain != self.domain:
            raise ConfigError(f"strategy {self.name} needs domain {self.domain}")
        return _opt0_loss(self.theta, workload, gram_diag(workload), grad=False)[0]


def _opt0_loss(
    theta: FloatArray, workload: Workload, diag_g: FloatArray, *, grad: bool
) -> tuple[float, FloatArray]:
    """``tr(C (I + T^T T)^-1)`` and its gradient in ``T`` (derivation in the module docstring).

    With ``Y = (I + T^T T)^-1`` and ``s = 1 + 1^T T``: ``df = -2 tr(T Y C Y dT^T)`` from ``Y`` plus
    ``2 sum_j ds_j (C Y)_jj / s_j`` from the column scaling, and ``T Y C Y = M^-1 (T C - T C T^T
    M^-1 T)``.
    """
    s = 1.0 + theta.sum(axis=0)
    ct = s[:, None] * workload._gram_matmat(s[:, None] * theta.T)  # C T^T, n x p
    chol = sla.cho_factor(np.eye(theta.shape[0]) + theta @ theta.T)
    minv_t = sla.cho_solve(chol, theta)  # M^-1 T, p x n
    tct = theta @ ct  # T C T^T, p x p
    diag_c = s * s * diag_g
    loss = float(np.sum(diag_c) - np.sum(minv_t * ct.T))
    if not grad:
        return loss, theta
    diag_cy = diag_c - np.sum(ct * minv_t.T, axis=1)
    tycy = sla.cho_solve(chol, ct.T - tct @ minv_t)
    g = -2.0 * tycy + (2.0 * diag_cy / s)[None, :]
    return loss, g


def lbfgs(
    fun: Callable[[FloatArray], tuple[float, FloatArray]],
    x0: FloatArray,
    *,
    maxiter: int,
    memory: int = 10,
    rtol: float = 1e-9,
    patience: int = 1,
) -> FloatArray:
    """Minimize a smooth function with L-BFGS (Nocedal & Wright 2006, Alg. 7.4 and 7.5).

    Deterministic, array-shaped, with an Armijo backtracking line search; stops after
    ``maxiter`` iterations or once the relative decrease has stayed below ``rtol`` for
    ``patience`` iterations in a row.
    """
    x = x0.copy()
    f, g = fun(x)
    hist: list[tuple[FloatArray, FloatArray, float]] = []
    small = 0
    for _ in range(maxiter):
        # Two-loop recursion: d = -H g with the implicit inverse-Hessian approximation H.
        q = g.copy()
        alphas = []
        for s_k, y_k, rho in reversed(hist):
            a = rho * float(np.vdot(s_k, q))
            alphas.append(a)
            q -= a * y_k
        if hist:
            s_k, y_k, _ = hist[-1]
            q *= float(np.vdot(s_k, y_k) / np.vdot(y_k, y_k))
        else:
            q /= max(1.0, float(np.linalg.norm(g)))
        for (s_k, y_k, rho), a in zip(hist, reversed(alphas), strict=True):
            q += s_k * (a - rho * float(np.vdot(y_k, q)))
        d = -q
        slope = float(np.vdot(g, d))
        if slope >= 0:  # not a descent direction: restart from steepest descent
            hist.clear()
            d, slope = -g, -float(np.vdot(g, g))
        step = 1.0
        while True:
            x_new = x + step * d
            f_new, g_new = fun(x_new)
            if f_new <= f + 1e-4 * step * slope or step < 1e-12:
                break
            step *= 0.5
        if f_new > f:
            break
        s_new, y_new = x_new - x, g_new - g
        sy = float(np.vdot(s_new, y_new))
        if sy > 1e-12:
            hist.append((s_new, y_new, 1.0 / sy))
            del hist[:-memory]
        small = small + 1 if f - f_new <= rtol * max(1.0, abs(f)) else 0
        x, f, g = x_new, f_new, g_new
        if small >= patience:
            break
    return x


def opt0(
    workload: Workload,
    *,
    p: int | None = None,
    init: str = "random",
    maxiter: int = 1000,
) -> PIdentity:
    """Optimize a p-Identity strategy for a 1-D workload (HDMM OPT0).

    Args:
        workload: any workload over a 1-D domain (``W^T W`` products are all it needs).
        p: number of extra rows for ``init="random"`` (default ``n // 16``, HDMM's choice).
        init: ``"random"`` (HDMM's uniform start, fixed seed) or ``"hierarchy"``: start from the
            block rows of :func:`tuned_hierarchy` plus a small uniform floor, which converges to
            better optima for ``n >= 1024``.
        maxiter: L-BFGS iterations.

    Returns:
        The optimized strategy (deterministic and data-independent).
    """
    if len(workload.domain) != 1:
        raise ConfigError(f"opt0 needs a 1-D workload, got domain {workload.domain}")
    n = workload.n
    if init == "hierarchy":
        rows = _hierarchy_rows(tuned_hierarchy(workload))
        # A tuned "hierarchy" of leaves only still needs one row to optimize.
        theta0 = (rows if rows.shape[0] else np.zeros((1, n))) + 1e-3
    elif init == "random":
        p = max(1, n // 16) if p is None else p
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise ConfigError(f"p must be a positive integer, got {p!r}")
        theta0 = np.random.default_rng(_INIT_SEED).uniform(0.0, 1.0, size=(p, n))
    else:
        raise ConfigError(f"init must be 'random' or 'hierarchy', got {init!r}")
    diag_g = gram_diag(workload)
    # Theta = phi^2 keeps Theta >= 0 without bounds, so a plain L-BFGS applies (scipy's L-BFGS-B
    # spends far more time in its own bookkeeping than in our O(n p^2) loss at this size).
    phi0 = np.sqrt(theta0)
    scale = _opt0_loss(theta0, workload, diag_g, grad=False)[0]

    def fun(phi: FloatArray) -> tuple[float, FloatArray]:
        check_stop("optimizing a strategy")
        loss, g = _opt0_loss(phi**2, workload, diag_g, grad=True)
        return loss / scale, 2.0 * phi * g / scale

    with single_threaded_blas():
        phi = lbfgs(fun, phi0, maxiter=maxiter, patience=_PATIENCE)
    if not np.all(np.isfinite(phi)):
        raise SolverError(f"OPT0 strategy optimization diverged for {workload.name}")
    theta = phi**2
    # Tiny entries only cost LP non-zeros in the L1 fit; dropping them changes the error < 1e-6.
    theta = np.where(theta < 1e-6 * max(1.0, float(theta.max())), 0.0, theta)
    return PIdentity(theta=theta, label=f"OPT0(p={theta.shape[0]})")


def _hierarchy_rows(tree: Tree) -> FloatArray:
    """Internal-node rows of a tree relative to its leaf weight (the ``[I; Theta]`` form)."""
    internal = np.flatnonzero((tree.hi - tree.lo) > 1)
    leaf_w = float(tree.weight[(tree.hi - tree.lo) == 1].max())
    rows = np.zeros((internal.size, tree.size))
    for r, v in enumerate(internal):
        rows[r, tree.lo[v] : tree.hi[v]] = tree.weight[v] / leaf_w
    return rows


def tuned_hierarchy(workload: Workload, *, restarts: int = 8) -> Tree:
    """Nested-block hierarchy with block sizes and level weights tuned to a 1-D workload.

    Candidate levels measure aligned blocks of ``2^j`` cells (``j = 0 .. ceil(log2 n)``). When the
    blocks nest exactly, ``A^T A = sum_l c_l (I (x) J_{k_l})`` is diagonal on the nested subspaces
    ``E_j`` (constant on level-``j`` blocks, zero-mean on level ``j-1`` blocks) with eigenvalue
    ``mu_j = sum_{l >= j} c_l k_l``, so ``||W A^+||_F^2 = sum_j tr(P_j W^T W) / mu_j`` and the
    weights ``u_l = sqrt(c_l)`` are optimized in closed form (weighted hierarchies: Hay et al. 2010,
    Qardaji et al. 2013; the projection trick is HDMM's eigen-analysis). Levels whose weight
    vanishes are dropped, which also picks the block sizes. Partial blocks make the formula an
    approximation for general ``n``; the returned strategy's error is always evaluated exactly.
    """
    if len(workload.domain) != 1:
        raise ConfigError(f"tuned_hierarchy needs a 1-D workload, got domain {workload.domain}")
    n = workload.n
    k = 2 ** np.arange(int(np.ceil(np.log2(n))) if n > 1 else 0, -1, -1)
    tr_u = np.array([_block_projection_trace(workload, int(b)) for b in k])
    t = np.diff(tr_u, prepend=0.0)
    kf = k.astype(np.float64)

    def fun(u: FloatArray) -> tuple[float, FloatArray]:
        c = u * u
        mu = np.cumsum((c * kf)[::-1])[::-1]
        val = float(np.sum(t / mu))
        sens = float(np.sum(u))
        dval_dc = np.cumsum(-t / mu**2) * kf  # c_l enters mu_j for every j <= l
        return sens * sens * val, 2.0 * sens * val + sens * sens * dval_dc * 2.0 * u

    rng = np.random.default_rng(_INIT_SEED)
    bounds = [(0.0, None)] * (k.size - 1) + [(1e-3, None)]  # the leaves must stay measured
    best: tuple[float, FloatArray] | None = None
    for _ in range(restarts):
        res = sopt.minimize(
            fun, rng.uniform(0.1, 1.0, k.size), jac=True, method="L-BFGS-B", bounds=bounds
        )
        if best is None or res.fun < best[0]:
            best = (float(res.fun), res.x)
    if best is None:
        raise ConfigError(f"restarts must be >= 1, got {restarts}")
    u = best[1] / best[1].max()
    keep = u > 1e-3
    keep[-1] = True
    # The leaves' bound above is absolute and the objective scale-free: relative to the top
    # weight they could reach ~1e-5 (total counts), where the error factor's closed form
    # (sum G_jj / w_leaf^2 minus corrections) cancels catastrophically; 1e-3 keeps ~6 digits.
    u[-1] = max(u[-1], 1e-3)
    sizes = k[keep]
    return nested_blocks(
        n, sizes, u[keep], label="HB*(" + ",".join(str(int(b)) for b in sizes) + ")"
    )


def _block_projection_trace(workload: Workload, size: int) -> float:
    """``tr(P W^T W)`` for ``P`` the projection onto vectors constant on aligned blocks."""
    n = workload.n
    block = np.arange(n) // size
    counts = np.bincount(block).astype(np.float64)
    h = sp.csr_matrix((1.0 / np.sqrt(counts[block]), (block, np.arange(n))), shape=(counts.size, n))
    return float(np.sum(quad_forms(workload, h)))


def p_identity(theta: FloatArray) -> PIdentity:
    """A p-Identity strategy from an explicit non-negative ``theta``."""
    return PIdentity(theta=np.asarray(theta, dtype=np.float64))
