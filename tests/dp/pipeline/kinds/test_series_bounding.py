"""Units across periods: each unit keeps at most ``m`` rows in each of at most ``k`` periods,
the rows it keeps in a past period never change as periods are added, removing one unit leaves
every other unit's rows as they were, and the measurements of two neighbours never differ by
more than the certified sensitivity (property-tested)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.pipeline.kinds.series.series_scan import bounded_values
from dppub.dp.series import BinaryTree, Identity, Relation, SquareRoot, certified
from dppub.dp.series.factorization import optimized
from dppub.dp.series.workloads import moving_sum, per_period, running_total, stack

T, GROUPS = 6, 3
STRATEGIES = (
    Identity(horizon=T),
    BinaryTree(horizon=T),
    SquareRoot(horizon=T),
    optimized(stack(per_period(T), running_total(T), moving_sum(T, 3))),
)

rows = st.lists(
    st.tuples(
        st.integers(0, 5),  # unit
        st.integers(0, T - 1),  # period
        st.integers(0, GROUPS - 1),  # group
        st.floats(0.0, 1.0, allow_nan=False),  # a sum's value over its hi
    ),
    min_size=1,
    max_size=40,
)


def _frame(data: list[tuple[int, int, int, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(data, columns=["unit", "period", "group", "v1"])
    frame.insert(3, "v0", 1.0)
    frame["unit"] = frame["unit"].astype(str).astype(object)
    return frame


def _keys(frame: pd.DataFrame) -> list[tuple[object, ...]]:
    return sorted(map(tuple, frame[["unit", "period", "group", "v0", "v1"]].to_numpy().tolist()))


def _cells(kept: pd.DataFrame, column: str) -> np.ndarray:
    cells = np.zeros((T, GROUPS))
    np.add.at(cells, (kept["period"].to_numpy(), kept["group"].to_numpy()), kept[column])
    return cells


@settings(max_examples=80, deadline=None)
@given(rows, st.integers(1, 3), st.integers(1, 2), st.integers(0, 5))
def test_units_are_bounded_per_period_stably_and_within_the_sensitivity(
    data: list[tuple[int, int, int, float]], k: int, m: int, removed: int
) -> None:
    frame = _frame(data)
    kept = bounded_values(frame, "s", k, m)
    assert (kept.groupby("unit")["period"].nunique() <= k).all()
    assert (kept.groupby(["unit", "period"]).size() <= m).all()
    # A unit keeps its first k periods: later periods never displace earlier ones.
    for last in range(T):
        earlier = bounded_values(frame[frame["period"] <= last], "s", k, m)
        assert _keys(earlier) == _keys(kept[kept["period"] <= last])
    # Removing one unit leaves every other unit's kept rows as they were.
    unit = str(removed)
    neighbour = bounded_values(frame[frame["unit"] != unit], "s", k, m)
    assert _keys(neighbour) == _keys(kept[kept["unit"] != unit])
    # The measurements of the two neighbours differ by at most the certified sensitivity,
    # over all groups together, for a count and for a sum.
    relation = Relation(max_periods_per_unit=k, max_rows_per_unit=m)
    for column in ("v0", "v1"):
        delta = _cells(kept, column) - _cells(neighbour, column)
        for strategy in STRATEGIES:
            a = strategy.matrix
            change = a @ delta
            assert np.sqrt(np.sum(change**2)) <= certified(a, relation, "gaussian")
            assert np.sum(np.abs(change)) <= certified(a, relation, "laplace")
