"""The Laplace release cannot be told apart by its low-order bits (Mironov, CCS 2012).

Textbook Laplace on doubles (``x + rng.laplace(0, b)``) leaks ``x`` through the floating-point
pattern of its output: the set of reachable doubles and the distribution of their low mantissa
bits depend on ``x``. dppub's releases (``rng=None``: OpenDP's exact discrete sampler, rounded to
a double as post-processing) and its reproducible seeded path (a two-sided geometric on a
power-of-two grid) must not. For the inputs 0.0 and 0.1 (not on any binary grid) we compare

* the low 8 bits of the IEEE-754 pattern of each output, and
* the number of trailing zero bits of its mantissa (the output's granularity),

between the two inputs with a chi-square test of homogeneity, and check that every seeded
output is an integer multiple of the grid ``2^-30 b``. The same tests reject the naive sampler
with p-values below 1e-300, so they would catch a regression to it.

False-failure rate: each homogeneity check of a correct sampler fails with probability 1e-4
(its threshold), 4 checks -> <= 4e-4 for the file; the seeded runs make it deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy.stats import chi2_contingency

from dppub.dp.mechanisms import laplace

ALPHA = 1e-4
SCALE = 1.0  # sensitivity 1, epsilon 1
INPUTS = (0.0, 0.1)
_MANTISSA = np.uint64((1 << 52) - 1)


def low_bits(y: np.ndarray) -> np.ndarray:
    """The lowest 8 bits of each double's bit pattern."""
    return (y.view(np.uint64) & np.uint64(0xFF)).astype(np.int64)


def trailing_zeros(y: np.ndarray) -> np.ndarray:
    """Trailing zero bits of each double's 52-bit mantissa field (52 for an empty field)."""
    m = y.view(np.uint64) & _MANTISSA
    lowest = m & (~m + np.uint64(1))  # isolate the lowest set bit
    out = np.full(y.shape, 52, dtype=np.int64)
    nz = m != 0
    out[nz] = np.log2(lowest[nz].astype(np.float64)).astype(np.int64)
    return out


def homogeneity_p(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square p-value that two samples of small integers share one distribution."""
    k = int(max(a.max(), b.max())) + 1
    table = np.array([np.bincount(a, minlength=k), np.bincount(b, minlength=k)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:  # one value in both samples: identical distributions
        return 1.0
    return float(chi2_contingency(table).pvalue)


Sampler = Callable[[float, int], np.ndarray]


def _seeded(x: float, n: int) -> np.ndarray:
    rng = np.random.default_rng(int(x * 10) + 100)
    return laplace(np.full(n, x), sensitivity=1.0, epsilon=1.0, rng=rng)


def _release(x: float, n: int) -> np.ndarray:
    return laplace(np.full(n, x), sensitivity=1.0, epsilon=1.0)  # OpenDP, OS randomness


def _naive(x: float, n: int) -> np.ndarray:
    rng = np.random.default_rng(int(x * 10) + 100)
    return x + rng.laplace(0.0, SCALE, size=n)  # Mironov's vulnerable textbook sampler


def _distinguishable(sampler: Sampler, n: int) -> dict[str, float]:
    a, b = (sampler(x, n) for x in INPUTS)
    return {
        "low_bits": homogeneity_p(low_bits(a), low_bits(b)),
        "trailing_zeros": homogeneity_p(trailing_zeros(a), trailing_zeros(b)),
    }


def test_bit_helpers() -> None:
    y = np.array([1.0, 1.5, 0.75 + 2.0**-50, -3.0])
    assert trailing_zeros(y).tolist() == [52, 51, 3, 51]  # 2^-50 is 8 ulps of 0.75
    assert low_bits(np.array([1.0 + 2.0**-52 * 5])).tolist() == [5]


@pytest.mark.parametrize(
    ("name", "sampler", "n"), [("seeded", _seeded, 200_000), ("release", _release, 20_000)]
)
def test_low_order_bits_do_not_depend_on_the_input(name: str, sampler: Sampler, n: int) -> None:
    p = _distinguishable(sampler, n)
    assert min(p.values()) > ALPHA, (name, p)


def test_seeded_outputs_lie_on_one_power_of_two_grid_for_every_input() -> None:
    grid = 2.0 ** (np.floor(np.log2(SCALE)) - 30)
    for x in INPUTS:
        steps = _seeded(x, 100_000) / grid
        assert np.array_equal(steps, np.rint(steps)), x  # exact: a power-of-two division


def test_the_same_checks_catch_the_naive_sampler() -> None:
    p = _distinguishable(_naive, 200_000)
    assert p["low_bits"] < ALPHA and p["trailing_zeros"] < ALPHA, p
    grid = 2.0 ** (np.floor(np.log2(SCALE)) - 30)
    steps = _naive(0.1, 10_000) / grid
    assert not np.array_equal(steps, np.rint(steps))  # off any coarse grid
