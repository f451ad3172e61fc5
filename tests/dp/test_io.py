from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dp.errors import InputError
from dp.io import read_table
from dp.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="age", type="int", bounds=(17, 90)),
        ColumnSpec(name="hours", type="float", bounds=(1, 99)),
        ColumnSpec(name="sex", type="category", categories=("Female", "Male")),
    )
)


def _write(tmp_path: Path, frame: pd.DataFrame, name: str = "t.parquet") -> Path:
    path = tmp_path / name
    frame.to_parquet(path, index=False)
    return path


def _good() -> pd.DataFrame:
    return pd.DataFrame(
        {"age": [20, 30, 95], "hours": [10.0, 120.0, 40.0], "sex": ["Male", "Female", "Male"]}
    )


def test_reads_and_clamps_without_reporting_counts(tmp_path: Path) -> None:
    res = read_table(_write(tmp_path, _good()), SCHEMA)
    assert res.frame["age"].tolist() == [20, 30, 90]
    assert res.frame["hours"].max() == 99.0
    assert res.clamped == {"age": 1, "hours": 1}
    assert "clamped" not in repr(res)  # exact counts stay out of reprs and logs


def test_partitioned_folder(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    _write(folder, _good().iloc[:2], "a.parquet")
    _write(folder, _good().iloc[2:], "b.parquet")
    assert len(read_table(folder, SCHEMA).frame) == 3


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.drop(columns="hours"), r"missing declared column\(s\) \['hours'\]"),
        (lambda f: f.assign(age=["a", "b", "c"]), "column 'age' should be int"),
        (lambda f: f.assign(hours=[1.0, np.nan, 2.0]), "'hours' contains missing, NaN or inf"),
        (lambda f: f.assign(hours=[1.0, np.inf, 2.0]), "'hours' contains missing, NaN or inf"),
        (lambda f: f.assign(sex=["Male", "Other", "Male"]), "outside its declared categories"),
        (lambda f: f.iloc[:0], "the table is empty"),
    ],
)
def test_bad_input_gives_one_clear_line(tmp_path: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, mutate(_good()))
    with pytest.raises(InputError, match=message) as info:
        read_table(path, SCHEMA)
    assert "\n" not in str(info.value)
    assert "Other" not in str(info.value)  # never echo a data value


def test_missing_and_non_parquet_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="dataset not found"):
        read_table(tmp_path / "nope.parquet", SCHEMA)
    bogus = tmp_path / "bogus.parquet"
    bogus.write_text("age,hours\n1,2\n")
    with pytest.raises(InputError, match="cannot read .* as Parquet"):
        read_table(bogus, SCHEMA)
    truncated = _write(tmp_path, _good(), "trunc.parquet")
    truncated.write_bytes(truncated.read_bytes()[:-40])
    with pytest.raises(InputError, match="cannot read .* as Parquet"):
        read_table(truncated, SCHEMA)
