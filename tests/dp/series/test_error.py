"""Expected errors, the SVD bound, and the figures the issue quotes at T = 120."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.series import (
    BinaryTree,
    Identity,
    Relation,
    SquareRoot,
    causal_estimates,
    expected_errors,
    factorization_bound,
    moving_sum,
    optimized,
    per_period,
    running_total,
    sensitivity,
    stack,
    svd_bound,
)

ROW = Relation()


def test_running_totals_at_horizon_120_match_the_issue() -> None:
    # Issue 38: identity 60.5 sigma^2 per running total, square root 5.9, bound 5.0.
    w = running_total(120)
    assert expected_errors(Identity(horizon=120), w, ROW).mean == pytest.approx(60.5)
    assert expected_errors(SquareRoot(horizon=120), w, ROW).mean == pytest.approx(5.897, abs=1e-3)
    assert svd_bound(w, ROW) / 120 == pytest.approx(4.992, abs=1e-3)


def test_identity_errors_are_the_number_of_periods_summed() -> None:
    w = stack(per_period(6), running_total(6))
    gauss = expected_errors(Identity(horizon=6), w, Relation(max_rows_per_unit=2))
    assert gauss.per_figure.tolist() == pytest.approx([4.0] * 6 + [4.0 * t for t in range(1, 7)])
    laplace = expected_errors(Identity(horizon=6), w, ROW, noise="laplace")
    assert laplace.per_figure.tolist() == pytest.approx([2.0] * 6 + [2.0 * t for t in range(1, 7)])
    with pytest.raises(ConfigError, match="noise must be 'gaussian' or 'laplace', got 'cauchy'"):
        expected_errors(Identity(horizon=6), w, ROW, noise="cauchy")  # type: ignore[arg-type]


def test_expected_error_matches_simulation() -> None:
    """Seeded: 2,000 tree releases (no revisions) at T = 16, noise sd = declared L2 sensitivity.
    The mean squared error over all figures and draws is within 5% of the expected value: its
    relative standard error is below 1% here (each figure's squared error has relative sd
    sqrt(2) per draw), so a false failure has probability < 1e-6."""
    w, tree = stack(per_period(16), running_total(16)), BinaryTree(horizon=16)
    rng = np.random.default_rng(38)
    x = rng.poisson(50.0, size=16).astype(np.float64)
    scale = sensitivity(tree.matrix, ROW, "l2").declared
    noise = rng.normal(0.0, scale, size=(tree.matrix.shape[0], 2000))
    values = causal_estimates(tree, w, (tree.matrix @ x)[:, None] + noise)
    mse = np.mean((w.matrix @ values - (w.matrix @ x)[:, None]) ** 2)
    assert mse == pytest.approx(expected_errors(tree, w, ROW).mean, rel=0.05)


def test_the_unit_bound_is_below_every_factorization_brute_forced() -> None:
    """The generalised SVD bound holds against the exact unit sensitivity (all sets) of random
    lower-triangular strategies and of the candidates, on a horizon small enough to enumerate."""
    horizon, k = 7, 3
    w = stack(per_period(horizon), moving_sum(horizon, 3))
    relation = Relation(max_periods_per_unit=k)
    bound = svd_bound(w, relation)
    floor = factorization_bound(w, relation)
    rng = np.random.default_rng(5)
    matrices = [
        np.tril(rng.normal(size=(horizon, horizon))) + 3 * np.eye(horizon) for _ in range(20)
    ]
    matrices += [s.matrix for s in (Identity(horizon=horizon), SquareRoot(horizon=horizon))]
    for a in matrices:
        exact = max(
            float(np.sum(a[:, list(s)].sum(axis=1) ** 2))
            for size in range(1, k + 1)
            for s in itertools.combinations(range(horizon), size)
        )
        error = exact * float(np.sum((w.matrix @ np.linalg.inv(a)) ** 2))
        assert max(bound, floor) <= error * (1 + 1e-9)
    # k = 1 is the classic bound (sum of singular values)^2 / T.
    sv = np.linalg.svd(w.matrix, compute_uv=False)
    assert svd_bound(w, ROW) == pytest.approx(sv.sum() ** 2 / horizon)


def test_row_level_factorization_bound_is_the_optimised_strategys_dual_value() -> None:
    w = stack(per_period(30), moving_sum(30, 12))
    opt = optimized(w)
    floor = factorization_bound(w, ROW)
    assert floor == pytest.approx(opt.dual_bound, rel=1e-6)
    assert svd_bound(w, ROW) <= floor <= expected_errors(opt, w, ROW).total * (1 + 1e-9)
