"""A private table as a stage sees it: a Parquet source, its declared schema and its engine.

Every engine is a :class:`~dp.engine.aggregate.Backend` behind a :class:`TableSource`: the
in-memory one (:mod:`dp.engine.memory`), the streaming one (record batches: memory bounded by
the domain, not by the row count) and Dask (one task per Parquet file). A stage asks the source
for its exact aggregates and never knows which engine computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from dp.engine.aggregate import Backend, StreamingBackend
from dp.engine.batches import DEFAULT_BATCH_SIZE
from dp.engine.dask import DaskBackend
from dp.engine.histogram import histogram_stream
from dp.histogram import Axis, histogram
from dp.schema import TableSchema

__all__ = ["EngineName", "TableSource", "exact_histogram", "make_backend"]

EngineName = Literal["pandas", "stream", "dask"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSource:
    """A Parquet file or folder with its declared schema and the engine that scans it."""

    path: Path
    schema: TableSchema
    backend: Backend


def make_backend(
    engine: EngineName, *, scheduler: str | None = None, batch_size: int | None = None
) -> Backend:
    """The backend of a streaming engine (``stream`` or ``dask``)."""
    size = batch_size or DEFAULT_BATCH_SIZE
    if engine == "dask":
        return DaskBackend(batch_size=size, address=scheduler)
    return StreamingBackend(batch_size=size)


def exact_histogram(
    data: pd.DataFrame | TableSource, axes: Sequence[Axis]
) -> npt.NDArray[np.float64]:
    """Exact counts over the declared domain of ``axes``, from a frame or through an engine."""
    if isinstance(data, TableSource):
        return histogram_stream(data.path, data.schema, axes, backend=data.backend)
    return histogram(data, axes)
