"""A table's fold with missing values, a ``where:`` filter and a privacy unit (issue 37): every
vector a component reads moves between neighbours (one unit's bounded rows removed, missing
values among them) by at most its declared sensitivity, and every engine agrees."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data import generate
from dppub.dp.axes import category_axis, numeric_axis
from dppub.dp.engine import MemoryBackend, StreamingBackend
from dppub.dp.engine.batches import Batch
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.engine.folds.table_sums import GroupSums, TableSumsAggregate
from dppub.dp.engine.row_filter import parse_filter
from dppub.dp.numerics.fixedpoint import CONVERSION_ALLOWANCE
from dppub.dp.tables.components import row_bound
from dppub.dp.tables.split import Component
from dppub.dp.tables.spread import distinct_bound
from tests.dp.engine.conftest import SCHEMA, write_part

RACES = SCHEMA["race"].categories or ()
WHERE = parse_filter("age >= 30 and race != 'Other'", SCHEMA)
GRID = numeric_axis(SCHEMA["hours"], bins=8)
AGG = TableSumsAggregate(
    axes=(category_axis(SCHEMA["race"]),),
    bounds=(("income", 0.0, 250_000.0), ("hours", 1.0, 99.0)),
    grids=(GRID,),
    counted=("income", "hours"),
    squared=(("hours", 1.0, 99.0),),
    unit="unit",
    max_groups=2,
    where=WHERE,
)

Row = tuple[int, int, float | None, float | None, int]
"""race, age, income (None: missing), hours (None: missing), unit."""


def _batch(rows: list[Row]) -> Batch:
    race, age, income, hours, unit = (list(c) for c in zip(*rows, strict=True))
    text = pa.array([RACES[i] for i in race], type=pa.string()).dictionary_encode()
    missing = {
        "income": np.array([v is None for v in income]),
        "hours": np.array([v is None for v in hours]),
    }
    return Batch(
        num_rows=len(rows),
        numeric={
            "age": np.asarray(age, dtype=np.int64),
            # a missing value holds a placeholder, as the reader leaves it
            "income": np.asarray([0.0 if v is None else v for v in income]),
            "hours": np.asarray([1.0 if v is None else v for v in hours]),
        },
        text={"race": text},
        clamped={},
        missing={c: m for c, m in missing.items() if m.any()},
        keys={"unit": np.asarray(unit, dtype=np.int64)},
    )


def _fold(rows: list[Row]) -> GroupSums:
    acc = AGG.empty()
    if rows:
        acc = AGG.update(acc, _batch(rows))
    return AGG.finish(acc)


def _l1(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def test_count_is_every_kept_row_and_each_column_its_present_rows() -> None:
    # Old code: the fold read the rows complete in all its columns (count 1, not 3).
    rows: list[Row] = [
        (0, 40, 10.0, None, 1),
        (0, 40, None, 20.0, 1),
        (0, 41, 30.0, 30.0, 2),
        (0, 20, 30.0, 30.0, 3),  # age < 30: filtered out
        (4, 50, 30.0, 30.0, 4),  # race Other: filtered out
    ]
    sums = _fold(rows)
    assert sums.counts[0] == 3 and sums.counts.sum() == 3
    assert (sums.present["income"][0], sums.present["hours"][0]) == (2, 2)
    assert sums.centred["income"][0] == pytest.approx(10.0 + 30.0 - 2 * 125_000.0)
    assert sums.histograms["hours"].sum() == 2
    # squares: (v - 50)^2 - 49^2 / 2 over the present hours (20 and 30)
    assert sums.squares["hours"][0] == pytest.approx(900.0 + 400.0 - 49.0**2, abs=0.1)
    assert sums.distinct is not None and sums.distinct[0] == 2  # units 1 and 2


def test_a_unit_in_more_groups_than_p_is_counted_in_p_of_them() -> None:
    # max_groups = 2: unit 7 has rows in four races (all kept by the filter), counted in two;
    # the choice is the unit's own (adding unit 8 elsewhere does not change it).
    rows: list[Row] = [(r, 40, 1.0, 1.0, 7) for r in range(4)]
    alone = _fold(rows).distinct
    more = _fold([*rows, (0, 40, 1.0, 1.0, 8), (3, 40, 1.0, 1.0, 8)]).distinct
    assert alone is not None and more is not None
    assert alone.sum() == 2 and set(np.flatnonzero(alone)) <= {0, 1, 2, 3}
    assert more.sum() == 4
    assert (more - alone).tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]


VALUE = st.one_of(st.none(), st.floats(0.0, 250_000.0, allow_nan=False))
HOURS = st.one_of(st.none(), st.floats(1.0, 99.0, allow_nan=False))


def _row(unit: st.SearchStrategy[int], races: st.SearchStrategy[int]) -> st.SearchStrategy[Row]:
    return st.tuples(races, st.integers(17, 90), VALUE, HOURS, unit)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(rows=st.lists(_row(st.integers(0, 5), st.integers(0, 4)), max_size=40), data=st.data())
def test_unit_neighbours_move_every_vector_by_at_most_its_sensitivity(
    rows: list[Row], data: st.DataObject
) -> None:
    # A unit (id 99) with m bounded rows in any groups, missing values among them, filtered like
    # every row. Removing it moves: count and count(col) by m, a centred sum by m half, centred
    # squares by m half^2 / 2, a grid by m, and the distinct units by the groups it is counted
    # in: at most distinct_bound(m, p) = min(m, p), p = 2 (dp.tables.spread).
    m = data.draw(st.integers(1, 5))
    removed = data.draw(st.lists(_row(st.just(99), st.integers(0, 4)), min_size=1, max_size=m))
    a, b = _fold(rows + removed), _fold(rows)
    allowance = 1 + CONVERSION_ALLOWANCE
    # each vector against the per-row bound its noise is calibrated to (row_bound), times m
    bounds = {c: (lo, hi) for c, lo, hi in AGG.bounds}

    def declared(kind: str, column: str | None = None) -> float:
        return m * row_bound(Component(kind, column, 1.0, 1.0), bounds)  # type: ignore[arg-type]

    assert _l1(a.counts, b.counts) <= declared("count")
    for column in ("income", "hours"):
        assert _l1(a.present[column], b.present[column]) <= declared("count", column)
        assert (
            _l1(a.centred[column], b.centred[column]) <= declared("centred_sum", column) * allowance
        )
    assert (
        _l1(a.squares["hours"], b.squares["hours"])
        <= declared("centred_square", "hours") * allowance
    )
    assert declared("centred_square", "hours") == m * 49.0**2 / 2
    assert _l1(a.histograms["hours"], b.histograms["hours"]) <= m
    assert a.distinct is not None and b.distinct is not None
    assert _l1(a.distinct, b.distinct) <= distinct_bound(rows_per_unit=m, max_partitions=2)
    # The table's count read off a pair and the rows missing the column, in parallel
    # (dp.tables.split): a = S + half N_x, b = half N_x - S at scale 2 half / e, missing =
    # count - N_x at scale 1 / e; the unit's privacy loss is at most m e.
    for column, half in (("income", 125_000.0), ("hours", 49.0)):
        loss = 0.0
        pair = [
            (
                x.centred[column] + half * x.present[column],
                half * x.present[column] - x.centred[column],
            )
            for x in (a, b)
        ]
        loss += _l1(pair[0][0], pair[1][0]) / (2 * half) + _l1(pair[0][1], pair[1][1]) / (2 * half)
        loss += _l1(a.counts - a.present[column], b.counts - b.present[column])
        assert loss <= m * allowance


def test_every_engine_gives_the_same_bits_with_missing_values_and_a_filter(
    tmp_path: Path,
) -> None:
    frame = generate.make_census(900, 9)
    frame["hours"] = frame["hours"].where(np.arange(900) % 5 != 0)
    frame["income"] = frame["income"].where(np.arange(900) % 3 != 0)
    write_part(tmp_path, "a.parquet", frame.iloc[:400], row_group_size=128)
    write_part(tmp_path, "b.parquet", frame.iloc[400:], row_group_size=128)
    agg = TableSumsAggregate(
        axes=AGG.axes,
        bounds=AGG.bounds,
        grids=AGG.grids,
        counted=AGG.counted,
        squared=AGG.squared,
        where=parse_filter("age >= 30 and race != 'Other'", SCHEMA),
    )
    streamed = StreamingBackend(batch_size=150).run(agg, tmp_path, SCHEMA)
    memory = MemoryBackend.load(tmp_path, SCHEMA, agg.columns, batch_size=97)
    dask = DaskBackend(batch_size=150).run(agg, tmp_path, SCHEMA)  # local scheduler
    for other in (memory.run(agg, tmp_path, SCHEMA), dask):
        for name, vector in streamed.vectors().items():
            assert vector.tobytes() == other.vectors()[name].tobytes(), name
    kept = frame[(frame["age"] >= 30) & (frame["race"] != "Other")]
    assert streamed.counts.sum() == len(kept)
    assert streamed.present["hours"].sum() == kept["hours"].notna().sum() < len(kept)
    assert streamed.present["income"].sum() == kept["income"].notna().sum()


def test_every_engine_counts_the_same_distinct_units(tmp_path: Path) -> None:
    from dppub.dp.schema import ColumnSpec, TableSchema

    schema = TableSchema(
        columns=(*SCHEMA.columns, ColumnSpec(name="person", type="string", unit=True))
    )
    frame = generate.make_census(600, 3)
    frame["person"] = [f"p{i % 97}" for i in range(600)]
    frame.iloc[:250].to_parquet(tmp_path / "a.parquet", index=False, row_group_size=64)
    frame.iloc[250:].to_parquet(tmp_path / "b.parquet", index=False, row_group_size=64)
    agg = TableSumsAggregate(axes=AGG.axes, unit="person", max_groups=2)
    streamed = StreamingBackend(batch_size=50).run(agg, tmp_path, schema)
    dask = DaskBackend(batch_size=70).run(agg, tmp_path, schema)
    assert streamed.distinct is not None and dask.distinct is not None
    assert streamed.distinct.tobytes() == dask.distinct.tobytes()
    # each person counted in at most 2 races, once per race
    per_race = frame.groupby("race")["person"].nunique()
    races_per_person = frame.groupby("person")["race"].nunique()
    assert streamed.distinct.sum() == races_per_person.clip(upper=2).sum()
    assert (streamed.distinct <= per_race.reindex(RACES, fill_value=0).to_numpy()).all()
