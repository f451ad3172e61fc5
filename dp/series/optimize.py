"""The optimised causal factorization of a series workload (Denisov, McMahan, Rush, Smith &
Thakurta, "Improved differential privacy for SGD via optimal private linear operators on
adaptive streams", NeurIPS 2022).

For ``W = B A`` with ``A`` invertible, the Gaussian error of the figures is
``||B||_F^2 ||A||_{1->2}^2 = tr(G X^-1) max_i X_ii`` with ``G = W^T W`` and ``X = A^T A``: it
depends on ``A`` only through ``X``. So the best factorization solves the convex problem
``min tr(G X^-1)`` subject to ``X_ii <= 1`` (Yuan et al., VLDB 2016, for the L2 matrix
mechanism), and :func:`dp.series.strategies.lower_factor` turns its ``X`` into a lower-triangular
``A``: the causal constraint costs nothing (Denisov et al., Sec. 4).

The dp.matrix optimisers do not fit: HDMM's p-Identity (``dp.matrix.optimize.opt0``) and the
block hierarchies measure L1-normalised strategies that are not lower-triangular. The problem is
solved here through its dual, with the project's L-BFGS (``dp.matrix.optimize.lbfgs``). With a
multiplier ``lambda_i`` per constraint, stationarity gives ``X Lambda X = G``, so
``X(lambda) = Lambda^-1/2 (Lambda^1/2 G Lambda^1/2)^1/2 Lambda^-1/2`` and the dual function is
``g(lambda) = 2 tr((Lambda^1/2 G Lambda^1/2)^1/2) - sum(lambda)``, concave, with gradient
``diag(X(lambda)) - 1``. Every ``g(lambda)`` is a lower bound on the error of *any*
factorization of ``W`` (weak duality), so the solver certifies its own gap: the strategy keeps
``dual_bound``, and ``error <= dual_bound * (1 + gap)`` is what the optimisation reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.optimize import lbfgs, single_threaded_blas
from dppub.dp.series.strategies import CausalStrategy, lower_factor
from dppub.dp.series.workloads import FloatArray, SeriesWorkload

__all__ = ["Optimized", "optimized"]

# Iterations of L-BFGS on the dual; at T = 120 it stops on the relative tolerance well before.
_MAXITER = 500


def _primal(lam: FloatArray, gram: FloatArray) -> tuple[FloatArray, float]:
    """``X(lambda)`` and ``tr((Lambda^1/2 G Lambda^1/2)^1/2)``."""
    root = np.sqrt(lam)
    vals, vecs = np.linalg.eigh(root[:, None] * gram * root[None, :])
    half = np.sqrt(np.clip(vals, 0.0, None))
    s = (vecs * half) @ vecs.T
    return s / root[:, None] / root[None, :], float(np.sum(half))


def _negative_dual(v: FloatArray, gram: FloatArray) -> tuple[float, FloatArray]:
    """``-g(e^v)`` and its gradient in ``v = log(lambda)`` (positive multipliers throughout)."""
    lam = np.exp(v)
    x, trace = _primal(lam, gram)
    return -(2.0 * trace - float(np.sum(lam))), -(np.diag(x) - 1.0) * lam


@dataclass(frozen=True, slots=True, kw_only=True)
class Optimized(CausalStrategy):
    """The lower-triangular ``A`` minimising ``||W A^-1||_F^2 max_i ||A e_i||_2^2`` for the
    declared workload (row-level Gaussian error), columns scaled to a maximum norm of 1."""

    workload: SeriesWorkload
    """The figures the strategy is optimised for (its horizon is the strategy's)."""
    dual_bound: float = field(init=False)
    """A lower bound on ``||B||_F^2 ||A||_{1->2}^2`` over every factorization ``W = B A``: the
    dual value the solver reached (the optimised error is at least this, and close to it)."""

    @property
    def name(self) -> str:
        return "Optimized"

    def _build(self) -> FloatArray:
        if self.workload.horizon != self.horizon:
            raise ConfigError(f"workload horizon {self.workload.horizon} is not {self.horizon}")
        w = self.workload.matrix
        gram = w.T @ w
        with single_threaded_blas():
            v = lbfgs(lambda z: _negative_dual(z, gram), np.zeros(self.horizon), maxiter=_MAXITER)
        x, trace = _primal(np.exp(v), gram)
        object.__setattr__(self, "dual_bound", 2.0 * trace - float(np.sum(np.exp(v))))
        a = lower_factor(x / float(np.max(np.diag(x))))
        return a / float(np.max(np.linalg.norm(a, axis=0)))


def optimized(workload: SeriesWorkload) -> Optimized:
    """The optimised causal factorization of ``workload`` (Denisov et al. 2022)."""
    return Optimized(horizon=workload.horizon, workload=workload)
