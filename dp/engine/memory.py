"""The in-memory engine: the run's columns read once, validated, and kept as batches.

One more :class:`~dp.engine.aggregate.Backend`: every release asks for its aggregates the same
way, and this backend folds them over batches held in memory instead of re-reading Parquet --
which also makes iterative stages (a DP Lloyd iteration, a Newton step) cheap. The batches are
the streaming validator's (:func:`~dp.engine.batches.iter_batches`: the same policies, the same
marks), folded fragment by fragment in the same order, so every exact aggregate is the one the
streaming engine computes, bit for bit.

Memory: the validated columns of every row (numbers as 8-byte arrays, text dictionary-encoded);
:func:`estimate_bytes` gives the figure the ``auto`` engine compares with its budget.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pyarrow.dataset as pads

from dppub.dp.engine.aggregate import Aggregate, Progress, fold_batches, fold_fragments
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, iter_batches, open_scan
from dppub.dp.errors import InvariantError
from dppub.dp.io import csv_header, fragments
from dppub.dp.schema import TableSchema

__all__ = ["MemoryBackend", "estimate_bytes"]

P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MemoryBackend:
    """Validated batches of one source's columns, per fragment, held in memory."""

    source: Path
    """The file or folder read."""
    columns: tuple[str, ...]
    """The columns held (every column the run reads)."""
    fragments: tuple[tuple[Batch, ...], ...]
    """Marked batches, per fragment, in scan order."""
    workers: int = 1
    """Fragments folded at once, one thread each; the result does not depend on it."""
    progress: Progress | None = field(default=None, compare=False, repr=False)
    """Told how many files each pass has merged (for a log line; no data)."""

    @classmethod
    def load(
        cls,
        source: str | Path,
        schema: TableSchema,
        columns: Sequence[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        workers: int = 1,
    ) -> MemoryBackend:
        """Read and validate ``columns`` of ``source`` once."""
        scan = open_scan(source, schema, columns, batch_size=batch_size)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dppub-load") as pool:
            held = tuple(pool.map(lambda f: tuple(iter_batches(scan, f)), scan.fragments))
        return cls(
            source=Path(source), columns=tuple(scan.columns), fragments=held, workers=workers
        )

    def _check(self, source: str | Path, columns: Sequence[str]) -> None:
        if Path(source) != self.source or not set(columns) <= set(self.columns):
            raise InvariantError(
                f"the in-memory table holds {list(self.columns)} of {self.source}, "
                f"asked for {list(columns)} of {source}"
            )

    def run(self, aggregate: Aggregate[P, R], source: str | Path, schema: TableSchema) -> R:
        """Fold ``aggregate`` over the held batches, fragment by fragment, merged in order."""
        self._check(source, aggregate.columns)

        def partial(batches: tuple[Batch, ...], stop: threading.Event) -> P:
            return fold_batches(aggregate, batches, stop)

        return fold_fragments(aggregate, self.fragments, partial, self.workers, self.progress)

    def batches(
        self, source: str | Path, schema: TableSchema, columns: Sequence[str]
    ) -> Iterator[Batch]:
        """The held batches, in order (marked; callers complete their own rows)."""
        self._check(source, columns)
        for batches in self.fragments:
            yield from batches


def estimate_bytes(source: str | Path, columns: Sequence[str]) -> int:
    """What holding ``columns`` of ``source`` in memory costs, from the Parquet footers only:
    8 bytes per number, and each text column's uncompressed size (an upper bound for its
    dictionary-encoded form); for a CSV file, its size and 8 bytes per column of each row its
    size allows (:func:`dp.io.check_source`'s bound). Reads no value."""
    total = 0
    for fragment in fragments(source):
        if isinstance(fragment.format, pads.CsvFileFormat):
            where = Path(fragment.path)
            size = where.stat().st_size
            total += size + 8 * len(columns) * ((size + 1) // max(len(csv_header(where)), 1))
            continue
        meta = fragment.metadata
        names = [meta.schema.column(i).path for i in range(meta.num_columns)]  # leaf columns
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in columns:
                if c not in names:
                    continue
                chunk = group.column(names.index(c))
                numeric = chunk.physical_type in ("INT32", "INT64", "FLOAT", "DOUBLE")
                total += 8 * group.num_rows if numeric else chunk.total_uncompressed_size
    return total
