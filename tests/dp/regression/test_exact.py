"""Exact arithmetic under the regression releases: exact moments over any split, and the
certified smallest eigenvalue of AdaSSP (the fixed-point primitives: tests/dp/numerics/)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.errors import InputError, InvariantError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.numerics.fixedpoint import CONVERSION_ALLOWANCE, MAX_ROWS
from dppub.dp.reference.frame_regression import sufficient_statistics
from dppub.dp.regression.eigen import certified_min_eigenvalue
from dppub.dp.regression.statistics import Design, ExactMoments, exact_moments

# --- the regression statistics ----------------------------------------------------------------

DESIGN = Design(
    features=FeatureDomain.box([17.0, 1.0], [90.0, 99.0], d=2),
    target=TargetDomain(lower=0.0, upper=250_000.0),
    fit_intercept=True,
)


def test_exact_moments_add_up_over_any_split() -> None:
    rng = np.random.default_rng(2)
    X = rng.uniform([17, 1], [90, 99], size=(3_000, 2))
    y = rng.uniform(0, 250_000, 3_000)
    whole = exact_moments(X, y, DESIGN)
    parts = [exact_moments(X[i : i + 700], y[i : i + 700], DESIGN) for i in range(0, 3_000, 700)]
    total = ExactMoments.zero(3)
    for part in reversed(parts):
        total = total + part
    assert total.gram.tolist() == whole.gram.tolist()
    assert total.moment.tolist() == whole.moment.tolist() and total.rows == 3_000
    stats = whole.statistics(DESIGN)
    # The count (gram corner) is the exact row count; every value within 2^-16 of float64.
    assert stats.gram[2, 2] == 3_000.0
    naive = sufficient_statistics(X[::-1], y[::-1], DESIGN)
    assert naive.gram.tobytes() == stats.gram.tobytes()


def test_more_rows_than_the_allowance_covers_are_refused() -> None:
    big = ExactMoments(
        gram=np.zeros((3, 3), dtype=object), moment=np.zeros(3, dtype=object), rows=MAX_ROWS + 1
    )
    with pytest.raises(InputError, match=r"more than 2\^36 rows"):
        big.statistics(DESIGN)


# --- the certified smallest eigenvalue --------------------------------------------------------


def _det(exact: list[list[Fraction]], t: Fraction) -> Fraction:
    a = [[exact[i][j] - (t if i == j else 0) for j in range(3)] for i in range(3)]
    return (
        a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
        - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
        + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])
    )


def _reference_min_eigenvalue(G: np.ndarray, lo: float, hi: float) -> Fraction:
    """The smallest root of the exact det(G - t I) in [lo, hi]: det > 0 below lambda_min and
    < 0 between it and the next eigenvalue (an independent method: no minors, no pivots)."""
    exact = [[Fraction(float(v)) for v in row] for row in G]
    low, high = Fraction(lo), Fraction(hi)
    assert _det(exact, low) > 0 > _det(exact, high)
    for _ in range(90):
        mid = (low + high) / 2
        low, high = (mid, high) if _det(exact, mid) > 0 else (low, mid)
    return low


@pytest.mark.parametrize("spectrum", [(2.0, 1.5, 1.0), (1e16, 1e8, 1.0), (3e12, 7.25, 5.0)])
def test_certified_eigenvalue_is_within_its_tolerance(spectrum: tuple[float, ...]) -> None:
    # A rotated diagonal: on (1e16, 1e8, 1) float64 eigvalsh is off by ~0.4 (u ||G|| ~ 1),
    # the certified value by less than its tolerance.
    Q, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))
    G = (Q * np.array(spectrum)) @ Q.T
    G = (G + G.T) / 2
    first, second = sorted(spectrum)[:2]
    truth = _reference_min_eigenvalue(G, first - 10.0, (first + second) / 2)
    for tolerance in (1e-3, 1e-9):
        got = certified_min_eigenvalue(G, tolerance=tolerance)
        assert abs(Fraction(got) - truth) <= Fraction(tolerance)


def test_certified_eigenvalue_refuses_an_asymmetric_matrix() -> None:
    with pytest.raises(InvariantError, match="needs a symmetric matrix"):
        certified_min_eigenvalue(np.array([[1.0, 2.0], [0.0, 1.0]]), tolerance=1e-6)


_coord = st.one_of(st.sampled_from([-3.0, -1.0, 0.0, 1.0, 3.0]), st.floats(-4.0, 4.0))


@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(1, 3),
    rows=st.lists(st.lists(_coord, min_size=3, max_size=3), min_size=1, max_size=6),
    drop=st.integers(0, 5),
)
def test_neighbours_move_the_certified_eigenvalue_within_its_sensitivity(
    d: int, rows: list[list[float]], drop: int
) -> None:
    # AdaSSP's first release: lambda_min of the float64 gram, certified, has sensitivity
    # R_z^2 (1 + 3 A) (module doc of dp.regression.adassp) -- checked without tolerance.
    X = np.array(rows)[:, :d]
    y = np.zeros(len(X))
    keep = np.arange(len(X)) != drop % len(X)
    dsg = Design(
        features=FeatureDomain.ball(1.0, d=d),
        target=TargetDomain(lower=-1.0, upper=1.0),
        fit_intercept=True,
    )
    r2 = 1.0 + 1.0
    tolerance = CONVERSION_ALLOWANCE * r2
    a = certified_min_eigenvalue(sufficient_statistics(X, y, dsg).gram, tolerance=tolerance)
    b = certified_min_eigenvalue(
        sufficient_statistics(X[keep], y[keep], dsg).gram, tolerance=tolerance
    )
    assert abs(a - b) <= r2 * (1.0 + 3.0 * CONVERSION_ALLOWANCE)
    assert math.isfinite(a) and math.isfinite(b)
