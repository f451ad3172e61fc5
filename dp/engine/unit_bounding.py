"""Privacy units: each unit's contribution is bounded before any aggregate sees its rows.

With ``privacy_unit: <column>``, neighbouring tables differ by *all* rows of one unit. A release
then reads at most ``max_rows`` rows of any unit (and, for a partitioned release such as a
trace regression's tasks, rows of at most ``max_partitions`` partitions per unit), so every
sensitivity scales with ``max_rows`` (see :mod:`dp.pipeline.units`).

Which rows are kept is decided by a data-independent rule: each row gets a priority from a
keyed hash of its unit and its own values under a fresh random key for the run (OS
randomness), and each unit keeps its ``max_rows`` rows of lowest priority -- a uniform random
choice among its rows. A partitioned release first keeps, per unit, the ``max_partitions``
partitions of lowest keyed hash among those the unit has rows in (ties, two labels with one
hash, broken by the labels themselves). A unit's choice depends on
that unit's rows only, so removing one unit leaves every other unit's kept rows as they were:
the bounded tables of two unit-neighbours differ by at most ``max_rows`` rows of one unit. A
row without a unit (a null, or an undeclared category) is never read.

A unit is its id *as stored*, never a value rule's result (:attr:`dp.schema.ColumnSpec.unit`):
an ``int`` id exactly as an int64 (:attr:`Batch.keys`; not through float64, not clamped), a text
id by its characters. Two distinct ids are two units and two distinct labels two partitions,
always: hashes (keyed with the run's secret key, so nobody can search for a collision offline)
only spread units over buckets and order rows and partitions; units and partitions are told
apart by comparing the ids and labels themselves (:data:`Ids`), so a hash collision merges
nothing. (A merge would not just keep fewer rows: removing one of two merged units changes
which rows the other keeps.)

One extra pass (:class:`BoundingAggregate`) finds the rows to leave out, by position; its
accumulator spills to disk in unit-hash buckets when it outgrows :data:`SPILL_ROWS`, so memory
is bounded by the bucket size and the rows left out, not by the row count. The spill files are
unnamed temporary files (unlinked at creation): whatever ends the process, nothing is left.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.engine.aggregate import Aggregate, Backend, fold
from dppub.dp.engine.batches import Batch, Mask
from dppub.dp.engine.row_filter import RowFilter
from dppub.dp.errors import InvariantError
from dppub.dp.schema import TableSchema

__all__ = [
    "SPILL_ROWS",
    "Bounded",
    "BoundedBackend",
    "BoundingAggregate",
    "UnitBound",
    "UnitFilter",
]

P = TypeVar("P")
R = TypeVar("R")

U64 = npt.NDArray[np.uint64]
SPILL_ROWS = 1 << 22
"""(unit, priority) pairs held in memory by the bounding pass before they spill to disk."""
_BUCKETS = 64


def _mix(values: U64, key: int) -> U64:
    """splitmix64 of ``values`` xor ``key``: a keyed, uniform 64-bit hash (vectorised)."""
    with np.errstate(over="ignore"):
        z = values ^ np.uint64(key)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def fresh_key() -> int:
    """A run's secret row-selection key, from the OS's randomness."""
    return int.from_bytes(os.urandom(8), "big")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitBound:
    """How a release's rows are bounded per privacy unit."""

    column: str
    """The column naming each row's unit."""
    max_rows: int
    """At most this many rows of one unit are read."""
    max_partitions: int = 1
    """At most this many partitions per unit (when ``partition`` is set)."""
    partition: str | None = None
    """The partitioning column of a partitioned release (a trace regression's tasks)."""
    content: tuple[str, ...] = ()
    """The columns whose values key each row's priority (the run's columns)."""
    key: int = field(default_factory=lambda: fresh_key(), repr=False)  # looked up per call
    """The run's secret hash key (OS randomness; never stored or published)."""
    where: RowFilter | None = None
    """A release's row filter: rows it does not keep are left out before the bound (so they
    spend none of it); it reads one row, so neighbours stay one unit apart."""

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,) if self.partition is None else (self.column, self.partition)

    def kept(self, batch: Batch) -> Mask:
        """Rows with a unit (and partition) that the filter keeps: the rows bounded."""
        present = batch.present(self.columns)
        return present if self.where is None else present & self.where.keep(batch)

    def units(self, batch: Batch) -> U64:
        """Each row's unit, hashed under the run's key (rows must be complete in the column):
        an int id as stored, a text id by its characters -- never a clamped or rounded value."""
        if self.column in batch.keys:
            return _mix(batch.keys[self.column].view(np.uint64), self.key)
        if self.column in batch.numeric:
            raise InvariantError(f"unit column {self.column!r} was not read as a unit id")
        return _hashed(batch.text[self.column], _hash_key(self.key))

    def ids(self, batch: Batch) -> Ids:
        """Each row's unit id as stored (an int64, or its text) and, for a partitioned release,
        its partition label: compared exactly, never by hash (rows complete in the columns)."""
        if self.column in batch.keys:
            unit: npt.NDArray[Any] = batch.keys[self.column]
        elif self.column in batch.numeric:
            raise InvariantError(f"unit column {self.column!r} was not read as a unit id")
        else:
            unit = _texts(batch.text[self.column])
        if self.partition is None:
            return (unit,)
        return unit, _texts(batch.text[self.partition])

    def parts(self, batch: Batch, units: U64) -> U64:
        """Each row's (unit, partition) pair, hashed under the run's key (zeros without a
        partition): it orders a unit's partitions, the labels tell them apart."""
        if self.partition is None:
            return np.zeros(len(units), dtype=np.uint64)
        labels = _hashed(batch.text[self.partition], _hash_key(self.key ^ _PARTITIONS))
        return _mix(units ^ labels, self.key)

    def priorities(self, batch: Batch, units: U64) -> U64:
        """Each row's priority: a keyed hash of its unit and its values (never its position,
        so one unit's choice does not depend on where other units' rows are)."""
        h = units.copy()
        for name in self.content:
            if name in batch.numeric:
                values = np.asarray(batch.numeric[name], dtype=np.float64).view(np.uint64)
            else:
                values = _hashed(batch.text[name], "dppub-values-001")
            mark = batch.missing.get(name)
            if mark is not None:
                values = np.where(mark, np.uint64(1), values)
            h = _mix(h ^ values, self.key)
        return _mix(h, self.key ^ 0x5DEECE66D)


_PARTITIONS = 0x7061727469746E73
"""Derives the partitions' hash key from the run's (a different key than the units')."""


def _hash_key(key: int) -> str:
    """The 16 characters :func:`_hashed` keys with, from a 64-bit key."""
    return key.to_bytes(8, "big").hex()


def _texts(column: Any) -> npt.NDArray[Any]:
    """Each row's value of a dictionary column as a Python string (rows complete in it)."""
    words = np.asarray(column.dictionary.to_pylist(), dtype=object)
    return np.asarray(words[column.indices.to_numpy(zero_copy_only=False)], dtype=object)


def _hashed(column: Any, hash_key: str) -> U64:
    """Each row's value of a dictionary column, hashed under ``hash_key`` (16 characters); a
    null hashes to 0. Only the dictionary's distinct values are hashed."""
    import pyarrow.compute as pc

    words = pd.util.hash_array(
        np.asarray(column.dictionary.to_pylist(), dtype=object), hash_key=hash_key
    )
    table = np.append(np.asarray(words, dtype=np.uint64), np.uint64(0))
    codes = pc.fill_null(column.indices, len(column.dictionary)).to_numpy(zero_copy_only=False)
    return np.asarray(table[np.asarray(codes, dtype=np.int64)], dtype=np.uint64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class UnitFilter:
    """The rows a bounded release leaves out, by position."""

    bound: UnitBound
    dropped: npt.NDArray[np.int64]
    """Sorted positions (:attr:`Batch.rows`) of the rows not read."""

    def keep(self, batch: Batch) -> Mask:
        """Which rows of ``batch`` the release reads."""
        if batch.rows is None:
            raise InvariantError("bounding a privacy unit needs each row's position")
        if not len(self.dropped):
            return np.ones(batch.num_rows, dtype=bool)
        at = np.minimum(np.searchsorted(self.dropped, batch.rows), len(self.dropped) - 1)
        return np.asarray(self.dropped[at] != batch.rows, dtype=bool)


Quad = tuple[U64, U64, U64, npt.NDArray[np.int64]]
Ids = tuple[npt.NDArray[Any], ...]
"""Each row's exact unit id and, for a partitioned release, its partition label
(:meth:`UnitBound.ids`)."""
Chunk = tuple[Quad, Ids]


def _concat(chunks: Sequence[Chunk]) -> Chunk:
    quads, ids = zip(*chunks, strict=True)
    u, p, q, r = (np.concatenate(a) for a in zip(*quads, strict=True))
    return (u, p, q, r), tuple(np.concatenate(a) for a in zip(*ids, strict=True))


@dataclass(eq=False)
class _Rows:
    """(unit, partition, priority, position) per row with its :data:`Ids`, spilled to disk in
    unit-hash buckets when large; positions of rows without a unit, kept apart (they are always
    left out)."""

    arrays: list[Chunk] = field(default_factory=list)
    unitless: list[npt.NDArray[np.int64]] = field(default_factory=list)
    held: int = 0
    files: list[tuple[IO[bytes], IO[bytes]]] | None = None
    """Two unnamed temporary files per bucket once spilled, the hashes and the ids (unlinked at
    creation: a crash or a kill leaves nothing; closing them frees the space)."""

    def add(self, chunk: Chunk) -> None:
        self.arrays.append(chunk)
        self.held += len(chunk[0][0])
        if self.held > SPILL_ROWS:
            self.spill()

    def spill(self) -> None:
        if not self.arrays:
            return
        if self.files is None:
            # Open for the whole pass (closed by buckets()); no name, so nothing to clean up.
            self.files = [
                (
                    tempfile.TemporaryFile(prefix="dppub-units-"),  # noqa: SIM115
                    tempfile.TemporaryFile(prefix="dppub-units-"),  # noqa: SIM115
                )
                for _ in range(_BUCKETS)
            ]
        for (units, parts, prio, pos), ids in self.arrays:  # one batch at a time: no copy
            bucket = (units % np.uint64(_BUCKETS)).astype(np.uint8)
            order = np.argsort(bucket, kind="stable")  # a radix sort, rows kept in order
            edges = np.searchsorted(bucket[order], np.arange(_BUCKETS + 1))
            for b in range(_BUCKETS):
                at = order[edges[b] : edges[b + 1]]
                if len(at):
                    quad = (units[at], parts[at], prio[at], pos[at].view(np.uint64))
                    hashes, exact = self.files[b]
                    hashes.write(np.stack(quad, axis=1).tobytes())
                    # Our own unnamed file, read back by this process or its dask partial.
                    pickle.dump(tuple(a[at] for a in ids), exact)
        self.arrays, self.held = [], 0

    def buckets(self) -> Iterator[Chunk]:
        """The rows, one bucket at a time (every row of a unit in one bucket)."""
        if self.files is None:
            if self.arrays:
                yield _concat(self.arrays)
            return
        self.spill()
        files, self.files = self.files, None
        try:
            for pair in files:
                chunk = _read(*pair)
                for f in pair:
                    f.close()
                if chunk is not None:
                    yield chunk
        finally:
            for pair in files:
                for f in pair:
                    f.close()

    def __getstate__(self) -> dict[str, Any]:
        """Shipped between processes (a dask worker's partial): spilled rows travel in memory."""
        spilled = [_read(*pair) for pair in self.files or []]
        arrays = self.arrays + [c for c in spilled if c is not None]
        held = sum(len(c[0][0]) for c in arrays)
        return {"arrays": arrays, "unitless": self.unitless, "held": held, "files": None}


def _read(hashes: IO[bytes], exact: IO[bytes]) -> Chunk | None:
    """The rows spilled to one bucket's files (left at their end, for more appends)."""
    for f in (hashes, exact):
        f.flush()
        f.seek(0)
    t = np.frombuffer(hashes.read(), dtype=np.uint64).reshape(-1, 4)
    if not len(t):
        return None
    parts: list[Ids] = []
    while True:  # our own unnamed file, written by spill() above
        try:
            parts.append(pickle.load(exact))
        except EOFError:
            break
    ids = tuple(np.concatenate(a) for a in zip(*parts, strict=True))
    return (t[:, 0].copy(), t[:, 1].copy(), t[:, 2].copy(), t[:, 3].copy().view(np.int64)), ids


@dataclass(frozen=True, slots=True, eq=False)
class BoundingAggregate:
    """The bounding pass: each row's hashed unit, partition and priority, finished into the
    positions of the rows the release leaves out (:class:`UnitFilter`)."""

    bound: UnitBound
    marked: ClassVar[bool] = True
    """Receives marked batches: a row without a unit is left out, not skipped."""

    @property
    def columns(self) -> tuple[str, ...]:
        where = () if self.bound.where is None else self.bound.where.columns
        return tuple(dict.fromkeys((*self.bound.columns, *self.bound.content, *where)))

    def empty(self) -> _Rows:
        return _Rows()

    def update(self, acc: _Rows, batch: Batch) -> _Rows:
        if not batch.num_rows:
            return acc
        if batch.rows is None:
            raise InvariantError("bounding a privacy unit needs each row's position")
        present = self.bound.kept(batch)  # a row the filter drops is left out, never read
        if not present.all():
            acc.unitless.append(batch.rows[~present])
        rows = batch.take(present)
        units = self.bound.units(rows)
        parts = self.bound.parts(rows, units)
        quad = (units, parts, self.bound.priorities(rows, units), rows.rows)
        acc.add((quad, self.bound.ids(rows)))  # type: ignore[arg-type]
        return acc

    def merge(self, left: _Rows, right: _Rows) -> _Rows:
        for chunk in right.buckets():
            left.add(chunk)
        left.unitless += right.unitless
        return left

    def finish(self, acc: _Rows) -> UnitFilter:
        dropped: list[npt.NDArray[np.int64]] = list(acc.unitless)
        for (_, parts, prio, pos), ids in acc.buckets():
            units = pd.factorize(ids[0])[0]  # the units themselves (equal ids, equal codes)
            if self.bound.partition is not None:
                labels = pd.factorize(ids[1], sort=True)[0]  # label order: ties by label
                keep = _keep_partitions(units, parts, labels, self.bound.max_partitions)
                dropped.append(pos[~keep])
                units, prio, pos = units[keep], prio[keep], pos[keep]
            order = np.lexsort((pos, prio, units))  # ties (identical rows) broken by position
            units, pos = units[order], pos[order]
            start = np.flatnonzero(np.r_[True, units[1:] != units[:-1]])
            rank = np.arange(len(units)) - np.repeat(start, np.diff(np.r_[start, len(units)]))
            dropped.append(pos[rank >= self.bound.max_rows])
        out = np.sort(np.concatenate(dropped)) if dropped else np.zeros(0, dtype=np.int64)
        return UnitFilter(bound=self.bound, dropped=out.astype(np.int64))


def _keep_partitions(
    units: npt.NDArray[np.intp], parts: U64, labels: npt.NDArray[np.intp], limit: int
) -> Mask:
    """Rows whose partition (``labels``: exact codes in label order) is among their unit's
    (``units``: exact codes) ``limit`` partitions of lowest hash ``parts``, ties by label."""
    order = np.lexsort((labels, parts, units))  # by unit, then partition hash, then label
    u, lab = units[order], labels[order]
    new_unit = np.r_[True, u[1:] != u[:-1]]
    pair = np.cumsum(new_unit | np.r_[True, lab[1:] != lab[:-1]])  # (unit, label) pair number
    first = np.maximum.accumulate(np.where(new_unit, pair, 0))  # its unit's first pair
    keep = np.empty(len(units), dtype=bool)
    keep[order] = pair - first < limit
    return keep


@dataclass(frozen=True, slots=True, eq=False)
class BoundedBackend:
    """A backend whose every pass reads only the rows a :class:`UnitFilter` keeps (the
    iterative passes of k-means and objective perturbation, the k-anonymous table's writer)."""

    inner: Backend
    filter: UnitFilter

    def run(self, aggregate: Aggregate[P, R], source: str | Path, schema: TableSchema) -> R:
        result: R = self.inner.run(Bounded(aggregate, self.filter), source, schema)
        return result

    def batches(
        self, source: str | Path, schema: TableSchema, columns: Sequence[str]
    ) -> Iterator[Batch]:
        for batch in self.inner.batches(source, schema, columns):
            yield batch.take(self.filter.keep(batch))


@dataclass(frozen=True, slots=True)
class Bounded:
    """An aggregate that reads only the rows its release's :class:`UnitFilter` keeps."""

    inner: Aggregate[Any, Any]
    filter: UnitFilter
    marked: ClassVar[bool] = True
    """Receives marked batches: it leaves out the bound's rows, then folds the inner one."""

    @property
    def columns(self) -> tuple[str, ...]:
        return self.inner.columns

    def empty(self) -> Any:
        return self.inner.empty()

    def update(self, acc: Any, batch: Batch) -> Any:
        return fold(self.inner, acc, batch.take(self.filter.keep(batch)))

    def merge(self, left: Any, right: Any) -> Any:
        return self.inner.merge(left, right)

    def finish(self, acc: Any) -> Any:
        return self.inner.finish(acc)
