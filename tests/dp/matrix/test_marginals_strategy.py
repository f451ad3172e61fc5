"""Weighted marginals strategies (HDMM): the shared eigenbasis, sensitivity, error, selection."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.matrix as mx
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.marginal_basis import (
    complement_sizes,
    marginal_spectrum,
    subset_sum,
    superset_mobius,
    superset_sum,
)
from dppub.dp.matrix.opt_marginals import marginals_loss

# The demo's 2-way marginals: age in 5-year bands over [17, 90] (15), sex, race, education,
# marital status.
DEMO = (15, 2, 5, 6, 4)


def _projector(dims: tuple[int, ...], p: int) -> np.ndarray:
    """Dense ``Pi_P``: ``I - J/n`` on the axes in ``P``, ``J/n`` elsewhere."""
    out = np.ones((1, 1))
    for i, n in enumerate(dims):
        mean = np.full((n, n), 1.0 / n)
        out = np.kron(out, np.eye(n) - mean if p >> i & 1 else mean)
    return out


def _dense_marginals(dims: tuple[int, ...], weights: np.ndarray) -> np.ndarray:
    """``A`` built from Kronecker products of ``I`` and ``1^T``, subsets in the strategy's order."""
    a = mx.MarginalsStrategy(dims=dims, weights=weights)
    rows = []
    for subset in a.subsets:
        block: np.ndarray = np.ones((1, 1))
        for i, n in enumerate(dims):
            block = np.kron(block, np.eye(n) if i in subset else np.ones((1, n)))
        rows.append(weights[sum(1 << i for i in subset)] * block)
    return np.vstack(rows)


def test_subset_transforms_match_their_definitions() -> None:
    rng = np.random.default_rng(0)
    d = 4
    v = rng.normal(size=1 << d)
    sup = [sum(v[s] for s in range(1 << d) if s & p == p) for p in range(1 << d)]
    sub = [sum(v[p] for p in range(1 << d) if s & p == p) for s in range(1 << d)]
    np.testing.assert_allclose(superset_sum(v), sup)
    np.testing.assert_allclose(subset_sum(v), sub)
    np.testing.assert_allclose(superset_mobius(superset_sum(v)), v, atol=1e-12)
    u = rng.normal(size=1 << d)  # subset_sum is the adjoint of superset_sum
    assert float(superset_sum(u) @ v) == pytest.approx(float(u @ subset_sum(v)))


@pytest.mark.parametrize(
    "workload",
    [
        mx.marginals((3, 4, 2), 2),
        mx.kron(mx.prefix(3), mx.identity(4), mx.total(2)),
        mx.union(
            mx.marginals((3, 4, 2), 1),
            mx.kron(mx.all_range(3), mx.prefix(4), mx.identity(2)),
            weights=[2.0, 0.5],
        ),
    ],
    ids=["marginals", "kron", "union"],
)
def test_pattern_weights_are_traces_against_projectors(workload: mx.Workload) -> None:
    c = mx.pattern_weights(workload)
    assert c is not None
    gram = workload.gram()
    dense = [np.trace(gram @ _projector(workload.domain, p)) for p in range(1 << 3)]
    np.testing.assert_allclose(c, dense, atol=1e-9)


def test_pattern_weights_are_unavailable_without_structure() -> None:
    boxes = mx.range_boxes((3, 4), [[0, 0]], [[1, 2]])
    assert mx.pattern_weights(boxes) is None
    assert mx.opt_marginals(boxes) is None


def test_strategy_is_the_weighted_stack_of_marginals() -> None:
    dims = (3, 4, 2)
    w = np.random.default_rng(1).uniform(0.1, 1.0, 8)
    w[[1, 6]] = 0.0  # some marginals unmeasured
    a = mx.MarginalsStrategy(dims=dims, weights=w)
    dense = _dense_marginals(dims, w)
    np.testing.assert_allclose(a.dense(), dense)
    np.testing.assert_allclose(a.matrix.toarray(), dense)
    y = np.random.default_rng(2).normal(size=a.m)
    np.testing.assert_allclose(a.rmatvec(y), dense.T @ y)
    assert a.sensitivity == pytest.approx(np.abs(dense).sum(axis=0).max())
    assert a.l2_sensitivity == pytest.approx(np.sqrt((dense**2).sum(axis=0)).max())
    # Every column has the same norms: one cell lies in exactly one cell of each marginal.
    assert np.ptp(np.abs(dense).sum(axis=0)) < 1e-12


@pytest.mark.parametrize(
    "workload",
    [
        mx.marginals((3, 4, 2), 2),
        mx.marginals((3, 4, 2), 1),
        mx.kron(mx.prefix(3), mx.all_range(4), mx.identity(2)),
    ],
    ids=["2-way", "1-way", "kron"],
)
def test_error_formula_and_least_squares_match_dense_algebra(workload: mx.Workload) -> None:
    rng = np.random.default_rng(3)
    w = rng.uniform(0.1, 1.0, 8)
    w[[3, 5]] = 0.0
    a = mx.MarginalsStrategy(dims=workload.domain, weights=w)
    dense = a.dense()
    pinv = np.linalg.pinv(dense)
    assert a.squared_error_factor(workload) == pytest.approx(
        np.linalg.norm(workload.dense() @ pinv) ** 2, rel=1e-9
    )
    r = rng.normal(size=(a.m, 2))
    np.testing.assert_allclose(a.lstsq(r), pinv @ r, atol=1e-10)


def test_unmeasured_directions_are_refused() -> None:
    a = mx.marginals_strategy((3, 4), {(0,): 1.0, (1,): 1.0})  # 1-way marginals only
    assert a.squared_error_factor(mx.marginals((3, 4), 1)) > 0
    with pytest.raises(ConfigError, match=r"workload domain \(12,\) does not match"):
        a.squared_error_factor(mx.identity(12))
    with pytest.raises(ConfigError, match="does not measure everything workload"):
        a.squared_error_factor(mx.marginals((3, 4), 2))


@st.composite
def _neighbours(draw: st.DrawFn) -> tuple[mx.MarginalsStrategy, np.ndarray, int]:
    d = draw(st.integers(1, 4))
    dims = tuple(draw(st.lists(st.integers(1, 4), min_size=d, max_size=d)))
    w = np.array(draw(st.lists(st.floats(0.0, 3.0), min_size=1 << d, max_size=1 << d)))
    if not np.any(w > 0):
        w[-1] = 1.0
    n = math.prod(dims)
    x = np.array(draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)), dtype=float)
    return mx.MarginalsStrategy(dims=dims, weights=w), x, draw(st.integers(0, n - 1))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_neighbours())
def test_neighbours_move_the_measurement_by_exactly_the_declared_sensitivity(
    case: tuple[mx.MarginalsStrategy, np.ndarray, int],
) -> None:
    a, x, cell = case
    x_nb = x.copy()
    x_nb[cell] += 1.0  # add one record in this cell
    diff = a @ x_nb - a @ x
    assert np.sum(np.abs(diff)) <= a.sensitivity * (1 + 1e-12) + 1e-12
    assert np.linalg.norm(diff) <= a.l2_sensitivity * (1 + 1e-12) + 1e-12
    # ...and the bound is attained: every cell is in one cell of every measured marginal.
    assert np.sum(np.abs(diff)) == pytest.approx(a.sensitivity, rel=1e-9)


def test_loss_gradient_matches_finite_differences() -> None:
    w = mx.marginals((3, 4, 2, 5), 2)
    c = mx.pattern_weights(w)
    assert c is not None
    sizes = complement_sizes(w.domain)
    theta = np.random.default_rng(4).uniform(0.2, 1.0, 16)
    _, grad = marginals_loss(theta, c, sizes)
    for s in range(16):
        step = np.zeros(16)
        step[s] = 1e-6
        num = marginals_loss(theta + step, c, sizes)[0] - marginals_loss(theta - step, c, sizes)[0]
        assert grad[s] == pytest.approx(num / 2e-6, rel=1e-5)


def test_loss_of_a_strategy_is_its_laplace_error() -> None:
    w = mx.marginals((3, 4, 2), 2)
    a = mx.opt_marginals(w)
    assert a is not None
    c = mx.pattern_weights(w)
    assert c is not None
    loss, _ = marginals_loss(a.weights, c, complement_sizes(w.domain))
    assert loss == pytest.approx(a.sensitivity**2 * a.squared_error_factor(w))


@pytest.mark.slow
def test_demo_two_way_marginals_plan_below_hdmm_reference() -> None:
    w = mx.marginals(DEMO, 2)
    a = mx.select_strategy(w)
    assert a.name.startswith("OptMarginals(")
    rmse = mx.expected_rmse(w, a, 1.0)
    # The workload measured as its own strategy: 12.24; HDMM's marginals (one start): 10.72.
    assert rmse <= 10.8
    assert rmse < mx.expected_rmse(w, mx.workload_strategy(w), 1.0)
    assert rmse >= mx.svd_bound_rmse(w, 1.0)
    # Data-independent and reproducible: a fresh optimization returns the same weights.
    again = mx.opt_marginals(w)
    assert isinstance(a, mx.MarginalsStrategy) and again is not None
    np.testing.assert_array_equal(again.weights, a.weights)


@pytest.mark.slow
def test_identity_wins_where_it_is_optimal_and_ties_keep_the_simpler_strategy() -> None:
    # 3-way marginals of the demo: the optimizer's best is the identity itself.
    w = mx.marginals(DEMO, 3)
    assert mx.select_strategy(w).name.startswith("Identity x")
    # A single marginal as a Kronecker product: measuring it directly is exact in one shot.
    single = mx.kron(mx.identity(4), mx.total(5), mx.identity(3))
    a = mx.select_strategy(single)
    assert isinstance(a, mx.MarginalsStrategy)
    assert a.subsets == ((0, 2),)
    assert mx.expected_rmse(single, a, 1.0) == pytest.approx(math.sqrt(2.0))


@pytest.mark.slow
def test_answer_end_to_end_matches_the_expected_error() -> None:
    # Seeded: 300 draws of 2-way marginals over (6, 5, 4, 3); the empirical mean squared error
    # of the least-squares answers has a relative standard error of ~0.012 here, so a 10% band
    # (8 standard errors) fails with probability < 1e-14 (normal approximation).
    w = mx.marginals((6, 5, 4, 3), 2)
    a = mx.select_strategy(w)
    assert isinstance(a, mx.MarginalsStrategy)
    rng = np.random.default_rng(6)
    x = rng.integers(0, 40, w.n).astype(float)
    truth = w @ x
    sq = []
    for _ in range(300):
        res = mx.answer(w, x, epsilon=1.0, reconstruction="least-squares", rng=rng)
        sq.append(np.mean((res.answers - truth) ** 2))
    expected = mx.expected_rmse(w, a, 1.0) ** 2
    assert float(np.mean(sq)) == pytest.approx(expected, rel=0.1)
    res = mx.answer(w, x, epsilon=1.0, rng=rng)  # default non-negative reconstruction
    assert res.strategy == a.name
    assert res.estimate.min() >= 0


def test_least_squares_is_exact_and_cheap_at_72000_cells() -> None:
    # Noiseless measurements: W A^+ A x = W x since W lies in A's row space. Nothing of size
    # n x n is formed (it would take 41 GB).
    dims = (15, 2, 5, 6, 4, 20)
    w = mx.marginals(dims, 2)
    a = mx.opt_marginals(w, restarts=2)
    assert a is not None and a.n == 72_000
    x = np.random.default_rng(7).integers(0, 5, a.n).astype(float)
    x_hat = a.lstsq(a @ x)
    np.testing.assert_allclose(w @ x_hat, w @ x, atol=1e-6)
    assert a.matrix.nnz == a.n * len(a.subsets)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: mx.MarginalsStrategy(dims=(2, 3), weights=np.ones(3)), r"weights must be 4"),
        (lambda: mx.MarginalsStrategy(dims=(2, 3), weights=-np.ones(4)), r"weights must be 4"),
        (lambda: mx.MarginalsStrategy(dims=(2, 3), weights=np.zeros(4)), r"at least one"),
        (lambda: mx.MarginalsStrategy(dims=(0, 3), weights=np.ones(4)), r"dims must be positive"),
        (lambda: mx.marginals_strategy((2, 3), {(0, 0): 1.0}), r"distinct attributes"),
        (lambda: mx.marginals_strategy((2, 3), {(2,): 1.0}), r"distinct attributes"),
        (lambda: mx.opt_marginals(mx.marginals((2, 3), 1), restarts=-1), r"restarts must be"),
    ],
)
def test_invalid_marginals_strategies_raise_config_error(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


@pytest.mark.slow
def test_kron_workloads_keep_their_per_axis_strategy_when_it_is_better() -> None:
    w = mx.kron(mx.prefix(16), mx.prefix(16))
    a = mx.select_strategy(w)
    assert isinstance(a, mx.KronStrategy)
    opt = mx.opt_marginals(w)
    assert opt is not None
    assert mx.expected_rmse(w, a, 1.0) < mx.expected_rmse(w, opt, 1.0)


def test_subsets_come_in_size_then_lexicographic_order() -> None:
    w = np.zeros(16)
    for s in [(0, 1, 2), (3,), (1, 3), (0, 3)]:
        w[sum(1 << i for i in s)] = 1.0
    a = mx.MarginalsStrategy(dims=(2, 2, 2, 2), weights=w)
    assert a.subsets == ((3,), (0, 3), (1, 3), (0, 1, 2))


@pytest.mark.parametrize(("dims", "k"), [((3, 4, 2), 2), ((2, 3, 1, 2), 1), ((4, 4), 0)])
def test_marginal_spectrum_gives_the_singular_values(dims: tuple[int, ...], k: int) -> None:
    w = mx.marginals(dims, k)
    spectrum = marginal_spectrum(w)
    assert spectrum is not None
    lam, mult = spectrum
    sv = np.repeat(np.sqrt(lam), mult.astype(int))
    assert sv.size == w.n  # one per eigenvector of W^T W, zeros included
    dense = np.linalg.svd(w.dense(), compute_uv=False)
    np.testing.assert_allclose(np.sort(sv[sv > 1e-9]), np.sort(dense[dense > 1e-9]), rtol=1e-9)
    assert marginal_spectrum(mx.kron(mx.prefix(3), mx.identity(2))) is None


def test_plans_over_a_hundred_million_cells_stay_small() -> None:
    # Adult's nine declared domains (age in 5-year bands): 205,721,600 cells. The bound, the
    # workload strategy's error (its rank) and the optimized weights use 2^9 numbers, never an
    # n-vector.
    w = mx.marginals((2, 20, 5, 7, 16, 41, 8, 14, 2), 2)
    assert w.n == 205_721_600
    a = mx.opt_marginals(w, restarts=1)
    assert a is not None
    opt = mx.expected_rmse(w, a, 1.0)
    assert mx.svd_bound_rmse(w, 1.0) < opt < mx.expected_rmse(w, mx.workload_strategy(w), 1.0)
