"""Privacy units: bounded contributions, unit-neighbours, every engine alike."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dp.engine.units as units_module
from dp.engine import Fused, HistogramAggregate, MemoryBackend, StreamingBackend
from dp.engine.dask import DaskBackend
from dp.engine.units import Bounded, BoundingAggregate, UnitBound
from dp.histogram import category_axis, numeric_axis
from dp.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="person", type="string"),
        ColumnSpec(name="age", type="int", bounds=(0, 9)),
        ColumnSpec(name="group", type="category", categories=("a", "b", "c")),
    )
)
COLUMNS = ("person", "age", "group")
AXES = (numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["group"]))


def _table(rows: list[tuple[str | None, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _write(tmp: Path, frame: pd.DataFrame, name: str = "t.parquet") -> Path:
    path = tmp / name
    frame.to_parquet(path, index=False, row_group_size=7)
    return path


def _bounded_rows(path: Path, bound: UnitBound, backend=None) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """The rows a bounded release reads, as (person, age, group) tuples."""
    backend = backend or StreamingBackend(batch_size=5)
    unit_filter = backend.run(BoundingAggregate(bound), path, SCHEMA)
    frame = pd.read_parquet(path)
    keep = np.ones(len(frame), dtype=bool)
    keep[unit_filter.dropped] = False  # one file: positions are the row numbers
    return frame[keep]


def test_each_unit_keeps_at_most_m_rows_and_small_units_keep_all(tmp_path: Path) -> None:
    rows = [("p1", i % 10, "a") for i in range(9)] + [("p2", 3, "b"), ("p2", 4, "c")]
    rows += [(None, 5, "a")]  # no unit: never read
    path = _write(tmp_path, _table(rows))
    kept = _bounded_rows(path, UnitBound(column="person", max_rows=3, content=COLUMNS))
    assert kept.groupby("person").size().to_dict() == {"p1": 3, "p2": 2}
    assert kept["person"].notna().all()


def test_a_partitioned_release_reads_at_most_p_partitions_per_unit(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = [
        (f"p{rng.integers(20)}", int(rng.integers(10)), str(rng.choice(["a", "b", "c"])))
        for _ in range(400)
    ]
    path = _write(tmp_path, _table(rows))
    bound = UnitBound(
        column="person", max_rows=5, max_partitions=1, partition="group", content=COLUMNS
    )
    kept = _bounded_rows(path, bound)
    assert kept.groupby("person")["group"].nunique().max() == 1
    assert kept.groupby("person").size().max() <= 5


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    people=st.lists(st.integers(0, 7), min_size=1, max_size=60),
    ages=st.lists(st.integers(0, 9), min_size=60, max_size=60),
    m=st.integers(1, 4),
    victim=st.integers(0, 7),
)
def test_removing_one_unit_moves_the_bounded_histogram_by_at_most_m(
    tmp_path_factory: pytest.TempPathFactory,
    people: list[int],
    ages: list[int],
    m: int,
    victim: int,
) -> None:
    # Unit-neighbours: the table, and the table without every row of one unit. Under the same
    # key every other unit keeps exactly the rows it kept, so the exact histogram a release
    # reads moves by at most m in L1 -- the unit-level sensitivity the noise is scaled to.
    tmp = tmp_path_factory.mktemp("units")
    rows = [(f"p{p}", a, "abc"[a % 3]) for p, a in zip(people, ages, strict=False)]
    full = _write(tmp, _table(rows), "full.parquet")
    without = _write(tmp, _table([r for r in rows if r[0] != f"p{victim}"]), "less.parquet")
    bound = UnitBound(column="person", max_rows=m, content=COLUMNS, key=12345)
    counts = []
    for path in (full, without):
        backend = StreamingBackend(batch_size=8)
        unit_filter = backend.run(BoundingAggregate(bound), path, SCHEMA)
        counts.append(backend.run(Bounded(HistogramAggregate(AXES), unit_filter), path, SCHEMA))
    assert np.abs(counts[0] - counts[1]).sum() <= m
    others = [
        sorted(_bounded_rows(p, bound).query(f"person != 'p{victim}'").itertuples(index=False))
        for p in (full, without)
    ]
    assert others[0] == others[1]


@pytest.mark.slow
def test_every_engine_and_a_spilled_pass_choose_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(7)
    frame = _table(
        [
            (f"p{rng.integers(50)}", int(rng.integers(10)), "abc"[int(rng.integers(3))])
            for _ in range(2_000)
        ]
    )
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        _write(folder, frame.iloc[i * 700 : (i + 1) * 700], f"p{i}.parquet")
    bound = UnitBound(column="person", max_rows=4, content=COLUMNS, key=99)
    stream = StreamingBackend(batch_size=64)
    reference = stream.run(BoundingAggregate(bound), folder, SCHEMA).dropped
    memory = MemoryBackend.load(folder, SCHEMA, COLUMNS, batch_size=64)
    assert np.array_equal(memory.run(BoundingAggregate(bound), folder, SCHEMA).dropped, reference)
    dask = DaskBackend(batch_size=64)
    assert np.array_equal(dask.run(BoundingAggregate(bound), folder, SCHEMA).dropped, reference)
    monkeypatch.setattr(units_module, "SPILL_ROWS", 100)  # buckets on disk
    assert np.array_equal(stream.run(BoundingAggregate(bound), folder, SCHEMA).dropped, reference)
    # One fused pass bounds two releases like two separate passes.
    fused = stream.run(
        Fused((BoundingAggregate(bound), BoundingAggregate(replace(bound, max_rows=2)))),
        folder,
        SCHEMA,
    )
    assert np.array_equal(fused[0].dropped, reference)
    assert len(fused[1].dropped) > len(reference)


@pytest.mark.slow
def test_a_fresh_key_per_run_chooses_a_uniform_subset(tmp_path: Path) -> None:
    # One unit with 10 distinct rows, m = 1: over 2,000 runs (fresh OS-random keys) each row is
    # kept about 200 times. Binomial(2000, 0.1): [140, 260] fails with probability < 1e-5 per
    # row, < 1e-4 in all (false-failure rate).
    path = _write(tmp_path, _table([("p", i, "a") for i in range(10)]))
    seen = np.zeros(10, dtype=int)
    stream = StreamingBackend(batch_size=16)
    for _ in range(2_000):
        dropped = stream.run(
            BoundingAggregate(UnitBound(column="person", max_rows=1, content=COLUMNS)), path, SCHEMA
        ).dropped
        kept = np.setdiff1d(np.arange(10), dropped)
        seen[kept] += 1
    assert seen.sum() == 2_000
    assert seen.min() >= 140 and seen.max() <= 260


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7)), max_size=60),
    st.integers(1, 4),
)
def test_kept_partitions_are_each_units_lowest_hashes(pairs: list[tuple[int, int]], m: int) -> None:
    units = np.array([u for u, _ in pairs], dtype=np.uint64)
    parts = np.array([u * 100 + p for u, p in pairs], dtype=np.uint64)  # distinct per unit
    lowest: set[int] = set()
    for u in set(units.tolist()):
        lowest |= set(sorted(set(parts[units == u].tolist()))[:m])
    want = np.array([int(p) in lowest for p in parts], dtype=bool)
    assert np.array_equal(units_module._keep_partitions(units, parts, m), want)


def test_a_spilled_partitioned_pass_on_two_threads_chooses_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(8)
    rows = [
        (f"p{rng.integers(40)}", int(rng.integers(10)), "abc"[int(rng.integers(3))])
        for _ in range(1_500)
    ]
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        _write(folder, _table(rows[i * 500 : (i + 1) * 500]), f"p{i}.parquet")
    bound = UnitBound(column="person", max_rows=3, partition="group", content=COLUMNS, key=5)
    reference = StreamingBackend(batch_size=64).run(BoundingAggregate(bound), folder, SCHEMA)
    monkeypatch.setattr(units_module, "SPILL_ROWS", 50)  # buckets on disk, several spills
    threaded = StreamingBackend(batch_size=64, workers=2)
    got = threaded.run(BoundingAggregate(bound), folder, SCHEMA)
    assert np.array_equal(got.dropped, reference.dropped)
    assert len(reference.dropped) > 0
