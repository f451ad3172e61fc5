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

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import pyarrow.dataset as pads

from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, Scan, iter_batches, open_scan
from dppub.dp.schema import TableSchema

__all__ = [
    "Aggregate",
    "Backend",
    "Fused",
    "Progress",
    "StreamingBackend",
    "fold",
    "fold_fragments",
    "fragment_partial",
    "merge_partials",
    "with_progress",
]

P = TypeVar("P")
R = TypeVar("R")
F = TypeVar("F")
R_co = TypeVar("R_co", covariant=True)
B = TypeVar("B")

Progress = Callable[[int, int], None]
"""Called with ``(files done, files in all)`` as a pass merges each file's partial."""


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


def fragment_partial(
    aggregate: Aggregate[P, R],
    scan: Scan,
    fragment: pads.Fragment,
    stop: threading.Event | None = None,
) -> P:
    """One fragment's accumulator: its batches folded in order (the unit a worker computes).
    A set ``stop`` ends the fold early (its partial is then discarded by the caller)."""
    return fold_batches(aggregate, iter_batches(scan, fragment), stop)


def fold_batches(
    aggregate: Aggregate[P, R], batches: Iterable[Batch], stop: threading.Event | None = None
) -> P:
    """``batches`` folded in order into a fresh accumulator (early out when ``stop`` is set)."""
    acc = aggregate.empty()
    for batch in batches:
        if stop is not None and stop.is_set():
            break
        acc = fold(aggregate, acc, batch)
    return acc


def fold_fragments(
    aggregate: Aggregate[P, R],
    fragments: Sequence[F],
    partial: Callable[[F, threading.Event], P],
    workers: int,
    progress: Progress | None = None,
) -> R:
    """Every fragment's ``partial``, computed on up to ``workers`` threads, merged in fragment
    order and finished.

    The merge order is the fragments' whatever the threads' timing, so the result is the one a
    sequential fold gives, bit for bit. At most ``workers`` partials are pending at a time.
    When a fragment fails (or the caller is interrupted), the others stop at their next batch
    and the error propagates. ``progress`` is called on this thread after each merge.
    """
    acc = aggregate.empty()
    done = 0

    def merged(part: P) -> None:
        nonlocal acc, done
        acc = aggregate.merge(acc, part)
        done += 1
        if progress is not None:
            progress(done, len(fragments))

    if workers <= 1 or len(fragments) <= 1:
        for fragment in fragments:
            merged(partial(fragment, threading.Event()))
        return aggregate.finish(acc)
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dppub-fold")
    pending: deque[Future[P]] = deque()
    try:
        for fragment in fragments:
            pending.append(pool.submit(partial, fragment, stop))
            if len(pending) >= workers:
                merged(_next_in_order(pending))  # as soon as its turn comes: few are alive
        while pending:
            merged(_next_in_order(pending))
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return aggregate.finish(acc)


def _next_in_order(pending: deque[Future[P]]) -> P:
    """The oldest pending partial, once done; an error in any of them is raised at once."""
    while not pending[0].done():
        wait(pending, return_when=FIRST_EXCEPTION)
        for future in pending:
            if future.done() and future.exception() is not None:
                future.result()
    return pending.popleft().result()


def with_progress(backend: B, progress: Progress) -> B:
    """``backend`` reporting each pass's progress, if it can (the dask backend does not)."""
    if not hasattr(backend, "progress"):
        return backend
    return replace(backend, progress=progress)  # type: ignore[type-var]


def merge_partials(aggregate: Aggregate[P, R], partials: Sequence[P]) -> R:
    """Merge per-fragment accumulators in fragment order and finish."""
    acc = aggregate.empty()
    for part in partials:
        acc = aggregate.merge(acc, part)
    return aggregate.finish(acc)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamingBackend:
    """One process, one batch in memory per worker thread at a time (plus Arrow's bounded
    read-ahead).

    Peak memory is about ``workers * batch_size`` rows of the columns read, plus the
    accumulators (domain or model size); it does not grow with the row count.
    """

    batch_size: int = DEFAULT_BATCH_SIZE
    """Upper bound on rows per batch."""
    workers: int = 1
    """Fragments (Parquet files) folded at once, one thread each (numpy and Arrow release the
    GIL); the result does not depend on it."""
    progress: Progress | None = field(default=None, compare=False, repr=False)
    """Told how many files each pass has merged (for a log line; no data)."""

    def run(self, aggregate: Aggregate[P, R], source: str | Path, schema: TableSchema) -> R:
        """Stream ``source`` fragment by fragment; see the module docstring for the order."""
        scan = open_scan(source, schema, aggregate.columns, batch_size=self.batch_size)

        def partial(fragment: pads.Fragment, stop: threading.Event) -> Any:
            return fragment_partial(aggregate, scan, fragment, stop)

        return fold_fragments(aggregate, scan.fragments, partial, self.workers, self.progress)

    def batches(
        self, source: str | Path, schema: TableSchema, columns: Sequence[str]
    ) -> Iterator[Batch]:
        """Stream the marked batches of ``columns``, fragment by fragment."""
        scan = open_scan(source, schema, columns, batch_size=self.batch_size)
        for fragment in scan.fragments:
            yield from iter_batches(scan, fragment)
