"""Privacy units: bounded contributions, unit-neighbours, every engine alike."""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.engine.unit_bounding as units_module
from dppub.dp.axes import category_axis, numeric_axis
from dppub.dp.engine import Fused, HistogramAggregate, MemoryBackend, StreamingBackend
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.engine.unit_bounding import Bounded, BoundingAggregate, UnitBound
from dppub.dp.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="person", type="string"),
        ColumnSpec(name="age", type="int", bounds=(0, 9)),
        ColumnSpec(name="group", type="category", categories=("a", "b", "c")),
    )
)
COLUMNS = ("person", "age", "group")
AXES = (numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["group"]))


def _table(rows: Sequence[tuple[str | None, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _write(tmp: Path, frame: pd.DataFrame, name: str = "t.parquet") -> Path:
    path = tmp / name
    frame.to_parquet(path, index=False, row_group_size=7)
    return path


def _bounded_rows(
    path: Path, bound: UnitBound, backend: StreamingBackend | None = None
) -> pd.DataFrame:
    """The rows a bounded release reads, as (person, age, group) tuples."""
    backend = backend or StreamingBackend(batch_size=5)
    unit_filter = backend.run(BoundingAggregate(bound), path, SCHEMA)
    frame = pd.read_parquet(path)
    keep = np.ones(len(frame), dtype=bool)
    keep[unit_filter.dropped] = False  # one file: positions are the row numbers
    return frame[keep]


def test_each_unit_keeps_at_most_m_rows_and_small_units_keep_all(tmp_path: Path) -> None:
    rows: list[tuple[str | None, int, str]] = [("p1", i % 10, "a") for i in range(9)]
    rows += [("p2", 3, "b"), ("p2", 4, "c"), (None, 5, "a")]  # no unit: never read
    path = _write(tmp_path, _table(rows))
    kept = _bounded_rows(path, UnitBound(column="person", max_rows=3, content=COLUMNS))
    assert kept.groupby("person").size().to_dict() == {"p1": 3, "p2": 2}
    assert kept["person"].notna().all()


@pytest.mark.slow
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


@pytest.mark.slow
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
    # One unit with 10 distinct rows, m = 1: over 500 runs (fresh OS-random keys) each row is
    # kept about 50 times. Binomial(500, 0.1): [22, 80] fails with probability 1.3e-5 per row,
    # 1.3e-4 in all (false-failure rate); a row kept twice as often (mean 100) fails it.
    path = _write(tmp_path, _table([("p", i, "a") for i in range(10)]))
    seen = np.zeros(10, dtype=int)
    stream = StreamingBackend(batch_size=16)
    for _ in range(500):
        dropped = stream.run(
            BoundingAggregate(UnitBound(column="person", max_rows=1, content=COLUMNS)), path, SCHEMA
        ).dropped
        kept = np.setdiff1d(np.arange(10), dropped)
        seen[kept] += 1
    assert seen.sum() == 500
    assert seen.min() >= 22 and seen.max() <= 80


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7)), max_size=60),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_kept_partitions_are_each_units_lowest_hashes_told_apart_by_label(
    pairs: list[tuple[int, int]], m: int, values: int
) -> None:
    # Hashes from only `values` values collide; the labels still tell partitions apart, so a
    # unit keeps exactly min(m, its labels) of them: its lowest (hash, label) pairs.
    units = np.array([u for u, _ in pairs], dtype=np.intp)
    labels = np.array([p for _, p in pairs], dtype=np.intp)
    parts = np.array([(u * 7 + p * 13) % values for u, p in pairs], dtype=np.uint64)
    lowest: set[tuple[int, int]] = set()
    for u in set(units.tolist()):
        own = sorted(
            {(int(h), int(p)) for h, p in zip(parts[units == u], labels[units == u], strict=True)}
        )
        lowest |= {(u, p) for _, p in own[:m]}
    want = np.array(
        [(int(u), int(p)) in lowest for u, p in zip(units, labels, strict=True)], dtype=bool
    )
    assert np.array_equal(units_module._keep_partitions(units, parts, labels, m), want)


@pytest.mark.slow
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


# An int unit column with narrow bounds: its bounds apply only where a release reads it as a
# value; a unit is its stored id (old code clamped 11 and 12 to 10, and read 2^60 + 1 and
# 2^60 + 2 through float64 as the same 2^60: three people, one unit).
ID_SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="person", type="int", bounds=(0, 10), unit=True),
        ColumnSpec(name="age", type="int", bounds=(0, 9)),
        ColumnSpec(name="group", type="category", categories=("a", "b", "c")),
    )
)
HOSTILE_IDS = [2**60 + 1, 2**60 + 2, 2**53 + 1, 2**53 + 2, 2**63 - 1, -(2**63), -5, 3, 10, 11, 12]


def _id_rows(path: Path, bound: UnitBound, backend: Any) -> list[tuple[int, int, str]]:
    """The rows a bounded release reads, as sorted (person, age, group) tuples."""
    dropped = backend.run(BoundingAggregate(bound), path, ID_SCHEMA).dropped
    frame = pd.read_parquet(path)
    keep = np.ones(len(frame), dtype=bool)
    keep[dropped] = False  # one file: positions are the row numbers
    return sorted(frame[keep].itertuples(index=False, name=None))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["stream", "memory", "dask"])
def test_ids_above_2_to_the_53_that_differ_by_one_stay_distinct_units(
    tmp_path: Path, engine: str
) -> None:
    ids = [2**60 + 1, 2**60 + 2, 2**53 + 1, 2**53 + 2, 11, 12]  # each a person with 3 rows
    frame = pd.DataFrame(
        {"person": np.repeat(np.array(ids, dtype=np.int64), 3), "age": 4, "group": "a"}
    )
    path = tmp_path / "ids.parquet"
    frame.to_parquet(path, index=False)
    backend: Any = {
        "stream": StreamingBackend(batch_size=4),
        "memory": MemoryBackend.load(path, ID_SCHEMA, ["person", "age", "group"], batch_size=4),
        "dask": DaskBackend(batch_size=4),
    }[engine]
    bound = UnitBound(column="person", max_rows=1, content=("person", "age", "group"), key=3)
    kept = _id_rows(path, bound, backend)
    assert sorted(p for p, _, _ in kept) == sorted(ids)  # one row of each of six people


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    people=st.lists(st.sampled_from(HOSTILE_IDS), min_size=1, max_size=50),
    ages=st.lists(st.integers(-3, 12), min_size=50, max_size=50),
    m=st.integers(1, 3),
    victim=st.sampled_from(HOSTILE_IDS),
)
def test_removing_one_unit_changes_the_bounded_rows_by_at_most_m(
    tmp_path_factory: pytest.TempPathFactory,
    people: list[int],
    ages: list[int],
    m: int,
    victim: int,
) -> None:
    # Unit-neighbours with hostile ids (above 2^53, at the int64 limits, outside the column's
    # bounds): every other unit keeps exactly its rows, so the bounded table (and any output
    # computed from it) moves by at most m rows.
    tmp = tmp_path_factory.mktemp("ids")
    rows = [(p, a, "abc"[a % 3]) for p, a in zip(people, ages, strict=False)]
    paths = []
    for name, part in (("full", rows), ("less", [r for r in rows if r[0] != victim])):
        frame = pd.DataFrame(part, columns=["person", "age", "group"]).astype({"person": "int64"})
        frame.to_parquet(tmp / f"{name}.parquet", index=False, row_group_size=7)
        paths.append(tmp / f"{name}.parquet")
    bound = UnitBound(column="person", max_rows=m, content=("person", "age", "group"), key=77)
    full, less = (_id_rows(p, bound, StreamingBackend(batch_size=8)) for p in paths)
    assert [r for r in full if r[0] != victim] == less
    assert len(full) - len(less) <= m
    for p in set(people):
        assert sum(1 for r in full if r[0] == p) == min(m, people.count(p))


class _Boom(Exception):
    pass


def _spilling_rows(tmp_path: Path) -> Path:
    rng = np.random.default_rng(9)
    rows = [(f"p{rng.integers(60)}", int(rng.integers(10)), "a") for _ in range(1_200)]
    path = _write(tmp_path, _table(rows), "spill.parquet")
    return path


@pytest.mark.slow
def test_a_pass_that_fails_midway_leaves_no_spill_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _spilling_rows(tmp_path)
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    monkeypatch.setattr(units_module, "SPILL_ROWS", 100)  # buckets on disk after 100 rows
    bound = UnitBound(column="person", max_rows=2, content=COLUMNS, key=4)
    seen: list[int] = []
    inner_update = BoundingAggregate.update

    def failing(self: BoundingAggregate, acc: Any, batch: Any) -> Any:
        seen.append(batch.num_rows)
        if sum(seen) > 600:  # several spills have happened (see the next test)
            raise _Boom
        return inner_update(self, acc, batch)

    monkeypatch.setattr(BoundingAggregate, "update", failing)
    with pytest.raises(_Boom):
        StreamingBackend(batch_size=64).run(BoundingAggregate(bound), path, SCHEMA)
    assert list(spill.iterdir()) == []
    monkeypatch.setattr(BoundingAggregate, "update", inner_update)
    done = StreamingBackend(batch_size=64).run(BoundingAggregate(bound), path, SCHEMA)
    assert len(done.dropped) > 0
    assert list(spill.iterdir()) == []


@pytest.mark.slow
def test_a_pass_killed_midway_leaves_no_spill_file(tmp_path: Path) -> None:
    path = _spilling_rows(tmp_path)
    spill = tmp_path / "tmp"
    spill.mkdir()
    script = f"""
import os, signal, tempfile
import dppub.dp.engine.unit_bounding as units
from dppub.dp.engine import StreamingBackend
from tests.dp.engine.test_unit_bounding import SCHEMA, COLUMNS
tempfile.tempdir = {str(spill)!r}
units.SPILL_ROWS = 100
update = units.BoundingAggregate.update
seen = []
def killed(self, acc, batch):
    seen.append(batch.num_rows)
    if sum(seen) > 600:  # several spills have happened
        os.kill(os.getpid(), signal.SIGKILL)
    return update(self, acc, batch)
units.BoundingAggregate.update = killed
bound = units.UnitBound(column="person", max_rows=2, content=COLUMNS, key=4)
StreamingBackend(batch_size=64).run(units.BoundingAggregate(bound), {str(path)!r}, SCHEMA)
"""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert list(spill.iterdir()) == []


@pytest.mark.slow
def test_a_spilled_partial_travels_between_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dask worker's partial is pickled: its spilled rows travel with it (no file name).
    path = _spilling_rows(tmp_path)
    monkeypatch.setattr(units_module, "SPILL_ROWS", 100)
    aggregate = BoundingAggregate(UnitBound(column="person", max_rows=2, content=COLUMNS, key=4))
    acc = aggregate.empty()
    for batch in StreamingBackend(batch_size=64).batches(path, SCHEMA, COLUMNS):
        acc = aggregate.update(acc, batch)
    assert acc.files is not None
    shipped = pickle.loads(pickle.dumps(acc))
    assert shipped.files is None
    want = aggregate.finish(acc).dropped
    assert np.array_equal(aggregate.finish(shipped).dropped, want)


def _truncate_hashes(monkeypatch: pytest.MonkeyPatch, bits: int = 2) -> None:
    """Every hash of the bounding pass keeps only its low ``bits`` bits: collisions galore."""
    mask = np.uint64((1 << bits) - 1)
    mix, hashed = units_module._mix, units_module._hashed
    monkeypatch.setattr(units_module, "_mix", lambda v, k: mix(v, k) & mask)
    monkeypatch.setattr(units_module, "_hashed", lambda c, k: hashed(c, k) & mask)


@pytest.mark.slow
@pytest.mark.parametrize("spill", [False, True])
@pytest.mark.parametrize("ids", ["string", "int"])
def test_units_whose_hashes_collide_are_never_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: bool, ids: str
) -> None:
    # Issue 34, item 2: with 2-bit hashes, 40 units share 4 hash values. Old code: units with
    # one hash were one unit under one bound (they kept m rows between them, and removing one
    # changed which rows the other kept).
    _truncate_hashes(monkeypatch)
    if spill:
        monkeypatch.setattr(units_module, "SPILL_ROWS", 30)
    rng = np.random.default_rng(34)
    people = rng.integers(0, 40, 300)
    frame = pd.DataFrame(
        {
            "person": [f"p{p}" for p in people] if ids == "string" else people * 2**55 + 1,
            "age": rng.integers(0, 10, 300),
            "group": rng.choice(["a", "b", "c"], 300),
        }
    )
    schema = SCHEMA if ids == "string" else ID_SCHEMA
    path = tmp_path / "t.parquet"
    m = 3
    bound = UnitBound(column="person", max_rows=m, content=COLUMNS, key=5)
    kept = {}
    for name, part in (("full", frame), ("less", frame[people != people[0]])):
        part.to_parquet(path, index=False, row_group_size=7)
        dropped = StreamingBackend(batch_size=11).run(BoundingAggregate(bound), path, schema)
        rows = part.reset_index(drop=True).drop(index=pd.Index(dropped.dropped))
        kept[name] = sorted(rows.itertuples(index=False, name=None))
        want = part.groupby("person").size().clip(upper=m).to_dict()
        assert rows.groupby("person").size().to_dict() == want
    victim = frame["person"].iloc[0]
    assert [r for r in kept["full"] if r[0] != victim] == kept["less"]


@pytest.mark.slow
@pytest.mark.parametrize("spill", [False, True])
def test_labels_whose_hashes_collide_are_two_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: bool
) -> None:
    # Issue 34, item 1: with 2-bit hashes, 12 labels share 4 values. Old code: labels with one
    # hash were one partition, so a unit kept rows in more than max_partitions labels.
    _truncate_hashes(monkeypatch)
    if spill:
        monkeypatch.setattr(units_module, "SPILL_ROWS", 30)
    schema = TableSchema(
        columns=(
            ColumnSpec(name="person", type="string"),
            ColumnSpec(name="age", type="int", bounds=(0, 9)),
            ColumnSpec(name="group", type="string"),
        )
    )
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "person": [f"p{p}" for p in rng.integers(0, 10, 400)],
            "age": rng.integers(0, 10, 400),
            "group": [f"label{g}" for g in rng.integers(0, 12, 400)],
        }
    )
    path = tmp_path / "t.parquet"
    frame.to_parquet(path, index=False, row_group_size=7)
    for p in (1, 2, 3):
        bound = UnitBound(
            column="person", max_rows=8, max_partitions=p, partition="group", content=COLUMNS
        )
        dropped = StreamingBackend(batch_size=11).run(BoundingAggregate(bound), path, schema)
        rows = frame.drop(index=pd.Index(dropped.dropped))
        assert rows.groupby("person")["group"].nunique().max() == p  # each unit has 12 labels
        assert rows.groupby("person").size().max() <= 8


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    people=st.lists(st.sampled_from(["p0", "p1", "p2", "p3"]), min_size=1, max_size=40),
    ages=st.lists(st.integers(0, 9), min_size=40, max_size=40),
    m=st.integers(1, 3),
    victim=st.sampled_from(["p0", "p1", "p2", "p3"]),
)
def test_a_where_filter_is_applied_before_the_bound_and_keeps_units_apart(
    tmp_path_factory: pytest.TempPathFactory,
    people: list[str],
    ages: list[int],
    m: int,
    victim: str,
) -> None:
    # where: age >= 5 (issue 37): a unit's m rows are chosen among the rows the filter keeps
    # (each unit reads min(m, its kept rows)), no filtered-out row is ever read, and removing
    # one unit leaves every other unit's rows as they were: the neighbour relation is one unit.
    from dppub.dp.engine.row_filter import parse_filter

    tmp = tmp_path_factory.mktemp("where")
    where = parse_filter("age >= 5", SCHEMA)
    rows = [(p, a, "abc"[a % 3]) for p, a in zip(people, ages, strict=False)]
    bound = UnitBound(column="person", max_rows=m, content=COLUMNS, key=31, where=where)
    full = _bounded_rows(_write(tmp, _table(rows), "full.parquet"), bound)
    less_rows = [r for r in rows if r[0] != victim]
    less = _bounded_rows(_write(tmp, _table(less_rows), "less.parquet"), bound)
    assert (full["age"] >= 5).all()
    for p in set(people):
        passing = sum(1 for r in rows if r[0] == p and r[1] >= 5)
        assert (full["person"] == p).sum() == min(m, passing)
    others = full[full["person"] != victim]
    assert sorted(map(tuple, others.to_numpy().tolist())) == sorted(
        map(tuple, less.to_numpy().tolist())
    )
