"""Exact expected error of a series' figures, and the SVD lower bound no strategy beats.

Each measurement gets independent noise of variance ``v Delta^2`` with ``Delta`` the strategy's
declared sensitivity under the relation (:mod:`dp.series.unit_sensitivity`) and ``v`` the variance
per unit of sensitivity: ``sigma^2`` for Gaussian noise of standard deviation ``sigma Delta_2``
(``v = 1`` in units of ``sigma^2``), ``2 / epsilon^2`` for Laplace noise of scale
``Delta_1 / epsilon`` (``v = 2`` in units of ``1 / epsilon^2``). A figure published as
``k_f . y`` (:func:`dp.series.estimate.estimator`, unbiased) then has expected squared error
``v Delta^2 ||k_f||^2``; with ``W = B A`` and ``B = K`` the total is ``v Delta^2 ||B||_F^2``
(Li et al., VLDB J. 2015, Prop. 4, for the matrix mechanism).

The bound. Let ``S`` be a uniformly random set of ``k`` of the ``T`` periods and
``C = E[1_S 1_S^T] = a I + b 1 1^T`` with ``a = k (T - k) / (T (T - 1))`` and
``b = k (k - 1) / (T (T - 1))``. Any strategy's L2 sensitivity satisfies
``Delta_2^2 >= m^2 E||A 1_S||^2 = m^2 tr(A C A^T)``, and for any ``K`` with ``K A = W``,
``||W C^1/2||_* <= ||K||_F ||A C^1/2||_F`` (Hoelder for Schatten norms), so

    v Delta^2 ||K||_F^2 >= v m^2 ||W C^1/2||_*^2,

and ``Delta_1 >= Delta_2`` carries it to Laplace noise. At ``k = 1`` (``C = I / T``) this is the
SVD bound ``(sum_i sigma_i(W))^2 / T`` of Li & Miklau (VLDB 2012); ``dp.matrix.error``'s
``svd_bound_rmse`` is the same bound for ``dp.matrix`` workloads in Laplace RMSE units (it does
not apply here: these workloads are dense causal matrices, moving sums with partial windows and
years to date are not among its workloads, and it has no unit relation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dppub.dp.errors import ConfigError
from dppub.dp.series.estimate import estimator
from dppub.dp.series.factorization import maximise_dual
from dppub.dp.series.strategies import CausalStrategy
from dppub.dp.series.unit_sensitivity import Norm, Relation, Sensitivity, sensitivity
from dppub.dp.series.workloads import FloatArray, SeriesWorkload

__all__ = [
    "ErrorProfile",
    "Noise",
    "expected_errors",
    "factorization_bound",
    "noise_norm",
    "svd_bound",
]

Noise = Literal["gaussian", "laplace"]
"""The noise the measurements get: Gaussian (L2 sensitivity) or Laplace (L1)."""

# Noise variance per unit of sensitivity, in units of sigma^2 (Gaussian) or 1/epsilon^2 (Laplace).
_UNIT_VARIANCE = {"gaussian": 1.0, "laplace": 2.0}


def noise_norm(noise: Noise) -> Norm:
    """The norm whose sensitivity calibrates ``noise``."""
    if noise not in _UNIT_VARIANCE:
        raise ConfigError(f"noise must be 'gaussian' or 'laplace', got {noise!r}")
    return "l2" if noise == "gaussian" else "l1"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorProfile:
    """A strategy's expected squared error on each figure of a workload."""

    strategy: str
    """The strategy's name."""
    sensitivity: Sensitivity
    """Its sensitivity under the relation, in the noise's norm."""
    per_figure: FloatArray
    """Expected squared error of each figure as first published, in units of ``sigma^2``
    (Gaussian) or ``1 / epsilon^2`` (Laplace)."""

    @property
    def total(self) -> float:
        """Expected total squared error over the figures."""
        return float(np.sum(self.per_figure))

    @property
    def mean(self) -> float:
        """Expected squared error per figure."""
        return self.total / self.per_figure.size


def expected_errors(
    strategy: CausalStrategy,
    workload: SeriesWorkload,
    relation: Relation,
    *,
    noise: Noise = "gaussian",
    revisions: bool = False,
) -> ErrorProfile:
    """The exact expected squared error of every figure (``v Delta^2 ||k_f||^2``)."""
    sens = sensitivity(strategy.matrix, relation, noise_norm(noise))
    k = estimator(strategy, workload, revisions=revisions)
    per = _UNIT_VARIANCE[noise] * sens.declared**2 * np.sum(k * k, axis=1)
    per.setflags(write=False)
    return ErrorProfile(strategy=strategy.name, sensitivity=sens, per_figure=per)


def svd_bound(workload: SeriesWorkload, relation: Relation, *, noise: Noise = "gaussian") -> float:
    """The least expected total squared error any factorization can reach (module docstring)."""
    noise_norm(noise)  # checks the name
    periods = workload.horizon
    k = min(relation.max_periods_per_unit, periods)
    if periods == 1:
        a, b = 1.0, 0.0
    else:
        a = k * (periods - k) / (periods * (periods - 1))
        b = k * (k - 1) / (periods * (periods - 1))
    # C^1/2 = sqrt(a) I + (sqrt(a + b T) - sqrt(a)) / T 1 1^T (eigenvalues a and a + b T).
    root = math.sqrt(a) * np.eye(periods) + (math.sqrt(a + b * periods) - math.sqrt(a)) / periods
    nuclear = float(np.sum(np.linalg.svd(workload.matrix @ root, compute_uv=False)))
    m = relation.max_rows_per_unit
    return _UNIT_VARIANCE[noise] * m * m * nuclear * nuclear


def factorization_bound(
    workload: SeriesWorkload, relation: Relation, *, noise: Noise = "gaussian"
) -> float:
    """A second lower bound on the expected total squared error of every factorization: tight
    row-level, and much higher than :func:`svd_bound` for a unit over many periods (at
    ``T = 120``, ``k = 12``; on short horizons it can be lower: report the larger).

    A unit may fill any ``k`` consecutive periods (or the first or last ``j < k``), so
    ``Delta_2^2 >= m^2 v_j^T X v_j`` for each such window ``v_j``, and the error is at least
    ``m^2 min tr(G X^-1)`` subject to ``v_j^T X v_j <= 1``: the dual value of that problem
    (:func:`dp.series.factorization.maximise_dual`) bounds it whatever the solver reached. Row-level
    (``k = 1``) the windows are the periods and this is the optimised factorization's own
    problem, so the bound is attained; for a unit over several periods the gap to the best
    strategy found is what a contiguous-window relaxation leaves open.
    """
    noise_norm(noise)  # checks the name
    periods = workload.horizon
    k = min(relation.max_periods_per_unit, periods)
    starts = np.arange(-(k - 1), periods)[:, None]
    t = np.arange(periods)[None, :]
    windows = ((t >= starts) & (t < starts + k)).astype(np.float64).T
    _, value = maximise_dual(workload, windows)
    m = relation.max_rows_per_unit
    return _UNIT_VARIANCE[noise] * m * m * value
