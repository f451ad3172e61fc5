"""Counts and centred sums over a table's cells and margins, measured with the matrix mechanism.

A component (:mod:`dp.tables.split`) is a vector ``x`` over the cells; the table publishes
``W x`` for ``W`` the cells (identity) or, with margins, every marginal down to the grand total
(:func:`dp.tables.margins.margin_workload`). One strategy ``A`` (chosen by expected error,
data-independently) is measured with Laplace noise of scale ``m s ||A||_1 / epsilon`` (``s``:
a row's sensitivity, 1 for a count and ``half`` for a centred sum; ``m``: the rows a unit may
contribute), and every published row is read off one reconstructed vector, so cells add up
exactly to every margin. Counts are reconstructed non-negative (``nonneg-l1``), centred sums by
least squares (they may be negative).

Standard errors are the exact noise standard deviations of the least-squares answers
(:func:`dp.matrix.intervals.least_squares_intervals`); they cover the noise only (not the
clamping to the bounds, nor the sampling of the data).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dp import matrix
from dp.matrix.intervals import least_squares_intervals
from dp.matrix.measure import Measurement
from dp.matrix.reconstruct import reconstruct
from dp.mechanisms import laplace

__all__ = ["Linear", "measure_linear"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Linear:
    """A measured component: the reconstructed cells and the published rows ``W x_bar``."""

    estimate: FloatArray
    answers: FloatArray
    std_error: FloatArray
    """Exact noise standard deviation of each row's least-squares answer."""
    half_width: FloatArray
    """Half-width of each row's 95% interval (Laplace-safe, :mod:`dp.matrix.intervals`)."""
    epsilon: float
    noise_scale: float
    sensitivity: float
    strategy: str


def measure_linear(
    workload: matrix.Workload,
    strategy: matrix.Strategy,
    x: npt.ArrayLike,
    *,
    epsilon: float,
    row_sensitivity: float,
    group: int,
    nonneg: bool,
    rng: np.random.Generator | None = None,
) -> Linear:
    """``workload``'s answers on ``x``, measured through ``strategy`` (module doc)."""
    values = np.asarray(x, dtype=np.float64)
    sensitivity = group * row_sensitivity * strategy.sensitivity
    noisy = laplace(strategy @ values, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
    del values  # post-processing of the noisy measurement only, from here
    measured = Measurement(
        strategy=strategy, values=noisy, epsilon=epsilon, noise_scale=sensitivity / epsilon
    )
    estimate = reconstruct(measured, workload, method="nonneg-l1" if nonneg else "least-squares")
    intervals = least_squares_intervals(
        workload, strategy, estimate, noise_scale=measured.noise_scale
    )
    return Linear(
        estimate=estimate,
        answers=np.asarray(workload @ estimate, dtype=np.float64),
        std_error=intervals.std_error,
        half_width=(intervals.ci_high - intervals.ci_low) / 2.0,
        epsilon=epsilon,
        noise_scale=measured.noise_scale,
        sensitivity=sensitivity,
        strategy=strategy.name,
    )
