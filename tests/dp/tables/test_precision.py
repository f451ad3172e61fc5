"""The precision rule: a published value carries no more digits than its noise supports."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dppub.dp.tables.precision import as_text, exponents, round_at


def test_the_documented_examples() -> None:
    # issue 37: 2086.0911728424985 +- 9.1786225266111678 is a count of 2086, se 9
    e = exponents([9.1786225266111678], counts=[True])
    assert as_text(round_at([2086.0911728424985, 9.1786225266111678], [e[0], e[0]]), [0, 0]) == [
        "2086",
        "9",
    ]
    # a mean with se 0.0342: to the thousandth
    (e,) = exponents([0.0342], counts=[False])
    assert e == -3
    assert as_text(round_at([40.14567, 0.0342], [e, e]), [e, e]) == ["40.146", "0.034"]


def test_counts_are_integers_and_large_errors_round_coarser() -> None:
    assert exponents([0.3, 9.0, 312.0], counts=[True, True, True]).tolist() == [0.0, 0.0, 1.0]
    assert exponents([0.3, 9.0, 312.0], counts=[False] * 3).tolist() == [-2.0, -1.0, 1.0]
    assert round_at([2412547123.0], [4]).tolist() == [2412550000.0]


def test_a_value_without_a_standard_error_uses_its_resolution_or_stays() -> None:
    e = exponents([np.nan, np.nan, 0.0], counts=[False] * 3, resolution=[98 / 1024, np.nan, 1.0])
    assert e[0] == -3 and math.isnan(e[1]) and e[2] == -1
    assert round_at([40.14329, 7.123456], e[:2]).tolist() == [40.143, 7.123456]
    assert as_text([7.5, np.nan], [np.nan, 0]) == ["7.5", ""]


def test_no_negative_zero_and_no_float_noise_in_the_text() -> None:
    assert as_text(round_at([-0.0004, 0.1 + 0.2], [-3, -1]), [-3, -1]) == ["0.000", "0.3"]


@given(
    value=st.floats(-1e9, 1e9, allow_nan=False),
    se=st.floats(1e-6, 1e8, allow_nan=False),
    count=st.booleans(),
)
def test_a_value_moves_by_at_most_half_its_step_and_the_step_fits_the_noise(
    value: float, se: float, count: bool
) -> None:
    (e,) = exponents([se], counts=[count])
    step = 10.0**e
    (rounded,) = round_at([value], [e])
    assert abs(rounded - value) <= step / 2 * (1 + 1e-9) + 1e-9 * abs(value)
    if count and se < 10:
        assert step == 1.0
    else:
        # the power of ten at or below a tenth of the se: se / 100 < step <= se / 10
        assert se / 100 < step * (1 + 1e-12) and step <= se / 10 * (1 + 1e-12)
    (text,) = as_text([rounded], [e])
    assert float(text) == rounded and len(text.partition(".")[2]) == max(0, -int(e))
