"""Synthetic data's config item (one entry of ``synthetic:``), and the share of rho its
noisy row count takes.
"""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import Cost, Integer, Model, Name, Number
from dppub.dp.pipeline.limits import MAX_SYNTHETIC_VALUES

MAX_SYNTHETIC_COLUMNS = 52


DEFAULT_MAX_ROWS = 1_000_000
"""The most rows a synthetic table publishes from its noisy count unless ``max_rows`` says."""


COUNT_SHARES = (0.01, 0.1)
"""The noisy row count's share of rho: at least 1%, at most 10% (:func:`count_share`)."""


COUNT_ERROR = 0.01
"""The noisy row count's standard deviation is held to 1% of ``max_rows``."""


def count_share(rho: float, sensitivity: float, max_rows: int, where: str) -> float:
    """The noisy row count's share of rho: the smallest in :data:`COUNT_SHARES` at which its
    standard deviation ``m / sqrt(2 share rho)`` is at most :data:`COUNT_ERROR` of
    ``max_rows`` (the declared scale of the data), so the count's error is small against a
    table of that size; a one-line error if 10% is not enough (give ``rows``, public, or a
    larger epsilon). Public values only.

    >>> count_share(0.015, 1.0, 1_000_000, "s")
    0.01
    """
    low, high = COUNT_SHARES
    sigma = COUNT_ERROR * max_rows
    need = (sensitivity / sigma) ** 2 / (2.0 * rho)  # m / sqrt(2 share rho) = sigma
    if need > high:
        worst = sensitivity / math.sqrt(2.0 * high * rho)
        raise ConfigError(
            f"{where}: at rho {rho:.3g} the noisy row count's standard deviation would be "
            f"{worst:.3g} rows with {high:.0%} of the budget, more than {COUNT_ERROR:.0%} of "
            f"max_rows {max_rows:,}; give rows: (public), a larger max_rows or a larger epsilon"
        )
    return max(low, need)


class MarginalsWorkload(Model):
    """All ``k``-way marginals of the declared columns."""

    marginals: Integer = Field(ge=1)


class SyntheticModel(Cost):
    name: Name
    columns: list[str] = Field(min_length=1, max_length=MAX_SYNTHETIC_COLUMNS)
    bins: dict[str, Integer] = Field(default_factory=dict)
    """Equal-width bins of a numeric column over its declared bounds."""
    levels: dict[str, Integer] = Field(default_factory=dict)
    """A hierarchy level of a column, fixed here (never chosen from the data)."""
    workload: MarginalsWorkload | list[list[str]] = Field(
        default_factory=lambda: MarginalsWorkload(marginals=2)
    )
    """What the table must preserve: all k-way marginals, or a list of column sets."""
    rows: Integer | None = Field(default=None, ge=1, le=MAX_SYNTHETIC_VALUES)
    """Rows to publish (public); default: a noisy count paid from the release's budget."""
    max_rows: Integer | None = Field(default=None, ge=1, le=MAX_SYNTHETIC_VALUES)
    """With the noisy count: the most rows published (the count is clamped to it), and the
    scale its noise is held small against (:func:`count_share`). Default
    :data:`DEFAULT_MAX_ROWS`."""
    max_model_size: Number = Field(default=80.0, gt=0.0, le=4096.0)
    """The model's size limit in MB: bounds a run's memory and time."""
    max_rounds: Integer | None = Field(default=None, ge=1, le=10_000)
    """A cap on AIM's rounds (the last spends what is left); default AIM's own end."""
    planned_rounds: Integer | None = Field(default=None, ge=1, le=10_000)
    """AIM's ``T``: the first rounds spend ``rho / T`` each (until annealing raises it); at
    least the number of columns. Default: ``4 d`` (the paper's ``16 d`` takes more rounds for
    the same error)."""
    iters: Integer = Field(default=1000, ge=1, le=100_000)
    """Private-PGM's iterations per fit."""

    @model_validator(mode="after")
    def _delta(self) -> SyntheticModel:
        if not self.delta > 0.0:
            raise ValueError("synthetic data is accounted in zCDP: it needs delta > 0")
        if self.rows is not None and self.max_rows is not None:
            raise ValueError("max_rows bounds the noisy row count: give rows or max_rows")
        return self
