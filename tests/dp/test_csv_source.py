"""CSV files as a source, beside Parquet: the same values through the same validator, the
structure checked from the header row only, a bad row or value never a refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dppub.dp.axes import category_axis
from dppub.dp.engine import histogram_stream
from dppub.dp.engine.aggregate import StreamingBackend
from dppub.dp.engine.memory import estimate_bytes
from dppub.dp.errors import InputError
from dppub.dp.io import check_source
from dppub.dp.reference.frame import read_table
from dppub.dp.schema import ColumnSpec, TableSchema
from tests.conftest import generate
from tests.dp.engine.conftest import SCHEMA

UNIT = TableSchema(
    columns=(
        ColumnSpec(name="person", type="int", bounds=(0, 10**18), unit=True),
        ColumnSpec(name="age", type="int", bounds=(17, 90)),
        ColumnSpec(name="ward", type="category", categories=("A", "B")),
    )
)


def _census(rows: int = 400) -> pd.DataFrame:
    frame: pd.DataFrame = generate.make_census(rows, 3)
    return frame


def test_a_csv_file_reads_the_values_its_parquet_twin_reads(tmp_path: Path) -> None:
    frame = _census()
    frame.loc[::17, "income"] = np.nan  # missing values travel as empty cells
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    frame.to_csv(tmp_path / "t.csv", index=False)
    parquet = read_table(tmp_path / "t.parquet", SCHEMA).frame
    text = read_table(tmp_path / "t.csv", SCHEMA).frame
    assert len(parquet) < len(frame)  # the missing incomes dropped their rows in both
    pd.testing.assert_frame_equal(text, parquet)


def test_a_folder_of_csv_files_is_read_in_file_order(tmp_path: Path) -> None:
    frame = _census(300)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        frame.iloc[100 * i : 100 * (i + 1)].to_csv(folder / f"part-{i}.csv", index=False)
    frame.to_parquet(tmp_path / "whole.parquet", index=False)
    whole = read_table(tmp_path / "whole.parquet", SCHEMA).frame
    assert read_table(folder, SCHEMA).frame.equals(whole)
    race = [category_axis(SCHEMA["race"])]
    got = histogram_stream(folder, SCHEMA, race, batch_size=50)
    assert np.array_equal(got, histogram_stream(tmp_path / "whole.parquet", SCHEMA, race))


def test_bad_rows_and_values_never_refuse_the_read(tmp_path: Path) -> None:
    # A number that does not parse or an empty cell is missing (the drop policy leaves the row
    # out); a row with a field too many or too few is left out. Refusing instead would let one
    # row decide whether a run publishes.
    path = tmp_path / "t.csv"
    path.write_text(
        "person,age,ward\n"
        "1,30,A\n"
        "2,abc,B\n"  # age does not parse
        "3,,A\n"  # age empty
        "4,40,A,extra\n"  # a field too many
        "5\n"  # too few
        '6," 50 ",B\n'  # blanks around a number are fine
        "x7,60,A\n"  # a unit id that is no whole number
        "9223372036854775807,95,B\n"  # int64's largest id, exact; age clamped to 90
        "9223372036854775808,70,B\n"  # beyond int64: the id is missing
        '8,20,"A\nB"\n',  # a quoted newline is one (undeclared) value: the drop policy
        encoding="utf-8",
    )
    got = read_table(path, UNIT).frame
    ids = [b.keys["person"] for b in StreamingBackend().batches(path, UNIT, ["person", "age"])]
    # Ids as stored, 0 where the id itself is missing (x7, beyond int64): 8 rows parsed.
    assert np.concatenate(ids).tolist() == [1, 2, 3, 6, 0, 2**63 - 1, 0, 8]
    assert got["person"].tolist()[:2] == [1, 6]
    assert got["age"].tolist() == [30, 50, 90]
    assert got["ward"].astype(str).tolist() == ["A", "B", "B"]


def test_the_structure_is_checked_from_the_header_row_alone(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    # After the header the file is not even text: check_source reads no value.
    path.write_bytes(b"person,age,ward\n" + bytes(range(256)) * 4)
    check_source(path, UNIT)
    assert estimate_bytes(path, ["age"]) >= path.stat().st_size
    short = tmp_path / "short.csv"
    short.write_text("person,ward\n1,A\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"short\.csv: missing declared column\(s\) \['age'\]"):
        check_source(short, UNIT)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="starts with its header row"):
        check_source(empty, UNIT)


def test_a_folder_mixing_csv_and_parquet_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    _census(10).to_csv(folder / "a.csv", index=False)
    _census(10).to_parquet(folder / "b.parquet", index=False)
    with pytest.raises(InputError, match=r"holds CSV \(a\.csv\) and other files \(b\.parquet\)"):
        check_source(folder, SCHEMA)
