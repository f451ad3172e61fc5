"""One DP-Lloyd iteration's exact aggregates, folded batch by batch.

:class:`LloydAggregate` computes, for fixed centres, the per-cluster counts and coordinate sums
of the rows clipped into the declared domain and shifted by its midpoint: each batch goes through
the very :func:`dp.kmeans.lloyd_partial` of the in-memory fit, and the per-batch integer sums
are added, then rounded once by :func:`dp.kmeans.lloyd_finish`: the result is bit for bit
the whole-table computation, whatever the batches. :meth:`dp.kmeans.KMeans.fit_steps` calls
:func:`lloyd_statistics_stream` once per iteration and adds the noise to the combined result,
once. When the run's shared scan could hold the features' weighted distinct rows
(:class:`~dp.engine.lloyd_cache.Projection`), :func:`projected_lloyd_step` computes the very
same integers from them instead, without reading the source again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.engine.aggregate import Backend, StreamingBackend
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch
from dppub.dp.engine.lloyd_cache import Projection
from dppub.dp.errors import ConfigError
from dppub.dp.kmeans import lloyd_finish, lloyd_partial
from dppub.dp.numerics.domains import FeatureDomain
from dppub.dp.numerics.fixedpoint import IntArray, int_zeros
from dppub.dp.schema import TableSchema

__all__ = ["LloydAggregate", "lloyd_statistics_stream", "projected_lloyd_step"]

FloatArray = npt.NDArray[np.float64]
_Acc = tuple[IntArray, IntArray]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LloydAggregate:
    """Per-cluster ``(counts, sums)`` of the clipped, centred rows for fixed ``centres``."""

    features: tuple[str, ...]
    """Numeric feature columns, in model order."""
    domain: FeatureDomain
    """The declared domain (rows are clipped into it, then shifted by its midpoint)."""
    centres: FloatArray
    """``(k, d)`` current centres, in the centred frame."""

    def __post_init__(self) -> None:
        if not self.features or self.centres.shape[1:] != (len(self.features),):
            raise ConfigError("give one centre coordinate per feature (at least one feature)")
        if self.domain.dim != len(self.features):
            raise ConfigError(f"{len(self.features)} features but a {self.domain.dim}-d domain")

    @property
    def columns(self) -> tuple[str, ...]:
        """The feature columns."""
        return tuple(dict.fromkeys(self.features))

    def empty(self) -> _Acc:
        """Zero counts and sums."""
        return int_zeros(len(self.centres)), int_zeros(self.centres.shape)

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        """Add one batch's integer counts and sums."""
        if batch.num_rows == 0:
            return acc
        rows = _centred_rows(self.features, self.domain, batch.numeric)
        counts, sums = lloyd_partial(rows, self._centred, self.centres)
        return self.merge(acc, (counts, sums))

    @property
    def _centred(self) -> FeatureDomain:
        return self.domain.translated(self.domain.midpoint())

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        """``left + right``, exactly (any order gives the same integers)."""
        return (
            np.asarray(left[0] + right[0], dtype=object),
            np.asarray(left[1] + right[1], dtype=object),
        )

    def finish(self, acc: _Acc) -> tuple[FloatArray, FloatArray]:
        """The exact ``(counts, sums)``, each rounded once to float64.

        Raises:
            InputError: more than :data:`dp.numerics.fixedpoint.MAX_ROWS` rows.
        """
        return lloyd_finish(acc[0], acc[1], self._centred)


def lloyd_statistics_stream(
    source: str | Path,
    schema: TableSchema,
    *,
    features: Sequence[str],
    domain: FeatureDomain,
    centres: FloatArray,
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Exact per-cluster counts and sums of a Parquet file or folder (a :data:`dp.kmeans.Step`).

    Raises:
        ConfigError: a feature is not numeric.
        InputError: as :func:`dp.reference.frame.read_table` would.
    """
    for name in features:
        if not schema[name].is_numeric:
            raise ConfigError(f"column {name!r} must be numeric (int or float) for k-means")
    agg = LloydAggregate(
        features=tuple(features), domain=domain, centres=np.asarray(centres, dtype=np.float64)
    )
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    result: tuple[FloatArray, FloatArray] = runner.run(agg, source, schema)
    return result


def _centred_rows(
    features: Sequence[str], domain: FeatureDomain, numeric: Mapping[str, Any]
) -> FloatArray:
    """The feature rows clipped into the declared domain, shifted by its midpoint."""
    X = np.column_stack([numeric[f].astype(np.float64) for f in features])
    return domain.clip(X) - domain.midpoint()


def projected_lloyd_step(
    projection: Projection, *, features: Sequence[str], domain: FeatureDomain
) -> Callable[[FloatArray], tuple[FloatArray, FloatArray]]:
    """A :data:`dp.kmeans.Step` over ``projection`` (the weighted distinct rows of
    ``features``): for any centres, the exact counts and sums :func:`lloyd_statistics_stream`
    gives on the source, bit for bit, without reading it."""
    if domain.dim != len(features):
        raise ConfigError(f"{len(features)} features but a {domain.dim}-d domain")
    rows = _centred_rows(features, domain, projection.values)  # clipped once for every step
    centred = domain.translated(domain.midpoint())

    def step(centres: FloatArray) -> tuple[FloatArray, FloatArray]:
        counts, sums = lloyd_partial(rows, centred, centres, projection.weights)
        return lloyd_finish(counts, sums, centred)

    return step
