import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dppub.dp import io
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.io import check_source
from dppub.dp.reference.frame import complete_rows, read_table
from dppub.dp.schema import ColumnSpec, TableSchema

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
    ],
)
def test_structural_problems_give_one_clear_line(
    tmp_path: Path, mutate: Callable[[pd.DataFrame], pd.DataFrame], message: str
) -> None:
    path = _write(tmp_path, mutate(_good()))
    with pytest.raises(InputError, match=message) as info:
        read_table(path, SCHEMA)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "rows"),
    [
        (lambda f: f.assign(hours=[1.0, np.nan, 2.0]), 2),  # NaN: its row is dropped
        (lambda f: f.assign(hours=[1.0, np.inf, 2.0]), 3),  # inf: clamped to 99
        (lambda f: f.assign(sex=["Male", "Other", "Male"]), 2),  # undeclared: dropped
        (lambda f: f.assign(sex=["Male", None, "Male"]), 2),  # missing: dropped
        (lambda f: f.iloc[:0], 0),  # empty: zero rows, not an error
    ],
)
def test_values_never_fail_the_read(
    tmp_path: Path, mutate: Callable[[pd.DataFrame], pd.DataFrame], rows: int
) -> None:
    frame = read_table(_write(tmp_path, mutate(_good())), SCHEMA).frame
    assert len(frame) == rows
    assert list(frame.dtypes.astype(str)) == ["int64", "float64", "category"]
    assert frame["hours"].max() <= 99.0 if rows else True


def test_a_shared_frame_marks_values_and_each_release_drops_its_own(tmp_path: Path) -> None:
    bad = _good().assign(hours=[1.0, np.nan, 2.0], sex=["Male", "Male", "Other"])
    path = _write(tmp_path, bad)
    shared = read_table(path, SCHEMA, complete=False).frame
    assert len(shared) == 3
    ages = complete_rows(shared, SCHEMA, ["age"])
    assert ages["age"].dtype == np.int64 and len(ages) == 3
    for columns in (["age", "hours"], ["sex"], ["hours", "sex"]):
        alone = read_table(path, SCHEMA, columns=columns).frame
        pd.testing.assert_frame_equal(complete_rows(shared, SCHEMA, columns), alone)


def test_missing_values_can_be_mapped(tmp_path: Path) -> None:
    schema = TableSchema(
        columns=(
            ColumnSpec(name="age", type="int", bounds=(17, 90)),
            ColumnSpec(name="hours", type="float", bounds=(1, 99), missing=40.0),
            ColumnSpec(
                name="sex",
                type="category",
                categories=("Female", "Male"),
                unknown="Female",
                missing="Male",
            ),
        )
    )
    bad = _good().assign(
        hours=[1.0, np.nan, 2.0], sex=np.array([None, "Other", "Male"], dtype=object)
    )
    frame = read_table(_write(tmp_path, bad), schema).frame
    assert frame["hours"].tolist() == [1.0, 40.0, 2.0]
    assert frame["sex"].tolist() == ["Male", "Female", "Male"]


def test_policies_are_checked_against_the_domain() -> None:
    with pytest.raises(ConfigError, match="missing value 120 is outside"):
        ColumnSpec(name="h", type="float", bounds=(1, 99), missing=120)
    with pytest.raises(ConfigError, match="unknown must be 'drop' or a declared category"):
        ColumnSpec(name="s", type="category", categories=("a",), unknown="b")


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


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "parts"
    folder.mkdir()
    _write(folder, _good().iloc[:2], "a.parquet")
    _write(folder, _good().iloc[2:], "b.parquet")
    return folder


def test_a_folder_reads_each_real_file_once_and_skips_hidden_names(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _write(outside, _good(), "c.parquet")
    (folder / "more").symlink_to(outside)  # a link to a folder outside: read, once
    (folder / "_SUCCESS").write_text("")  # marker and hidden files are not data
    (folder / ".part.crc").write_text("x")
    assert io.data_files(folder) == (
        (folder / "a.parquet").resolve(),
        (folder / "b.parquet").resolve(),
        (outside / "c.parquet").resolve(),
    )
    assert len(read_table(folder, SCHEMA).frame) == 6


@pytest.mark.parametrize(
    ("link", "message"),
    [
        (lambda d: (d / "self").symlink_to(d), "links back to a folder it is inside"),
        (lambda d: (d / "deep").mkdir() or (d / "deep" / "up").symlink_to(d), "must not loop"),
        (lambda d: (d / "twin.parquet").symlink_to(d / "a.parquet"), "are the same file"),
        (lambda d: os.link(d / "a.parquet", d / "hard.parquet"), "are the same file"),
    ],
    ids=["self", "ancestor", "second link", "hard link"],
)
def test_a_folder_that_loops_or_repeats_a_file_is_refused(
    tmp_path: Path, link: Callable[[Path], None], message: str
) -> None:
    # Rows read twice would count twice while noise is sized for one: refused from the listing.
    folder = _folder(tmp_path)
    link(folder)
    with pytest.raises(InputError, match=message) as info:
        check_source(folder, SCHEMA)
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match=message):
        read_table(folder, SCHEMA)


def test_storage_types_never_decide_the_read(tmp_path: Path) -> None:
    # 'age' is int64 in one file and double in the other: a fraction is rounded (half to even)
    # after clamping, a NaN meets the missing policy; a null-typed column (no value in its file,
    # as pandas writes it) is all missing -- whichever file comes first.
    folder = tmp_path / "mixed"
    folder.mkdir()
    _write(folder, _good(), "1.parquet")
    doubles = _good().assign(age=[40.5, np.nan, 41.5])
    _write(folder, doubles, "2.parquet")
    nulls = _good().assign(age=np.full(3, None, dtype=object), sex=np.full(3, None, dtype=object))
    _write(folder, nulls, "0.parquet")
    assert pq.read_schema(folder / "0.parquet").field("age").type == pa.null()
    frame = read_table(folder, SCHEMA).frame
    assert frame["age"].tolist() == [20, 30, 90, 40, 42]
    assert frame["age"].dtype == np.int64


def test_an_int_unit_column_must_be_stored_as_integers(tmp_path: Path) -> None:
    schema = TableSchema(
        columns=(
            ColumnSpec(name="person", type="int", bounds=(0, 10), unit=True),
            ColumnSpec(name="age", type="int", bounds=(17, 90)),
        )
    )
    path = _write(tmp_path, pd.DataFrame({"person": [1.0, 2.0], "age": [20, 30]}))
    with pytest.raises(InputError, match="'person' is the privacy unit.*found double"):
        check_source(path, schema)
    for bad in ({"type": "float", "bounds": (0, 9)}, {"missing": 3}):
        spec: dict[str, Any] = {"type": "int", "bounds": (0, 9), **bad}
        with pytest.raises(ConfigError, match="'person' is the privacy unit"):
            ColumnSpec(name="person", unit=True, **spec)
    with pytest.raises(ConfigError, match="'person' is the privacy unit"):
        ColumnSpec(name="person", type="category", categories=("a", "b"), unknown="a", unit=True)
