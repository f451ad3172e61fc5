"""Controlled rounding to a base (``round: {base: b}``, ``round: integer`` = 1): counts and sums
as multiples of the base whose every published margin is the sum of its published cells."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dppub.dp.tables.margins import STAR, published_rows
from dppub.dp.tables.rounding import round_to_base, sum_base
from dppub.dp.tables.split import Measure
from dppub.dp.tables.table import release_table
from tests.dp.tables.test_tables import NESTED, _design, _dims


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@example(shape=[1], nested=False, base=1, signed=False, cells=[8.5e-47] + [0.0] * 44)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=2),
    nested=st.booleans(),
    base=st.sampled_from([1, 2, 5, 10, 1000]),
    signed=st.booleans(),
    cells=st.lists(st.floats(0.0, 5000.0, allow_nan=False), min_size=45, max_size=45),
)
def test_every_margin_is_the_sum_of_its_cells_in_multiples_of_the_base(
    shape: list[int], nested: bool, base: int, signed: bool, cells: list[float]
) -> None:
    published = published_rows((*_dims(shape), *((NESTED,) if nested else ())), True)
    x = np.asarray(cells[: published.cells]) - (2500.0 if signed else 0.0)
    rows = published.matrix
    y = round_to_base(x, rows, base=float(base), nonneg=not signed)
    assert np.array_equal(np.mod(y, base), np.zeros_like(y))  # multiples of the base
    if not signed:
        assert np.all(y >= 0)
    # controlled: each cell down or up to a neighbouring multiple, never further
    kept = x if signed else np.clip(x, 0.0, None)
    # (compared as multiples, not as |y - x| < base: 1 - 8.5e-47 is 1.0 in floating point,
    # which hypothesis found)
    down, up = np.floor(kept / base) * base, np.ceil(kept / base) * base
    assert np.all((y == down) | (y == up))
    published_values = rows @ y
    # margins are read off the cells: each equals the exact sum of the cells it covers
    for r in range(rows.shape[0]):
        covered = rows[r].toarray().ravel() > 0
        assert published_values[r] == y[covered].sum()
    # never further from the released rows than rounding each cell on its own
    alone = np.rint(kept / base) * base
    target = rows @ kept
    assert np.abs(published_values - target).sum() <= np.abs(rows @ alone - target).sum() + 1e-6


def test_a_sums_base_grows_to_its_precision_by_powers_of_ten() -> None:
    assert sum_base(1.0, [9.0]) == 1.0  # step 0.1: never below the declared base
    assert sum_base(1.0, [312.0, 5000.0]) == 10.0  # the smallest se's step (10)
    assert sum_base(5.0, [710_000.0]) == 5000.0  # 5 x 10^3 <= 10^4 < 5 x 10^4
    assert sum_base(3.0, [np.nan]) == 3.0


def _exact_margins(answers: pd.DataFrame, keys: list[str], measure: str) -> None:
    rows = answers[answers["measure"] == measure]
    cells = rows[~(rows[keys] == STAR).any(axis=1)]
    for _, row in rows.iterrows():
        match = np.ones(len(cells), dtype=bool)
        for k in keys:
            if row[k] != STAR:
                match &= (cells[k] == row[k]).to_numpy()
        assert row["answer"] == cells["answer"][match].sum()


def test_a_table_rounds_counts_and_sums_to_bases_that_add_up() -> None:
    rng = np.random.default_rng(7)
    dims = _dims([2, 3])
    counts = rng.integers(0, 400, 6).astype(float)
    centred = {"x": rng.uniform(-5.0, 5.0, 6) * counts}
    design = _design(
        dims, [Measure("count"), Measure("sum", "x")], margins=True, integer=True, base=5
    )
    answers = release_table(design, counts, centred, {}, rng=rng).answers
    keys = list(design.keys)
    for measure in ("count", "sum(x)"):
        _exact_margins(answers, keys, measure)
    count = answers[answers["measure"] == "count"]["answer"]
    assert (count % 5 == 0).all() and (count >= 0).all()
    sums = answers[answers["measure"] == "sum(x)"]
    base = sum_base(5, sums["std_error"])
    assert base >= 5 and (sums["answer"] % base == 0).all()
