"""A series released one period at a time: its noise, what it has cost so far, its figures.

**Calibration.** The config declares the whole horizon's budget: ``rho`` (zCDP, Gaussian noise)
or ``epsilon`` (pure, Laplace noise). With ``Delta`` the strategy's certified sensitivity over the
whole horizon under the neighbour relation (:func:`certified`), every measurement gets noise of
standard deviation ``sigma = Delta / sqrt(2 rho)`` (Gaussian) or scale ``b = Delta / epsilon``
(Laplace), the same in every period, from the vetted samplers of :mod:`dp.mechanisms`.

**Honest cost, period by period.** By the end of period ``t`` the rows measured are ``A_t``, the
first ``measured_by(t)`` rows of ``A``; everything published by then is post-processing of
``A_t x + z``: one Gaussian (Laplace) mechanism of sensitivity ``Delta_t = Delta(A_t) <= Delta``
(its rows are a subset of ``A``'s, so ``Delta_t`` never decreases with ``t``). Its loss is
``rho_t = Delta_t^2 / (2 sigma^2) = rho (Delta_t / Delta)^2`` (``epsilon_t = epsilon Delta_t /
Delta``): :meth:`SeriesRelease.loss`. A run publishing period ``t``, the last published being
``s``, charges :meth:`SeriesRelease.charge` ``= loss(t) - loss(s)``: after every run the ledger
holds exactly the loss of what has been published (a skipped period costs its run nothing
extra: ``loss`` depends on the last period measured only), and the horizon's runs add up to the
declared budget. For an (epsilon, delta) ledger the cumulative ``rho_t`` converts to
``cdp_epsilon(rho_t, delta)`` (increasing in ``rho``), so the increments telescope to it too.

**The measured values.** A row's answer ``A_r x`` is computed correctly rounded from its exact
value (:func:`dp.matrix.exact.exact_rows`, as the matrix mechanism's), so two neighbours' answers
differ by at most their exact difference plus one rounding, which :func:`certified` adds.

**Figures.** Without revisions a period's value is :func:`dp.series.estimate.next_value` and its
figures (running total, year to date, moving sums) are the workload's rows applied to the values
published so far; with revisions every period's value so far is the least-squares estimate from
every measurement so far (:func:`dp.series.estimate.revised_estimate`). Each figure is a linear
map ``k_f`` of the measurements, unbiased, with standard error ``s ||k_f||`` (``s``: the noise's
standard deviation) and a 95% interval of ``1.96`` (Gaussian: exact for the normal sum) or the
Laplace-safe multiplier (:func:`dp.matrix.least_squares_intervals.laplace_multiplier`)
standard errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.matrix.exact import exact_rows
from dppub.dp.matrix.least_squares_intervals import laplace_multiplier
from dppub.dp.mechanisms import gaussian, laplace
from dppub.dp.numerics.fixedpoint import float_allowance
from dppub.dp.series.estimate import (
    causal_estimates,
    next_value,
    period_of,
    revised_estimate,
)
from dppub.dp.series.expected_error import Noise, noise_norm
from dppub.dp.series.strategies import CausalStrategy
from dppub.dp.series.unit_sensitivity import Relation, declared
from dppub.dp.series.workloads import FloatArray, SeriesWorkload

__all__ = ["Figures", "SeriesRelease", "certified"]

_Z95 = 1.959963984540054


def certified(matrix: FloatArray, relation: Relation, noise: Noise) -> float:
    """The sensitivity the noise is sized for: the relation's declared bound on the float
    matrix (:func:`dp.series.unit_sensitivity.declared`), raised by the relative error of its own
    float evaluation (``2 (T + 2) 2^-53``), plus one rounding's allowance per unit row on
    the largest column L1 norm times the unit's rows (the correctly rounded answers)."""
    bound = declared(matrix, relation, noise_norm(noise))
    slack = 1.0 + 2.0 * (matrix.shape[1] + 2.0) * 2.0**-53
    l1 = float(np.max(np.sum(np.abs(matrix), axis=0), initial=0.0))
    rows = relation.max_rows_per_unit * relation.max_periods_per_unit
    allowance = float(np.nextafter(l1 * rows * float_allowance(1), math.inf))
    return float(np.nextafter(bound * slack + allowance, math.inf))


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """The figures a run publishes, one row per figure and one column per series (group)."""

    figure: npt.NDArray[np.int64]
    """Each figure's row of the workload."""
    values: FloatArray
    std_error: FloatArray
    """One per figure (the same for every series)."""
    ci_low: FloatArray
    ci_high: FloatArray


@dataclass(frozen=True, kw_only=True)
class SeriesRelease:
    """One series' mechanism over its horizon, from public values only (module doc)."""

    strategy: CausalStrategy
    workload: SeriesWorkload
    relation: Relation
    noise: Noise
    budget: float
    """The whole horizon's ``rho`` (Gaussian) or ``epsilon`` (Laplace)."""
    revisions: bool = False
    _losses: FloatArray = field(init=False, repr=False, compare=False)
    _maps: dict[tuple[int, bool], FloatArray] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if not (self.budget > 0.0 and math.isfinite(self.budget)):
            raise ConfigError(f"a series' budget must be positive and finite, got {self.budget}")
        if self.workload.horizon != self.strategy.horizon:
            raise ConfigError(
                f"workload horizon {self.workload.horizon} is not {self.strategy.horizon}"
            )
        whole = self.sensitivity
        losses = [
            certified(
                self.strategy.matrix[: self.strategy.measured_by(t)], self.relation, self.noise
            )
            for t in range(self.strategy.horizon)
        ]
        ratio = np.minimum(np.asarray(losses) / whole, 1.0)
        power = 2.0 if self.noise == "gaussian" else 1.0
        object.__setattr__(self, "_losses", self.budget * ratio**power)

    @cached_property
    def sensitivity(self) -> float:
        """The certified sensitivity over the whole horizon."""
        return certified(self.strategy.matrix, self.relation, self.noise)

    @property
    def std(self) -> float:
        """The noise's standard deviation per measurement."""
        if self.noise == "gaussian":
            return self.sensitivity / math.sqrt(2.0 * self.budget)
        return math.sqrt(2.0) * self.sensitivity / self.budget

    def loss(self, period: int | None) -> float:
        """``rho_t`` or ``epsilon_t``: the loss of everything measured by the end of ``period``
        (``None``: nothing yet, 0)."""
        if period is None:
            return 0.0
        return float(self._losses[self._check(period)])

    def charge(self, period: int, after: int | None) -> float:
        """What the run publishing ``period`` charges when ``after`` was the last published."""
        if after is not None and after >= period:
            raise InputError(f"period {period} is not after period {after}: published once only")
        return max(self.loss(period) - self.loss(after), 0.0)

    def rows(self, period: int, after: int | None) -> slice:
        """The strategy's rows measured by the run publishing ``period`` after ``after``."""
        start = 0 if after is None else self.strategy.measured_by(after)
        return slice(start, self.strategy.measured_by(self._check(period)))

    def measure(
        self,
        period: int,
        after: int | None,
        exact: npt.ArrayLike,
        *,
        rng: np.random.Generator | None = None,
    ) -> FloatArray:
        """The noisy rows of :meth:`rows`, from the exact values of periods ``0..period``
        (``(period + 1) x series``; only the rows' periods are read) -- the only values a run
        stores between periods."""
        x = np.asarray(exact, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] != period + 1:
            raise InputError(f"period {period} needs {period + 1} periods' values, got {x.shape}")
        a = self.strategy.matrix[self.rows(period, after), : period + 1]
        answers = np.column_stack([exact_rows(a, x[:, j]) for j in range(x.shape[1])])
        if self.noise == "gaussian":
            return gaussian(answers, l2_sensitivity=self.sensitivity, rho=self.budget, rng=rng)
        return laplace(answers, sensitivity=self.sensitivity, epsilon=self.budget, rng=rng)

    def figures(
        self, measurements: npt.ArrayLike, published: npt.ArrayLike
    ) -> tuple[Figures, FloatArray]:
        """The figures due at the period the ``measurements`` (every row measured so far,
        ``rows x series``) end, and the period values published from now on: without
        revisions the past values ``published`` (``periods x series``) and the new one; with
        revisions every period's revised estimate (``published`` is not read)."""
        y = np.asarray(measurements, dtype=np.float64)
        past = np.asarray(published, dtype=np.float64).reshape(-1, y.shape[1])
        period = past.shape[0] if not self.revisions else period_of(self.strategy, y.shape[0])
        if self.revisions:
            values = revised_estimate(self.strategy, y)
            due = np.flatnonzero(self.workload.periods <= period)
        else:
            new = next_value(self.strategy, self.workload, y, past)
            values = np.vstack([past, np.atleast_1d(new)[None, :]])
            due = np.flatnonzero(self.workload.periods == period)
        maps = self._estimate_maps(period)
        w = self.workload.matrix[due, : period + 1]
        k = w @ maps
        se = self.std * np.sqrt(np.sum(k * k, axis=1))
        estimate = w @ values
        half = (_Z95 if self.noise == "gaussian" else float(laplace_multiplier(0.95))) * se
        return (
            Figures(
                figure=due,
                values=estimate,
                std_error=se,
                ci_low=estimate - half[:, None],
                ci_high=estimate + half[:, None],
            ),
            values,
        )

    def _estimate_maps(self, period: int) -> FloatArray:
        """Each period value's linear map of the measurements by ``period`` (as published
        without revisions, or revised), computed once per period (public values only)."""
        key = (period, self.revisions)
        if key not in self._maps:
            identity = np.eye(self.strategy.measured_by(period))
            self._maps[key] = (
                revised_estimate(self.strategy, identity)
                if self.revisions
                else causal_estimates(self.strategy, self.workload, identity)
            )
        return self._maps[key]

    def _check(self, period: int) -> int:
        if not 0 <= period < self.strategy.horizon:
            raise InputError(f"period {period} is outside the horizon {self.strategy.horizon}")
        return period
