"""Quantiles of a measure per group, read off one hierarchical CDF per group.

The column's values (clamped to its declared ``[lo, hi]``) are counted per group over a fine
grid of ``B`` declared bins; each group's histogram is measured through one tree strategy of
the matrix mechanism (:func:`dp.matrix.hierarchical`, whose prefix queries -- the CDF -- cost
``O(log B)`` noisy nodes each) and reconstructed by least squares. Groups are disjoint, so one
row moves one group's histogram by one cell: the stacked measurement has L1 sensitivity
``m ||A||_1`` (``m`` rows per unit) and every group is measured at the component's full
epsilon. The noisy CDF is made monotone (the least-squares projection of its prefix sums onto
non-decreasing sequences, isotonic regression, clipped to ``[0, T]``; ``T``: the least-squares
total; post-processing) and every quantile ``p`` is read off it: the first bin whose CDF
reaches ``p T``, interpolated linearly inside the bin (on a one-bin-per-integer grid, that
bin's value). (A running maximum instead, the first version, drifts up with the noise: it
doubled the rank error of medians and 0.9 quantiles, 20 rows against 9 on 3,000-row lognormal
groups at 1,024 bins and epsilon 1.) So any number of quantiles cost one measurement.

Intervals cover the group's actual quantile of its clamped values (the smallest value with at
least ``p n`` of its ``n`` rows at or below it), the grid's error included: the rank's exact
noise standard deviation ``se`` (the least-squares prefix query's, :mod:`dp.matrix.variance`)
is turned into values by finding the bins where the CDF reaches ``p T -+ k se`` (``k``: the
Laplace-safe 95% multiplier) and taking the lower bin's lower edge and the upper bin's upper
edge. Where the CDF's noise is within ``k se``, the actual quantile lies between them wherever
the rows sit inside their bins; the released value, interpolated linearly inside its bin,
assumes them spread evenly, which rows at a few values (hours worked: whole numbers on a grid of
0.1) are not. Read off the interpolated points instead, the intervals covered the released
reading but 0.55 of the actual deciles of such groups (3,000 rows, 1,024 bins, epsilon 1; 0.95
with the edges). On a one-bin-per-integer grid the reading is exact and the ends are the
values themselves. The standard error in value units is the interval's half-width over ``k``.

**With margins** (``margins: true``) every published row -- a cell, a sub-total, the grand
total -- gets its own quantiles: a quantile of a margin is not a function of its cells'
quantiles, so it is read off the margin's own CDF, the sum of its cells' histograms. All of
them come from one measurement (:func:`measure_quantiles_jointly`): the cells' histograms
(``cells x B``) through the Kronecker product of the strategy the table's counts use over
its cells and margins (``S``) and the tree (``T``). One row moves one cell's histogram by one
bin, so the L1 sensitivity is ``m ||S||_1 ||T||_1`` (a row is in one cell and in one group of
every margin: ``S`` already pays for that, as for the counts), every row's CDF costs the one
epsilon, and the least-squares noise variance of a row ``g``'s CDF at prefix ``p`` is ``2
b^2 (g^T (S^T S)^+ g) (p^T (T^T T)^+ p)`` (``b``: the Laplace scale). Splitting epsilon
across the ``L`` groupings instead (each a cell-wise CDF) would scale every row's rank noise
by ``L``; the Kronecker strategy lets a large margin borrow from its cells. The method is the
CDF always (the exponential mechanism's draws have no consistent joint form).

For one or a few quantiles the CDF is not the best buy: the exponential mechanism over the grid's
edges (OpenDP's ``make_private_quantile``) answers each ``p`` at ``epsilon / k`` (``k``
probabilities) with a rank error of about ``2 m max(p, 1 - p) k / epsilon`` rows, against the
tree's ``expected_rank_error`` (12.9 rows at 1,024 bins and epsilon 1 for any ``k``). The
method is chosen per column before any data (:func:`quantile_method`: the smaller expected rank
RMSE from ``k``, ``p``, the grid size, epsilon and ``m``). Its utility at edge ``e_j`` is
``-|(1 - p) C_j - p (n - C_j)| = -|C_j - p n|`` (``C_j``: the rows below ``e_j``, ``n``: the
group's rows): one row added or removed moves it by ``1 - p`` or ``p``, so its sensitivity is
``m max(p, 1 - p)``; the edge is drawn by report-noisy-max with exponential noise
(:func:`dp.mechanisms.noisy_max`, pure epsilon-DP). A unit's ``r_g`` rows in group ``g`` cost
that group's draw ``(r_g / m) epsilon_p``: with ``sum r_g <= m`` the groups together cost at
most ``epsilon_p`` per probability, and the ``k`` probabilities add up to ``epsilon``. Its
output has no value interval without the group's distribution: ``ci_low``, ``ci_high`` and
``std_error`` are empty, and the facts state the rank bound that holds with probability 95%
(the mechanism's tail bound: the drawn edge's utility is within ``(2 sensitivity /
epsilon_p) ln(20 (B + 1))`` of the best edge's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.optimize import isotonic_regression

from dppub.dp import matrix
from dppub.dp.matrix.least_squares_intervals import laplace_multiplier
from dppub.dp.matrix.variance import query_noise_moments, query_variance_factors
from dppub.dp.mechanisms import laplace, noisy_max
from dppub.dp.numerics.fixedpoint import float_allowance

__all__ = [
    "QUANTILE_INTERVAL_COVERS",
    "RANK_ROUNDINGS",
    "Quantiles",
    "cdf_strategy",
    "em_rank_error",
    "expected_rank_error",
    "joint_rank_errors",
    "measure_quantiles",
    "measure_quantiles_jointly",
    "quantile_method",
    "rank_utility",
]

FloatArray = npt.NDArray[np.float64]
QUANTILE_INTERVAL_COVERS = (
    "the group's actual quantile of its clamped values (the smallest value with at least p n "
    "of its n rows at or below it), with probability at least 0.95: the CDF's 95% noise band, "
    "widened to the grid's bin edges, so it includes the error of reading the value off the "
    "grid (conservative by up to one bin at each end); the value itself is interpolated inside "
    "its bin"
)
"""What a CDF quantile's interval covers (``release.json``)."""
BRANCHING = 8
"""The tree's branching factor: the lowest expected prefix error of 2, 4, 8 and 16 at 256 and
1,024 bins (``matrix.expected_rmse`` of ``prefix(B)``: 12.9 rows at 1,024 bins and epsilon 1,
against 17.3 for a binary tree)."""


@cache
def cdf_strategy(bins: int) -> matrix.Strategy:
    """The tree measured per group (data-independent)."""
    return matrix.hierarchical(bins, BRANCHING)


@cache
def _prefix_variance(bins: int) -> float:
    """The largest ``||c_i||_2^2`` of the least-squares prefix answers (noise scale 1)."""
    moments = query_noise_moments(matrix.prefix(bins), cdf_strategy(bins))
    return float(np.max(moments.second))


@cache
def expected_rank_error(bins: int, epsilon: float, group: int) -> float:
    """Expected RMSE, in rows, of a group's noisy CDF at one point (least squares)."""
    # Laplace noise scales as group / epsilon: no floor on epsilon / group, which nothing runs at
    rmse = float(matrix.expected_rmse(matrix.prefix(bins), cdf_strategy(bins), 1.0))
    return group / epsilon * rmse


def em_rank_error(at: Sequence[float], epsilon: float, group: int) -> float:
    """Expected RMSE, in rows, of the exponential mechanism's rank for the worst of ``at``, each
    at ``epsilon / len(at)``: over a fine grid the drawn edge's rank error is Laplace with scale
    ``2 m max(p, 1 - p) / epsilon_p`` (report-noisy-max with exponential noise is never worse in
    expectation), so its RMSE is ``sqrt(2)`` times that."""
    worst = max(max(p, 1.0 - p) for p in at)
    return math.sqrt(2.0) * 2.0 * group * worst * len(at) / epsilon


QuantileMethod = Literal["exponential", "cdf"]
RANK_ROUNDINGS = 4
"""Float64 roundings in a rank utility (three, and one for their second-order terms)."""


def quantile_method(
    bins: int, at: Sequence[float], epsilon: float, group: int
) -> tuple[QuantileMethod, float]:
    """The method with the smaller expected rank RMSE (public values only) and that RMSE."""
    em, tree = em_rank_error(at, epsilon, group), expected_rank_error(bins, epsilon, group)
    return ("exponential", em) if em <= tree else ("cdf", tree)


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantiles:
    """Per group (rows) and probability (columns): the value, its standard error and interval."""

    values: FloatArray
    std_error: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    rank_std_error: float
    """The noise standard deviation of a CDF value, in rows (the largest group's: the same for
    every cell without margins); for the exponential mechanism the worst ``p``'s 95% rank
    bound, in rows."""
    noise_scale: float
    sensitivity: float
    method: QuantileMethod = "cdf"


Read = Literal["interpolated", "lower edge", "upper edge"]


def _read(
    cdf: FloatArray, edges: FloatArray, ranks: FloatArray, tied: bool, at: Read = "interpolated"
) -> FloatArray:
    """The values at which the monotone ``cdf`` (one per bin's upper edge) reaches ``ranks``
    (``tied``: bin ``b`` holds the one value ``edges[b]``, read without interpolation): inside
    the bin, interpolated linearly, or that bin's lower or upper edge (``at``)."""
    lower = np.concatenate(([0.0], cdf[:-1]))
    i = np.clip(np.searchsorted(cdf, ranks, side="left"), 0, len(cdf) - 1)
    if tied or at == "lower edge":
        return np.asarray(edges[i], dtype=np.float64)
    if at == "upper edge":
        return np.asarray(edges[i + 1], dtype=np.float64)
    width = cdf[i] - lower[i]
    frac = np.where(
        width > 0, np.clip((ranks - lower[i]) / np.where(width > 0, width, 1), 0, 1), 0.5
    )
    return np.asarray(edges[i] + frac * (edges[i + 1] - edges[i]), dtype=np.float64)


def measure_quantiles(
    histograms: npt.ArrayLike,
    edges: Sequence[float],
    at: Sequence[float],
    *,
    epsilon: float,
    group: int,
    rng: np.random.Generator | None = None,
    tied: bool = False,
) -> Quantiles:
    """Quantiles ``at`` of every group's histogram (``groups x bins``) over ``edges``, by the
    method :func:`quantile_method` chooses (module doc); ``tied``: one bin per integer value."""
    hist = np.asarray(histograms, dtype=np.float64)
    groups, bins = hist.shape
    if quantile_method(bins, at, epsilon, group)[0] == "exponential":
        return _exponential(hist, edges, at, epsilon=epsilon, group=group, rng=rng, tied=tied)
    strategy = cdf_strategy(bins)
    sensitivity = group * strategy.sensitivity
    answers = np.stack([strategy @ hist[g] for g in range(groups)]) if groups else hist
    noisy = laplace(answers, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
    del hist, answers  # post-processing of the noisy measurement only, from here
    scale = sensitivity / epsilon
    rank_se = math.sqrt(2.0 * _prefix_variance(bins)) * scale
    estimate = np.stack([strategy.lstsq(noisy[g]) for g in range(groups)]) if groups else noisy
    return _read_cdfs(estimate, edges, at, np.full(groups, rank_se), scale, sensitivity, tied)


def joint_rank_errors(
    rows: matrix.Workload, groups: matrix.Strategy, bins: int, epsilon: float, group: int
) -> tuple[FloatArray, float, float]:
    """The Kronecker strategy of :func:`measure_quantiles_jointly`: each published row's rank
    noise standard deviation at one CDF point (the worst point's), the Laplace scale and the
    L1 sensitivity (public values only: ``dppub plan`` reads them)."""
    tree = cdf_strategy(bins)
    sensitivity = group * groups.sensitivity * tree.sensitivity
    scale = sensitivity / epsilon
    factors = query_variance_factors(rows, groups)
    return np.sqrt(2.0 * factors * _prefix_variance(bins)) * scale, scale, sensitivity


def measure_quantiles_jointly(
    histograms: npt.ArrayLike,
    edges: Sequence[float],
    at: Sequence[float],
    *,
    rows: matrix.Workload,
    groups: matrix.Strategy,
    epsilon: float,
    group: int,
    rng: np.random.Generator | None = None,
    tied: bool = False,
) -> Quantiles:
    """Quantiles ``at`` of every row of ``rows`` (a cell or a margin: a sum of cells) from the
    cells' histograms (``cells x bins``), all read off one measurement (module doc): the
    Kronecker product of ``groups`` (the strategy the table's counts are measured with) and the
    CDF tree, so a margin's CDF is the least-squares sum of its cells' and every row costs the
    one ``epsilon``."""
    hist = np.asarray(histograms, dtype=np.float64)
    cells, bins = hist.shape
    strategy = matrix.kron_strategy(groups, cdf_strategy(bins))
    rank_se, scale, sensitivity = joint_rank_errors(rows, groups, bins, epsilon, group)
    noisy = laplace(strategy @ hist.ravel(), sensitivity=sensitivity, epsilon=epsilon, rng=rng)
    del hist  # post-processing of the noisy measurement only, from here
    cell_hists = strategy.lstsq(noisy).reshape(cells, bins)
    estimate = np.asarray(rows @ cell_hists, dtype=np.float64)
    return _read_cdfs(estimate, edges, at, rank_se, scale, sensitivity, tied)


def _read_cdfs(
    estimate: FloatArray,
    edges: Sequence[float],
    at: Sequence[float],
    rank_se: FloatArray,
    scale: float,
    sensitivity: float,
    tied: bool,
) -> Quantiles:
    """Every group's quantiles from its least-squares histogram (a row of ``estimate``) and
    the noise standard deviation of its CDF in rows (module doc; ``tied``: :func:`_read`)."""
    groups = estimate.shape[0]
    k = float(laplace_multiplier(0.95))
    grid = np.asarray(edges, dtype=np.float64)
    p = np.asarray(at, dtype=np.float64)
    shape = (groups, len(p))
    values, low, high = np.empty(shape), np.empty(shape), np.empty(shape)
    for g in range(groups):
        prefix = np.cumsum(estimate[g])
        total = max(float(prefix[-1]), 0.0)  # the least-squares total (unbiased)
        cdf = np.clip(isotonic_regression(prefix).x, 0.0, total)
        ranks = p * total
        values[g] = _read(cdf, grid, ranks, tied)
        low[g] = _read(cdf, grid, np.clip(ranks - k * rank_se[g], 0.0, total), tied, "lower edge")
        high[g] = _read(cdf, grid, np.clip(ranks + k * rank_se[g], 0.0, total), tied, "upper edge")
    return Quantiles(
        values=values,
        std_error=(high - low) / (2.0 * k),
        ci_low=low,
        ci_high=high,
        rank_std_error=float(rank_se.max(initial=0.0)),
        noise_scale=scale,
        sensitivity=sensitivity,
    )


def rank_utility(histogram: npt.ArrayLike, p: float, *, tied: bool = False) -> FloatArray:
    """The exponential mechanism's utility of each edge ``e_j`` of a histogram's grid:
    ``-|C_j - p n|`` (``C_j``: the rows below ``e_j``; ``n``: all rows). With ``tied`` (one bin
    per integer: bin ``b`` holds only the value ``e_b``) the candidates are the values, scored
    by how far ``p n`` lies outside the value's rows: ``-max(0, p n - C_(b+1), C_b - p n)``, zero
    exactly where ``C_b < p n <= C_(b+1)`` (the value is the type-1 quantile, the inverse CDF,
    numpy's ``inverted_cdf``; where ``p n`` is a whole number of rows, also the next value with
    rows). OpenDP's tie scoring, ``-|(1 - p) C_b - p (n - C_(b+1))|``, peaks elsewhere: the
    0.9-quantile of 9 rows with 8 at or below 6 (7 below 6) scored 6 over the data's 7. Since
    ``C_b <= C_(b+1)`` at most one of the two terms is positive, so the score is the maximum of
    three functions each moved by at most ``max(p, 1 - p)`` by a row added or removed: so is the
    score. The float64 score is the exact one up to :data:`RANK_ROUNDINGS` roundings of
    magnitude ``n`` (``p n`` and the differences; counts are exact), whose allowance the
    mechanism's sensitivity adds."""
    below = np.concatenate(([0.0], np.cumsum(np.asarray(histogram, dtype=np.float64))))
    n = below[-1]
    if tied:
        rank = p * n
        outside = np.maximum(rank - below[1:], below[:-1] - rank)
        return np.asarray(-np.maximum(outside, 0.0), dtype=np.float64)
    return np.asarray(-np.abs(below - p * n), dtype=np.float64)


def _exponential(
    hist: FloatArray,
    edges: Sequence[float],
    at: Sequence[float],
    *,
    epsilon: float,
    group: int,
    rng: np.random.Generator | None,
    tied: bool,
) -> Quantiles:
    """Each ``p`` by the exponential mechanism over the grid's edges at ``epsilon / len(at)``
    (its integers, ``tied``: :func:`rank_utility`)."""
    groups, bins = hist.shape
    grid = np.asarray(edges, dtype=np.float64)
    eps = epsilon / len(at)
    worst = max(max(p, 1.0 - p) for p in at)
    values = np.empty((groups, len(at)))
    for g in range(groups):
        for j, p in enumerate(at):
            i = noisy_max(
                rank_utility(hist[g], p, tied=tied),
                sensitivity=group * max(p, 1.0 - p) + float_allowance(RANK_ROUNDINGS),
                epsilon=eps,
                rng=rng,
            )
            values[g, j] = grid[i]
    del hist
    sensitivity = group * worst + float_allowance(RANK_ROUNDINGS)
    scale = 2.0 * sensitivity / eps
    empty = np.full_like(values, np.nan)
    return Quantiles(
        values=values,
        std_error=empty,
        ci_low=empty.copy(),
        ci_high=empty.copy(),
        rank_std_error=scale * math.log(20.0 * (bins + 1)),
        noise_scale=scale,
        sensitivity=sensitivity,
        method="exponential",
    )
