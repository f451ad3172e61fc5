"""Private keys: the selection rules' delta, derived exactly, and their draws."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.tables.keys import (
    GRID,
    KeyWeights,
    key_rule,
    new_key_delta,
    select_keys,
    selection_budget,
    threshold_delta,
    threshold_probabilities,
    unit_weight,
)


@pytest.mark.slow
@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.5, 1e-6), (0.1, 1e-9), (2.0, 1e-3)])
def test_the_threshold_rule_spends_at_most_delta_and_no_rule_releases_more(
    eps: float, delta: float
) -> None:
    probs = threshold_probabilities(eps, delta)
    assert threshold_delta(probs, eps) <= delta
    assert probs[0] == 0.0 and probs[-1] == 1.0 and list(probs) == sorted(probs)
    # Optimal: raising any one release probability (by 1% of delta) breaks (eps, delta).
    for n in range(1, len(probs) - 1):
        bumped = list(probs)
        bumped[n] = min(1.0, bumped[n] + 0.01 * delta)
        assert threshold_delta(tuple(bumped), eps) > delta, n


def test_a_unit_in_m_keys_composes_the_threshold_rule_over_its_keys() -> None:
    rule = key_rule(1.0, 1e-6, 2)
    assert rule.kind == "threshold"
    assert rule.probabilities == threshold_probabilities(0.5, 0.5e-6)
    assert 2 * threshold_delta(rule.probabilities, 0.5) <= 1e-6


@pytest.mark.parametrize(("eps", "m"), [(0.5, 4), (1.0, 4), (0.25, 8)])
def test_the_gaussian_rule_spends_at_most_delta_and_its_threshold_is_tight(
    eps: float, m: int
) -> None:
    from dppub.dp.calibration import gaussian_delta

    rule = key_rule(eps, 1e-6, m)
    assert rule.kind == "gaussian"
    noise = gaussian_delta(sigma=rule.sigma, l2_sensitivity=1.0, epsilon=eps)
    new = new_key_delta(rule)
    assert noise <= rule.delta_noise * (1 + 1e-9)
    assert noise + new <= 1e-6
    lower = new_key_delta(replace(rule, rho=rule.rho * 0.99))
    assert noise + lower > 1e-6  # a 1% lower threshold would overspend


def test_unit_weights_are_floor_of_grid_over_root_k_and_have_l2_norm_at_most_one() -> None:
    for k in range(1, 200):
        w = unit_weight(k)
        assert k * w * w <= GRID * GRID < k * (w + 1) ** 2  # floor, exactly


def test_the_rule_with_fewer_units_for_half_is_chosen_under_m_keys() -> None:
    for m in (2, 3, 4, 8):
        chosen = key_rule(0.5, 1e-6, m)
        thr = replace(
            chosen, kind="threshold", probabilities=threshold_probabilities(0.5 / m, 1e-6 / m)
        )
        assert chosen.units_for_half() <= thr.units_for_half()


def test_bad_budgets_are_refused_with_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="delta > 0, got 0.0"):
        key_rule(1.0, 0.0)
    with pytest.raises(ConfigError, match="max_partitions_per_unit must be >= 1, got 0"):
        key_rule(1.0, 1e-6, 0)
    assert selection_budget(1.0, 1e-6, 1) == (0.5, 1e-6, 0.5)


def _weights(units: list[int], m: int = 1) -> KeyWeights:
    labels = tuple(f"k{i:03d}" for i in range(len(units)))
    n = np.array(units, dtype=np.int64)
    return KeyWeights(labels=labels, units=n, weights=n * unit_weight(m))


def test_threshold_draws_follow_the_release_probabilities() -> None:
    # 4000 draws per key: a rate 4.5 standard errors off fails with probability < 1e-4 (seeded).
    rule = key_rule(1.0, 1e-6)
    counts = [0, 1, 5, 10, 14, 20, 27, 28, 500]
    data = _weights([c for c in counts for _ in range(4000)])
    rng = np.random.default_rng(26)
    kept = select_keys(data, rule, rng=rng).reshape(len(counts), 4000)
    for c, row in zip(counts, kept, strict=True):
        p = rule.probabilities[min(c, len(rule.probabilities) - 1)]
        assert abs(row.mean() - p) <= 4.5 * np.sqrt(p * (1 - p) / 4000) + 1e-12, c
    assert not kept[0].any() and kept[-1].all()


def test_gaussian_draws_release_heavy_keys_and_not_light_ones() -> None:
    # sigma ~8.3, threshold ~43.5: 300 units of 4 keys (weight 150) are > 12 sigma above.
    rule = key_rule(0.5, 1e-6, 4)
    data = _weights([1] * 2000 + [300] * 2000, m=4)
    kept = select_keys(data, rule, rng=np.random.default_rng(7))
    assert not kept[:2000].any() and kept[2000:].all()
    assert [data.labels[i] for i in np.flatnonzero(kept)] == list(data.labels[2000:])


def test_release_grade_draws_come_from_opendp() -> None:
    for rule in (key_rule(1.0, 1e-6), key_rule(0.5, 1e-6, 4)):
        kept = select_keys(_weights([0, 1000]), rule)
        assert kept.tolist() == [False, True]


@pytest.mark.parametrize(("epsilon", "m"), [(20.0, 1), (40.0, 3), (100.0, 1), (300.0, 7)])
def test_a_large_epsilon_gets_a_threshold_rule_within_its_delta(epsilon: float, m: int) -> None:
    # Old code: InvariantError "threshold rule spends delta 1.013e-06 > 1e-06" at epsilon 20
    # (and 1.00004e-06 at 40 / 3): the drawn probabilities near 0 and 1 differ from the floats
    # by a step of 1.0, which e^epsilon magnifies beyond delta's slack; they are capped exactly.
    rule = key_rule(epsilon, 1e-6, m, "threshold")
    assert threshold_delta(rule.probabilities, epsilon / m) * m <= 1e-6
    assert rule.probabilities[-1] == 1.0 and list(rule.probabilities) == sorted(rule.probabilities)


@pytest.mark.parametrize("epsilon", [709.9, 999.0, 1000.0])
def test_the_largest_epsilons_the_config_allows_give_a_rule(epsilon: float) -> None:
    """The config allows epsilon up to 1000; e^eps overflowed a float above 709 (an internal
    error). The rule is built at 700, which is DP at any larger epsilon, and checked exactly."""
    rule = key_rule(epsilon, 1e-6)
    assert rule.probabilities[0] == 0.0 and rule.probabilities[-1] == 1.0
    assert threshold_delta(rule.probabilities, epsilon) <= 1e-6
