"""Data-independent error analysis of the matrix mechanism.

With Laplace noise of scale ``b = ||A||_1 / epsilon`` on every strategy answer, least-squares
workload answers ``W A^+ (A x + z)`` are unbiased with total squared error
``TSE = 2 b^2 ||W A^+||_F^2`` (Li et al., VLDB J. 2015, Prop. 4). No strategy beats the SVD
bound ``2 / epsilon^2 (sum_i sigma_i(W))^2 / n`` (Li & Miklau, VLDB 2012; HDMM Thm. 2 for the
L1 form used here). Both are reported per query as RMSEs so they compare across workloads.
Under Gaussian noise of standard deviation ``sigma`` per answer the TSE is
``sigma^2 ||W A^+||_F^2``, with ``sigma`` proportional to the L2 sensitivity ``||A||_{1->2}``.

>>> from dppub.dp.matrix.workload import identity
>>> from dppub.dp.matrix.strategy import identity_strategy
>>> round(expected_rmse(identity(4), identity_strategy(4), 1.0), 6)
1.414214
>>> round(svd_bound_rmse(identity(4), 1.0), 6)
1.414214
"""

from __future__ import annotations

import math

import numpy as np

from dppub.dp.calibration import gaussian_sigma
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.marginal_basis import marginal_spectrum
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import Workload
from dppub.dp.validation import check_epsilon

__all__ = ["expected_rmse", "expected_rmse_gaussian", "expected_tse", "svd_bound_rmse"]


def _check_pair(workload: Workload, strategy: Strategy) -> None:
    if not isinstance(workload, Workload) or not isinstance(strategy, Strategy):
        raise ConfigError("expected a dp.matrix workload and strategy")
    if workload.domain != strategy.domain:
        raise ConfigError(
            f"workload domain {workload.domain} does not match strategy domain {strategy.domain}"
        )


def expected_tse(workload: Workload, strategy: Strategy, epsilon: float) -> float:
    """Expected total squared error ``2 (||A||_1 / eps)^2 ||W A^+||_F^2`` of LS answers."""
    eps = check_epsilon(epsilon)
    _check_pair(workload, strategy)
    scale = strategy.sensitivity / eps
    return 2.0 * scale * scale * strategy.squared_error_factor(workload)


def expected_rmse(workload: Workload, strategy: Strategy, epsilon: float) -> float:
    """Expected per-query RMSE ``sqrt(TSE / m)`` of least-squares answers."""
    return math.sqrt(expected_tse(workload, strategy, epsilon) / workload.m)


def expected_rmse_gaussian(
    workload: Workload, strategy: Strategy, *, epsilon: float, delta: float, group: int = 1
) -> float:
    """Expected per-query RMSE of least-squares answers measured by
    :func:`dp.matrix.measure.measure_gaussian`: ``sigma sqrt(||W A^+||_F^2 / m)`` with the
    analytic Gaussian ``sigma`` for ``group`` times the strategy's L2 sensitivity."""
    _check_pair(workload, strategy)
    l2 = group * strategy.l2_sensitivity
    sigma = gaussian_sigma(l2_sensitivity=l2, epsilon=epsilon, delta=delta)
    return sigma * math.sqrt(strategy.squared_error_factor(workload) / workload.m)


def svd_bound_rmse(workload: Workload, epsilon: float) -> float:
    """SVD lower bound on the per-query RMSE: ``sqrt(2/eps^2 (sum sigma)^2 / (n m))``."""
    eps = check_epsilon(epsilon)
    if not isinstance(workload, Workload):
        raise ConfigError("expected a dp.matrix workload")
    spectrum = marginal_spectrum(workload)
    if spectrum is None:
        total = float(np.sum(workload.singular_values()))
    else:  # marginals: 2^d distinct singular values, never an n-vector
        lam, mult = spectrum
        total = float(np.sum(mult * np.sqrt(lam)))
    return math.sqrt(2.0 / eps**2 * total * total / (workload.n * workload.m))
