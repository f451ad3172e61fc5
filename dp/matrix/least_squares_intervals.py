"""Intervals of released workload answers with an exact variance (post-processing, public
values only), and :class:`AnswerIntervals`, what every interval method returns.

``least-squares`` answers ``w_i^T A^+ r`` are unbiased, with the exact variance
``2 b^2 ||c_i||_2^2`` for ``c_i = (W A^+)_i`` (:mod:`dp.matrix.variance`). Their error is a
weighted sum of Laplace variables: Gaussian when many terms contribute, a single Laplace
variable when one dominates (an identity strategy on an identity workload), whose 95%
quantile is ``b ln 20 = 2.12`` standard deviations, not 1.96. Its excess kurtosis is exactly
``g = 3 ||c_i||_4^4 / ||c_i||_2^4`` (from 3 for one term down to 0), and the half-width is
the Cornish-Fisher quantile ``z + (z^3 - 3 z) g / 24`` standard errors (Cornish & Fisher
1938; the skewness terms vanish for symmetric noise): 1.96 for a Gaussian error, 2.17 for a
single Laplace term (95.3% coverage there). Where ``||c_i||_4`` is not computed (marginals
measured by themselves, all ranges over more than a few hundred cells) the half-width is the
single-term bound ``max(ln(1/alpha) / sqrt 2, z)``, which covers 95% of one Laplace term and
96.6% of a Gaussian.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.variance import query_noise_moments
from dppub.dp.matrix.workload import FloatArray, Workload
from dppub.dp.validation import check_level, check_positive

__all__ = [
    "AnswerIntervals",
    "laplace_multiplier",
    "least_squares_intervals",
    "reach_least_squares",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerIntervals:
    """Per-query standard errors and confidence intervals of released answers."""

    std_error: FloatArray
    """Estimated root-mean-square error of each answer (its standard deviation when unbiased)."""
    ci_low: FloatArray
    """Lower ends of the intervals."""
    ci_high: FloatArray
    """Upper ends of the intervals."""
    method: str
    """How the intervals were made (for ``release.json``)."""
    level: float
    """Nominal coverage of each interval, e.g. 0.95."""
    replicates: int = 0
    """Bootstrap replicates used (0 for the exact least-squares intervals)."""
    widened: npt.NDArray[np.bool_] | None = None
    """Answers whose interval was stretched to the least-squares interval's end
    (:func:`reach_least_squares`): conservative, covering at least ``level``."""

    def describe(self) -> dict[str, Any]:
        """``{"interval_method", "interval_level", "bootstrap_replicates"}`` for a release."""
        return {
            "interval_method": self.method,
            "interval_level": self.level,
            "bootstrap_replicates": self.replicates,
        }


def laplace_multiplier(level: float, kurtosis: npt.ArrayLike | None = None) -> FloatArray:
    """Half-widths in standard errors of ``level`` intervals for weighted Laplace sums.

    With the noise's excess ``kurtosis`` (0 to 3), the Cornish-Fisher quantile; without it,
    the bound that covers ``level`` of a single Laplace variable and more of any sum (module
    doc).

    >>> laplace_multiplier(0.95, [0.0, 3.0]).round(4).tolist()
    [1.96, 2.1661]
    >>> float(laplace_multiplier(0.95).round(4))
    2.1183
    """
    alpha = 1.0 - check_level(level)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    if kurtosis is None:
        return np.asarray(max(math.log(1.0 / alpha) / math.sqrt(2.0), z))
    g = np.clip(np.asarray(kurtosis, dtype=np.float64), 0.0, 3.0)
    return np.asarray(z + (z**3 - 3.0 * z) * g / 24.0)


def least_squares_intervals(
    workload: Workload,
    strategy: Strategy,
    estimate: npt.ArrayLike,
    *,
    noise_scale: float,
    level: float = 0.95,
    noise: str = "laplace",
) -> AnswerIntervals:
    """Exact standard errors and Laplace-safe (or Gaussian) intervals of least-squares answers.

    Args:
        workload: the answered workload ``W``.
        strategy: the measured strategy ``A``.
        estimate: the released least-squares histogram ``A^+ r``.
        noise_scale: the Laplace scale ``b`` (or Gaussian ``sigma``) of every strategy answer.
        level: nominal coverage.
        noise: ``"laplace"`` or ``"gaussian"``, the measurement's noise.

    Returns:
        Intervals centred on ``W @ estimate``.
    """
    answers = workload @ np.asarray(estimate, dtype=np.float64)
    se, half, quantile = _least_squares_widths(workload, strategy, noise_scale, level, noise)
    return AnswerIntervals(
        std_error=se,
        ci_low=answers - half,
        ci_high=answers + half,
        method=f"least-squares: exact variance, {quantile} quantile",
        level=check_level(level),
    )


def check_noise(noise: str) -> str:
    if noise not in ("laplace", "gaussian"):
        raise ConfigError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    return noise


def _least_squares_widths(
    workload: Workload, strategy: Strategy, noise_scale: float, level: float, noise: str
) -> tuple[FloatArray, FloatArray, str]:
    """Standard errors and half-widths of the least-squares answers, and the quantile used.

    Gaussian noise stays Gaussian through any linear map: the half-width is exactly ``z``
    standard errors."""
    scale = check_positive(noise_scale, name="noise_scale")
    if check_noise(noise) == "gaussian":
        se = scale * np.sqrt(query_noise_moments(workload, strategy).second)
        z = NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)
        return se, z * se, "Gaussian"
    moments = query_noise_moments(workload, strategy)
    se = math.sqrt(2.0) * scale * np.sqrt(moments.second)
    kurtosis = moments.kurtosis()
    half = laplace_multiplier(level, kurtosis) * se
    return se, half, "Laplace-safe bound" if kurtosis is None else "Cornish-Fisher"


def least_squares_widths_around(
    workload: Workload,
    strategy: Strategy,
    x_bar: FloatArray,
    scale: float,
    level: float,
    noise: str,
    why: str,
) -> AnswerIntervals:
    answers = workload @ x_bar
    se, half, quantile = _least_squares_widths(workload, strategy, scale, level, noise)
    return AnswerIntervals(
        std_error=se,
        ci_low=np.maximum(answers - half, 0.0),
        ci_high=answers + half,
        method=(f"least-squares widths ({quantile} quantile) around the released answers: {why}"),
        level=level,
    )


def reach_least_squares(
    intervals: AnswerIntervals,
    workload: Workload,
    strategy: Strategy,
    estimate: npt.ArrayLike,
    least_squares: npt.ArrayLike,
    *,
    noise_scale: float,
    noise: str = "laplace",
) -> AnswerIntervals:
    """``intervals`` of a non-negative reconstruction, each stretched, where the projection
    moved its answer, to the exact least-squares interval's end on the side the answer moved
    away from (module doc).

    The bootstrap re-draws noise around the released, projected estimate, which at the edge of
    an empty region is biased (the projection pushes the empty cells' noise up and the answers
    beside them down) and reproduces neither that bias nor its spread: ranges starting at the
    last populated cell before an empty tail were covered about 0.86 of the time, every miss
    above the interval. The least-squares answer ``y_ls`` is unbiased, and ``y_ls +- h`` (its
    exact half-width ``h``) covers ``level`` whatever the data; an answer moved down
    (``y < y_ls``) gets ``ci_high >= y_ls + h``, one moved up ``ci_low <= max(y_ls - h, 0)``,
    so its interval misses on that side only where the least-squares interval would.
    """
    x_ls = np.asarray(least_squares, dtype=np.float64)
    if x_ls.shape != (workload.n,):
        raise ConfigError(f"least_squares must have shape ({workload.n},), got {x_ls.shape}")
    y = workload @ np.asarray(estimate, dtype=np.float64)
    y_ls = workload @ x_ls
    _, half, _ = _least_squares_widths(workload, strategy, noise_scale, intervals.level, noise)
    # Moved: by more than float noise of the projection (1e-9 of a least-squares half-width).
    tol = 1e-9 * half
    down, up = y < y_ls - tol, y > y_ls + tol
    return AnswerIntervals(
        std_error=intervals.std_error,
        ci_low=np.where(
            up, np.minimum(intervals.ci_low, np.maximum(y_ls - half, 0.0)), intervals.ci_low
        ),
        ci_high=np.where(down, np.maximum(intervals.ci_high, y_ls + half), intervals.ci_high),
        method=f"{intervals.method}; where the projection moved an answer, reaching the exact "
        "least-squares interval's end on the side it moved away from",
        level=intervals.level,
        replicates=intervals.replicates,
        widened=down | up,
    )
