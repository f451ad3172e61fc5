"""The CSV copy of a streamed Parquet table (the k-anonymous table's ``table.csv``) follows
the CSV conventions of every other released table: RFC 4180 line ends, so a label holding a
carriage return is quoted, never split."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from dppub.dp.publication import Staging


def test_a_copied_csv_quotes_a_label_with_a_carriage_return(tmp_path: Path) -> None:
    # old code: copy_as_csv wrote "\n" line ends, so "a\rb" went out unquoted and CSV readers
    # split its row in two (write_table, the tables' writer, already wrote "\r\n")
    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    frame = pd.DataFrame({"zip": ["a\rb", "c\nd", "190*"], "age": ["17-26", "*", "27-36"]})
    st.write_frame("k", "table.parquet", frame)
    st.copy_as_csv("k", "table")
    path = st.release_dir("k") / "table.csv"
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["zip", "age"], ["a\rb", "17-26"], ["c\nd", "*"], ["190*", "27-36"]]
    pd.testing.assert_frame_equal(pd.read_csv(path, dtype=str, keep_default_na=False), frame)
    assert path.read_bytes().endswith(b"27-36\r\n")


def test_an_empty_copied_csv_is_its_header_with_a_crlf(tmp_path: Path) -> None:
    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    st.write_frame("k", "table.parquet", pd.DataFrame({"zip": pd.Series([], dtype=str)}))
    st.copy_as_csv("k", "table")
    assert (st.release_dir("k") / "table.csv").read_bytes() == b"zip\r\n"
