import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dppub.dp.budget import PlannedCost, PrivacyCost, compose, parallel, sequential
from dppub.dp.errors import ConfigError
from dppub.dp.validation import check_bounds, check_delta, check_epsilon

costs = st.builds(
    PrivacyCost,
    epsilon=st.floats(0, 10, allow_nan=False),
    delta=st.floats(0, 1e-3, allow_nan=False),
)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "1", True])
def test_epsilon_rejects(bad: object) -> None:
    with pytest.raises(ConfigError, match="epsilon must be"):
        check_epsilon(bad)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0, math.nan, math.inf])
def test_delta_rejects(bad: float) -> None:
    with pytest.raises(ConfigError, match=r"delta must be in \[0, 1\)"):
        check_delta(bad)


def test_bounds_rejects_inverted_and_echoes_value() -> None:
    with pytest.raises(ConfigError, match=r"lo < hi, got \[3.0, 1.0\]"):
        check_bounds([3, 1])
    assert check_bounds([0, 2]) == (0.0, 2.0)


@pytest.mark.parametrize(("eps", "delta"), [(-1.0, 0.0), (math.nan, 0.0), (1.0, 1.0)])
def test_cost_validates(eps: float, delta: float) -> None:
    with pytest.raises(ConfigError):
        PrivacyCost(epsilon=eps, delta=delta)


def test_cost_is_immutable() -> None:
    c = PrivacyCost(epsilon=1.0)
    with pytest.raises(AttributeError):
        c.epsilon = 2.0  # type: ignore[misc]


@given(st.lists(costs, max_size=8))
def test_sequential_adds(cs: list[PrivacyCost]) -> None:
    total = sequential(cs)
    assert total.epsilon == pytest.approx(sum(c.epsilon for c in cs))
    assert total.delta == pytest.approx(sum(c.delta for c in cs))


@given(st.lists(costs, min_size=1, max_size=8))
def test_parallel_is_max_and_never_exceeds_sequential(cs: list[PrivacyCost]) -> None:
    p, s = parallel(cs), sequential(cs)
    assert p.epsilon == max(c.epsilon for c in cs)
    assert p.epsilon <= s.epsilon + 1e-12


def test_compose_mixes_parallel_and_sequential() -> None:
    plan = [
        PlannedCost(name="a", cost=PrivacyCost(epsilon=1.0), partition=("region", "north")),
        PlannedCost(name="b", cost=PrivacyCost(epsilon=0.5), partition=("region", "north")),
        PlannedCost(name="c", cost=PrivacyCost(epsilon=1.2), partition=("region", "south")),
        PlannedCost(name="d", cost=PrivacyCost(epsilon=0.3, delta=1e-6)),
    ]
    total = compose(plan)
    # north: 1.0 + 0.5 = 1.5 (sequential within a part); max(1.5, 1.2) across parts; + 0.3.
    assert total.epsilon == pytest.approx(1.8)
    assert total.delta == pytest.approx(1e-6)


def test_compose_rejects_duplicate_names() -> None:
    c = PrivacyCost(epsilon=1.0)
    with pytest.raises(ConfigError, match="unique, got 'x' twice"):
        compose([PlannedCost(name="x", cost=c), PlannedCost(name="x", cost=c)])


def test_fits_within_and_remaining() -> None:
    budget = PrivacyCost(epsilon=1.0, delta=1e-5)
    assert PrivacyCost(epsilon=0.7).fits_within(budget)
    assert not PrivacyCost(epsilon=1.01).fits_within(budget)
    assert not PrivacyCost(epsilon=0.1, delta=2e-5).fits_within(budget)
    assert (budget - PrivacyCost(epsilon=0.25)).epsilon == pytest.approx(0.75)
