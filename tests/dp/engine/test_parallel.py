"""Folding fragments on several threads: the same result as one thread, bit for bit; a failing
fragment stops the others; never more than ``workers`` fragments in flight."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pytest

import dppub.dp.engine.aggregate as aggregate_module
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.axes import category_axis, numeric_axis
from dppub.dp.engine import (
    Fused,
    HistogramAggregate,
    LeafCountsAggregate,
    MemoryBackend,
    StreamingBackend,
    with_progress,
)
from dppub.dp.engine.batches import Batch, Scan, iter_batches
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.errors import InputError
from tests.dp.engine.conftest import SCHEMA


@dataclass(frozen=True)
class _FloatTrail:
    """Order-sensitive on purpose: a running float sum of ``hours / 3`` and the row counts of
    the partials in the order they were merged."""

    columns: tuple[str, ...] = ("hours",)

    def empty(self) -> tuple[float, list[int]]:
        return 0.0, []

    def update(self, acc: tuple[float, list[int]], batch: Batch) -> tuple[float, list[int]]:
        total = acc[0]
        for v in batch.numeric["hours"]:
            total += float(v) / 3.0
        rows = [*acc[1][:-1], (acc[1][-1] if acc[1] else 0) + batch.num_rows]
        return total, rows

    def merge(
        self, left: tuple[float, list[int]], right: tuple[float, list[int]]
    ) -> tuple[float, list[int]]:
        return left[0] + right[0], left[1] + (right[1] or [0])

    def finish(self, acc: tuple[float, list[int]]) -> tuple[float, list[int]]:
        return acc


def _aggregate(hierarchies: dict[str, Hierarchy]) -> Fused:
    axes = (numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["sex"]))
    qi = ("age", "sex", "zip")
    return Fused(
        (
            _FloatTrail(),
            HistogramAggregate(axes=axes),
            LeafCountsAggregate(qi=qi, hierarchies=tuple(hierarchies[q] for q in qi)),
        )
    )


@pytest.fixture
def slow_first(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The first fragment's batches arrive slowly, so later fragments finish first; records
    how many fragments were being read at once."""
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def reading(scan: Scan, fragment: pads.Fragment) -> Iterator[Batch]:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        try:
            for batch in iter_batches(scan, fragment):
                if fragment is scan.fragments[0]:
                    time.sleep(0.002)
                yield batch
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(aggregate_module, "iter_batches", reading)
    return state


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 3, 8])
def test_threads_give_the_one_thread_result_bit_for_bit(
    partitioned: Path,
    hierarchies: dict[str, Hierarchy],
    slow_first: dict[str, int],
    workers: int,
) -> None:
    agg = _aggregate(hierarchies)
    one = StreamingBackend(batch_size=16, workers=1).run(agg, partitioned, SCHEMA)
    assert slow_first["most"] == 1
    many = StreamingBackend(batch_size=16, workers=workers).run(agg, partitioned, SCHEMA)
    assert 1 < slow_first["most"] <= workers  # really in parallel, never more than asked
    trail, hist, leaf = many
    assert trail == one[0]  # same float, same merge order: rows per fragment, in file order
    assert trail[1] == [1301, 3, 0, 650]
    assert np.array_equal(hist, one[1])
    assert np.array_equal(leaf.rows, one[2].rows)
    assert np.array_equal(leaf.counts, one[2].counts)
    assert np.array_equal(leaf.first, one[2].first)


@pytest.mark.slow
def test_memory_engine_threads_match_one_thread(
    partitioned: Path, hierarchies: dict[str, Hierarchy]
) -> None:
    agg = _aggregate(hierarchies)
    columns = agg.columns
    one = MemoryBackend.load(partitioned, SCHEMA, columns, batch_size=16).run(
        agg, partitioned, SCHEMA
    )
    held = MemoryBackend.load(partitioned, SCHEMA, columns, batch_size=16, workers=2)
    assert held.workers == 2
    two = held.run(agg, partitioned, SCHEMA)
    assert two[0] == one[0]
    assert np.array_equal(two[1], one[1])
    assert np.array_equal(two[2].first, one[2].first)


def test_a_failing_fragment_stops_the_others(
    partitioned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded = {"first": 0}

    def reading(scan: Scan, fragment: pads.Fragment) -> Iterator[Batch]:
        if fragment is scan.fragments[1]:
            time.sleep(0.05)
            raise InputError("cannot read part 1")
        for batch in iter_batches(scan, fragment):
            if fragment is scan.fragments[0]:
                folded["first"] += 1
                time.sleep(0.01)
            yield batch

    monkeypatch.setattr(aggregate_module, "iter_batches", reading)
    backend = StreamingBackend(batch_size=4, workers=2)
    start = time.monotonic()
    with pytest.raises(InputError, match="part 1"):
        backend.run(_FloatTrail(), partitioned, SCHEMA)
    # Fragment 0 has 326 batches of 4 rows (3.3 s at 10 ms each): it stopped soon after.
    assert folded["first"] < 100
    assert time.monotonic() - start < 2.0


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_each_merged_file_is_reported_in_order(
    partitioned: Path, hierarchies: dict[str, Hierarchy], workers: int
) -> None:
    agg = _aggregate(hierarchies)
    calls: list[tuple[int, int]] = []
    stream = with_progress(
        StreamingBackend(batch_size=64, workers=workers), lambda *a: calls.append(a)
    )
    quiet = StreamingBackend(batch_size=64, workers=workers).run(agg, partitioned, SCHEMA)
    assert stream.run(agg, partitioned, SCHEMA)[0] == quiet[0]
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    calls.clear()
    held = MemoryBackend.load(partitioned, SCHEMA, agg.columns, batch_size=64, workers=workers)
    with_progress(held, lambda *a: calls.append(a)).run(agg, partitioned, SCHEMA)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    dask = DaskBackend(batch_size=64)
    assert with_progress(dask, lambda *a: calls.append(a)) is dask  # no progress there
