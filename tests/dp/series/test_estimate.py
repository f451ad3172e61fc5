"""Estimates with revisions (least squares) and without (consistent with what was published)."""

from __future__ import annotations

import numpy as np
import pytest

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.series import (
    BinaryTree,
    CausalStrategy,
    SquareRoot,
    causal_estimates,
    estimator,
    moving_sum,
    next_value,
    optimized,
    per_period,
    revised_estimate,
    running_total,
    stack,
)

T = 20
FIGURES = {
    "running_total": running_total(T),
    "per_period+running_total": stack(per_period(T), running_total(T)),
    "per_period+moving_sum_4": stack(per_period(T), moving_sum(T, 4)),
}


def _noisy(strategy: CausalStrategy, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.poisson(100.0, size=strategy.horizon).astype(np.float64)
    return x, strategy.matrix @ x + rng.normal(0.0, 3.0, size=strategy.matrix.shape[0])


@pytest.mark.parametrize("figures", sorted(FIGURES))
def test_without_revisions_published_values_never_change(figures: str) -> None:
    workload = FIGURES[figures]
    tree = BinaryTree(horizon=T)
    _, y = _noisy(tree, seed=1)
    final = causal_estimates(tree, workload, y)
    for t in range(T):
        so_far = causal_estimates(tree, workload, y[: tree.measured_by(t)])
        assert np.array_equal(so_far, final[: t + 1])  # bit for bit, not approximately
        step = next_value(tree, workload, y[: tree.measured_by(t)], final[:t])
        assert float(step) == final[t]
    # The tree revises its estimate of the past: the test above is not vacuous.
    revised = revised_estimate(tree, y)
    assert not np.allclose(revised, final)


def test_running_totals_without_revisions_add_each_new_period_to_the_last_total() -> None:
    tree = BinaryTree(horizon=T)
    _, y = _noisy(tree, seed=2)
    values = causal_estimates(tree, running_total(T), y)
    totals = np.cumsum(values)
    # Each published running total is the least-squares running total of its period.
    for t in range(T):
        best = revised_estimate(tree, y[: tree.measured_by(t)])
        assert totals[t] == pytest.approx(np.sum(best))


def test_square_strategies_never_revise_so_both_estimates_agree() -> None:
    for strategy in (SquareRoot(horizon=T), optimized(FIGURES["per_period+running_total"])):
        x, y = _noisy(strategy, seed=3)
        values = causal_estimates(strategy, FIGURES["per_period+running_total"], y)
        assert values == pytest.approx(revised_estimate(strategy, y))
        assert revised_estimate(strategy, strategy.matrix @ x) == pytest.approx(x)


@pytest.mark.parametrize("revisions", [False, True])
@pytest.mark.parametrize("figures", sorted(FIGURES))
def test_estimators_are_unbiased_and_causal(figures: str, revisions: bool) -> None:
    workload, tree = FIGURES[figures], BinaryTree(horizon=T)
    k = estimator(tree, workload, revisions=revisions)
    assert np.allclose(k @ tree.matrix, workload.matrix)  # K A = W: unbiased for every series
    for f, period in enumerate(workload.periods):
        assert not np.any(k[f, tree.measured_by(int(period)) :])  # reads only what is measured


def test_revised_estimate_is_unbiased_in_simulation() -> None:
    """Seeded: 4,000 noisy tree releases of one series at T = 20, N(0, 3^2) per measurement.
    Each period's mean error over the draws is within 5 standard errors of zero: with the
    exact standard errors, a false failure has probability < 20 * 5.8e-7 = 1.2e-5."""
    tree = BinaryTree(horizon=T)
    rng = np.random.default_rng(20260401)
    x = rng.poisson(100.0, size=T).astype(np.float64)
    draws = 4000
    y = (tree.matrix @ x)[:, None] + rng.normal(0.0, 3.0, size=(tree.matrix.shape[0], draws))
    errors = revised_estimate(tree, y) - x[:, None]
    pinv = np.linalg.pinv(tree.matrix)
    standard_error = 3.0 * np.linalg.norm(pinv, axis=1) / np.sqrt(draws)
    assert np.all(np.abs(errors.mean(axis=1)) < 5.0 * standard_error)
    # The simulated spread matches the exact one: a sample sd over 4,000 draws has a relative
    # standard error of 1.1%, so 20% is 18 of them (false failure < 1e-50).
    assert np.std(errors, axis=1) == pytest.approx(standard_error * np.sqrt(draws), rel=0.2)


def test_measurements_that_do_not_end_a_period_are_refused() -> None:
    tree = BinaryTree(horizon=T)  # period 1 closes with two rows: [1] and [0, 1]
    with pytest.raises(InputError, match="2 measurements do not end a period"):
        revised_estimate(tree, np.ones(2))
    with pytest.raises(InputError, match="period 2 needs 4 measurements and 2 published"):
        next_value(tree, running_total(T), np.ones(3), np.ones(2))
    with pytest.raises(InputError, match="period 20 is outside the horizon 20"):
        next_value(tree, running_total(T), np.ones(tree.matrix.shape[0]), np.ones(T))
    with pytest.raises(ConfigError, match="workload horizon 21 is not 20"):
        next_value(tree, running_total(T + 1), np.ones(1), np.ones(0))


def test_a_period_without_figures_gets_its_least_squares_estimate() -> None:
    from dppub.dp.series import SeriesWorkload

    # Quarterly totals over 6 months: months 0, 1, 3 and 4 publish nothing.
    months = np.asarray(np.kron(np.eye(2), np.ones((1, 3))), dtype=np.float64)
    quarters = SeriesWorkload(matrix=months, blocks=(("quarter", 2),))
    tree = BinaryTree(horizon=6)
    _, y = _noisy(tree, seed=4)
    values = causal_estimates(tree, quarters, y)
    assert values[0] == pytest.approx(revised_estimate(tree, y[: tree.measured_by(0)])[0])
    assert np.sum(values[:3]) == pytest.approx(
        np.sum(revised_estimate(tree, y[: tree.measured_by(2)]))
    )
