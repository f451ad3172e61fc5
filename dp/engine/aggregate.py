"""Exact aggregates as fold/merge pairs, and the streaming backend that runs them.

PipelineDP's backend idea, cut to what dppub needs: an :class:`Aggregate` says *what* to compute
from validated batches (``update`` folds one batch into an accumulator, ``merge`` combines two
accumulators), and a :class:`Backend` says *where*. Every backend computes one partial per
fragment (Parquet file) by folding that fragment's batches in order, then merges the partials in
fragment order starting from ``empty()``. Because the arithmetic and its order are fixed by the
aggregate and the source -- not by the backend's scheduling -- a local stream and a cluster give
bit-identical results, floating-point sums included.

Aggregates here are *exact*: no noise is ever added by an engine. DP noise is drawn once, by the
caller, on the finished aggregate (never per partition, which would multiply the privacy cost or
the error).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import pyarrow.dataset as pads

from dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, Scan, iter_batches, open_scan
from dp.schema import TableSchema

__all__ = [
    "Aggregate",
    "Backend",
    "Fused",
    "StreamingBackend",
    "fold",
    "fragment_partial",
    "merge_partials",
]

P = TypeVar("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Aggregate(Protocol[P, R_co]):
    """An exact, mergeable statistic of validated batches."""

    @property
    def columns(self) -> tuple[str, ...]:
        """Declared columns the aggregate reads."""
        ...

    def empty(self) -> P:
        """The accumulator of zero rows (a neutral element of :meth:`merge`)."""
        ...

    def update(self, acc: P, batch: Batch) -> P:
        """Fold one validated batch into ``acc`` (may update ``acc`` in place and return it)."""
        ...

    def merge(self, left: P, right: P) -> P:
        """Combine two accumulators (``left`` first; order matters for float sums)."""
        ...

    def finish(self, acc: P) -> R_co:
        """The released-shape result (still exact)."""
        ...


class Backend(Protocol):
    """Where aggregates run: in memory, streamed here, or on a Dask cluster."""

    def run(self, aggregate: Aggregate[P, R], source: str | Path, schema: TableSchema) -> R:
        """Check ``source``, aggregate every row, and return the finished exact result."""
        ...

    def batches(
        self, source: str | Path, schema: TableSchema, columns: Sequence[str]
    ) -> Iterator[Batch]:
        """Every validated (marked) batch of ``columns``, in order, for a sequential pass."""
        ...


@dataclass(frozen=True, slots=True)
class Fused:
    """Several aggregates folded in one pass over the union of their columns.

    Each part sees the complete rows of *its own* columns (:meth:`Batch.complete`), exactly
    what a separate scan would give it; the finished result is the list of the parts' results.
    """

    parts: tuple[Aggregate[Any, Any], ...]
    marked: ClassVar[bool] = True
    """Receives marked batches (each part completes its own rows)."""

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for p in self.parts for c in p.columns))

    def empty(self) -> list[Any]:
        return [p.empty() for p in self.parts]

    def update(self, acc: list[Any], batch: Batch) -> list[Any]:
        return [fold(p, a, batch) for p, a in zip(self.parts, acc, strict=True)]

    def merge(self, left: list[Any], right: list[Any]) -> list[Any]:
        return [p.merge(a, b) for p, a, b in zip(self.parts, left, right, strict=True)]

    def finish(self, acc: list[Any]) -> list[Any]:
        return [p.finish(a) for p, a in zip(self.parts, acc, strict=True)]


def fold(aggregate: Aggregate[P, R], acc: P, batch: Batch) -> P:
    """Fold one marked batch: the aggregate sees the complete rows of its columns."""
    if getattr(aggregate, "marked", False):
        return aggregate.update(acc, batch)
    return aggregate.update(acc, batch.complete(aggregate.columns))


def fragment_partial(aggregate: Aggregate[P, R], scan: Scan, fragment: pads.Fragment) -> P:
    """One fragment's accumulator: its batches folded in order (the unit a worker computes)."""
    acc = aggregate.empty()
    for batch in iter_batches(scan, fragment):
        acc = fold(aggregate, acc, batch)
    return acc


def merge_partials(aggregate: Aggregate[P, R], partials: Sequence[P]) -> R:
    """Merge per-fragment accumulators in fragment order and finish."""
    acc = aggregate.empty()
    for part in partials:
        acc = aggregate.merge(acc, part)
    return aggregate.finish(acc)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamingBackend:
    """One process, one batch in memory at a time (plus Arrow's bounded read-ahead).

    Peak memory is about ``batch_size`` rows of the columns read, plus the accumulator (domain or
    model size); it does not grow with the row count.
    """

    batch_size: int = DEFAULT_BATCH_SIZE
    """Upper bound on rows per batch."""

    def run(self, aggregate: Aggregate[P, R], source: str | Path, schema: TableSchema) -> R:
        """Stream ``source`` fragment by fragment; see the module docstring for the order."""
        scan = open_scan(source, schema, aggregate.columns, batch_size=self.batch_size)
        acc = aggregate.empty()
        for fragment in scan.fragments:
            # Merge each fragment's partial as soon as it is done: only one partial is alive.
            acc = aggregate.merge(acc, fragment_partial(aggregate, scan, fragment))
        return aggregate.finish(acc)

    def batches(
        self, source: str | Path, schema: TableSchema, columns: Sequence[str]
    ) -> Iterator[Batch]:
        """Stream the marked batches of ``columns``, fragment by fragment."""
        scan = open_scan(source, schema, columns, batch_size=self.batch_size)
        for fragment in scan.fragments:
            yield from iter_batches(scan, fragment)
