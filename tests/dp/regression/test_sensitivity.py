"""Sensitivities of the regression statistics: unit values, tightness, and a neighbour property."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.errors import ConfigError
from dp.regression import FeatureDomain, TargetDomain, l1_sensitivity, l2_sensitivity
from dp.regression.sensitivity import product_range
from dp.regression.statistics import Design, sufficient_statistics

UNIT_Y = TargetDomain(lower=-1.0, upper=1.0)


def _l1(dom: FeatureDomain, *, intercept: bool = False, target: TargetDomain = UNIT_Y):
    return l1_sensitivity(dom, target, fit_intercept=intercept)


def test_ball_quadratic_is_cauchy_schwarz_bound() -> None:
    s = _l1(FeatureDomain.ball(1.0, d=10))
    assert s.quadratic == pytest.approx(math.sqrt(65.0))  # sqrt(d (d+3) / 2) at d = 10
    assert s.cross == pytest.approx(2.0 * math.sqrt(10.0))
    # The seed's bound 2 (d+1)^2 = 242 is 16x larger than what we charge for the whole release.
    assert s.gram + s.moment < 2 * 11**2 / 16


def test_ball_quadratic_scales_with_radius_squared() -> None:
    assert _l1(FeatureDomain.ball(3.0, d=4)).quadratic == pytest.approx(
        9.0 * _l1(FeatureDomain.ball(1.0, d=4)).quadratic
    )


def test_centred_box_diagonal_counts_once() -> None:
    # x_j^2 and x'_j^2 both lie in [0, a_j^2]: the diagonal costs a_j^2 (diffprivlib charges 2x).
    s = _l1(FeatureDomain.box(-1.0, 1.0, d=1))
    assert s.quadratic == 1.0
    s3 = _l1(FeatureDomain.box([-1.0, -2.0, -0.5], [1.0, 2.0, 0.5], d=3))
    assert s3.quadratic <= (1.0 + 2.0 + 0.5) ** 2


def test_nonnegative_box_uses_product_ranges() -> None:
    # On [0, 1]^2 every product lies in [0, 1]: three entries, each with range 1.
    assert _l1(FeatureDomain.box(0.0, 1.0, d=2)).quadratic == 3.0
    assert product_range((0.0, 2.0), (-1.0, 3.0)) == 8.0


def test_intercept_adds_feature_and_target_sums() -> None:
    s = _l1(FeatureDomain.box(-1.0, 1.0, d=3), intercept=True)
    assert s.feature_sum == pytest.approx(6.0)
    assert s.target_sum == 2.0
    assert s.gram == pytest.approx(s.quadratic + 6.0)
    assert _l1(FeatureDomain.box(-1.0, 1.0, d=3)).feature_sum == 0.0


def test_l2_values() -> None:
    s = l2_sensitivity(FeatureDomain.ball(2.0, d=5), UNIT_Y, fit_intercept=True)
    assert s.quadratic == pytest.approx(math.sqrt(2.0) * 4.0)
    assert s.feature_sum == 4.0
    assert s.gram == pytest.approx(math.hypot(math.sqrt(2.0) * 4.0, 4.0))


def test_bounds_are_attained_in_one_dimension() -> None:
    # Tightness: replacing x = 1 by x = 0 moves sum x^2 by the full bound, and flipping y moves
    # sum x y by the full bound. An over-estimate would add noise for nothing.
    dsg = Design(features=FeatureDomain.box(-1.0, 1.0, d=1), target=UNIT_Y, fit_intercept=False)
    s = _l1(dsg.features)
    a = sufficient_statistics(np.array([[1.0]]), np.array([1.0]), dsg).parts()
    b = sufficient_statistics(np.array([[0.0]]), np.array([1.0]), dsg).parts()
    c = sufficient_statistics(np.array([[1.0]]), np.array([-1.0]), dsg).parts()
    assert abs(a["quadratic"] - b["quadratic"]).sum() == s.quadratic
    assert abs(a["cross"] - c["cross"]).sum() == s.cross


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


@st.composite
def _neighbours(draw: st.DrawFn):
    d = draw(st.integers(1, 4))
    n = draw(st.integers(1, 4))
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
    X = np.array(draw(st.lists(rows, min_size=n, max_size=n)))
    y = np.array(draw(st.lists(_coord, min_size=n, max_size=n)))
    X2, y2 = X.copy(), y.copy()
    i = draw(st.integers(0, n - 1))
    X2[i] = np.array(draw(rows))
    y2[i] = draw(_coord)
    return dsg, (X, y), (X2, y2)


@settings(max_examples=400, deadline=None)
@given(_neighbours())
def test_neighbours_move_each_part_by_at_most_its_sensitivity(case) -> None:
    dsg, (X, y), (X2, y2) = case
    a = sufficient_statistics(X, y, dsg).parts()
    b = sufficient_statistics(X2, y2, dsg).parts()
    s1 = l1_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=dsg.fit_intercept)
    s2 = l2_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=dsg.fit_intercept)
    for part in ("quadratic", "feature_sum", "cross", "target_sum"):
        diff = a[part] - b[part]
        tol = 1e-9 * (1.0 + float(np.abs(a[part]).sum()))  # float summation error only
        assert np.abs(diff).sum() <= getattr(s1, part) + tol, part
        assert np.linalg.norm(diff) <= getattr(s2, part) + tol, part
    # The whole released vector: the sum of the per-part bounds.
    whole = sum(np.abs(a[k] - b[k]).sum() for k in a)
    assert whole <= s1.gram + s1.moment + 1e-9 * (1.0 + sum(np.abs(v).sum() for v in a.values()))
