"""A released table as an office publishes it: rounded to its precision, flagged by relative
standard error, small cells withheld (margins kept); the wide layout and the workbook."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dppub.dp.tables.margins import Dimension
from dppub.dp.tables.office import Presentation, office_table
from dppub.dp.tables.quality import quality_flags
from dppub.dp.tables.split import Measure
from dppub.dp.tables.table import TableDesign
from dppub.dp.tables.wide import TOTAL, WITHHELD, wide_blocks, wide_csv
from dppub.dp.tables.workbook import write_workbook

SEX, AGE = ("F", "M"), ("young", "old")


def _released() -> tuple[pd.DataFrame, TableDesign]:
    """A 2 x 2 table with margins: counts and means of x, as :func:`release_table` gives them."""
    keys = [(s, a) for s in SEX for a in AGE] + [(s, "*") for s in SEX]
    keys += [("*", a) for a in AGE] + [("*", "*")]
    count = [2086.0911, 7.4, 1500.2, 310.7, 2093.49, 1810.9, 3586.29, 318.1, 3904.39]
    mean = [40.14567, 38.0, 41.5, 39.9, 40.1, 41.3, 40.9, 39.0, 40.8]
    frame = pd.DataFrame(keys * 2, columns=["sex", "age"])
    frame["measure"] = ["count"] * 9 + ["mean(x)"] * 9
    frame["answer"] = count + mean
    se = [9.1786] * 9 + [0.0342, 12.0, 0.05, 0.3, 0.03, 0.04, 0.03, 0.3, 0.02]
    frame["std_error"] = se
    frame["ci_low"] = frame["answer"] - 2 * frame["std_error"]
    frame["ci_high"] = frame["answer"] + 2 * frame["std_error"]
    design = TableDesign(
        keys=("sex", "age"),
        dims=(Dimension(SEX), Dimension(AGE)),
        measures=(Measure("count"), Measure("mean", "x")),
        components=(),
        margins=True,
    )
    return frame, design


def test_each_row_is_rounded_to_its_precision_and_counts_to_integers() -> None:
    frame, design = _released()
    table = office_table(frame, design, Presentation())
    text = table.text()
    first = text.iloc[0]
    assert (first["answer"], first["std_error"], first["ci_low"]) == ("2086", "9", "2068")
    mean = text[text["measure"] == "mean(x)"].iloc[0]
    assert (mean["answer"], mean["std_error"], mean["ci_high"]) == ("40.146", "0.034", "40.214")
    # the Parquet floats are the same numbers as the CSV's text
    for c in ("answer", "std_error", "ci_low", "ci_high"):
        assert np.allclose(table.answers[c], text[c].astype(float), rtol=0, atol=0)


def test_quality_flags_follow_the_relative_standard_error_and_its_thresholds() -> None:
    assert quality_flags([100, 100, 100], [25, 26, 51]) == ["ok", "use with caution", "unreliable"]
    strict = quality_flags([100, 100], [11, 21], caution=0.1, unreliable=0.2)
    assert strict == ["use with caution", "unreliable"]
    frame, design = _released()
    table = office_table(frame, design, Presentation())
    # mean 38.0 +- 12: RSE 32% (use with caution); count 7 +- 9: RSE 130% (unreliable)
    flags = dict(
        zip(
            zip(table.answers["measure"], table.answers["answer"], strict=True),
            table.answers["quality"],
            strict=True,
        )
    )
    assert flags[("mean(x)", 38.0)] == "use with caution"
    assert flags[("count", 7.0)] == "unreliable"


def test_suppression_withholds_small_cells_marks_them_and_keeps_margins() -> None:
    frame, design = _released()
    table = office_table(frame, design, Presentation(suppress_below=10))
    out = table.answers
    withheld = out[out["quality"] == "suppressed"]
    # the cell (F, old) of count 7: both its measures, blank and marked, still in the table
    assert len(out) == len(frame) and len(withheld) == 2
    assert set(zip(withheld["sex"], withheld["age"], strict=True)) == {("F", "old")}
    assert withheld[["answer", "std_error", "ci_low", "ci_high"]].isna().all().all()
    # the margins that hold it are published (the DP guarantee does not need suppression)
    margins = out[(out["sex"] == "*") | (out["age"] == "*")]
    assert margins["answer"].notna().all()
    assert table.text().loc[withheld.index, "answer"].eq("").all()


def test_the_wide_layout_has_the_first_key_down_the_second_across_and_totals() -> None:
    frame, design = _released()
    table = office_table(frame, design, Presentation(suppress_below=10))
    blocks = wide_blocks(table, design.keys)
    assert [b.measure for b in blocks] == ["count", "mean(x)"]
    count = blocks[0]
    assert count.rows == (("F",), ("M",), (TOTAL,)) and count.columns == ("young", "old", TOTAL)
    assert count.text == (
        ("2086", WITHHELD, "2093"),
        ("1500", "311", "1811"),
        ("3586", "318", "3904"),
    )
    rows = list(csv.reader(io.StringIO(wide_csv(blocks))))
    assert rows[0] == ["count by sex (down) and age (across)"]
    assert rows[1] == ["sex", "young", "old", "Total"]
    assert rows[4] == ["Total", "3586", "318", "3904"]
    assert rows[5] == [] and rows[6] == ["mean(x) by sex (down) and age (across)"]


def test_a_one_key_table_is_one_column_per_measure() -> None:
    frame = pd.DataFrame(
        {
            "race": ["A", "B", "A", "B"],
            "measure": ["count", "count", "sum(x)", "sum(x)"],
            "answer": [12.3, 45.6, 1234.5, 5678.9],
            "std_error": [1.5, 1.5, 310.0, 310.0],
            "ci_low": [9.0, 42.0, 1170.0, 5610.0],
            "ci_high": [15.0, 49.0, 1300.0, 5740.0],
        }
    )
    design = TableDesign(
        keys=("race",),
        dims=(Dimension(("A", "B")),),
        measures=(Measure("count"), Measure("sum", "x")),
        components=(),
    )
    blocks = wide_blocks(office_table(frame, design, Presentation()), design.keys)
    assert blocks[1].header == ("race", "sum(x)")
    assert blocks[1].text == (("1230",), ("5680",))


def test_the_workbook_holds_the_published_values_and_the_notes(tmp_path: Path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    frame, design = _released()
    table = office_table(frame, design, Presentation(suppress_below=10))
    path = tmp_path / "answers.xlsx"
    write_workbook(path, wide_blocks(table, design.keys), [("Guarantee", "epsilon 1")])
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["count", "mean(x)", "Notes"]
    sheet = book["mean(x)"]
    assert [c.value for c in sheet[2]] == ["sex", "young", "old", "Total"]
    long = table.answers.set_index(["measure", "sex", "age"])["answer"]
    for row in sheet.iter_rows(min_row=3):
        sex = "*" if row[0].value == TOTAL else row[0].value
        for cell, age in zip(row[1:], ("young", "old", "*"), strict=True):
            value = long[("mean(x)", sex, age)]
            if np.isnan(value):
                assert cell.value == WITHHELD
            else:
                assert cell.value == value
    assert book["mean(x)"]["B3"].number_format == "0.000"  # 40.146: its three decimals
    flagged = book["count"]["C4"]  # (M, old) 311 +- 9: ok; (F, old) withheld
    assert book["count"]["C3"].value == WITHHELD and flagged.value == 311
    notes = {r[0].value: r[1].value for r in book["Notes"].iter_rows()}
    assert notes["Guarantee"] == "epsilon 1" and "[c]" in notes["Marks"]
