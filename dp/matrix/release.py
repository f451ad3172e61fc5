"""End-to-end workload answering with the matrix mechanism (Li et al. 2015).

``answer`` selects a strategy without looking at the data, measures it once with Laplace noise
(or Gaussian noise for an ``(epsilon, delta)`` release; the only step that touches ``x``, in
:mod:`dp.matrix.measure`), reconstructs a histogram and answers the workload from it.
Everything after the measurement is post-processing of the noisy answers, so the release is
``epsilon``-DP, or ``(epsilon, delta)``-DP with Gaussian noise (Li et al. 2015, Prop. 2;
Dwork & Roth 2014, Prop. 2.1).

>>> import numpy as np
>>> from dppub.dp.matrix.workload import prefix
>>> res = answer(prefix(4), [3, 0, 1, 2], epsilon=1.0, rng=np.random.default_rng(0))
>>> res.answers.shape, res.estimate.shape, bool(np.all(res.estimate >= 0))
((4,), (4,), True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.error import svd_bound_rmse
from dppub.dp.matrix.exact import certified_sensitivity
from dppub.dp.matrix.measure import check_histogram, measure, measure_gaussian
from dppub.dp.matrix.reconstruct import check_reconstruction, least_squares, reconstruct
from dppub.dp.matrix.select import cached_error_factor, select_strategy
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import FloatArray, Workload
from dppub.dp.validation import check_delta, check_epsilon

__all__ = ["WorkloadAnswer", "answer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadAnswer:
    """A released workload answer set and the data-independent facts about its accuracy."""

    answers: FloatArray
    """Noisy workload answers ``W x_bar``, one per workload row."""
    estimate: FloatArray
    """Reconstructed histogram ``x_bar`` (flat, C order for multi-dimensional domains)."""
    sensitivity: float
    """``||A||_1`` of the strategy (``||A||_{1->2}`` with Gaussian noise)."""
    noise_scale: float
    """Laplace scale ``||A||_1 / epsilon`` of every strategy answer, or the Gaussian sigma."""
    measured: Strategy
    """The measured strategy (for intervals: post-processing of public values)."""
    expected_rmse: float
    """Expected per-query RMSE of the least-squares answers (an upper reference for
    ``"nonneg-l1"``, whose workload error is never larger for any noise draw)."""
    svd_bound_rmse: float
    """SVD lower bound on the per-query RMSE of any strategy."""
    epsilon: float
    """Privacy parameter spent."""
    reconstruction: str
    """Reconstruction method used."""
    delta: float = 0.0
    """Approximate-DP parameter spent (0 with Laplace noise)."""
    noise: str = "laplace"
    """``"laplace"`` or ``"gaussian"``."""
    least_squares: FloatArray | None = None
    """The unbiased least-squares histogram ``A^+ r`` the non-negative reconstructions start
    from (None for ``"least-squares"``: it is ``estimate``); the intervals use it where the
    projection moved an answer (:func:`dp.matrix.intervals.answer_intervals`)."""

    @property
    def strategy(self) -> str:
        """Name of the measured strategy."""
        return self.measured.name

    @property
    def cost(self) -> PrivacyCost:
        """The release's privacy cost."""
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)


def answer(
    workload: Workload,
    x: npt.ArrayLike,
    *,
    epsilon: float,
    strategy: Strategy | None = None,
    reconstruction: str = "nonneg-l1",
    rng: np.random.Generator | None = None,
    noise: str = "laplace",
    delta: float = 0.0,
    group: int = 1,
    rho: float | None = None,
) -> WorkloadAnswer:
    """Answer ``workload`` on histogram ``x`` with the matrix mechanism (``epsilon``-DP, or
    ``(epsilon, delta)``-DP with Gaussian noise).

    Args:
        workload: linear queries to answer (e.g. :func:`dp.matrix.prefix`).
        x: histogram over the workload's domain (finite, >= 0; C order if multi-dimensional).
        epsilon: privacy parameter (> 0).
        strategy: strategy to measure; default :func:`dp.matrix.select_strategy` (data-free).
        reconstruction: ``"nonneg-l1"`` (default), ``"least-squares"`` or ``"l1"``.
        rng: ``None`` for release-grade OpenDP noise; a seeded generator in tests only.
        noise: ``"laplace"`` (default) or ``"gaussian"`` (the analytic Gaussian mechanism on
            the strategy's L2 sensitivity, :func:`dp.matrix.measure.measure_gaussian`).
        delta: the Gaussian release's delta (in (0, 1)); 0 with Laplace noise.
        group: neighbours differ by up to this many records (a privacy unit's bound): the
            sensitivity, hence the noise, is ``group`` times the strategy's.
        rho: Gaussian noise calibrated to rho-zCDP (:func:`dp.matrix.measure.measure_gaussian`);
            ``(epsilon, delta)`` is then what the release is charged as.

    Returns:
        The :class:`WorkloadAnswer` (its ``sensitivity`` is the group's).
    """
    # Validate everything before the measurement, so a bad argument never spends budget.
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload must be a dp.matrix workload, got {type(workload).__name__}")
    eps = check_epsilon(epsilon)
    method = check_reconstruction(workload, reconstruction)
    hist = check_histogram(x, workload.n)
    if noise not in ("laplace", "gaussian"):
        raise ConfigError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    dl = check_delta(delta)
    if (noise == "gaussian") != (dl > 0):
        raise ConfigError("Gaussian noise needs delta > 0, and Laplace noise delta = 0")
    if rho is not None and noise != "gaussian":
        raise ConfigError("a rho budget is for Gaussian noise")
    chosen = select_strategy(workload, noise=noise) if strategy is None else strategy
    if not isinstance(chosen, Strategy):
        raise ConfigError(f"strategy must be a dp.matrix strategy, got {type(chosen).__name__}")
    if chosen.domain != workload.domain:
        raise ConfigError(
            f"strategy domain {chosen.domain} does not match workload domain {workload.domain}"
        )
    factor = cached_error_factor(workload, chosen)
    if noise == "gaussian":
        meas = measure_gaussian(chosen, hist, epsilon=eps, delta=dl, rng=rng, group=group, rho=rho)
        variance = meas.noise_scale**2
        sensitivity = group * certified_sensitivity(chosen, l2=True)
    else:
        meas = measure(chosen, hist, epsilon=eps, rng=rng, group=group)
        variance, sensitivity = 2.0 * meas.noise_scale**2, group * certified_sensitivity(chosen)
    del hist  # from here on only the noisy measurement is used (post-processing)
    estimate = reconstruct(meas, workload, method=method)
    return WorkloadAnswer(
        answers=workload @ estimate,
        estimate=estimate,
        sensitivity=sensitivity,
        noise_scale=meas.noise_scale,
        measured=chosen,
        expected_rmse=math.sqrt(variance * factor / workload.m),
        svd_bound_rmse=svd_bound_rmse(workload, eps / group),
        epsilon=eps,
        reconstruction=method,
        delta=dl,
        noise=noise,
        least_squares=None if method == "least-squares" else least_squares(meas),
    )
