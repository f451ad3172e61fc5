"""Many marginals of one declared domain, counted in one pass (DP synthetic data's candidates).

Each axis's codes are computed once per batch (:func:`dp.engine.folds.histogram_counts.axis_codes`,
the histogram's own path), then every marginal -- a tuple of axis positions -- is one
``bincount``. Counts are int64 until :meth:`MarginalsAggregate.finish`, so the result is
bit-identical to one :class:`~dp.engine.folds.histogram_counts.HistogramAggregate` per marginal,
whatever the engine or batching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.axes import Axis
from dppub.dp.engine.batches import Batch
from dppub.dp.engine.folds.histogram_counts import axis_codes
from dppub.dp.errors import ConfigError

__all__ = ["MarginalsAggregate"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class MarginalsAggregate:
    """Counts of each marginal (axis positions into ``axes``), flattened in C order."""

    axes: tuple[Axis, ...]
    marginals: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if not self.marginals or any(
            not m or not all(0 <= i < len(self.axes) for i in m) for m in self.marginals
        ):
            raise ConfigError("marginals need at least one axis each, among the declared axes")

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.column for a in self.axes))

    def _shape(self, marginal: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.axes[i].size for i in marginal)

    def empty(self) -> list[IntArray]:
        return [np.zeros(math.prod(self._shape(m)), dtype=np.int64) for m in self.marginals]

    def update(self, acc: list[IntArray], batch: Batch) -> list[IntArray]:
        if batch.num_rows == 0:
            return acc
        used = sorted({i for m in self.marginals for i in m})
        codes = {i: axis_codes(self.axes[i], batch) for i in used}
        for counts, m in zip(acc, self.marginals, strict=True):
            flat = np.ravel_multi_index([codes[i] for i in m], self._shape(m))
            counts += np.bincount(flat, minlength=len(counts))
        return acc

    def merge(self, left: list[IntArray], right: list[IntArray]) -> list[IntArray]:
        for a, b in zip(left, right, strict=True):
            a += b
        return left

    def finish(self, acc: list[IntArray]) -> tuple[FloatArray, ...]:
        return tuple(a.astype(np.float64) for a in acc)
