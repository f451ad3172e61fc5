"""Coefficient tables with standard errors and intervals, from released values only.

A DP model's coefficients move with the noise its mechanism added; how far is a function of the
released noisy statistics and the public noise scales. The parametric bootstrap of Ferrando,
Wang & Sheldon ("Parametric bootstrap for differentially private confidence intervals",
AISTATS 2022) reads the spread off replicates: treat the released statistics as the data,
run the same mechanism on them again (the same sensitivities, budget split and noise scales,
fresh noise) and refit with the same solver. Here each replicate is literally the model's own
``fit_statistics`` applied to the released statistics with a seeded generator, so the replicate
world can never drift from the mechanism (shrinkage, trimming floors, AdaSSP's private ridge,
the trace regression's penalty, rank selection and refit all included).

This is post-processing: the input is the release, nothing private is read and no budget is
spent (Dwork & Roth 2014, Prop. 2.1). The replicate noise is a simulation, not a release, so a
seeded generator is the right tool (the model's own noise came from OpenDP's sampler); by
default it is seeded from the released statistics, so the same release always gets the same
table. What the intervals cover is the *privacy* error: the coefficient the same fit would give
on the exact statistics of the same rows (sampling error of the rows themselves is not included:
it would need the noisy ``sum y^2``, which the mechanisms do not release). For the trace
regression that is the same penalty and low-rank refit on the exact statistics: its rank
selection is part of the estimator, and against per-task least squares (no penalty) the
intervals covered only 86% on the demo, a bias the bootstrap world reproduces around the
released fit and so cannot see. Measured on the demo (``bench/intervals.py``, 200 releases
each): 93.8-95.3% coverage, standard errors 0.89-1.13 times the real RMSE.

For the logistic functional mechanism the fit is the minimiser of a Taylor surrogate whose
coefficients are attenuated against the logistic MLE (20-45% on the demo), so its intervals
held the non-private MLE in 2.7% of cases (``bench/intervals.py``): they are published as
``surrogate_std_error``, ``surrogate_ci_low``, ``surrogate_ci_high``, and every table's
``interval_covers`` says what its intervals are for.

The standard error is the replicates' root-mean-square deviation from the published
coefficient; the interval is symmetric around it, ``coef +- q`` with ``q`` the ``level``
quantile of the absolute deviations (as for workload answers, :mod:`dp.matrix.intervals`): a
coefficient driven by a few Laplace draws has heavier tails than a Gaussian, which the quantile
follows and a fixed ``1.96 se`` would not.

Objective perturbation (:mod:`dp.regression.objective`) releases only its minimiser. Its
spread is ``(H + lam I)^-1 b`` for the data's Hessian ``H``, which is not released, so no
post-processing interval exists for it; :func:`coefficient_table` refuses it with that reason,
and :func:`point_table` publishes its coefficients with the interval columns empty (NaN).

DP k-means publishes centres and the last iteration's noisy cluster sizes
(:func:`cluster_table`); a size is its count plus one Laplace draw, so its interval is exact.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.calibration import laplace_half_width
from dppub.dp.errors import ConfigError, InputError, SolverError
from dppub.dp.regression.linear import LinearFit
from dppub.dp.regression.logistic import LogisticFit
from dppub.dp.regression.statistics import SufficientStatistics
from dppub.dp.regression.trace import TraceFit
from dppub.dp.validation import check_level, check_positive

__all__ = [
    "DEFAULT_REPLICATES",
    "NO_INTERVALS",
    "CoefficientTable",
    "Fit",
    "cluster_table",
    "coefficient_table",
    "point_table",
]

FloatArray = npt.NDArray[np.float64]
Released = SufficientStatistics | Sequence[SufficientStatistics]
Fit = LinearFit | LogisticFit | TraceFit
DEFAULT_REPLICATES = 200
"""Bootstrap replicates by default."""
NO_INTERVALS = (
    "none: objective perturbation releases only its minimiser; its spread depends on the "
    "data's Hessian, which is not released, so it has no post-processing intervals"
)
"""The interval method recorded for an objective-perturbation model (:func:`point_table`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CoefficientTable:
    """A published model's coefficients with standard errors and intervals."""

    feature: tuple[str, ...]
    """Feature of each coefficient (``intercept`` for the constant term)."""
    coefficient: FloatArray
    """The published coefficients."""
    std_error: FloatArray
    """Root-mean-square deviation of the bootstrap replicates from each coefficient."""
    ci_low: FloatArray
    """Lower ends of the intervals."""
    ci_high: FloatArray
    """Upper ends of the intervals."""
    method: str
    """How the intervals were made (for the release record)."""
    level: float | None
    """Nominal coverage of each interval (None: no intervals, :func:`point_table`)."""
    replicates: int
    """Bootstrap replicates used (0: no intervals)."""
    dropped: int = 0
    """Replicates the solver could not finish exactly (e.g. CLARABEL's ``optimal_inaccurate``),
    left out of the table; at most half of those asked for."""
    task: tuple[str, ...] | None = None
    """Task of each coefficient (trace regression only)."""
    covers: str = ""
    """What the intervals are for (empty: no intervals)."""
    surrogate: bool = False
    """The intervals are for a surrogate's minimiser, not for the model's non-private estimate
    (the logistic functional mechanism): their columns say so (``surrogate_ci_low``...)."""

    def to_frame(self) -> pd.DataFrame:
        """``task`` (trace only), ``feature``, ``coefficient``, ``std_error``, ``ci_low``,
        ``ci_high`` (``surrogate_std_error``... for a :attr:`surrogate` interval): the columns
        of ``coefficients.csv`` / ``.parquet``."""
        cols: dict[str, Any] = {} if self.task is None else {"task": list(self.task)}
        prefix = "surrogate_" if self.surrogate else ""
        cols |= {
            "feature": list(self.feature),
            "coefficient": self.coefficient,
            f"{prefix}std_error": self.std_error,
            f"{prefix}ci_low": self.ci_low,
            f"{prefix}ci_high": self.ci_high,
        }
        return pd.DataFrame(cols)

    def describe(self) -> dict[str, Any]:
        """``{"interval_method", "interval_level", "bootstrap_replicates",
        "bootstrap_replicates_dropped", "interval_covers", "interval_columns"}``."""
        prefix = "surrogate_" if self.surrogate else ""
        return {
            "interval_method": self.method,
            "interval_level": self.level,
            "bootstrap_replicates": self.replicates,
            "bootstrap_replicates_dropped": self.dropped,
            "interval_covers": self.covers or None,
            "interval_columns": [f"{prefix}{c}" for c in ("std_error", "ci_low", "ci_high")],
        }


COVERS_LEAST_SQUARES = (
    "the non-private least-squares coefficients of the same rows: the privacy noise's error, "
    "not the rows' sampling error"
)
COVERS_SURROGATE = (
    "NOT the logistic regression's coefficients: noise-only intervals around the minimiser of "
    "the functional mechanism's Taylor surrogate on the same rows, whose coefficients are "
    "attenuated (20-45% on the demo); they held the non-private logistic estimate in almost no "
    "case (bench/intervals.py)"
)
COVERS_TRACE = (
    "the same penalised low-rank fit on the exact statistics of the same rows (its rank "
    "selection included), not per-task least squares"
)


def _covers(fit: Fit) -> tuple[str, bool]:
    """What a fit's bootstrap intervals cover, and whether that is a surrogate (module doc)."""
    if isinstance(fit, LogisticFit):
        return COVERS_SURROGATE, True
    if isinstance(fit, TraceFit):
        return COVERS_TRACE, False
    return COVERS_LEAST_SQUARES, False


def _coefficients(fit: Fit) -> FloatArray:
    """Coefficients in table order (trace: task by task; others: features, then intercept)."""
    if isinstance(fit, TraceFit):
        return np.asarray(fit.coef.T.ravel(), dtype=np.float64)
    tail = [fit.intercept] if fit.model.fit_intercept else []
    return np.asarray(np.r_[fit.coef, tail], dtype=np.float64)


def _labels(
    fit: Fit, features: Sequence[str], tasks: Sequence[str] | None
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    if isinstance(fit, TraceFit):
        n_tasks = fit.model.n_tasks
        names = list(tasks) if tasks is not None else [str(t) for t in range(n_tasks)]
        if len(names) != n_tasks:
            raise ConfigError(f"tasks must name {n_tasks} tasks, got {len(names)}")
        pairs = [(t, f) for t in names for f in features]
        return tuple(f for _, f in pairs), tuple(t for t, _ in pairs)
    return tuple(features) + (("intercept",) if fit.model.fit_intercept else ()), None


def _seed(released: Released) -> np.random.Generator:
    # Deterministic in the release: the same statistics always give the same table.
    blocks = [released] if isinstance(released, SufficientStatistics) else list(released)
    h = hashlib.sha256()
    for s in blocks:
        h.update(np.ascontiguousarray(s.gram).tobytes())
        h.update(np.ascontiguousarray(s.moment).tobytes())
    return np.random.default_rng(int.from_bytes(h.digest()[:8], "little"))


def coefficient_table(
    fit: Fit,
    *,
    features: Sequence[str],
    tasks: Sequence[str] | None = None,
    level: float = 0.95,
    replicates: int = DEFAULT_REPLICATES,
    rng: np.random.Generator | None = None,
) -> CoefficientTable:
    """Parametric-bootstrap standard errors and intervals of a fitted model (module doc).

    Args:
        fit: the fit whose coefficients were published; its replicates start from the noisy
            sufficient statistics it released (for a trace regression, one per task).
        features: feature names, in the model's column order.
        tasks: task labels of a trace regression (default ``0 .. T-1``).
        level: nominal coverage.
        replicates: bootstrap replicates ``B``.
        rng: generator for the replicate noise; default seeded from ``released``.

    Returns:
        The table; its ``coefficient`` column is the model's published coefficients.
    """
    if not isinstance(fit, LinearFit | LogisticFit | TraceFit):
        raise ConfigError(f"no coefficient table for {type(fit).__name__}")
    released = fit.released
    if released is None:
        raise ConfigError(
            f"{NO_INTERVALS.removeprefix('none: ')} (use method 'functional' for a coefficient "
            "table with intervals)"
        )
    lvl = check_level(level)
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 2:
        raise ConfigError(f"replicates must be an integer >= 2, got {replicates!r}")
    names, task_names = _labels(fit, features, tasks)
    point = _coefficients(fit)
    if point.shape != (len(names),):
        raise ConfigError(f"features must name the model's {point.size} columns, got {names}")
    gen = _seed(released) if rng is None else rng
    finished: list[FloatArray] = []
    for _ in range(replicates):
        try:
            finished.append(_coefficients(_refit(fit, d=len(features), rng=gen)))
        except SolverError:
            continue  # a simulated replicate, not a release: dropped and counted
    if 2 * len(finished) < replicates or len(finished) < 2:
        raise SolverError(
            f"only {len(finished)} of {replicates} bootstrap replicates could be refitted; "
            "no coefficient table"
        )
    dev = np.stack(finished) - point
    half = np.quantile(np.abs(dev), lvl, axis=0, method="weibull")
    covers, surrogate = _covers(fit)
    return CoefficientTable(
        feature=names,
        coefficient=point,
        std_error=np.sqrt(np.mean(dev * dev, axis=0)),
        ci_low=point - half,
        ci_high=point + half,
        method="parametric bootstrap of the released statistics: symmetric intervals",
        level=lvl,
        replicates=len(finished),
        dropped=replicates - len(finished),
        task=task_names,
        covers=covers,
        surrogate=surrogate,
    )


def _refit(fit: Fit, *, d: int, rng: np.random.Generator) -> Fit:
    """One bootstrap replicate: the fit's own mechanism on the statistics it released."""
    if isinstance(fit, TraceFit):
        return fit.model.fit_statistics(fit.released, d=d, rng=rng)
    if fit.released is None:
        raise ConfigError(NO_INTERVALS)
    return fit.model.fit_statistics(fit.released, d=d, rng=rng)


def point_table(
    fit: Fit,
    *,
    features: Sequence[str],
    tasks: Sequence[str] | None = None,
    method: str = NO_INTERVALS,
) -> CoefficientTable:
    """The published coefficients in the table's layout, without intervals.

    For a model whose released values do not determine its spread (objective perturbation):
    ``std_error``, ``ci_low`` and ``ci_high`` are NaN (empty cells in a CSV), ``method`` says
    why, and the level is None.
    """
    names, task_names = _labels(fit, features, tasks)
    point = _coefficients(fit)
    if point.shape != (len(names),):
        raise ConfigError(f"features must name the model's {point.size} columns, got {names}")
    empty = np.full(point.size, np.nan)
    return CoefficientTable(
        feature=names,
        coefficient=point,
        std_error=empty,
        ci_low=empty.copy(),
        ci_high=empty.copy(),
        method=method,
        level=None,
        replicates=0,
        task=task_names,
    )


def cluster_table(
    centres: npt.ArrayLike,
    sizes: npt.ArrayLike,
    *,
    features: Sequence[str],
    size_scale: float,
    level: float = 0.95,
    reseeded: npt.ArrayLike | None = None,
) -> pd.DataFrame:
    """DP k-means centres and noisy cluster sizes as one table.

    A size is an exact count plus one Laplace draw of scale ``size_scale``, so its standard
    error is ``sqrt(2) b`` and ``size +- b ln(1 / (1 - level))`` covers exactly ``level``;
    the lower end is cut at 0 (a count is non-negative). Centres are ratios of noisy sums to
    noisy counts and carry no interval.

    Args:
        centres: ``k x d`` published centres.
        sizes: the ``k`` noisy counts of the last Lloyd iteration.
        features: the ``d`` feature names.
        size_scale: Laplace scale of the counts.
        level: nominal coverage of the size intervals.
        reseeded: which clusters' centres the last iteration re-drew uniformly at random
            because their noisy size was below 1 (default: none). Such a centre is a random
            point of the domain, not an estimate.

    Returns:
        Columns ``cluster``, one per feature, ``size``, ``size_std_error``, ``size_ci_low``,
        ``size_ci_high``, ``reseeded``.
    """
    c = np.asarray(centres, dtype=np.float64)
    s = np.asarray(sizes, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != len(features) or s.shape != (c.shape[0],):
        raise InputError(
            f"centres must be k x {len(features)} and sizes length k, got {c.shape}, {s.shape}"
        )
    b = check_positive(size_scale, name="size_scale")
    half = laplace_half_width(b, level)
    frame = pd.DataFrame({"cluster": np.arange(c.shape[0])})
    for j, f in enumerate(features):
        frame[f] = c[:, j]
    frame["size"] = s
    frame["size_std_error"] = math.sqrt(2.0) * b
    frame["size_ci_low"] = np.maximum(s - half, 0.0)
    frame["size_ci_high"] = s + half
    flags = np.zeros(len(s), dtype=bool) if reseeded is None else np.asarray(reseeded, dtype=bool)
    if flags.shape != s.shape:
        raise InputError(f"reseeded must have one flag per cluster, got shape {flags.shape}")
    frame["reseeded"] = flags
    return frame
