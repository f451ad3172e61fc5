"""The optimised causal factorization of a series workload (Denisov, McMahan, Rush, Smith &
Thakurta, "Improved differential privacy for SGD via optimal private linear operators on
adaptive streams", NeurIPS 2022).

For ``W = B A`` with ``A`` invertible, the Gaussian error of the figures is
``||B||_F^2 ||A||_{1->2}^2 = tr(G X^-1) max_i X_ii`` with ``G = W^T W`` and ``X = A^T A``: it
depends on ``A`` only through ``X``. So the best factorization solves the convex problem
``min tr(G X^-1)`` subject to ``X_ii <= 1`` (Yuan et al., ACM TODS 2016, for the L2 matrix
mechanism), and :func:`dp.series.strategies.lower_factor` turns its ``X`` into a lower-triangular
``A``: the causal constraint costs nothing (Denisov et al.).

The dp.matrix optimisers do not fit: HDMM's p-Identity (``dp.matrix.optimize.opt0``) and the
block hierarchies measure L1-normalised strategies that are not lower-triangular. The problem is
solved here through its dual, with the project's L-BFGS (``dp.matrix.optimize.lbfgs``). With a
multiplier ``lambda_i`` per constraint, stationarity gives ``X Lambda X = G``, so
``X(lambda) = Lambda^-1/2 (Lambda^1/2 G Lambda^1/2)^1/2 Lambda^-1/2`` and the dual function is
``g(lambda) = 2 tr((Lambda^1/2 G Lambda^1/2)^1/2) - sum(lambda)``, concave, with gradient
``diag(X(lambda)) - 1`` (computed from a nuclear norm, :func:`_negative_dual`, which also
serves the unit relation's bound, :func:`dp.series.expected_error.factorization_bound`). Every
``g(lambda)`` is a lower bound on the error of *any* factorization of ``W`` (weak duality), so
the solver certifies its own gap: the strategy keeps ``dual_bound``, which its error exceeds by
what the optimisation left (0.01% at ``T = 120``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.optimize import lbfgs, single_threaded_blas
from dppub.dp.series.strategies import CausalStrategy, lower_factor
from dppub.dp.series.workloads import FloatArray, SeriesWorkload

__all__ = ["Optimized", "maximise_dual", "optimized"]

# Iterations of L-BFGS on the dual; at T = 120 it stops on the relative tolerance well before.
_MAXITER = 500
# Multipliers beyond e^300 only come from an overlong trial step (the optimum's are near W's scale).
_LOG_LAMBDA_MAX = 300.0


def _primal(lam: FloatArray, gram: FloatArray) -> FloatArray:
    """``X(lambda)`` for one multiplier per period (``Lambda`` diagonal)."""
    root = np.sqrt(lam)
    vals, vecs = np.linalg.eigh(root[:, None] * gram * root[None, :])
    s = (vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T
    return np.asarray(s / root[:, None] / root[None, :], dtype=np.float64)


def _negative_dual(v: FloatArray, wv: FloatArray) -> tuple[float, FloatArray]:
    """``-g(e^v)`` and its gradient in ``v = log(lambda)`` for constraints ``v_j^T X v_j <= 1``
    (columns of ``V``; ``wv = W V``). With ``Lambda = V diag(lambda) V^T``,
    ``tr((Lambda^1/2 G Lambda^1/2)^1/2) = ||W V diag(lambda)^1/2||_*`` (nuclear norm), whose
    gradient comes from one SVD ``U S R^T``:
    ``d/d lambda_j = (W v_j)^T (U R^T)_j / sqrt(lambda_j)``; no inverse is formed, so
    multipliers may approach 0."""
    if np.max(v) > _LOG_LAMBDA_MAX:  # a line search's overshoot: refuse the step, never overflow
        return math.inf, np.zeros_like(v)
    lam = np.exp(v)
    u, s, rt = np.linalg.svd(wv * np.sqrt(lam), full_matrices=False)
    slope = np.sum(wv * (u @ rt), axis=0) / np.sqrt(lam) - 1.0
    return -(2.0 * float(np.sum(s)) - float(np.sum(lam))), -slope * lam


def maximise_dual(workload: SeriesWorkload, constraints: FloatArray) -> tuple[FloatArray, float]:
    """Multipliers ``lambda`` and the dual value ``g(lambda)``: by weak duality a lower bound on
    ``tr(G X^-1)`` over every ``X`` with ``v_j^T X v_j <= 1`` for the columns of ``constraints``,
    whether or not the solver converged."""
    wv = workload.matrix @ constraints
    with single_threaded_blas():
        v = lbfgs(lambda z: _negative_dual(z, wv), np.zeros(wv.shape[1]), maxiter=_MAXITER)
    value, _ = _negative_dual(v, wv)
    return np.exp(v), -value


@dataclass(frozen=True, slots=True, kw_only=True)
class Optimized(CausalStrategy):
    """The lower-triangular ``A`` minimising ``||W A^-1||_F^2 max_i ||A e_i||_2^2`` for the
    declared workload (row-level Gaussian error), columns scaled to a maximum norm of 1.

    It is optimised for the row-level relation only; under a unit over several periods it is
    a candidate with its certified unit sensitivity, and
    :func:`dp.series.expected_error.factorization_bound` says how far any strategy could go below
    it.
    """

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
        lam, bound = maximise_dual(self.workload, np.eye(self.horizon))
        object.__setattr__(self, "dual_bound", bound)
        x = _primal(lam, self.workload.matrix.T @ self.workload.matrix)
        a = lower_factor(x / float(np.max(np.diag(x))))
        return a / float(np.max(np.linalg.norm(a, axis=0)))


def optimized(workload: SeriesWorkload) -> Optimized:
    """The optimised causal factorization of ``workload`` (Denisov et al. 2022)."""
    return Optimized(horizon=workload.horizon, workload=workload)
