"""Standard errors and confidence intervals for released workload answers (post-processing).

Everything here reads only public values: the workload, the strategy, the Laplace scale
``b = ||A||_1 / epsilon`` and the released estimate. No private data and no privacy budget are
involved (Dwork & Roth 2014, Prop. 2.1).

* ``least-squares`` answers have exact intervals (:mod:`dp.matrix.least_squares_intervals`).
* ``nonneg-l1`` and ``l1`` are biased near zero (they project onto non-negative histograms).
  Their intervals come from a parametric bootstrap (Efron & Tibshirani 1993, ch. 6; for DP
  releases, Ferrando, Wang & Sheldon, AISTATS 2022): re-draw the mechanism's Laplace noise
  around the strategy answers of the released estimate, ``r* = A x_bar + z*``, re-run the same
  reconstruction, and compare each replicate answer ``y*`` with the released one ``y``. The
  standard error is ``sqrt(mean (y* - y)^2)`` (bias included, so it tracks the RMSE) and the
  interval is symmetric around the released answer, ``y +- q`` with ``q`` the ``level``
  quantile of ``|y* - y|`` (Hall 1988's symmetric bootstrap interval), cut at 0 below (counts
  are non-negative, so this never loses coverage). The percentile interval
  ``[q_2.5(y*), q_97.5(y*)]`` is not used: at the corner where a sparse histogram's CDF turns
  flat, the replicates sit to one side of the released answer (the projection's bias there
  differs between the real and the bootstrap world), so it covers less than its level
  (figures: ``bench/RESULTS.md``, History). Quantiles use ``p (B + 1)``
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

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.least_squares_intervals import (
    AnswerIntervals,
    check_noise,
    least_squares_intervals,
    least_squares_widths_around,
    reach_least_squares,
)
from dppub.dp.matrix.measure import Measurement
from dppub.dp.matrix.reconstruct import check_reconstruction, linear_program_variables, reconstruct
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import AllRange, FloatArray, Identity, Prefix, Workload
from dppub.dp.validation import check_level, check_positive

__all__ = ["answer_intervals", "bootstrap_intervals", "bootstrap_replicates", "replicate_cost"]

DEFAULT_REPLICATES = 200
"""Bootstrap replicates by default: about 10 replicates lie beyond each query's quantile, and a
single query's coverage varies by about 1.5 points from release to release."""
_MIN_REPLICATES = 50
WORK_BUDGET = 10.0
"""Reference seconds a release's bootstrap may cost (:func:`replicate_cost` times ``B``)."""
# Replicate answers held at once (m x B floats) before all-range answers are read in blocks.
_MAX_HELD = 1 << 25


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
    gaussian = check_noise(noise) == "gaussian"
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
            return least_squares_widths_around(workload, strategy, x_bar, scale, lvl, noise, why)
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
        return least_squares_widths_around(
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
