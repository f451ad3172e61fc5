"""Histogram sensitivity under add/remove-one neighbours, and an audit of the noisy histogram.

``dp.reference.histogram.histogram`` must change by exactly one count in exactly one cell when a
row is added (L1 sensitivity 1), for every row of the declared domain: a property test (hypothesis)
over random tables and added rows. The noisy histogram ``h + Lap(1 / eps)`` is then audited on
a table and the same table plus one row, against its twin (sensitivity 1/2). False-failure rate
of the audit of the correct release: <= 2e-6 (``dp.reference.empirical_privacy`` at confidence
1 - 1e-6).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.axes import category_axis, numeric_axis
from dppub.dp.mechanisms import laplace
from dppub.dp.reference.histogram import histogram
from dppub.dp.schema import ColumnSpec
from tests.empirical_privacy.twins import audit_twins

AGE = ColumnSpec(name="age", type="int", bounds=(0, 9))
INC = ColumnSpec(name="inc", type="float", bounds=(0, 100))
SEX = ColumnSpec(name="sex", type="category", categories=("F", "M"))
AXES = (numeric_axis(AGE), numeric_axis(INC, bins=2), category_axis(SEX))

rows = st.tuples(
    st.integers(0, 9),
    st.floats(0.0, 100.0, allow_nan=False),
    st.sampled_from(["F", "M"]),
)


def _frame(data: list[tuple[int, float, str]]) -> pd.DataFrame:
    return pd.DataFrame(data, columns=["age", "inc", "sex"]).astype(
        {"age": "int64", "inc": "float64"}
    )


@settings(max_examples=60, deadline=None)
@given(base=st.lists(rows, min_size=1, max_size=30), extra=rows)
def test_adding_a_row_adds_exactly_one_count(
    base: list[tuple[int, float, str]], extra: tuple[int, float, str]
) -> None:
    h = histogram(_frame(base), AXES)
    h_nb = histogram(_frame([*base, extra]), AXES)
    diff = h_nb - h
    assert np.abs(diff).sum() == 1.0  # the L1 sensitivity the release is calibrated to
    assert diff.max() == 1.0 and diff.min() == 0.0


def test_noisy_histogram_passes_and_its_twin_is_rejected() -> None:
    base = [(3, 50.0, "F"), (7, 12.5, "M"), (3, 99.0, "M")]
    h = histogram(_frame(base), AXES)
    h_nb = histogram(_frame([*base, (9, 100.0, "F")]), AXES)  # a boundary row: last bin, closed

    def noisy(sensitivity: float) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
        def sampler(hist: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
            batch = np.broadcast_to(hist, (n, hist.size))
            return laplace(batch, sensitivity=sensitivity, epsilon=1.0, rng=rng)

        return sampler

    real, twin = audit_twins(
        noisy(1.0), noisy(0.5), seed=3, dataset=h, neighbour=h_nb, epsilon=1.0, samples=20_000
    )
    assert real.passed and real.eps_lb > 0.8, real.summary()
    assert not twin.passed, twin.summary()
