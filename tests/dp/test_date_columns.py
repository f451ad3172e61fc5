"""``type: date`` columns: a Parquet date or timestamp, or ISO text (a CSV file's), is read as
its ``YYYY-MM-DD`` text; another stored type is refused from the footer; a date cannot be the
privacy unit."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.io import check_source
from dppub.dp.reference.frame import read_table
from dppub.dp.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(columns=(ColumnSpec(name="on", type="date"),))


@pytest.mark.parametrize(
    "column",
    [
        pa.array([dt.date(2026, 3, 14), None, dt.date(2027, 12, 31)]),
        pa.array([dt.datetime(2026, 3, 14, 23, 59), None, dt.datetime(2027, 12, 31)]),
        pa.array(
            [dt.datetime(2026, 3, 14, 12), None, dt.datetime(2027, 12, 31)],
            type=pa.timestamp("ms", tz="UTC"),
        ),
        pa.array(["2026-03-14", None, "2027-12-31"]),
    ],
)
def test_a_date_is_read_as_its_iso_text(tmp_path: Path, column: pa.Array) -> None:
    path = tmp_path / "dates.parquet"
    pq.write_table(pa.table({"on": column}), path)
    check_source(path, SCHEMA)
    frame = read_table(path, SCHEMA).frame
    assert frame["on"].tolist() == ["2026-03-14", "2027-12-31"]  # the null row is dropped


def test_a_csv_date_is_its_text(tmp_path: Path) -> None:
    path = tmp_path / "dates.csv"
    pd.DataFrame({"on": ["2026-03-14", "2027-01-02"]}).to_csv(path, index=False)
    assert read_table(path, SCHEMA).frame["on"].tolist() == ["2026-03-14", "2027-01-02"]


def test_another_type_or_a_date_unit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"on": pa.array([1.5])}), path)
    with pytest.raises(InputError, match="column 'on' should be date, found double"):
        check_source(path, SCHEMA)
    with pytest.raises(ConfigError, match="is the privacy unit: it must be int, string or"):
        ColumnSpec(name="on", type="date", unit=True)
