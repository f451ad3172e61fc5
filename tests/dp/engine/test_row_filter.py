"""``where:`` filters: parsed against the declared columns, refused in one line otherwise, and
on every batch exactly the rows pandas' query keeps (a missing value never kept)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.engine.aggregate import StreamingBackend
from dppub.dp.engine.batches import Batch
from dppub.dp.engine.row_filter import parse_filter
from dppub.dp.errors import ConfigError
from dppub.dp.reference.frame import read_table
from tests.dp.engine.conftest import SCHEMA


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import generate

    frame = generate.make_census(2000, 11)
    frame.loc[::13, "hours"] = np.nan  # missing: the drop policy marks them
    path = tmp_path_factory.mktemp("filter") / "census.parquet"
    frame.to_parquet(path, index=False)
    return path


FILTERS = [
    ("age >= 18 and race in ('White', 'Black')", "age >= 18 and race in ('White', 'Black')"),
    ("18 <= age < 40", "18 <= age < 40"),
    ("not (sex == 'Female' or hours > 60)", "not (sex == 'Female' or hours > 60)"),
    ("40 < age", "40 < age"),
    (
        "education not in ('Bachelors',) or age == 30",
        "education not in ('Bachelors',) or age == 30",
    ),
    ("hours <= 40.5", "hours <= 40.5"),
]


@pytest.mark.parametrize(("where", "query"), FILTERS)
def test_a_filter_keeps_the_rows_pandas_keeps(census: Path, where: str, query: str) -> None:
    row_filter = parse_filter(where, SCHEMA)
    columns = ["age", "sex", "race", "education", "hours"]
    kept = np.concatenate(
        [
            row_filter.keep(b)
            for b in StreamingBackend(batch_size=300).batches(census, SCHEMA, columns)
        ]
    )
    # pandas on the validated frame, missing values kept as NA: a row with NA in a column the
    # filter reads is never kept.
    frame = read_table(census, SCHEMA, columns=columns, complete=False).frame
    known = frame[list(row_filter.columns)].notna().all(axis=1)
    evaluated = frame.eval(query)
    assert isinstance(evaluated, pd.Series)
    expected = known & evaluated.fillna(False).astype(bool)
    assert kept.tolist() == expected.tolist()
    assert 0 < kept.sum() < len(kept)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("agee >= 18", "'agee' is not a declared column"),
        ("age >= '18'", "'age' is numeric: compare it with numbers"),
        ("race == 1", "'race' holds text"),
        ("race in ('Martian',)", "not among 'race'"),
        ("len(zip) > 3", "one side must be a column"),
        ("age + 1 > 3", "one side must be a column"),
        ("age", "is not a comparison of a column"),
        ("age > hours", "is not a number or a quoted string"),
        ("18 < 20", "one side must be a column"),
        ("age >= ", "is not an expression"),
        ("age in 18", "'in' needs a list of literals"),
        ("age is None", "not an allowed comparison"),
    ],
)
def test_what_a_filter_may_not_say_is_refused_in_one_line(where: str, message: str) -> None:
    with pytest.raises(ConfigError, match="where: ") as caught:
        parse_filter(where, SCHEMA)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    ages=st.lists(st.integers(17, 90), min_size=0, max_size=30),
    extra=st.integers(17, 90),
    cut=st.integers(17, 90),
)
def test_a_row_more_keeps_at_most_one_row_more_and_changes_no_other(
    ages: list[int], extra: int, cut: int
) -> None:
    # A filter is a function of one row: the neighbour relation is unchanged.
    row_filter = parse_filter(f"age >= {cut} or age == 17", SCHEMA)

    def batch(values: list[int]) -> Batch:
        return Batch(
            num_rows=len(values),
            numeric={"age": np.asarray(values, dtype=np.int64)},
            text={},
            clamped={},
        )

    base, more = row_filter.keep(batch(ages)), row_filter.keep(batch([*ages, extra]))
    assert more[: len(ages)].tolist() == base.tolist()
    assert 0 <= int(more.sum()) - int(base.sum()) <= 1
