"""Standard errors and confidence intervals for released workload answers (post-processing).

Everything here reads only public values: the workload, the strategy, the Laplace scale
``b = ||A||_1 / epsilon`` and the released estimate. No private data and no privacy budget are
involved (Dwork & Roth 2014, Prop. 2.1).

* ``least-squares`` answers ``w_i^T A^+ r`` are unbiased, with the exact variance
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
* ``nonneg-l1`` and ``l1`` are biased near zero (they project onto non-negative histograms).
  Their intervals come from a parametric bootstrap (Efron & Tibshirani 1993, ch. 6; for DP
  releases, Ferrando, Wang & Sheldon, AISTATS 2022): re-draw the mechanism's Laplace noise
  around the strategy answers of the released estimate, ``r* = A x_bar + z*``, re-run the same
  reconstruction, and compare each replicate answer ``y*`` with the released one ``y``. The
  standard error is ``sqrt(mean (y* - y)^2)`` (bias included, so it tracks the RMSE) and the
  interval is symmetric around the released answer, ``y +- q`` with ``q`` the ``level``
  quantile of ``|y* - y|`` (Hall 1988's symmetric bootstrap interval), cut at 0 below (counts
  are non-negative, so this never loses coverage). The percentile interval
  ``[q_2.5(y*), q_97.5(y*)]`` was measured too and rejected: at the corner where a sparse
  histogram's CDF turns flat, the replicates sit to one side of the released answer (the
  projection's bias there differs between the real and the bootstrap world), and 95%
  percentile intervals covered 91.7% of NETTRACE prefixes (1,000 records, 256 cells, epsilon
  0.1; symmetric: 95.5%), down to 51% for single queries. Quantiles use ``p (B + 1)``
  positions (Weibull), whose expected coverage is the nominal one; numpy's default
  interpolation covers about one point less at ``B = 200``. Replicate noise comes from a
  seeded numpy generator: it is post-processing of public values, not a release, so the
  floating-point concerns of release noise (Mironov 2012) do not apply.

  Where the projection moved an answer, its interval is stretched to the exact least-squares
  interval's end on the side it moved away from (:func:`reach_least_squares`): the bootstrap
  world is centred on the projected estimate, biased at the edge of an empty region, and the
  ranges starting at the last populated cell before an empty tail were covered 0.89 of the
  time, every miss above (all ranges over 16 cells, 80 runs; 0.95 stretched, the widths of
  all ranges 7-15% larger).

  How many replicates, and whether to bootstrap at all, follows from public sizes only
  (:func:`bootstrap_replicates`), never from a clock: a release's interval settings and values
  are the same on an idle and on a loaded machine. A reference cost per replicate, computed
  from the cells, the strategy's rows and the linear programs the reconstruction solves,
  bounds the bootstrap's work to :data:`WORK_BUDGET` reference seconds; a workload whose
  replicates would not fit 50 times gets the exact least-squares widths around the released
  answers instead, and ``interval_method`` says so. A replicate whose reconstruction fails
  (a solver error) falls back to the same widths: that depends on the replicate noise, i.e.
  on the released estimate only (post-processing), and the method says so too.

>>> from dppub.dp.matrix.workload import identity
>>> from dppub.dp.matrix.strategy import identity_strategy
>>> iv = least_squares_intervals(identity(2), identity_strategy(2), np.array([5.0, 9.0]),
...                              noise_scale=1.0)
>>> np.round(iv.ci_high - iv.ci_low, 4).tolist(), iv.method
([6.1267, 6.1267], 'least-squares: exact variance, Cornish-Fisher quantile')
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.measure import Measurement
from dppub.dp.matrix.reconstruct import check_reconstruction, linear_program_variables, reconstruct
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.variance import query_noise_moments
from dppub.dp.matrix.workload import AllRange, FloatArray, Identity, Prefix, Workload
from dppub.dp.validation import check_level, check_positive

__all__ = [
    "AnswerIntervals",
    "answer_intervals",
    "bootstrap_intervals",
    "bootstrap_replicates",
    "laplace_multiplier",
    "least_squares_intervals",
    "reach_least_squares",
    "replicate_cost",
]

DEFAULT_REPLICATES = 200
"""Bootstrap replicates by default: about 10 replicates lie beyond each query's quantile, and a
single query's coverage varies by about 1.5 points from release to release."""
_MIN_REPLICATES = 50
WORK_BUDGET = 10.0
"""Reference seconds a release's bootstrap may cost (:func:`replicate_cost` times ``B``)."""
# Replicate answers held at once (m x B floats) before all-range answers are read in blocks.
_MAX_HELD = 1 << 25


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


def replicate_cost(workload: Workload, strategy: Strategy, reconstruction: str) -> float:
    """Reference seconds of one bootstrap replicate, from the sizes alone (never a clock).

    Measured on the bench machine (2 shared cores, 2026-11-27) and rounded up: the
    least-squares solve and the projection -- linear in the cells for identity and prefix
    workloads, quadratic for all ranges (12 ms at 256 cells, 0.2 s at 2,048), ``n r^2`` for the
    dense NNLS of other workloads with ``r`` the smaller of cells and queries (1.5 s for 1,200
    cells and queries, 6.2 s for 2,048) -- plus, where the reconstruction solves linear programs
    (``l1``; ``nonneg-l1`` of a rank-deficient workload), 15 ms per program and 0.15 ms per
    variable (12-473 ms measured for 300-12,900 variables).
    """
    n = workload.n
    if isinstance(workload, Identity | Prefix):
        cost = 1e-6 * n
    elif isinstance(workload, AllRange):
        cost = 2e-7 * n * n
    else:
        cost = 2e-3 + 1e-9 * n * float(min(n, workload.m)) ** 2
    variables = linear_program_variables(workload, strategy, reconstruction)
    if variables:
        cost += 2 * 0.015 + 1.5e-4 * variables
    return cost


def bootstrap_replicates(workload: Workload, strategy: Strategy, reconstruction: str) -> int:
    """The bootstrap's replicate count for a release: :data:`DEFAULT_REPLICATES`, fewer where
    :data:`WORK_BUDGET` allows fewer (at least 50), or 0 (no bootstrap: the exact
    least-squares widths) -- a function of public sizes only.

    >>> from dppub.dp.matrix.workload import prefix
    >>> from dppub.dp.matrix.strategy import hierarchical
    >>> bootstrap_replicates(prefix(74), hierarchical(74, 2), "nonneg-l1")
    200
    """
    if check_reconstruction(workload, reconstruction) == "least-squares":
        return 0
    fits = math.floor(WORK_BUDGET / replicate_cost(workload, strategy, reconstruction))
    return min(DEFAULT_REPLICATES, fits) if fits >= _MIN_REPLICATES else 0


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


def _check_noise(noise: str) -> str:
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
    if _check_noise(noise) == "gaussian":
        se = scale * np.sqrt(query_noise_moments(workload, strategy).second)
        z = NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)
        return se, z * se, "Gaussian"
    moments = query_noise_moments(workload, strategy)
    se = math.sqrt(2.0) * scale * np.sqrt(moments.second)
    kurtosis = moments.kurtosis()
    half = laplace_multiplier(level, kurtosis) * se
    return se, half, "Laplace-safe bound" if kurtosis is None else "Cornish-Fisher"


def _default_rng(estimate: FloatArray) -> np.random.Generator:
    # Deterministic in the released values: re-running the post-processing republishes the same
    # intervals, and the seed carries no information beyond what is released.
    digest = hashlib.sha256(np.ascontiguousarray(estimate).tobytes()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _replicate_blocks(workload: Workload, xs: FloatArray) -> Iterator[FloatArray]:
    """``W @ xs`` for replicate histograms ``xs`` (``n x B``), in blocks of rows.

    All-range answers are read off the replicates' prefix sums a few starting cells at a time,
    so ``n (n + 1) / 2`` queries never need ``m x B`` floats at once.
    """
    if not isinstance(workload, AllRange) or workload.m * xs.shape[1] <= _MAX_HELD:
        yield workload @ xs
        return
    n, reps = workload.n, xs.shape[1]
    c = np.zeros((n + 1, reps))
    np.cumsum(xs, axis=0, out=c[1:])
    step = max(1, _MAX_HELD // (n * reps))
    for first in range(0, n, step):
        yield np.concatenate([c[i + 1 :] - c[i] for i in range(first, min(n, first + step))])


def bootstrap_intervals(
    workload: Workload,
    strategy: Strategy,
    estimate: npt.ArrayLike,
    *,
    noise_scale: float,
    reconstruction: str,
    level: float = 0.95,
    replicates: int = DEFAULT_REPLICATES,
    rng: np.random.Generator | None = None,
    noise: str = "laplace",
) -> AnswerIntervals:
    """Parametric-bootstrap standard errors and symmetric intervals (module doc).

    Args:
        workload: the answered workload ``W``.
        strategy: the measured strategy ``A``.
        estimate: the released histogram ``x_bar``.
        noise_scale: the Laplace scale ``b`` of every strategy answer.
        reconstruction: the reconstruction that produced ``estimate`` (re-run per replicate).
        level: nominal coverage.
        replicates: number of replicates ``B``.
        rng: seeded generator for the replicate noise; default: seeded by the released
            estimate, so the same release always gets the same intervals.
        noise: ``"laplace"`` or ``"gaussian"`` (``noise_scale`` is then ``sigma``): the
            measurement's noise, re-drawn per replicate.

    Returns:
        The intervals; ``replicates`` says how many replicates they rest on.
    """
    scale = check_positive(noise_scale, name="noise_scale")
    lvl = check_level(level)
    gaussian = _check_noise(noise) == "gaussian"
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 2:
        raise ConfigError(f"replicates must be an integer >= 2, got {replicates!r}")
    x_bar = np.asarray(estimate, dtype=np.float64)
    if x_bar.shape != (workload.n,):
        raise ConfigError(f"estimate must have shape ({workload.n},), got {x_bar.shape}")
    gen = _default_rng(x_bar) if rng is None else rng
    centre = strategy @ x_bar
    eps = strategy.sensitivity / scale  # nominal: only the scale matters to a reconstruction
    xs = []
    for _ in range(replicates):
        draw = gen.normal if gaussian else gen.laplace
        meas = Measurement(
            strategy=strategy,
            values=centre + draw(0.0, scale, size=centre.shape),
            epsilon=eps,
            noise_scale=scale,
            mechanism=noise,
        )
        try:
            xs.append(reconstruct(meas, workload, method=reconstruction))
        except SolverError:  # a replicate, not the release: fall back to the exact widths
            why = "a bootstrap replicate's reconstruction failed (a solver error)"
            return _least_squares_widths_around(workload, strategy, x_bar, scale, lvl, noise, why)
    reps = np.column_stack(xs)
    answers = workload @ x_bar
    halves, ses = [], []
    done = 0
    for ys in _replicate_blocks(workload, reps):
        dev = ys - answers[done : done + ys.shape[0], None]
        halves.append(np.quantile(np.abs(dev), lvl, axis=1, method="weibull"))
        ses.append(np.sqrt(np.mean(dev * dev, axis=1)))
        done += ys.shape[0]
    half = np.concatenate(halves)
    return AnswerIntervals(
        std_error=np.concatenate(ses),
        ci_low=np.maximum(answers - half, 0.0),
        ci_high=answers + half,
        method=f"parametric bootstrap ({reconstruction}): symmetric intervals",
        level=lvl,
        replicates=reps.shape[1],
    )


def _least_squares_widths_around(
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


def answer_intervals(
    workload: Workload,
    strategy: Strategy,
    estimate: npt.ArrayLike,
    *,
    noise_scale: float,
    reconstruction: str,
    level: float = 0.95,
    replicates: int | None = None,
    rng: np.random.Generator | None = None,
    noise: str = "laplace",
    least_squares: npt.ArrayLike | None = None,
) -> AnswerIntervals:
    """Intervals for a released answer set: exact for least squares, bootstrap otherwise.

    ``reconstruction`` is the configured method (checked as for
    :func:`dp.matrix.reconstruct.reconstruct`). ``replicates`` defaults to
    :func:`bootstrap_replicates` (from the sizes; 0: the exact least-squares widths around the
    released answers, which covered 95.4-99.5% on the bench's workloads -- conservative, the
    non-negative answers are the more accurate ones). ``least_squares``: the unbiased
    histogram ``A^+ r`` the reconstruction started from; where given, every answer the
    projection moved gets the exact least-squares interval's end on the side it moved away
    from (:func:`reach_least_squares`). The other arguments are those of
    :func:`bootstrap_intervals`.
    """
    method = check_reconstruction(workload, reconstruction)
    if method == "least-squares":
        return least_squares_intervals(
            workload, strategy, estimate, noise_scale=noise_scale, level=level, noise=noise
        )
    out = _projected_intervals(
        workload, strategy, estimate, noise_scale, method, level, replicates, rng, noise
    )
    if least_squares is None:
        return out
    return reach_least_squares(
        out, workload, strategy, estimate, least_squares, noise_scale=noise_scale, noise=noise
    )


def _projected_intervals(
    workload: Workload,
    strategy: Strategy,
    estimate: npt.ArrayLike,
    noise_scale: float,
    method: str,
    level: float,
    replicates: int | None,
    rng: np.random.Generator | None,
    noise: str,
) -> AnswerIntervals:
    if replicates is None:
        replicates = bootstrap_replicates(workload, strategy, method)
    if replicates == 0:
        why = (
            f"a bootstrap of {_MIN_REPLICATES} replicates of this workload's size (about "
            f"{replicate_cost(workload, strategy, method):.2g} reference seconds each) is over "
            f"its work budget of {WORK_BUDGET:g}"
        )
        x_bar = np.asarray(estimate, dtype=np.float64)
        return _least_squares_widths_around(
            workload, strategy, x_bar, noise_scale, check_level(level), noise, why
        )
    return bootstrap_intervals(
        workload,
        strategy,
        estimate,
        noise_scale=noise_scale,
        reconstruction=method,
        level=level,
        replicates=replicates,
        rng=rng,
        noise=noise,
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
