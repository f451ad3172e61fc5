"""Read and check every value a publication will read, batch by batch, releasing nothing.

The streaming counterpart of reading the declared columns into a frame and encoding them: each
batch is validated as the engine always does (missing values, NaN, undeclared categories), and its
quasi-identifiers and workload axes are encoded by the very functions the releases use, so a bad
value fails here -- before any budget is reserved -- with the message a release would give.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dp.anonymity.hierarchy import Hierarchy
from dp.engine.aggregate import Backend, StreamingBackend
from dp.engine.batches import DEFAULT_BATCH_SIZE, Batch
from dp.engine.classes import batch_leaf_codes
from dp.engine.histogram import axis_codes
from dp.histogram import Axis
from dp.schema import TableSchema

__all__ = ["CheckAggregate", "validate_stream"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CheckAggregate:
    """Counts rows (exact: never publish) after encoding every QI and axis of each batch."""

    read: tuple[str, ...]
    """Every column to read and validate."""
    hierarchies: tuple[tuple[str, Hierarchy], ...] = ()
    """``(column, hierarchy)`` pairs whose values must be leaves."""
    axes: tuple[Axis, ...] = ()
    """Declared histogram axes whose domain every value must fall in."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns read (each once)."""
        used = (*self.read, *(c for c, _ in self.hierarchies), *(a.column for a in self.axes))
        return tuple(dict.fromkeys(used))

    def empty(self) -> int:
        """No rows."""
        return 0

    def update(self, acc: int, batch: Batch) -> int:
        """Encode the batch's QIs and axes (raising on a bad value)."""
        for column, hierarchy in self.hierarchies:
            batch_leaf_codes(hierarchy, batch, column)
        for axis in self.axes:
            axis_codes(axis, batch)
        return acc + batch.num_rows

    def merge(self, left: int, right: int) -> int:
        """Sum."""
        return left + right

    def finish(self, acc: int) -> int:
        """Rows checked."""
        return acc


def validate_stream(
    source: str | Path,
    schema: TableSchema,
    columns: Sequence[str],
    *,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    axes: Sequence[Axis] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> None:
    """Check every value of ``columns`` (and that QIs are leaves and axes cover their values).

    Raises:
        InputError: as :func:`dp.io.read_table`, :meth:`Hierarchy.encode` or
            :meth:`Axis.codes` would on the whole table.
    """
    agg = CheckAggregate(
        read=tuple(columns), hierarchies=tuple((hierarchies or {}).items()), axes=tuple(axes)
    )
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    runner.run(agg, source, schema)
