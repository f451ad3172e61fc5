"""A private table as a stage sees it: a Parquet source, its declared schema and its engine.

Every engine is a :class:`~dp.engine.aggregate.Backend` behind a :class:`TableSource`: the
in-memory one (:mod:`dp.engine.memory`), the streaming one (record batches: memory bounded by
the domain, not by the row count) and Dask (one task per Parquet file). A stage asks the source
for its exact aggregates and never knows which engine computes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dppub.dp.engine.aggregate import Backend
from dppub.dp.schema import TableSchema

__all__ = ["TableSource"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSource:
    """A Parquet file or folder with its declared schema and the engine that scans it."""

    path: Path
    schema: TableSchema
    backend: Backend
