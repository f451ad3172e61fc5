"""HDMM's marginals parameterization: optimize one weight per attribute subset (Laplace noise).

McKenna, Miklau, Hay & Machanavajjhala, "Optimizing error of high-dimensional statistical
queries under differential privacy", VLDB 2018, Sec. 6: the strategy measures every marginal
``S`` of the ``d`` attributes scaled by ``theta_S >= 0``, so ``||A||_1 = sum_S theta_S`` and,
in the eigenbasis all marginals share (:mod:`dp.matrix.marginal_basis`),

    ``||A||_1^2 ||W A^+||_F^2 = (sum_S theta_S)^2 sum_P c_P / lambda_P``,
    ``lambda_P = sum_{S >= P} theta_S^2 N_S``,

with ``c_P = tr(W^T W Pi_P)``. Loss and gradient cost ``O(d 2^d)`` (two subset transforms),
independent of the number of cells. The loss is not convex; L-BFGS-B runs from fixed starts
(the identity, the workload's own marginals, and seeded random points as in HDMM), and the
best local optimum wins. Nothing depends on the data: the choice costs no privacy budget.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize as sopt

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.marginal_basis import (
    MarginalsStrategy,
    complement_sizes,
    pattern_weights,
    subset_sum,
    superset_sum,
)
from dppub.dp.matrix.optimize import single_threaded_blas
from dppub.dp.matrix.workload import FloatArray, Workload

__all__ = ["MAX_ATTRIBUTES", "descend", "marginals_loss", "opt_marginals"]

# Fixed seed of the random starts: a plan must be reproducible and data-independent.
_SEED = 20180601
# Random starts by number of attributes: each run costs O(d 2^d) per iteration (0.1-0.4 s per
# 48 starts up to d = 9, unloaded). Over seeds 0-4 the best start on the demo's 2-way marginals
# (d = 5) reaches RMSE 8.90-9.08 at epsilon 1 with 48 or 128 starts, 8.90-8.97 with 256; on
# Adult's 9 attributes 256 starts gain ~1% over 48.
_RESTARTS = {2: 16, 3: 32, 4: 64, 5: 128, 6: 128, 7: 64, 8: 64, 9: 48, 10: 48, 11: 16, 12: 16}
MAX_ATTRIBUTES = max(_RESTARTS)
"""Largest number of attributes optimized (``2^12`` weights)."""
# Weights below this fraction of the total are dropped (they would add rows, not accuracy).
_PRUNE = 1e-9


def marginals_loss(theta: FloatArray, c: FloatArray, sizes: FloatArray) -> tuple[float, FloatArray]:
    """``(sum theta)^2 sum_P c_P / lambda_P`` and its gradient in ``theta``.

    ``d lambda_P / d theta_S = 2 theta_S N_S`` for ``S >= P``, so the error term's gradient is
    ``-2 theta_S N_S sum_{P <= S} c_P / lambda_P^2``: one subset transform. Infinite where a
    subspace the workload needs is not measured.
    """
    lam = superset_sum(theta * theta * sizes)
    need = c > 0
    if np.any(lam[need] <= 0):
        return float("inf"), np.zeros_like(theta)
    ratio = np.zeros_like(c)
    ratio[need] = c[need] / lam[need]
    err = float(np.sum(ratio))
    total = float(np.sum(theta))
    ratio[need] /= lam[need]
    grad = 2.0 * total * err - 2.0 * total * total * theta * sizes * subset_sum(ratio)
    return total * total * err, grad


def descend(
    x0: FloatArray, c: FloatArray, sizes: FloatArray, *, ftol: float, gtol: float
) -> FloatArray:
    """A local minimum of :func:`marginals_loss` from ``x0`` (L-BFGS-B, ``theta >= 0``)."""
    res = sopt.minimize(
        marginals_loss,
        x0,
        args=(c, sizes),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * x0.size,
        options={"ftol": ftol, "gtol": gtol},
    )
    return np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)


def _starts(c: FloatArray, d: int, restarts: int, seed: int) -> list[FloatArray]:
    full = 1 << d
    ident = np.zeros(full)
    ident[-1] = 1.0
    # The workload's own marginals: the maximal subsets it asks about (for k-way marginals
    # exactly the k-subsets; for a single marginal, that marginal).
    needed = np.flatnonzero(c > 0)
    own = np.zeros(full)
    for p in needed:
        if not any(q != p and (q & p) == p for q in needed):
            own[p] = 1.0
    # Uniform on the simplex: every weight positive, so every start measures every subspace.
    rng = np.random.default_rng(seed)
    return [ident, own, *(rng.dirichlet(np.ones(full)) for _ in range(restarts))]


def opt_marginals(
    workload: Workload, *, restarts: int | None = None, seed: int = _SEED
) -> MarginalsStrategy | None:
    """The weighted-marginals strategy with the lowest Laplace error found for ``workload``.

    Args:
        workload: marginals, a Kronecker product of 1-D workloads, or a union of those.
        restarts: random starts besides the identity and the workload's own marginals
            (default by number of attributes, up to 128).
        seed: seed of the random starts (fixed: the result never depends on the data).

    Returns:
        The strategy, normalized to ``||A||_1 = 1``, or ``None`` when the workload has fewer
        than two or more than :data:`MAX_ATTRIBUTES` attributes or no pattern weights.
    """
    dims = workload.domain
    d = len(dims)
    if not 2 <= d <= MAX_ATTRIBUTES:
        return None
    c = pattern_weights(workload)
    if c is None or not np.any(c > 0):
        return None
    if restarts is None:
        restarts = _RESTARTS[d]
    if restarts < 0:
        raise ConfigError(f"restarts must be >= 0, got {restarts}")
    c = c / float(np.sum(c))  # the identity's loss is 1: a well-scaled objective
    sizes = complement_sizes(dims)
    best, best_loss = np.zeros(0), float("inf")
    with single_threaded_blas():  # tiny products: BLAS threads only spin
        for x0 in _starts(c, d, restarts, seed):
            # The loss is scaled to 1 at the identity, so absolute tolerances are meaningful.
            theta = descend(x0, c, sizes, ftol=1e-10, gtol=1e-10)
            loss = marginals_loss(theta, c, sizes)[0]
            if loss < best_loss:  # ties keep the earlier (simpler) start
                best, best_loss = theta, loss
    best = best / float(np.sum(best))
    pruned = np.where(best > _PRUNE, best, 0.0)
    if marginals_loss(pruned, c, sizes)[0] <= best_loss * (1.0 + 1e-9):
        best = pruned / float(np.sum(pruned))
    return MarginalsStrategy(dims=dims, weights=best, label="OptMarginals")
