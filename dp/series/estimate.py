"""Estimating the series from a causal strategy's noisy measurements, period by period.

Every measurement carries noise of the same variance, so the generalized least-squares estimate
is the ordinary one. Both estimators are pure functions of public values (the noisy
measurements and what was published), linear in the measurements, and unbiased.

* With revisions (:func:`revised_estimate`): in period ``t``, the least-squares estimate of every
  period ``0..t`` from all rows measured by ``t`` (Honaker, TPDP 2015: the optimal estimate from
  a binary tree, here from any causal strategy). Past periods' estimates may change.
* Without revisions (:func:`next_value`): past values are kept as published, and period ``t``'s
  value ``p_t`` is chosen so that its figures, each ``c_f + a_f p_t`` with ``c_f`` made of
  published values, have the least total squared error. With ``x_hat`` the revised estimate,
  ``c_f(v) = sum_{s < t} w_f[s] v_s`` and weights ``a_f`` (figure ``f``'s coefficient on period
  ``t``), minimising ``sum_f E(c_f(p) + a_f p_t - w_f x)^2`` over unbiased ``p_t`` gives

      p_t = x_hat_t + sum_f a_f (c_f(x_hat) - c_f(p)) / sum_f a_f^2,

  the new period's estimate plus the mean revision the published past would have needed. For
  running totals alone this is ``R_t = R_{t-1} + p_t`` with ``R_t`` the least-squares running
  total; for per-period values alone, ``p_t = x_hat_t``. When ``A`` is square lower-triangular
  (identity, square root, optimised) the revised estimate of the past never changes and both
  estimators coincide with ``A^-1 y``.

Measurements are passed in the strategy's row order (rows measured by period ``t`` are the first
``strategy.measured_by(t)``), as a vector or as columns of several series at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.linalg as sla

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.matrix.optimize import single_threaded_blas
from dppub.dp.series.strategies import CausalStrategy
from dppub.dp.series.workloads import FloatArray, SeriesWorkload

__all__ = ["causal_estimates", "estimator", "next_value", "period_of", "revised_estimate"]


def period_of(strategy: CausalStrategy, rows: int) -> int:
    """The period whose end the first ``rows`` measurements reach exactly."""
    if 0 < rows <= strategy.released.size:
        period = int(strategy.released[rows - 1])
        if strategy.measured_by(period) == rows:
            return period
    raise InputError(f"{rows} measurements do not end a period of strategy {strategy.name}")


def _columns(values: npt.ArrayLike, *, what: str) -> tuple[FloatArray, bool]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim not in (1, 2) or not np.all(np.isfinite(arr)):
        raise InputError(f"{what} must be a finite vector or matrix, got shape {arr.shape}")
    return (arr[:, None], True) if arr.ndim == 1 else (arr, False)


def _lstsq(strategy: CausalStrategy, y: FloatArray) -> FloatArray:
    """Least squares of periods ``0..t`` from the first ``len(y)`` rows (columns of ``y``)."""
    t = period_of(strategy, y.shape[0])
    a = strategy.matrix[: y.shape[0], : t + 1]
    if a.shape[0] == a.shape[1]:  # square lower-triangular: the unique solution
        return np.asarray(sla.solve_triangular(a, y, lower=True), dtype=np.float64)
    solution, *_ = np.linalg.lstsq(a, y, rcond=None)
    return np.asarray(solution, dtype=np.float64)


def revised_estimate(strategy: CausalStrategy, measurements: npt.ArrayLike) -> FloatArray:
    """The least-squares estimate of every period so far from the measurements so far."""
    y, vec = _columns(measurements, what="measurements")
    out = _lstsq(strategy, y)
    return out[:, 0] if vec else out


def _next(
    strategy: CausalStrategy, workload: SeriesWorkload, y: FloatArray, published: FloatArray
) -> FloatArray:
    t = published.shape[0]
    if workload.horizon != strategy.horizon:
        raise ConfigError(f"workload horizon {workload.horizon} is not {strategy.horizon}")
    if t >= strategy.horizon:
        raise InputError(f"period {t} is outside the horizon {strategy.horizon}")
    if y.shape[0] != strategy.measured_by(t) or published.shape[1] != y.shape[1]:
        raise InputError(
            f"period {t} needs {strategy.measured_by(t)} measurements and {t} published values"
        )
    x_hat = _lstsq(strategy, y)
    figures = workload.matrix[workload.periods == t]
    if figures.shape[0] == 0:  # nothing published this period: its best estimate
        return np.asarray(x_hat[t])
    a = figures[:, t]
    revision = x_hat[:t] - published
    return np.asarray(x_hat[t] + (a @ (figures[:, :t] @ revision)) / float(a @ a))


def next_value(
    strategy: CausalStrategy,
    workload: SeriesWorkload,
    measurements: npt.ArrayLike,
    published: npt.ArrayLike,
) -> FloatArray:
    """Period ``t = len(published)``'s value without revisions, from the measurements by ``t``
    (vector: one series, a float array of shape ``()``; matrix: one value per column)."""
    y, vec = _columns(measurements, what="measurements")
    past = np.asarray(published, dtype=np.float64)
    past = past.reshape(-1, y.shape[1])  # also no period yet: 0 x series
    value = _next(strategy, workload, y, past)
    return np.asarray(value[0]) if vec else value


def causal_estimates(
    strategy: CausalStrategy, workload: SeriesWorkload, measurements: npt.ArrayLike
) -> FloatArray:
    """The values of periods ``0..t`` as published without revisions, from the measurements
    by the end of period ``t`` (one :func:`next_value` per period, in order)."""
    y, vec = _columns(measurements, what="measurements")
    last = period_of(strategy, y.shape[0])
    published = np.zeros((0, y.shape[1]))
    with single_threaded_blas():  # many small solves: BLAS threads only contend
        for t in range(last + 1):
            value = _next(strategy, workload, y[: strategy.measured_by(t)], published)
            published = np.vstack([published, value[None, :]])
    return published[:, 0] if vec else published


def estimator(
    strategy: CausalStrategy, workload: SeriesWorkload, *, revisions: bool = False
) -> FloatArray:
    """``K`` (figures x measurements): each figure, when first published, is ``K y``.

    Without revisions ``K = W P`` with ``P`` the linear map of :func:`causal_estimates`; with
    revisions row ``f`` is ``w_f`` applied to the revised estimate in the figure's period. Either
    way ``K A = W`` (unbiased) and row ``f`` reads only rows measured by the figure's period.
    """
    identity = np.eye(strategy.matrix.shape[0])
    if not revisions:
        return workload.matrix @ causal_estimates(strategy, workload, identity)
    out = np.zeros((workload.matrix.shape[0], identity.shape[0]))
    with single_threaded_blas():
        for t in np.unique(workload.periods):
            rows = strategy.measured_by(int(t))
            figures = workload.periods == t
            x_hat = _lstsq(strategy, identity[:rows, :rows])
            out[np.ix_(figures, np.arange(rows))] = workload.matrix[figures, : t + 1] @ x_hat
    return out
