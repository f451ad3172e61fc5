"""DP k-means (noisy Lloyd): configuration, sensitivities, budget split, accuracy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.budget import PrivacyCost
from dp.clustering import COUNT_SENSITIVITY, KMeans, lloyd_step, sum_sensitivity
from dp.errors import ConfigError, InputError, InvariantError
from dp.regression import FeatureDomain


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
    # sensitivity 1 -> scale 4; sums on [0, 10]^3 (centred, |x_j| <= 5): max ||x||_1 = 15 ->
    # scale 60 (replace-one needed 2 and 30). Swapped budgets (diffprivlib) would not give these.
    rng = np.random.default_rng(0)
    model = KMeans(3, 2.0, bounds_X=(0.0, 10.0), n_iter=4).fit(
        rng.uniform(0, 10, (500, 3)), rng=rng
    )
    doc = json.loads(json.dumps(model.to_dict()))
    assert doc["epsilon_per_release"] == 0.25
    assert doc["laplace_scale"] == {"counts": 4.0, "sums": 60.0}
    assert doc["neighbours"] == "add/remove one record"
    assert model.privacy_cost == PrivacyCost(epsilon=2.0)
    assert sum_sensitivity(FeatureDomain.box(0.0, 10.0, d=3).translated(np.full(3, 5.0))) == 15.0
    assert sum_sensitivity(FeatureDomain.ball(2.0, d=4)) == 4.0  # sqrt(d) R


@st.composite
def _neighbours(draw: st.DrawFn):
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


@settings(max_examples=300, deadline=None)
@given(_neighbours())
def test_neighbours_move_counts_and_sums_within_sensitivity(case) -> None:
    dom, X, X2, centres = case
    shift = dom.midpoint()
    c1, s1 = lloyd_step(dom.clip(X) - shift, centres - shift)
    c2, s2 = lloyd_step(dom.clip(X2) - shift, centres - shift)
    assert np.abs(c1 - c2).sum() == COUNT_SENSITIVITY  # exactly one count moves, by one
    assert np.abs(s1 - s2).sum() <= sum_sensitivity(dom.translated(shift)) + 1e-9


def test_recovers_separated_clusters() -> None:
    # Three clusters of 10,000 rows, epsilon = 2, T = 5: noise on a centre is ~ scale / count
    # = (2 / 0.2) / 10,000 = 0.001 per coordinate. Tolerance 0.1 allows for Lloyd's own
    # convergence from a random start; seeded (a bad start would fail it, rarely: seed fixed).
    rng = np.random.default_rng(3)
    truth = np.array([[-0.6, -0.6], [0.6, -0.6], [0.0, 0.6]])
    X = np.vstack([c + 0.05 * rng.normal(size=(10_000, 2)) for c in truth])
    model = KMeans(3, 2.0, bounds_X=(-1.0, 1.0), n_iter=5).fit(X, rng=np.random.default_rng(11))
    found = model.cluster_centers_
    for c in truth:
        assert np.min(np.linalg.norm(found - c, axis=1)) < 0.1
    assert len(set(model.predict(truth).tolist())) == 3


def test_tiny_data_reseeds_and_stays_in_domain() -> None:
    rng = np.random.default_rng(4)
    model = KMeans(4, 0.1, data_norm=1.0, n_iter=3).fit(rng.normal(size=(3, 2)), rng=rng)
    doc = model.to_dict()
    assert doc["reseeded"] > 0  # counts of ~1 row under Laplace(60) noise are mostly < 1
    assert np.all(np.linalg.norm(model.cluster_centers_, axis=1) <= 1.0 + 1e-12)


def test_fit_steps_is_fit_from_aggregates() -> None:
    rng = np.random.default_rng(8)
    X = rng.uniform(0, 10, (300, 2))
    model = KMeans(2, 1.0, bounds_X=(0.0, 10.0), n_iter=3)
    want = KMeans(2, 1.0, bounds_X=(0.0, 10.0), n_iter=3).fit(X, rng=np.random.default_rng(1))
    seen: list[np.ndarray] = []

    def step(centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen.append(centres)
        return lloyd_step(model.domain(2).clip(X) - 5.0, centres)

    got = model.fit_steps(step, d=2, rng=np.random.default_rng(1))
    assert got.cluster_centers_.tobytes() == want.cluster_centers_.tobytes()
    assert len(seen) == 3 and all(np.abs(c).max() <= 5.0 for c in seen)  # centred frame
    with pytest.raises(InvariantError, match="wrong shape"):
        model.fit_steps(lambda c: (np.zeros(3), np.zeros((3, 2))), d=2)
