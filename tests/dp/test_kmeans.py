"""DP k-means (noisy Lloyd): configuration, sensitivities, budget split, accuracy."""

from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InputError, InvariantError
from dppub.dp.kmeans import COUNT_SENSITIVITY, lloyd_step, sum_sensitivity
from dppub.dp.numerics.domains import FeatureDomain
from dppub.dp.reference.frame_kmeans import KMeans, predict


def test_config_messages() -> None:
    with pytest.raises(ConfigError, match=r"n_clusters must be an integer >= 1, got 0"):
        KMeans(0, 1.0, data_norm=1.0)
    with pytest.raises(ConfigError, match=r"n_iter must be an integer >= 1, got 0"):
        KMeans(2, 1.0, data_norm=1.0, n_iter=0)
    with pytest.raises(ConfigError, match=r"declare exactly one of bounds_X"):
        KMeans(2, 1.0)
    with pytest.raises(ConfigError, match=r"epsilon must be finite and > 0, got 0.0"):
        KMeans(2, 0.0, data_norm=1.0)
    with pytest.raises(InputError, match=r"X must be finite"):
        KMeans(2, 1.0, data_norm=1.0).fit(np.array([[np.inf, 0.0]]))


def test_counts_and_sums_get_their_own_sensitivity() -> None:
    # epsilon = 2, T = 4: each release gets 2 / 8 = 0.25. Add/remove neighbours: counts have
    # sensitivity 1 -> scale 4; sums on [0, 10]^3 (centred, |x_j| <= 5): max ||x||_1 = 15,
    # plus the float64 rounding allowance 2^-16 * 15 -> scale 60 (1 + 2^-16) (replace-one
    # needed 2 and 30). Swapped budgets (diffprivlib) would not give these.
    rng = np.random.default_rng(0)
    model = KMeans(3, 2.0, bounds_X=(0.0, 10.0), n_iter=4).fit(
        rng.uniform(0, 10, (500, 3)), rng=rng
    )
    doc = json.loads(json.dumps(model.to_dict()))
    assert doc["epsilon_per_release"] == 0.25
    assert doc["laplace_scale"] == {"counts": 4.0, "sums": 60.0 * (1.0 + 2.0**-16)}
    assert doc["neighbours"] == "add/remove one record"
    assert model.model.privacy_cost == PrivacyCost(epsilon=2.0)
    box = FeatureDomain.box(0.0, 10.0, d=3).translated(np.full(3, 5.0))
    assert sum_sensitivity(box) == 15.0 * (1.0 + 2.0**-16)
    # sqrt(d) R, plus 2^-16 sum_j a_j = 2^-16 d R
    assert sum_sensitivity(FeatureDomain.ball(2.0, d=4)) == 4.0 + 8.0 * 2.0**-16


@st.composite
def _neighbours(draw: st.DrawFn) -> tuple[FeatureDomain, np.ndarray, np.ndarray, np.ndarray]:
    d = draw(st.integers(1, 3))
    k = draw(st.integers(1, 4))
    ball = draw(st.booleans())
    dom = FeatureDomain.ball(1.5, d=d) if ball else FeatureDomain.box(-2.0, 1.0, d=d)
    coord = st.one_of(st.sampled_from([-4.0, -2.0, 0.0, 1.0, 4.0]), st.floats(-5, 5))
    rows = st.lists(st.lists(coord, min_size=d, max_size=d), min_size=1, max_size=5)
    X = np.array(draw(rows))
    # D' removes one row of D (any row, often far outside the domain; D' may be empty).
    X2 = np.delete(X, draw(st.integers(0, len(X) - 1)), axis=0)
    centres = np.array(
        draw(st.lists(st.lists(coord, min_size=d, max_size=d), min_size=k, max_size=k))
    )
    return dom, X, X2, centres


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_neighbours())
def test_neighbours_move_counts_and_sums_within_sensitivity(
    case: tuple[FeatureDomain, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    dom, X, X2, centres = case
    shift = dom.midpoint()
    centred = dom.translated(shift)
    c1, s1 = lloyd_step(dom.clip(X) - shift, centred, centres - shift)
    c2, s2 = lloyd_step(dom.clip(X2) - shift, centred, centres - shift)
    assert np.abs(c1 - c2).sum() == COUNT_SENSITIVITY  # exactly one count moves, by one
    assert np.abs(s1 - s2).sum() <= sum_sensitivity(centred)  # the float64 values, no slack


def _absorbing_neighbours() -> tuple[np.ndarray, np.ndarray]:
    """One cluster on [-1, 1]: D is 2^20 rows of -1 then 2^20 rows of t = 2^-33; D' adds one
    row -1 in front. In float64, in row order, D's running sum sits just above -2^20, where
    the spacing of doubles is 2^-33, so every t is added exactly; D''s sits at -(2^20 + 1),
    where the spacing is 2^-32, so every t is a tie rounded away. The computed sums differ by
    1 + 2^20 t = 1 + 2^-13, the exact sums by 1 (Casacuberta et al. 2022)."""
    big, tiny = np.full(2**20, -1.0), np.full(2**20, 2.0**-33)
    D = np.r_[big, tiny][:, None]
    return D, np.r_[[-1.0], D[:, 0]][:, None]


def test_float_absorption_cannot_stretch_the_sums_past_their_sensitivity() -> None:
    D, D_nb = _absorbing_neighbours()
    centred = FeatureDomain.box(-1.0, 1.0, d=1)
    naive = np.sum(D_nb[:, 0]) - np.sum(D[:, 0])  # pairwise summation hides it; a fold does not
    fold = np.bincount(np.zeros(len(D), dtype=np.int64), weights=D[:, 0])[0]
    fold_nb = np.bincount(np.zeros(len(D_nb), dtype=np.int64), weights=D_nb[:, 0])[0]
    assert abs(fold - fold_nb) == 1.0 + 2.0**-13 > sum_sensitivity(centred)  # the attack
    assert abs(naive) == pytest.approx(1.0, abs=1e-6)
    (c1,), (s1,) = lloyd_step(D, centred, np.zeros((1, 1)))
    (c2,), (s2,) = lloyd_step(D_nb, centred, np.zeros((1, 1)))
    assert c2 - c1 == 1.0
    assert abs(s1[0] - s2[0]) <= sum_sensitivity(centred)
    assert s1[0] == -(2.0**20)  # t quantises to 0: the sums are exact and order-free


def test_sums_do_not_depend_on_the_row_order() -> None:
    rng = np.random.default_rng(5)
    centred = FeatureDomain.box(-1.0, 1.0, d=3)
    rows = rng.uniform(-1.0, 1.0, (5_000, 3))
    centres = rng.uniform(-1.0, 1.0, (4, 3))
    counts, sums = lloyd_step(rows, centred, centres)
    for perm in (rng.permutation(len(rows)), np.arange(len(rows))[::-1]):
        c2, s2 = lloyd_step(rows[perm], centred, centres)
        assert counts.tobytes() == c2.tobytes() and sums.tobytes() == s2.tobytes()


def test_recovers_separated_clusters() -> None:
    # Three clusters of 10,000 rows, epsilon = 2, T = 5: noise on a centre is ~ scale / count
    # = (2 / 0.2) / 10,000 = 0.001 per coordinate. Tolerance 0.1 allows for Lloyd's own
    # convergence from a random start; seeded (a bad start would fail it, rarely: seed fixed).
    rng = np.random.default_rng(3)
    truth = np.array([[-0.6, -0.6], [0.6, -0.6], [0.0, 0.6]])
    X = np.vstack([c + 0.05 * rng.normal(size=(10_000, 2)) for c in truth])
    model = KMeans(3, 2.0, bounds_X=(-1.0, 1.0), n_iter=5).fit(X, rng=np.random.default_rng(11))
    found = model.centres
    for c in truth:
        assert np.min(np.linalg.norm(found - c, axis=1)) < 0.1
    assert len(set(predict(model, truth).tolist())) == 3
    # The published sizes are the last step's noisy counts (Laplace scale 5 on 10,000 rows:
    # 50 is 10 scales, probability e^-10 per cluster).
    sizes = model.sizes
    assert sizes.shape == (3,)
    assert np.abs(np.sort(sizes) - 10_000.0).max() < 50.0


def test_tiny_data_reseeds_and_stays_in_domain() -> None:
    rng = np.random.default_rng(4)
    model = KMeans(4, 0.1, data_norm=1.0, n_iter=3).fit(rng.normal(size=(3, 2)), rng=rng)
    doc = model.to_dict()
    assert doc["reseeded"] > 0  # counts of ~1 row under Laplace(60) noise are mostly < 1
    assert np.all(np.linalg.norm(model.centres, axis=1) <= 1.0 + 1e-12)
    # The last iteration's re-drawn centres are flagged: exactly the clusters sized below 1.
    assert model.reseeded.tolist() == (model.sizes < 1.0).tolist()
    assert model.reseeded.any()


def test_fit_steps_is_fit_from_aggregates() -> None:
    rng = np.random.default_rng(8)
    X = rng.uniform(0, 10, (300, 2))
    model = KMeans(2, 1.0, bounds_X=(0.0, 10.0), n_iter=3)
    want = KMeans(2, 1.0, bounds_X=(0.0, 10.0), n_iter=3).fit(X, rng=np.random.default_rng(1))
    seen: list[np.ndarray] = []

    def step(centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen.append(centres)
        dom = model.domain(2)
        return lloyd_step(dom.clip(X) - 5.0, dom.translated(dom.midpoint()), centres)

    got = model.fit_steps(step, d=2, rng=np.random.default_rng(1))
    assert got.centres.tobytes() == want.centres.tobytes()
    assert len(seen) == 3 and all(np.abs(c).max() <= 5.0 for c in seen)  # centred frame
    with pytest.raises(InvariantError, match="wrong shape"):
        model.fit_steps(lambda c: (np.zeros(3), np.zeros((3, 2))), d=2)


def test_a_fit_leaves_its_estimator_as_configured() -> None:
    # A plan is cached and shared by retries: its estimator must never change when it fits.
    X = np.random.default_rng(9).uniform(0, 10, (200, 2))
    model = KMeans(3, 1.0, bounds_X=(0.0, 10.0), n_iter=2)
    configured = pickle.dumps(model)
    first = model.fit(X, rng=np.random.default_rng(2))
    assert pickle.dumps(model) == configured
    assert model.fit(X, rng=np.random.default_rng(2)).centres.tobytes() == first.centres.tobytes()
    with pytest.raises(ValueError, match="read-only"):
        first.sizes[0] = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.centres = np.zeros((3, 2))  # type: ignore[misc]  # the point: it is read-only
