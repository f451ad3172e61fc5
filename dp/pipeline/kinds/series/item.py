"""A series' config item (one entry of ``series:``): its calendar, budget, keys and figures.

```yaml
series:
  - name: admissions
    period: {column: admitted_on, per: month}  # a declared date column (or ISO text)
    start: 2027-01                             # the horizon's first period
    horizon: 120                               # periods this budget covers
    epsilon: 1.0                               # for the whole horizon (Laplace), or rho + delta
    by: [region]                               # declared category keys
    measures: [count, {sum: cost}]
    publish: [period, running_total, year_to_date, {moving: 12}]
    revisions: false                           # published values never change (default)
```
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dppub.dp.pipeline.config import Delta, Epsilon, Flag, Integer, Model, Name, Rho
from dppub.dp.pipeline.kinds.series.series_calendar import Per, ordinal

__all__ = ["MAX_HORIZON", "MovingModel", "PeriodModel", "SeriesModel", "SumModel"]

MAX_HORIZON = 240
"""The longest horizon (20 years of months): the strategy's matrix is horizon x horizon."""


class PeriodModel(Model):
    """Where a row's period comes from: its date column, by month, quarter or year."""

    column: str = Field(min_length=1)
    per: Per = "month"


class SumModel(Model):
    """``{sum: column}``: the sum of a declared numeric column with bounds ``[lo, hi]``,
    ``lo >= 0``."""

    sum: str = Field(min_length=1)


class MovingModel(Model):
    """``{moving: k}``: the sum of the last ``k`` periods."""

    moving: Integer = Field(ge=2, le=MAX_HORIZON)


Figure = Literal["period", "running_total", "year_to_date"] | MovingModel


class SeriesModel(Model):
    """One series published period by period under one budget for its whole horizon."""

    name: Name
    period: PeriodModel
    start: str = Field(min_length=1)
    """The label of the horizon's first period (``2027-01``, ``2027-Q1``, ``2027``)."""
    horizon: Integer = Field(ge=1, le=MAX_HORIZON)
    epsilon: Epsilon | None = None
    """The whole horizon's pure-DP budget (Laplace noise)."""
    rho: Rho | None = None
    """The whole horizon's zCDP budget (Gaussian noise), charged as ``(epsilon, delta)``."""
    delta: Delta = 0.0
    """With ``rho``: the delta of the ``(epsilon, delta)`` the ledger is charged."""
    by: list[str] = Field(default_factory=list)
    measures: list[Literal["count"] | SumModel] = Field(default=["count"], min_length=1)
    publish: list[Figure] = Field(default=["period"], min_length=1)
    revisions: Flag = False
    max_periods_per_unit: Integer | None = Field(default=None, ge=1, le=MAX_HORIZON)
    """With the dataset's privacy unit: the periods of the horizon one unit appears in (its
    first ones are kept); its ``max_rows_per_unit`` bounds its rows in each period."""

    @model_validator(mode="before")
    @classmethod
    def _start_text(cls, data: Any) -> Any:
        # YAML reads 2027 as a number: a year's label is its digits.
        if isinstance(data, dict) and isinstance(data.get("start"), int):
            return {**data, "start": f"{data['start']:04d}"}
        return data

    @model_validator(mode="after")
    def _checks(self) -> SeriesModel:
        if (self.epsilon is None) == (self.rho is None):
            raise ValueError("give the whole horizon's budget as epsilon or rho (one of them)")
        if self.rho is not None and not self.delta > 0:
            raise ValueError("a rho budget needs delta > 0, to charge it as (epsilon, delta)")
        if self.epsilon is not None and self.delta > 0:
            raise ValueError("delta is spent only by Gaussian noise: give rho with delta")
        ordinal(self.start, self.period.per)  # raises with the expected form
        if len(set(self.by)) != len(self.by):
            raise ValueError(f"by names a column twice: {self.by}")
        if len({repr(m) for m in self.measures}) != len(self.measures):
            raise ValueError("measures lists one measure twice")
        if len({repr(f) for f in self.publish}) != len(self.publish):
            raise ValueError("publish lists one figure twice")
        for figure in self.publish:
            if isinstance(figure, MovingModel) and figure.moving > self.horizon:
                raise ValueError(
                    f"moving: {figure.moving} is longer than the horizon {self.horizon}"
                )
        return self

    @property
    def noise(self) -> Literal["gaussian", "laplace"]:
        return "laplace" if self.epsilon is not None else "gaussian"

    @property
    def budget(self) -> float:
        """The whole horizon's epsilon (Laplace) or rho (Gaussian)."""
        return float(self.epsilon if self.epsilon is not None else self.rho or 0.0)
