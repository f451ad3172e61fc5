"""Workloads over time: the figures a series publishes, one row per figure over ``T`` periods.

A series over a horizon of ``T`` periods holds one value per period, ``x = (x_0, ..., x_{T-1})``.
Each published figure is a linear query ``w_f . x`` that depends only on periods up to the one in
which it is published, its *period* (the last period with a non-zero coefficient): the workload
is causal, i.e. lower-triangular when it has one figure per period (Dwork, Naor, Pitassi &
Rothblum, STOC 2010, "continual observation"; Chan, Shi & Song, TISSEC 2011). A running total is
the prefix workload of the matrix mechanism (Li et al., VLDB J. 2015) applied over time.

Moving sums publish a figure from the first period on (the sum over the periods so far until
``width`` of them are available), so every workload here is invertible: one figure per period
with a unit coefficient on its own period.

>>> running_total(3).matrix
array([[1., 0., 0.],
       [1., 1., 0.],
       [1., 1., 1.]])
>>> stack(per_period(2), running_total(2)).blocks
(('per_period', 2), ('running_total', 2))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.workload import check_size

__all__ = [
    "SeriesWorkload",
    "moving_sum",
    "per_period",
    "running_total",
    "stack",
    "year_to_date",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def last_nonzero(matrix: FloatArray) -> IntArray:
    """The last column with a non-zero entry of every row (the period a row can be released)."""
    nonzero = matrix != 0.0
    if not np.all(nonzero.any(axis=1)):
        raise ConfigError("every row of a series matrix needs a non-zero coefficient")
    return np.asarray(matrix.shape[1] - 1 - np.argmax(nonzero[:, ::-1], axis=1), dtype=np.int64)


def frozen(matrix: npt.ArrayLike, *, what: str) -> FloatArray:
    """A finite 2-D float copy of ``matrix`` that cannot be written (frozen values stay frozen)."""
    arr = np.array(matrix, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{what} must be a finite non-empty 2-D matrix, got shape {arr.shape}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesWorkload:
    """The figures of a series: ``matrix`` (figures x periods), grouped into named blocks."""

    matrix: FloatArray
    """``m x T``: row ``f`` is figure ``f``'s coefficients on the periods' values."""
    blocks: tuple[tuple[str, int], ...]
    """``(name, rows)`` of each block of figures, in row order (``running_total``...)."""
    periods: IntArray = field(init=False, repr=False)
    """The period each figure is published in: its last non-zero coefficient."""

    def __post_init__(self) -> None:
        matrix = frozen(self.matrix, what="a series workload")
        object.__setattr__(self, "matrix", matrix)
        if sum(rows for _, rows in self.blocks) != matrix.shape[0]:
            raise ConfigError(f"blocks {self.blocks} do not add up to {matrix.shape[0]} figures")
        periods = last_nonzero(matrix)
        periods.setflags(write=False)
        object.__setattr__(self, "periods", periods)

    @property
    def horizon(self) -> int:
        """``T``, the number of periods."""
        return int(self.matrix.shape[1])

    @property
    def name(self) -> str:
        """The blocks' names joined with ``+`` (``per_period+running_total``)."""
        return "+".join(name for name, _ in self.blocks)

    def block(self, name: str) -> slice:
        """The rows of the block called ``name``."""
        start = 0
        for block_name, rows in self.blocks:
            if block_name == name:
                return slice(start, start + rows)
            start += rows
        raise ConfigError(f"workload {self.name} has no block {name!r}")


def _one(name: str, matrix: FloatArray) -> SeriesWorkload:
    return SeriesWorkload(matrix=matrix, blocks=((name, int(matrix.shape[0])),))


def per_period(horizon: int) -> SeriesWorkload:
    """Each period's own value (the identity workload)."""
    return _one("per_period", np.eye(check_size(horizon, name="horizon")))


def running_total(horizon: int) -> SeriesWorkload:
    """The running total ``x_0 + ... + x_t`` of every period (the prefix workload)."""
    return _one("running_total", np.tril(np.ones((check_size(horizon, name="horizon"),) * 2)))


def year_to_date(horizon: int, year: int = 12) -> SeriesWorkload:
    """The total since the start of the period's year: a running total reset every ``year``
    periods (period 0 starts a year)."""
    t = np.arange(check_size(horizon, name="horizon"))
    same_year = (t[:, None] // check_size(year, name="year")) == (t[None, :] // year)
    return _one(f"year_to_date_{year}", np.tril(same_year.astype(np.float64)))


def moving_sum(horizon: int, width: int) -> SeriesWorkload:
    """The sum of the last ``width`` periods (fewer in the first ``width - 1`` periods)."""
    t = np.arange(check_size(horizon, name="horizon"))
    lag = t[:, None] - t[None, :]
    window = (lag >= 0) & (lag < check_size(width, name="width"))
    return _one(f"moving_sum_{width}", window.astype(np.float64))


def stack(*workloads: SeriesWorkload) -> SeriesWorkload:
    """The figures of several workloads over the same horizon, published together."""
    if not workloads or len({w.horizon for w in workloads}) != 1:
        raise ConfigError("stack needs one or more workloads over the same horizon")
    return SeriesWorkload(
        matrix=np.vstack([w.matrix for w in workloads]),
        blocks=tuple(block for w in workloads for block in w.blocks),
    )
