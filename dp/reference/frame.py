"""A whole private table in one pandas frame, for tests and benchmarks (a release streams).

:func:`read_table` reads through the streaming validator (:mod:`dp.engine.batches`), so it sees
exactly the values, and applies exactly the policies, of every engine; the engines' results must
equal the in-memory computations on its frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dppub.dp.engine.batches import batch_frame, iter_batches, open_scan
from dppub.dp.io import empty_frame
from dppub.dp.schema import TableSchema

__all__ = ["ReadResult", "complete_rows", "read_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    """A validated private table. Never persist or log :attr:`clamped`: it is exact."""

    frame: pd.DataFrame
    clamped: dict[str, int] = field(default_factory=dict, repr=False)


def read_table(
    path: str | Path,
    schema: TableSchema,
    *,
    columns: Sequence[str] | None = None,
    complete: bool = True,
) -> ReadResult:
    """Read ``columns`` (default: all declared) of a Parquet file or folder into one frame,
    through the streaming validator (so with exactly its values and policies).

    With ``complete`` (default) rows with a value the ``drop`` policy rejects are left out;
    otherwise such a value is NA, for a frame several releases share: each then takes its own
    complete rows with :func:`complete_rows`, exactly the rows a streamed scan of its columns
    keeps.

    Raises:
        InputError: a structural problem (see :func:`dp.io.check_source`) or an unreadable file.
    """
    wanted = list(columns) if columns is not None else list(schema.names)
    scan = open_scan(path, schema, wanted)
    frames: list[pd.DataFrame] = []
    clamped = dict.fromkeys((s.name for s in scan.specs if s.is_numeric), 0)
    for fragment in scan.fragments:
        for marked in iter_batches(scan, fragment):
            batch = marked.complete(wanted) if complete else marked
            frames.append(batch_frame(batch, scan.specs))
            for name, n in batch.clamped.items():
                clamped[name] += n
    kept = [f for f in frames if len(f)]
    frame = pd.concat(kept, ignore_index=True) if kept else empty_frame(scan.specs)
    return ReadResult(frame=frame, clamped=clamped)


def complete_rows(frame: pd.DataFrame, schema: TableSchema, columns: Sequence[str]) -> pd.DataFrame:
    """The rows of a shared frame (``read_table(..., complete=False)``) whose ``columns`` are
    all present, with the dtypes of a complete read (``int`` columns back to int64)."""
    cols = list(dict.fromkeys(columns))
    part = frame[cols].dropna().reset_index(drop=True)
    for c in cols:
        if schema[c].type == "int" and part[c].dtype != np.int64:
            part[c] = part[c].astype(np.int64)
    return part
