"""Counts and centred sums over a table's cells and margins, measured with the matrix mechanism.

A component (:mod:`dp.tables.split`) is a vector ``x`` over the cells; the table publishes
``W x`` for ``W`` the cells (identity) or, with margins, every marginal down to the grand total
(:func:`dp.tables.margins.margin_workload`). One strategy ``A`` (chosen by expected error,
data-independently) is measured with Laplace noise of scale ``m s ||A||_1 / epsilon`` (``s``:
a row's sensitivity, 1 for a count and ``half`` for a centred sum; ``m``: the rows a unit may
contribute), and every published row is read off one reconstructed vector, so cells add up
exactly to every margin. Counts are reconstructed non-negative (``nonneg-l1``), centred sums by
least squares (they may be negative). A count and a centred sum measured together
(:mod:`dp.tables.split`, :func:`measure_count_and_sum`) are read off the two noisy vectors
``A a`` and ``A b`` (``a``, ``b``: the sums of ``v - lo`` and ``hi - v``) as
``(a + b) / (2 half)`` and ``(a - b) / 2``, then reconstructed the same way.

Standard errors are the exact noise standard deviations of the least-squares answers
(:func:`dp.matrix.intervals.least_squares_intervals`); they cover the noise only (not the
clamping to the bounds, nor the sampling of the data).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp import matrix
from dppub.dp.matrix.exact import certified_sensitivity, exact_answers
from dppub.dp.matrix.least_squares_intervals import least_squares_intervals
from dppub.dp.matrix.measure import Measurement
from dppub.dp.matrix.reconstruct import reconstruct
from dppub.dp.mechanisms import laplace
from dppub.dp.numerics.fixedpoint import float_allowance

__all__ = ["PAIR_ROUNDINGS", "Linear", "measure_count_and_sum", "measure_linear"]

FloatArray = npt.NDArray[np.float64]
PAIR_ROUNDINGS = 4
"""Roundings of ``half N`` in each of a pair's vectors ``a`` and ``b`` (their L1 errors add up to
``2 * 4 u half n``, half the pair's ``2 half``-relative allowance of 4 roundings)."""


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
    sensitivity = group * row_sensitivity * certified_sensitivity(strategy)
    noisy = laplace(
        exact_answers(strategy, values), sensitivity=sensitivity, epsilon=epsilon, rng=rng
    )
    del values  # post-processing of the noisy measurement only, from here
    return _read(workload, strategy, noisy, epsilon, sensitivity / epsilon, sensitivity, nonneg)


def measure_count_and_sum(
    workload: matrix.Workload,
    strategy: matrix.Strategy,
    counts: npt.ArrayLike,
    centred: npt.ArrayLike,
    *,
    epsilon: float,
    half: float,
    group: int,
    rng: np.random.Generator | None = None,
) -> tuple[Linear, Linear]:
    """The count and a centred sum (``half``: the declared bound on ``|v - mid|``) measured
    together at ``epsilon`` (module doc of :mod:`dp.tables.split`): a row adds ``v - lo >= 0``
    to ``a`` and ``hi - v >= 0`` to ``b``, ``2 half`` in all, so ``(A a, A b)`` has L1
    sensitivity ``m 2 half ||A||_1`` -- computed exactly. In float64, ``a = fl(fl(S) + fl(half
    N))`` (``fl(S)``: the exact centred sum rounded once) carries four roundings' worth of
    ``half N`` (one for ``fl(S)``, one for the shift ``half N``, two for the sum, of magnitude
    up to ``2 half N``), and so does ``b``: :data:`PAIR_ROUNDINGS` roundings' allowance
    (:func:`dp.numerics.fixedpoint.float_allowance`) on the sensitivity. (The offset is the
    declared ``half``: an offset inflated by an allowance still rounds.)"""
    n = np.asarray(counts, dtype=np.float64)
    s = np.asarray(centred, dtype=np.float64)
    a, b = s + half * n, half * n - s
    sensitivity = (
        group
        * 2.0
        * half
        * certified_sensitivity(strategy)
        * (1.0 + float_allowance(PAIR_ROUNDINGS))
    )
    noisy = laplace(
        np.concatenate([exact_answers(strategy, a), exact_answers(strategy, b)]),
        sensitivity=sensitivity,
        epsilon=epsilon,
        rng=rng,
    )
    del n, s, a, b  # post-processing of the noisy measurement only, from here
    a, b = np.split(noisy, 2)
    scale = sensitivity / epsilon  # of a and b; (a +- b) / c has the variance of scale sqrt 2 / c
    count = _read(
        workload,
        strategy,
        (a + b) / (2.0 * half),
        epsilon,
        scale / (np.sqrt(2.0) * half),
        sensitivity,
        True,
    )
    total = _read(
        workload, strategy, (a - b) / 2.0, epsilon, scale / np.sqrt(2.0), sensitivity, False
    )
    return count, total


def _read(
    workload: matrix.Workload,
    strategy: matrix.Strategy,
    noisy: FloatArray,
    epsilon: float,
    noise_scale: float,
    sensitivity: float,
    nonneg: bool,
) -> Linear:
    """Reconstruct the cells from ``strategy``'s noisy answers (Laplace of ``noise_scale``, or
    noise of that variance) and read off ``workload``'s rows with their intervals."""
    measured = Measurement(
        strategy=strategy, values=noisy, epsilon=epsilon, noise_scale=noise_scale
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
