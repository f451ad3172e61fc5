"""Bad input fails as dp.io.read_table fails: same error, same one-line message, no values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dp.engine import histogram_stream
from dp.errors import ConfigError, InputError
from dp.histogram import category_axis, numeric_axis
from dp.io import read_table
from tests.conftest import generate
from tests.dp.engine.conftest import SCHEMA, write_part

AXES = [numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["sex"])]


def _folder(tmp_path: Path, bad: pd.DataFrame) -> Path:
    write_part(tmp_path, "a.parquet", generate.make_census(400, 1), row_group_size=100)
    write_part(tmp_path, "b.parquet", bad, row_group_size=100)
    return tmp_path


def _same_error(path: Path, columns: list[str]) -> str:
    with pytest.raises(InputError) as pandas_error:
        read_table(path, SCHEMA, columns=columns)
    axes = [
        numeric_axis(SCHEMA[c])
        if SCHEMA[c].is_numeric and SCHEMA[c].type == "int"
        else category_axis(SCHEMA[c])
        for c in columns
    ]
    with pytest.raises(InputError) as stream_error:
        histogram_stream(path, SCHEMA, axes, batch_size=64)
    assert str(stream_error.value) == str(pandas_error.value)
    assert "\n" not in str(stream_error.value)
    return str(stream_error.value)


def test_nan_in_a_late_partition(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2).astype({"age": "float64"})
    bad.loc[250, "age"] = np.nan
    path = tmp_path / "d"
    path.mkdir()
    bad.to_parquet(path / "b.parquet", index=False)
    generate.make_census(400, 1).to_parquet(path / "a.parquet", index=False)
    message = _same_error(path, ["age", "sex"])
    assert "missing, NaN or inf" in message


def test_inf_in_a_float_column(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2)
    bad.loc[3, "income"] = np.inf
    with pytest.raises(InputError, match="'income' contains missing, NaN or inf values"):
        histogram_stream(_folder(tmp_path, bad), SCHEMA, [numeric_axis(SCHEMA["income"], bins=4)])


def test_undeclared_category_does_not_echo_the_value(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2)
    bad.loc[299, "sex"] = "SecretValue"
    message = _same_error(_folder(tmp_path, bad), ["age", "sex"])
    assert "outside its declared categories" in message
    assert "SecretValue" not in message


def test_missing_category_value(tmp_path: Path) -> None:
    bad = generate.make_census(300, 2)
    bad.loc[10, "sex"] = None
    assert "contains missing values" in _same_error(_folder(tmp_path, bad), ["sex"])


def test_empty_dataset(tmp_path: Path) -> None:
    write_part(tmp_path, "a.parquet", generate.make_census(0, 1), row_group_size=10)
    write_part(tmp_path, "b.parquet", generate.make_census(0, 2), row_group_size=10)
    assert "the table is empty" in _same_error(tmp_path, ["age", "sex"])


def test_missing_path_and_wrong_type(tmp_path: Path) -> None:
    assert "dataset not found" in _same_error(tmp_path / "nope", ["age"])
    bad = generate.make_census(10, 2)
    bad["age"] = bad["age"].astype(str)
    bad.to_parquet(tmp_path / "t.parquet", index=False)
    assert "should be int" in _same_error(tmp_path / "t.parquet", ["age"])


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_batch_size(census_small: Path, size: object) -> None:
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        histogram_stream(census_small, SCHEMA, AXES, batch_size=size)  # type: ignore[arg-type]
