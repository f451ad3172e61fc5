"""Gaussian measurement: L2 sensitivities, the residual strategy (ResidualPlanner) and zCDP."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.matrix as mx
from dppub.dp.budget import PrivacyCost, zcdp_to_dp
from dppub.dp.calibration import gaussian_sigma
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.exact import certified_sensitivity
from dppub.dp.matrix.residual import helmert


def _max_col_l2(a: np.ndarray) -> float:
    return float(np.sqrt((a**2).sum(axis=0)).max())


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_helmert_rows_are_an_orthonormal_basis_of_the_complement_of_ones(n: int) -> None:
    h = helmert(n)
    assert h.shape == (n - 1, n)
    np.testing.assert_allclose(h @ h.T, np.eye(n - 1), atol=1e-12)
    np.testing.assert_allclose(h.T @ h, np.eye(n) - 1.0 / n, atol=1e-12)


@pytest.mark.parametrize(
    "workload",
    [
        mx.marginals((3, 4, 2), 2),
        mx.marginals((2, 3, 1, 2), 1),
        mx.kron(mx.prefix(3), mx.identity(4)),
    ],
    ids=["2-way", "1-way-with-a-1-cell-axis", "kron"],
)
def test_residual_strategy_matches_dense_algebra(workload: mx.Workload) -> None:
    a = mx.residual_planner(workload)
    dense = a.dense()
    np.testing.assert_allclose(a.matrix.toarray(), dense, atol=1e-12)
    assert a.l2_sensitivity == pytest.approx(_max_col_l2(dense))
    assert a.l2_sensitivity == pytest.approx(1.0)
    assert a.sensitivity == pytest.approx(np.abs(dense).sum(axis=0).max())
    pinv = np.linalg.pinv(dense)
    assert a.squared_error_factor(workload) == pytest.approx(
        np.linalg.norm(workload.dense() @ pinv) ** 2, rel=1e-9
    )
    r = np.random.default_rng(0).normal(size=(a.m, 2))
    np.testing.assert_allclose(a.lstsq(r), pinv @ r, atol=1e-10)
    np.testing.assert_allclose(a.rmatvec(r), dense.T @ r, atol=1e-12)


@pytest.mark.parametrize(("dims", "k"), [((3, 4, 2), 2), ((15, 2, 5, 6, 4), 2), ((4, 4, 4), 1)])
def test_residual_planner_attains_the_svd_bound_on_marginals(dims: tuple[int, ...], k: int) -> None:
    # (sum of singular values)^2 / n is the least L2-sensitivity^2 x error of any strategy.
    w = mx.marginals(dims, k)
    a = mx.residual_planner(w)
    bound = float(np.sum(w.singular_values())) ** 2 / w.n
    assert a.l2_sensitivity**2 * a.squared_error_factor(w) == pytest.approx(bound, rel=1e-9)


@st.composite
def _neighbours(draw: st.DrawFn) -> tuple[mx.Strategy, np.ndarray, int]:
    d = draw(st.integers(1, 3))
    dims = tuple(draw(st.lists(st.integers(1, 5), min_size=d, max_size=d)))
    n = math.prod(dims)
    if draw(st.booleans()):
        a: mx.Strategy = mx.residual_planner(mx.marginals(dims, draw(st.integers(0, d))))
    else:
        w = np.array(draw(st.lists(st.floats(0.0, 3.0), min_size=1 << d, max_size=1 << d)))
        w[-1] = max(w[-1], 0.1)
        a = mx.MarginalsStrategy(dims=dims, weights=w)
    x = np.array(draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)), dtype=float)
    return a, x, draw(st.integers(0, n - 1))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_neighbours())
def test_neighbours_move_the_measurement_by_at_most_the_declared_sensitivities(
    case: tuple[mx.Strategy, np.ndarray, int],
) -> None:
    a, x, cell = case
    x_nb = x.copy()
    x_nb[cell] += 1.0
    diff = a @ x_nb - a @ x
    assert np.linalg.norm(diff) <= a.l2_sensitivity * (1 + 1e-9) + 1e-12
    assert np.sum(np.abs(diff)) <= a.sensitivity * (1 + 1e-9) + 1e-12


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_neighbours(), st.integers(1, 6), st.data())
def test_m_records_move_the_measurement_by_at_most_m_sensitivities(
    case: tuple[mx.Strategy, np.ndarray, int], m: int, data: st.DataObject
) -> None:
    # A unit-neighbour of a bounded table: up to m records added, in any cells.
    a, x, _ = case
    cells = data.draw(st.lists(st.integers(0, a.n - 1), min_size=m, max_size=m))
    x_nb = x.copy()
    np.add.at(x_nb, cells, 1.0)
    diff = a @ x_nb - a @ x
    assert np.linalg.norm(diff) <= m * a.l2_sensitivity * (1 + 1e-9) + 1e-12
    assert np.sum(np.abs(diff)) <= m * a.sensitivity * (1 + 1e-9) + 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("m", [2, 5, 20])
def test_a_group_is_measured_at_its_own_sensitivity_with_less_noise_than_group_privacy(
    m: int,
) -> None:
    w = mx.marginals((4, 3, 5), 2)
    a = mx.residual_planner(w)
    x = np.arange(w.n, dtype=float)
    eps, delta = 1.0, 1e-6
    meas = mx.measure_gaussian(
        a, x, epsilon=eps, delta=delta, group=m, rng=np.random.default_rng(0)
    )
    l2 = certified_sensitivity(a, l2=True)  # of the answers as computed (dp.matrix.exact)
    assert a.l2_sensitivity < l2 <= a.l2_sensitivity * (1 + 1e-4)
    assert meas.noise_scale == gaussian_sigma(l2_sensitivity=m * l2, epsilon=eps, delta=delta)
    assert meas.cost == PrivacyCost(epsilon=eps, delta=delta)
    # Group privacy would run the mechanism at (eps / m, delta / (m e^((m-1) eps / m))).
    row_delta = delta / (m * math.exp((m - 1) * eps / m))
    grouped = gaussian_sigma(l2_sensitivity=a.l2_sensitivity, epsilon=eps / m, delta=row_delta)
    assert meas.noise_scale < grouped
    got = mx.answer(
        w,
        x,
        epsilon=eps,
        delta=delta,
        noise="gaussian",
        group=m,
        strategy=a,
        reconstruction="least-squares",
        rng=np.random.default_rng(0),
    )
    assert got.sensitivity == m * l2
    assert got.noise_scale == meas.noise_scale
    assert got.expected_rmse == pytest.approx(
        mx.expected_rmse_gaussian(w, a, epsilon=eps, delta=delta, group=m), rel=1e-4
    )
    # Laplace: a group of m at epsilon is the scale of one record at epsilon / m.
    lap = mx.answer(w, x, epsilon=eps, group=m, strategy=a, rng=np.random.default_rng(0))
    one = mx.answer(w, x, epsilon=eps / m, strategy=a, rng=np.random.default_rng(0))
    assert lap.noise_scale == pytest.approx(one.noise_scale)
    assert lap.sensitivity == m * certified_sensitivity(a)
    assert lap.svd_bound_rmse == pytest.approx(one.svd_bound_rmse)
    with pytest.raises(ConfigError, match="group must be a positive integer"):
        mx.measure_gaussian(a, x, epsilon=eps, delta=delta, group=0)


@pytest.mark.parametrize(
    "strategy",
    [
        mx.hierarchical(11, 3),
        mx.wavelet(8),
        mx.kron_strategy(mx.hierarchical(5, 2), mx.identity_strategy(3)),
        mx.workload_strategy(mx.marginals((3, 4), 1)),
    ],
    ids=["tree", "wavelet", "kron", "workload"],
)
def test_l2_sensitivity_is_the_largest_column_norm(strategy: mx.Strategy) -> None:
    assert strategy.l2_sensitivity == pytest.approx(_max_col_l2(strategy.dense()))


@pytest.mark.slow
def test_gaussian_selection_picks_the_residual_strategy_for_marginals() -> None:
    w = mx.marginals((15, 2, 5, 6, 4), 2)
    a = mx.select_strategy(w, noise="gaussian")
    assert isinstance(a, mx.ResidualStrategy)
    laplace = mx.select_strategy(w)
    score = a.l2_sensitivity**2 * a.squared_error_factor(w)
    assert score < laplace.l2_sensitivity**2 * laplace.squared_error_factor(w)
    with pytest.raises(ConfigError, match=r"noise must be one of \['laplace', 'gaussian'\]"):
        mx.select_strategy(w, noise="uniform")


@pytest.mark.slow
def test_gaussian_measurement_noise_and_expected_error() -> None:
    # Seeded: 400 draws; the relative standard error of the mean squared error of the answers
    # is ~0.012 here, so a 10% band (8 standard errors) fails with probability < 1e-14.
    w = mx.marginals((4, 3, 5), 2)
    a = mx.residual_planner(w)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 30, w.n).astype(float)
    sigma = gaussian_sigma(
        l2_sensitivity=certified_sensitivity(a, l2=True), epsilon=0.5, delta=1e-6
    )
    sq = []
    for _ in range(400):
        meas = mx.measure_gaussian(a, x, epsilon=0.5, delta=1e-6, rng=rng)
        sq.append(np.mean((w @ mx.least_squares(meas) - w @ x) ** 2))
    assert meas.mechanism == "gaussian"
    assert meas.noise_scale == sigma
    assert meas.cost == PrivacyCost(epsilon=0.5, delta=1e-6)
    expected = mx.expected_rmse_gaussian(w, a, epsilon=0.5, delta=1e-6)
    assert float(np.mean(sq)) == pytest.approx(expected**2, rel=0.1)
    # Post-processing works unchanged: the default reconstruction is non-negative.
    est = mx.reconstruct(meas, w)
    assert est.min() >= 0


def test_gaussian_measurement_validates_before_touching_data() -> None:
    a = mx.residual_planner(mx.marginals((2, 3), 1))
    with pytest.raises(ConfigError, match="delta must"):
        mx.measure_gaussian(a, np.ones(6), epsilon=1.0, delta=1.5)
    with pytest.raises(ConfigError, match="histogram must have 6 cells"):
        mx.measure_gaussian(a, np.ones(5), epsilon=1.0, delta=1e-6)
    with pytest.raises(ConfigError, match="strategy must be a dp.matrix strategy"):
        mx.measure_gaussian("identity", np.ones(6), epsilon=1.0, delta=1e-6)  # type: ignore[arg-type]


@pytest.mark.parametrize("epsilon", [1e-4, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 0.1])
def test_zcdp_rho_inverts_the_standard_conversion(epsilon: float, delta: float) -> None:
    rho = mx.zcdp_rho(epsilon, delta)
    assert zcdp_to_dp(rho, delta) <= epsilon
    assert zcdp_to_dp(rho, delta) == pytest.approx(epsilon, rel=1e-12)
    cost = mx.zcdp_cost(rho, delta)
    assert (cost.epsilon, cost.delta) == (zcdp_to_dp(rho, delta), delta)


def test_zcdp_conversion_rejects_bad_parameters() -> None:
    with pytest.raises(ConfigError, match="needs delta > 0"):
        mx.zcdp_rho(1.0, 0.0)
    with pytest.raises(ConfigError, match="needs delta > 0"):
        mx.zcdp_cost(0.1, 0.0)
    with pytest.raises(ConfigError, match="rho must"):
        mx.zcdp_cost(-0.1, 1e-6)


def test_a_rho_measurement_is_calibrated_as_zcdp_not_through_epsilon() -> None:
    """sigma = group L2 / sqrt(2 rho): the analytic Gaussian at the converted (epsilon, delta)
    would add less noise, i.e. spend more than rho."""
    w = mx.marginals((4, 2), 2)
    a = mx.select_strategy(w, noise="gaussian")
    rho, delta, group = 0.02, 1e-6, 3
    cost = mx.zcdp_cost(rho, delta)
    x = np.full(w.n, 10.0)
    meas = mx.measure_gaussian(
        a,
        x,
        epsilon=cost.epsilon,
        delta=delta,
        rho=rho,
        group=group,
        rng=np.random.default_rng(0),
    )
    sens = group * certified_sensitivity(a, l2=True)
    assert meas.noise_scale == pytest.approx(math.sqrt(sens**2 / (2.0 * rho)), rel=1e-12)
    analytic = mx.measure_gaussian(
        a, x, epsilon=cost.epsilon, delta=delta, group=group, rng=np.random.default_rng(0)
    )
    assert analytic.noise_scale < meas.noise_scale  # what the rho budget was spent at before
    with pytest.raises(ConfigError, match="costs more than epsilon"):
        mx.measure_gaussian(a, x, epsilon=cost.epsilon / 2, delta=delta, rho=rho)
