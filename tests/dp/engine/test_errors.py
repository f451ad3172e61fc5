"""Structure fails the same way on every path; values never fail: the declared policies drop
or map them, and the in-memory frame and the streamed batches see exactly the same rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dppub.dp.axes import Axis, category_axis, numeric_axis
from dppub.dp.engine import histogram_stream
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.frame import read_table
from dppub.dp.reference.histogram import histogram
from dppub.dp.schema import TableSchema
from tests.conftest import generate
from tests.dp.engine.conftest import SCHEMA, write_part

AXES = [numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["sex"])]


def _folder(tmp_path: Path, bad: pd.DataFrame) -> Path:
    write_part(tmp_path, "a.parquet", generate.make_census(400, 1), row_group_size=100)
    write_part(tmp_path, "b.parquet", bad, row_group_size=100)
    return tmp_path


def _same_counts(path: Path, schema: TableSchema, axes: Sequence[Axis]) -> np.ndarray:
    frame = read_table(path, schema, columns=[a.column for a in axes]).frame
    streamed = histogram_stream(path, schema, axes, batch_size=64)
    np.testing.assert_array_equal(streamed, histogram(frame, axes))
    return streamed


def test_a_nan_drops_its_row_in_every_path(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2).astype({"age": "float64"})
    bad.loc[250, "age"] = np.nan
    path = tmp_path / "d"
    path.mkdir()
    bad.to_parquet(path / "b.parquet", index=False)
    generate.make_census(400, 1).to_parquet(path / "a.parquet", index=False)
    assert _same_counts(path, SCHEMA, AXES).sum() == 699


def test_a_declared_missing_value_replaces_nan(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2).astype({"age": "float64"})
    bad.loc[[3, 4], "age"] = np.nan
    schema = TableSchema(
        columns=tuple(replace(c, missing=40) if c.name == "age" else c for c in SCHEMA.columns)
    )
    counts = _same_counts(_folder(tmp_path, bad), schema, [numeric_axis(schema["age"])])
    assert counts.sum() == 700


def test_an_infinity_is_clamped_not_refused(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2)
    bad.loc[3, "income"] = np.inf
    axes = [numeric_axis(SCHEMA["income"], bins=4)]
    counts = _same_counts(_folder(tmp_path, bad), SCHEMA, axes)
    assert counts.sum() == 700


def test_an_undeclared_category_is_dropped_or_mapped(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2)
    bad.loc[[10, 299], "sex"] = "SecretValue"
    bad.loc[11, "sex"] = None
    path = _folder(tmp_path, bad)
    assert _same_counts(path, SCHEMA, AXES).sum() == 697
    mapped = TableSchema(
        columns=tuple(
            replace(c, unknown="Female", missing="Male") if c.name == "sex" else c
            for c in SCHEMA.columns
        )
    )
    axes = [category_axis(mapped["sex"])]
    assert _same_counts(path, mapped, axes).sum() == 700


def test_an_empty_dataset_reads_as_zero_rows(tmp_path: Path) -> None:
    write_part(tmp_path, "a.parquet", generate.make_census(0, 1), row_group_size=10)
    write_part(tmp_path, "b.parquet", generate.make_census(0, 2), row_group_size=10)
    assert _same_counts(tmp_path, SCHEMA, AXES).sum() == 0
    assert read_table(tmp_path, SCHEMA).frame.dtypes["sex"].name == "category"


def _same_error(path: Path, columns: list[str]) -> str:
    with pytest.raises(InputError) as pandas_error:
        read_table(path, SCHEMA, columns=columns)
    axes = [
        numeric_axis(SCHEMA[c]) if SCHEMA[c].is_numeric else category_axis(SCHEMA[c])
        for c in columns
    ]
    with pytest.raises(InputError) as stream_error:
        histogram_stream(path, SCHEMA, axes, batch_size=64)
    assert str(stream_error.value) == str(pandas_error.value)
    assert "\n" not in str(stream_error.value)
    return str(stream_error.value)


def test_structure_fails_alike_and_in_any_file(tmp_path: Path) -> None:
    assert "dataset not found" in _same_error(tmp_path / "nope", ["age"])
    bad = generate.make_census(10, 2)
    bad["age"] = bad["age"].astype(str)
    folder = tmp_path / "f"
    folder.mkdir()
    generate.make_census(10, 1).to_parquet(folder / "a.parquet", index=False)
    bad.to_parquet(folder / "b.parquet", index=False)  # the *second* file has the wrong type
    message = _same_error(folder, ["age"])
    assert "b.parquet: column 'age' should be int" in message


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_batch_size(census_small: Path, size: object) -> None:
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        histogram_stream(census_small, SCHEMA, AXES, batch_size=size)  # type: ignore[arg-type]
