"""Causal strategies: their matrices, causality, and the optimised factorization."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.series import (
    BinaryTree,
    CausalStrategy,
    Relation,
    SquareRoot,
    expected_errors,
    optimized,
    per_period,
    running_total,
    stack,
    svd_bound,
    year_to_date,
)
from dppub.dp.series.strategies import lower_factor
from dppub.dp.series.workloads import FloatArray


def test_square_root_squared_is_the_prefix_matrix() -> None:
    a = SquareRoot(horizon=50).matrix
    assert np.allclose(a @ a, np.tril(np.ones((50, 50))), atol=1e-12)


def test_binary_tree_measures_dyadic_blocks_when_they_close() -> None:
    tree = BinaryTree(horizon=6)
    blocks = [(int(np.flatnonzero(r)[0]), int(np.flatnonzero(r)[-1])) for r in tree.matrix]
    assert blocks == [
        (0, 0),
        (0, 1),
        (1, 1),
        (2, 2),
        (0, 3),
        (2, 3),
        (3, 3),
        (4, 4),
        (4, 5),
        (5, 5),
    ]
    assert tree.released.tolist() == [0, 1, 1, 2, 3, 3, 3, 4, 5, 5]
    # At T = 120 every period lies in 7 blocks at most (sizes 64, 32, ..., 1).
    assert np.max(np.sum(BinaryTree(horizon=120).matrix, axis=0)) == 7


@dataclass(frozen=True, slots=True, kw_only=True)
class _Looking(CausalStrategy):
    """Measures period 1 alone, then periods 0 and 1 together: period 0 is unknown at its end."""

    def _build(self) -> FloatArray:
        return np.array([[1.0, 1.0], [0.0, 1.0]])


def test_a_strategy_that_cannot_estimate_a_closed_period_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not determine period 0 when it closes"):
        _Looking(horizon=2)


def test_lower_factor_is_lower_triangular_with_the_gram() -> None:
    rng = np.random.default_rng(7)
    m = rng.normal(size=(6, 6))
    x = m.T @ m + np.eye(6)
    a = lower_factor(x)
    assert np.allclose(np.triu(a, 1), 0.0) and np.allclose(a.T @ a, x)
    with pytest.raises(ConfigError, match="not positive definite"):
        lower_factor(-x)


@pytest.mark.parametrize(
    "workload",
    [running_total(40), stack(per_period(40), running_total(40)), year_to_date(40, 12)],
    ids=["running_total", "per_period+running_total", "year_to_date"],
)
def test_optimized_beats_the_square_root_and_meets_its_dual_bound(workload: object) -> None:
    from dppub.dp.series.workloads import SeriesWorkload

    assert isinstance(workload, SeriesWorkload)
    row = Relation()
    opt = optimized(workload)
    assert np.allclose(np.triu(opt.matrix, 1), 0.0)
    err = expected_errors(opt, workload, row).total
    # Weak duality: the dual value is below every factorization's error, and the solver's gap
    # is small; the SVD bound is below both.
    assert svd_bound(workload, row) <= opt.dual_bound * (1 + 1e-9)
    assert opt.dual_bound <= err * (1 + 1e-9) and err <= opt.dual_bound * 1.001
    assert err <= expected_errors(SquareRoot(horizon=40), workload, row).total
