"""Sensitivities of the regression statistics (add/remove one record): unit values, tightness,
and a neighbour property."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.errors import ConfigError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.numerics.fixedpoint import CONVERSION_ALLOWANCE as A
from dppub.dp.reference.frame_regression import sufficient_statistics
from dppub.dp.regression import l1_sensitivity, l2_sensitivity
from dppub.dp.regression.sensitivity import PARTS, BlockSensitivity
from dppub.dp.regression.statistics import Design

UNIT_Y = TargetDomain(lower=-1.0, upper=1.0)
# Every expected value below is the exact-arithmetic bound plus the float64 rounding allowance
# A = 2^-16 times the part's bound over the box of group magnitudes (module doc).


def _l1(
    dom: FeatureDomain, *, intercept: bool = False, target: TargetDomain = UNIT_Y
) -> BlockSensitivity:
    return l1_sensitivity(dom, target, fit_intercept=intercept)


def test_ball_values_and_gain_over_replace_one() -> None:
    s = _l1(FeatureDomain.ball(1.0, d=10))
    assert s.quadratic == pytest.approx(5.5 + 55 * A, rel=1e-12)  # R^2 (d + 1) / 2
    assert s.cross == pytest.approx(math.sqrt(10.0) + 10 * A, rel=1e-12)  # B sqrt(d) R
    # Replace-one charged sqrt(d (d+3) / 2) = 8.06 and 2 sqrt(d) = 6.32 for these two parts.
    assert s.quadratic < math.sqrt(65.0) / 1.4
    assert s.cross < 2.0 * math.sqrt(10.0) / 1.99
    # The seed's bound 2 (d+1)^2 = 242 is > 25x what we charge for the whole release.
    assert s.gram + s.moment < 2 * 11**2 / 25


def test_ball_quadratic_scales_with_radius_squared() -> None:
    assert _l1(FeatureDomain.ball(3.0, d=4)).quadratic == pytest.approx(
        9.0 * _l1(FeatureDomain.ball(1.0, d=4)).quadratic
    )


def test_centred_box_values() -> None:
    # |x_j| <= a_j: sum_{j<=l} a_j a_l = ((sum a)^2 + sum a^2) / 2.
    assert _l1(FeatureDomain.box(-1.0, 1.0, d=1)).quadratic == 1.0 + A
    s3 = _l1(FeatureDomain.box([-1.0, -2.0, -0.5], [1.0, 2.0, 0.5], d=3), intercept=True)
    assert s3.quadratic == pytest.approx((3.5**2 + 1.0 + 4.0 + 0.25) / 2.0 * (1 + A), rel=1e-12)
    assert s3.feature_sum == pytest.approx(3.5 * (1 + A), rel=1e-12)
    assert s3.cross == pytest.approx(3.5 * (1 + A), rel=1e-12)


def test_offset_box_uses_largest_magnitude() -> None:
    # On [0, 2] (no intercept, no centring) the largest |x| is 2: x^2 <= 4.
    assert _l1(FeatureDomain.box(0.0, 2.0, d=1)).quadratic == 4.0 * (1 + A)
    assert _l1(FeatureDomain.box(-3.0, 1.0, d=1)).cross == 3.0 * (1 + A)


def test_intercept_adds_feature_sum_count_and_target_sum() -> None:
    s = _l1(FeatureDomain.box(-1.0, 1.0, d=3), intercept=True)
    assert s.feature_sum == pytest.approx(3.0 + 3.0 * A, rel=1e-12)
    assert (s.count, s.target_sum) == (1.0, 1.0 + A)  # the count is exact: no allowance
    assert s.gram == pytest.approx(s.quadratic + 3.0 * (1 + A) + 1.0, rel=1e-12)
    no = _l1(FeatureDomain.box(-1.0, 1.0, d=3))
    assert (no.feature_sum, no.count, no.target_sum) == (0.0, 0.0, 0.0)


def test_l2_values() -> None:
    s = l2_sensitivity(FeatureDomain.ball(2.0, d=5), UNIT_Y, fit_intercept=True)
    # R^2 (replace-one: sqrt(2) R^2), plus A times the L2 norm of R^2 over 15 pairs.
    assert s.quadratic == pytest.approx(4.0 + A * 4.0 * math.sqrt(15.0), rel=1e-12)
    x = 2.0 + A * 2.0 * math.sqrt(5.0)  # R, plus A times the L2 norm of R over 5 coordinates
    assert (s.feature_sum, s.count, s.cross, s.target_sum) == (x, 1.0, x, 1.0 + A)
    assert s.gram == pytest.approx(math.sqrt(16.0 + 4.0 + 1.0), rel=1e-3)


def test_bounds_are_attained() -> None:
    # Tightness: adding the row x = R (1, ..., 1) / sqrt(d), y = 1 moves each part by its full
    # L1 bound on the ball (x = 1/2 and y = 1 lie on the fixed-point grid), which the declared
    # sensitivity exceeds only by the rounding allowance. An over-estimate adds noise for nothing.
    d = 4
    dsg = Design(features=FeatureDomain.ball(1.0, d=d), target=UNIT_Y, fit_intercept=True)
    s = _l1(dsg.features, intercept=True)
    X = np.array([[0.1, -0.2, 0.3, 0.0]])
    row = np.full((1, d), 1.0 / math.sqrt(d))
    a = sufficient_statistics(X, np.array([0.5]), dsg).parts()
    b = sufficient_statistics(np.vstack([X, row]), np.array([0.5, 1.0]), dsg).parts()
    for part in PARTS:
        moved = np.abs(a[part] - b[part]).sum()
        assert moved <= s.part(part) and moved == pytest.approx(s.part(part), rel=1e-4), part


def test_domain_validation_messages() -> None:
    with pytest.raises(ConfigError, match=r"bounds_X for feature 1 must be finite with lo < hi"):
        FeatureDomain.box([0.0, 1.0], [1.0, 1.0], d=2)
    with pytest.raises(ConfigError, match=r"bounds_X\[0\] must be a scalar or have length 3"):
        FeatureDomain.box([0.0, 1.0], 1.0, d=3)
    with pytest.raises(ConfigError, match=r"data_norm must be finite and > 0, got -1.0"):
        FeatureDomain.ball(-1.0, d=2)
    with pytest.raises(ConfigError, match=r"bounds_y is required"):
        TargetDomain.from_bounds(None)


# --- property: any two neighbours move every released part by at most its sensitivity --------

# Coordinates are drawn from the domain's corners, its centre, and arbitrary values (often
# outside the domain, so the clip is exercised): the worst cases sit on corners and spheres.
_coord = st.one_of(
    st.sampled_from([-5.0, -1.0, -0.5, 0.0, 0.5, 1.0, 5.0]),
    st.floats(-6.0, 6.0, allow_nan=False),
)


# A design and two neighbouring datasets (X, y): the second drops one row of the first.
_Neighbours = tuple[Design, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@st.composite
def _neighbours(draw: st.DrawFn) -> _Neighbours:
    d = draw(st.integers(1, 4))
    n = draw(st.integers(0, 4))
    if draw(st.booleans()):
        lo = np.array(draw(st.lists(st.floats(-3.0, 2.0), min_size=d, max_size=d)))
        width = np.array(draw(st.lists(st.floats(0.1, 3.0), min_size=d, max_size=d)))
        dom = FeatureDomain.box(lo, lo + width, d=d)
    else:
        dom = FeatureDomain.ball(draw(st.floats(0.1, 3.0)), d=d)
    ylo = draw(st.floats(-3.0, 2.0))
    target = TargetDomain(lower=ylo, upper=ylo + draw(st.floats(0.1, 4.0)))
    dsg = Design(features=dom, target=target, fit_intercept=draw(st.booleans()))
    rows = st.lists(_coord, min_size=d, max_size=d)
    X = np.array(draw(st.lists(rows, min_size=n + 1, max_size=n + 1)))
    y = np.array(draw(st.lists(_coord, min_size=n + 1, max_size=n + 1)))
    # D has n + 1 rows; D' removes one of them (any row, often far outside the domain).
    i = draw(st.integers(0, n))
    keep = np.arange(n + 1) != i
    return dsg, (X, y), (X[keep], y[keep])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_neighbours())
def test_neighbours_move_each_part_by_at_most_its_sensitivity(case: _Neighbours) -> None:
    dsg, (X, y), (X2, y2) = case
    a = sufficient_statistics(X, y, dsg).parts()
    b = sufficient_statistics(X2, y2, dsg).parts()  # may be the empty dataset
    s1 = l1_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=dsg.fit_intercept)
    s2 = l2_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=dsg.fit_intercept)
    # No tolerance: the declared sensitivities bound the float64 statistics themselves.
    for part in PARTS:
        diff = a[part] - b[part]
        assert np.abs(diff).sum() <= s1.part(part), part
        assert np.linalg.norm(diff) <= s2.part(part), part
    if dsg.fit_intercept:
        assert float(a["count"][0] - b["count"][0]) == 1.0  # n is private: it moves by one
    # The whole released vector: the sum of the per-part bounds.
    assert sum(np.abs(a[k] - b[k]).sum() for k in a) <= s1.gram + s1.moment
