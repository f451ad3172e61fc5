"""Exact sums over private rows (dp/numerics/fixedpoint.py): fixed-point rows, integer sums,
one rounding."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dppub.dp.errors import InputError, InvariantError
from dppub.dp.numerics.fixedpoint import (
    CONVERSION_ALLOWANCE,
    MAX_ROWS,
    ONE,
    check_rows,
    digits,
    exact_products,
    exact_sums,
    quantise,
    to_float,
)


def test_quantise_truncates_toward_zero_and_refuses_unclipped_values() -> None:
    values = np.array([0.3, -0.3, 1.0, -1.0, 2.0**-17, 0.0])
    q = quantise(values, 1.0)
    assert np.all(np.abs(q / ONE) <= np.abs(values))  # no magnitude grows
    assert np.all(np.abs(values - q / ONE) < 2.0**-16)
    assert q.tolist() == [19660.0, -19660.0, 65536.0, -65536.0, 0.0, 0.0]
    with pytest.raises(InvariantError, match="exceeds its declared magnitude bound"):
        quantise(np.array([1.5]), 1.0)


@pytest.mark.parametrize("bits", [20, 50])  # 50: chunks of 8 rows, many int64 flushes
def test_exact_products_are_the_integer_products(bits: int) -> None:
    rng = np.random.default_rng(0)
    half = 2 ** (bits // 2)
    a = rng.integers(-half, half + 1, size=(5_000, 3)).astype(np.float64)
    b = rng.integers(-half, half + 1, size=(5_000, 2)).astype(np.float64)
    want = [
        [sum(int(x) * int(y) for x, y in zip(a[:, i], b[:, j], strict=True)) for j in range(2)]
        for i in range(3)
    ]
    got = exact_products(a, b, bits=bits)
    assert got.tolist() == want
    values: list[object] = list(got.flat)
    assert all(type(v) is int for v in values)  # Python integers: no int64 wrap-around
    assert exact_sums(a, bits=bits).tolist() == [sum(int(x) for x in a[:, i]) for i in range(3)]


def test_digits_reconstruct_within_their_bound() -> None:
    rng = np.random.default_rng(1)
    v = np.r_[rng.uniform(-1.0, 1.0, 10_000), -1.0, 1.0, 0.0]
    ds = digits(v, count=3, bits=18)
    assert ds.shape == (len(v), 3)
    assert np.all(np.abs(ds) <= 2**18) and np.array_equal(ds, np.trunc(ds))
    for value, parts in zip(v, ds, strict=True):
        rebuilt = sum(Fraction(int(d)) / 2 ** (18 * (k + 1)) for k, d in enumerate(parts))
        assert abs(rebuilt - Fraction(float(value))) <= Fraction(1, 2**55)


def test_to_float_rounds_once_and_counts_are_exact() -> None:
    big = 2**70 + 2**17 + 1  # not a float: one correct rounding, not two
    (got,) = to_float(np.array([big], dtype=object), 2.0**-20)
    assert got == float(Fraction(big, 2**20))
    assert to_float(np.array([12345], dtype=object), 1.0).tolist() == [12345.0]
    assert check_rows(MAX_ROWS) == MAX_ROWS
    with pytest.raises(InputError, match=r"more than 2\^36 rows in one statistic"):
        check_rows(MAX_ROWS + 1)
    assert CONVERSION_ALLOWANCE == MAX_ROWS * 2.0**-52 == 2.0**-16
