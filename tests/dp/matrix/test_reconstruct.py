"""Reconstruction: exactness without noise, the workload-norm guarantee, determinism, errors."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import scipy.optimize as sopt
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.matrix as mx
from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.tiebreak import lexicographic_l1

# The package re-exports the function ``reconstruct``, which shadows the module attribute.
rec = importlib.import_module("dppub.dp.matrix.reconstruct")


def _exact(strategy: mx.Strategy, x: np.ndarray) -> mx.Measurement:
    return mx.Measurement(strategy=strategy, values=strategy @ x, epsilon=1.0, noise_scale=1.0)


def _wnorm(w: mx.Workload, e: np.ndarray) -> float:
    return float(np.sqrt(e @ w.gram_matmul(e)))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["least-squares", "nonneg-l1", "l1"])
@pytest.mark.parametrize(
    "strategy", [mx.hierarchical(13, 3), mx.wavelet(13), mx.identity_strategy(13)], ids=str
)
def test_noiseless_measurement_is_recovered_exactly(strategy: mx.Strategy, method: str) -> None:
    x = np.array([0, 0, 4, 1, 0, 7, 0, 0, 0, 2, 3, 0, 5], dtype=float)
    est = mx.reconstruct(_exact(strategy, x), mx.all_range(13), method=method)
    np.testing.assert_allclose(est, x, atol=1e-6)


WORKLOADS = [
    mx.prefix(40),
    mx.all_range(40),
    mx.identity(40),
    mx.width_range(40, 5),
    mx.union(mx.prefix(40), mx.total(40)),
    mx.marginals((4, 5, 2), 1),
    mx.kron(mx.prefix(5), mx.all_range(8)),
]


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_projection_matches_nnls_on_the_workload_factor(w: mx.Workload) -> None:
    rng = np.random.default_rng(5)
    x_ls = rng.normal(size=w.n) * 3 + (rng.random(w.n) < 0.3) * 6
    got = mx.workload_projection(w, x_ls)
    factor = np.linalg.cholesky(w.gram() + 1e-9 * np.eye(w.n)).T
    ref, _ = sopt.nnls(factor, factor @ x_ls, maxiter=100 * w.n)
    assert got.min() >= 0
    assert _wnorm(w, got - x_ls) <= _wnorm(w, ref - x_ls) * (1 + 1e-6) + 1e-6


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**20),
    which=st.sampled_from(["prefix", "all_range"]),
    density=st.floats(0.05, 0.9),
)
def test_nonneg_l1_never_loses_to_least_squares_on_the_workload(
    seed: int, which: str, density: float
) -> None:
    # Projection onto a convex set containing the truth is non-expansive: this holds for every
    # noise draw, so a single counterexample fails the test.
    n = 48
    w = getattr(mx, which)(n)
    rng = np.random.default_rng(seed)
    x = rng.poisson(5, n) * (rng.random(n) < density)
    meas = mx.measure(mx.hierarchical(n, 4), x, epsilon=0.5, rng=rng)
    ls = mx.reconstruct(meas, w, method="least-squares")
    nn = mx.reconstruct(meas, w, method="nonneg-l1")
    assert nn.min() >= 0
    assert _wnorm(w, nn - x) <= _wnorm(w, ls - x) * (1 + 1e-9) + 1e-9


def test_nonneg_l1_zeroes_empty_regions() -> None:
    # Seeded statistical test: a histogram that is empty except two cells; over 30 draws the
    # per-cell RMSE ratio to least squares is ~0.2 here; the 0.6 threshold is far from it
    # (false-failure rate well below 1e-6 by the spread seen across seeds).
    n = 64
    x = np.zeros(n)
    x[[10, 40]] = [50.0, 20.0]
    w, a = mx.prefix(n), mx.hierarchical(n, 4)
    rng = np.random.default_rng(3)
    ls_err, nn_err = [], []
    for _ in range(30):
        meas = mx.measure(a, x, epsilon=1.0, rng=rng)
        ls_err.append(np.mean((mx.reconstruct(meas, w, method="least-squares") - x) ** 2))
        nn_err.append(np.mean((mx.reconstruct(meas, w) - x) ** 2))
    assert np.sqrt(np.mean(nn_err) / np.mean(ls_err)) < 0.6


@pytest.mark.slow
def test_l1_result_does_not_depend_on_the_lp_vertex(monkeypatch: pytest.MonkeyPatch) -> None:
    # Duplicate rows make the plain L1 fit degenerate: a whole segment of optima.
    a = mx.nested_blocks(6, [2, 1], [1.0, 1.0])
    meas = mx.Measurement(
        strategy=a,
        values=np.array([3.0, 1.0, 2.0, 0.5, 0.5, 1.0, 2.0, 0.0, 4.0]),
        epsilon=1.0,
        noise_scale=3.0,
    )
    first = mx.reconstruct(meas, mx.prefix(6), method="l1")
    true_fit, value = rec.l1_fit(meas)
    # Pretend the LP returned another vertex: only the optimal value is used downstream.
    monkeypatch.setattr(rec, "l1_fit", lambda m, c=None: (np.full(6, 99.0), value))
    second = mx.reconstruct(meas, mx.prefix(6), method="l1")
    np.testing.assert_allclose(first, second, atol=1e-6)
    assert np.sum(np.abs(meas.values - a @ first)) == pytest.approx(value, rel=1e-6)
    assert true_fit.min() >= 0


def test_rank_deficient_workload_result_is_deterministic() -> None:
    w = mx.marginals((3, 4), 1)
    x = np.array([3, 0, 0, 1, 0, 2, 0, 0, 5, 0, 0, 1], dtype=float)
    runs = []
    for _ in range(2):
        meas = mx.measure(mx.workload_strategy(w), x, epsilon=1.0, rng=np.random.default_rng(9))
        runs.append(mx.reconstruct(meas, w))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert runs[0].min() >= 0


def test_solver_failure_raises_one_line_solver_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_solve(self: Any, *args: Any, **kwargs: Any) -> None:
        self._status = "infeasible"

    monkeypatch.setattr(rec._cvxpy().Problem, "solve", fake_solve)
    monkeypatch.setattr(rec._cvxpy().Problem, "status", property(lambda self: self._status))
    meas = _exact(mx.hierarchical(4, 2), np.ones(4))
    with pytest.raises(
        SolverError, match=r"HiGHS returned status 'infeasible', expected 'optimal'"
    ):
        rec.l1_fit(meas)


def test_unknown_reconstruction_is_rejected() -> None:
    meas = _exact(mx.identity_strategy(3), np.ones(3))
    with pytest.raises(Exception, match=r"reconstruction must be one of .* got 'median'"):
        mx.reconstruct(meas, mx.prefix(3), method="median")


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (np.ones(5), r"histogram must have 4 cells \(the workload domain\), got 5"),
        (np.array([1.0, -1.0, 0.0, 0.0]), r"histogram counts must be >= 0"),
        (np.array([1.0, np.nan, 0.0, 0.0]), r"histogram must be finite"),
        (np.array(["a", "b", "c", "d"]), r"histogram must be numeric"),
    ],
)
def test_measure_validates_the_histogram(x: np.ndarray, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        mx.measure(mx.identity_strategy(4), x, epsilon=1.0, rng=np.random.default_rng(0))


WIDE = mx.marginals((8, 6, 5, 3, 4), 2)  # 2,880 cells: the interior-point path


@pytest.mark.slow
@pytest.mark.parametrize("strategy", [mx.workload_strategy(WIDE), None], ids=["A=W", "A=I"])
def test_wide_marginals_keep_the_projected_answers_and_are_deterministic(
    strategy: mx.Strategy | None,
) -> None:
    a = strategy or mx.kron_strategy(*(mx.identity_strategy(d) for d in WIDE.domain))
    rng = np.random.default_rng(4)
    x = rng.poisson(4, WIDE.n) * (rng.random(WIDE.n) < 0.3)
    meas = mx.measure(a, x, epsilon=0.5, rng=rng)
    x_hat = mx.reconstruct(meas, WIDE, method="least-squares")
    x_w = mx.workload_projection(WIDE, x_hat)
    runs = [mx.reconstruct(meas, WIDE) for _ in range(2)]
    np.testing.assert_array_equal(runs[0], runs[1])
    est = runs[0]
    assert est.min() >= 0
    # The linear programs pick a histogram but keep the answers (to HiGHS's 1e-7 noise units).
    np.testing.assert_allclose(WIDE @ est, WIDE @ x_w, atol=1e-5 * meas.noise_scale)
    # Stage 1 (A != W): the L1 likelihood is at least as good as the projection's own.
    fit = np.sum(np.abs(meas.values - a @ est))
    assert fit <= np.sum(np.abs(meas.values - a @ x_w)) + 1e-6 * meas.noise_scale
    # Stage 2: nearer the least-squares estimate in L1 than the projection's own histogram.
    if strategy is not None:
        assert np.sum(np.abs(est - x_hat)) <= np.sum(np.abs(x_w - x_hat)) + 1e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class _Opaque(mx.Strategy):
    """A strategy that exposes no structure (only products), like a new strategy class."""

    mat: np.ndarray

    @property
    def name(self) -> str:
        return "Opaque"

    @property
    def domain(self) -> tuple[int, ...]:
        return (self.mat.shape[1],)

    @property
    def m(self) -> int:
        return int(self.mat.shape[0])

    @property
    def sensitivity(self) -> float:
        return float(np.abs(self.mat).sum(axis=0).max())

    def _matmat(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.mat @ x)

    def _rmatmat(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(self.mat.T @ y)

    def _lstsq(self, r: np.ndarray) -> np.ndarray:
        return np.asarray(np.linalg.lstsq(self.mat, r, rcond=None)[0])


@pytest.mark.slow
def test_a_strategy_without_structure_is_probed_column_blocks_at_a_time() -> None:
    rng = np.random.default_rng(2)
    dense = (rng.random((700, 600)) < 0.01) * rng.integers(1, 4, (700, 600))
    dense[np.arange(600), np.arange(600)] = 1.0
    a = _Opaque(mat=dense.astype(float))
    np.testing.assert_array_equal(rec.sparse_matrix(a).toarray(), a.mat)
    w = mx.marginals((20, 30), 1)
    x = rng.poisson(2, 600).astype(float)
    est = mx.reconstruct(mx.measure(a, x, epsilon=1.0, rng=rng), w)
    assert est.min() >= 0


@pytest.mark.parametrize(
    ("strategy", "workload"),
    [
        (mx.hierarchical(256, 4), mx.prefix(256)),  # node formulation
        (mx.wavelet(256), mx.all_range(256)),  # general sparse formulation
        (mx.identity_strategy(256), mx.marginals((16, 16), 1)),  # rank-deficient workload
    ],
    ids=["tree", "sparse", "rank-deficient"],
)
def test_linear_programs_solve_at_ten_million_records(
    strategy: mx.Strategy, workload: mx.Workload
) -> None:
    # Noise ~1 against counts ~10^5: in raw units the residuals sit at HiGHS's tolerance, and the
    # solver used to report "infeasible" or no solution. Centred noise units keep them O(1).
    rng = np.random.default_rng(5)
    prob = rng.dirichlet(np.full(256, 0.3))
    prob[rng.random(256) < 0.5] = 0.0
    x = rng.multinomial(10**7, prob / prob.sum()).astype(float)
    meas = mx.measure(strategy, x, epsilon=1.0, rng=rng)
    x_ls = mx.reconstruct(meas, workload, method="least-squares")
    for method in ("l1", "nonneg-l1"):
        est = mx.reconstruct(meas, workload, method=method)
        assert est.min() >= 0
        # Post-processing of unit-scale noise stays within a few noise scales of the truth.
        assert np.max(np.abs(est - x)) < 40 * meas.noise_scale
    fit, value = rec.l1_fit(meas)
    assert value <= np.sum(np.abs(meas.values - strategy @ np.maximum(x_ls, 0))) + 1e-6
    assert np.sum(np.abs(meas.values - strategy @ fit)) == pytest.approx(value, rel=1e-6)


def test_tie_break_reports_a_failed_program_in_one_line() -> None:
    # F x = -1 has no non-negative solution (F >= 0): HiGHS reports infeasibility.
    with pytest.raises(SolverError, match=r"^L1 tie-break: HiGHS returned status 'Infeasible'"):
        lexicographic_l1(
            fixed=np.ones((1, 4)),
            target=np.array([-1.0]),
            strategy=None,
            measured=np.zeros(1),
            x_hat=np.ones(4),
            unit=1.0,
        )


def test_tie_break_keeps_the_likelihood_optimum() -> None:
    # Stage 2 runs on stage 1's optimal face (variables with non-zero reduced cost fixed): its
    # result must reach the optimal L1 fit among histograms with the projected answers, which
    # an independent solve (cvxpy) computes here.
    w = mx.marginals((4, 5, 3), 2)
    a = mx.kron_strategy(*(mx.identity_strategy(d) for d in w.domain))
    rng = np.random.default_rng(10)  # a draw where the projection is not L1-optimal itself
    x = rng.poisson(3, w.n) * (rng.random(w.n) < 0.4)
    meas = mx.measure(a, x, epsilon=0.3, rng=rng)
    x_hat = mx.reconstruct(meas, w, method="least-squares")
    x_w = mx.workload_projection(w, x_hat)
    f = w.dense()
    cp = rec._cvxpy()
    v = cp.Variable(w.n, nonneg=True)
    best = cp.Problem(cp.Minimize(cp.norm1(meas.values - a.dense() @ v)), [f @ v == f @ x_w])
    best.solve(solver="HIGHS")
    est = mx.reconstruct(meas, w)
    fit = float(np.sum(np.abs(meas.values - a @ est)))
    assert fit <= best.value + 1e-5 * meas.noise_scale
    assert fit < float(np.sum(np.abs(meas.values - a @ x_w)))  # stage 1 did change something


def test_beyond_the_program_limit_the_histogram_is_the_projection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = mx.marginals((4, 5, 3), 2)
    a = mx.kron_strategy(*(mx.identity_strategy(d) for d in w.domain))
    rng = np.random.default_rng(10)
    meas = mx.measure(a, rng.poisson(3, w.n) * (rng.random(w.n) < 0.4), epsilon=0.3, rng=rng)
    x_w = mx.workload_projection(w, mx.reconstruct(meas, w, method="least-squares"))
    assert not np.array_equal(mx.reconstruct(meas, w), x_w)  # the programs pick another one
    # 2 n + 2 m_A = 240 variables: one fewer allowed skips them.
    monkeypatch.setattr(rec, "MAX_TIE_BREAK_VARIABLES", 4 * w.n - 1)
    np.testing.assert_array_equal(mx.reconstruct(meas, w), x_w)
