"""Strategies: exact sensitivity, structured least squares and error factors vs dense algebra."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.matrix as mx
from dppub.dp.errors import ConfigError


def _dense_sensitivity(a: np.ndarray) -> float:
    return float(np.abs(a).sum(axis=0).max())


@st.composite
def one_dim_strategies(draw: st.DrawFn) -> mx.Strategy:
    n = draw(st.integers(1, 40))
    kind = draw(st.sampled_from(["identity", "hier", "weighted", "wavelet", "blocks", "pid"]))
    if kind == "identity":
        return mx.identity_strategy(n)
    if kind == "hier":
        return mx.hierarchical(n, draw(st.integers(2, 9)))
    if kind == "weighted":
        b = draw(st.integers(2, 5))
        levels = int(mx.hierarchical(n, b).depth.max()) + 1
        w = draw(st.lists(st.floats(0.1, 5.0), min_size=levels, max_size=levels))
        return mx.hierarchical(n, b, level_weights=w)
    if kind == "wavelet":
        return mx.wavelet(n)
    if kind == "blocks":
        sizes = [s for s in (32, 8, 2) if draw(st.booleans())] + [1]
        w = draw(st.lists(st.floats(0.1, 5.0), min_size=len(sizes), max_size=len(sizes)))
        return mx.nested_blocks(n, sizes, w)
    p = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 1000))
    theta = np.random.default_rng(seed).uniform(0, 1, (p, n)) * (
        np.random.default_rng(seed + 1).random((p, n)) < 0.6
    )
    return mx.p_identity(theta)


@settings(max_examples=80, deadline=None)
@given(a=one_dim_strategies())
def test_sensitivity_equals_dense_max_column_l1_norm(a: mx.Strategy) -> None:
    assert a.sensitivity == pytest.approx(_dense_sensitivity(a.dense()), rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(a=one_dim_strategies(), seed=st.integers(0, 2**16))
def test_least_squares_recovers_x_exactly_without_noise(a: mx.Strategy, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=a.n) * 10
    np.testing.assert_allclose(a.lstsq(a @ x), x, rtol=1e-8, atol=1e-8)


@settings(max_examples=50, deadline=None)
@given(a=one_dim_strategies(), seed=st.integers(0, 2**16))
def test_least_squares_matches_dense_pseudo_inverse(a: mx.Strategy, seed: int) -> None:
    r = np.random.default_rng(seed).normal(size=a.m)
    expected = np.linalg.lstsq(a.dense(), r, rcond=None)[0]
    np.testing.assert_allclose(a.lstsq(r), expected, rtol=1e-7, atol=1e-7)


@settings(max_examples=50, deadline=None)
@given(a=one_dim_strategies(), which=st.sampled_from(["prefix", "all_range", "identity"]))
def test_error_factor_matches_dense_frobenius_norm(a: mx.Strategy, which: str) -> None:
    w = getattr(mx, which)(a.n)
    dense = np.linalg.norm(w.dense() @ np.linalg.pinv(a.dense())) ** 2
    assert a.squared_error_factor(w) == pytest.approx(dense, rel=1e-7)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 20), y=st.integers(0, 1000))
def test_transpose_is_the_adjoint(n: int, y: int) -> None:
    a = mx.hierarchical(n, 3)
    rng = np.random.default_rng(y)
    u, v = rng.normal(size=a.n), rng.normal(size=a.m)
    assert float(v @ (a @ u)) == pytest.approx(float(u @ (a.T @ v)))
    np.testing.assert_allclose(a.rmatvec(v), a.dense().T @ v)


def test_wavelet_two_cells_is_the_seed_example() -> None:
    # SPEC 3.3: A = [[1, 1], [1, -1]], ||A||_1 = 2 and A^+ = A^T / 2.
    a = mx.wavelet(2)
    np.testing.assert_allclose(a.dense(), [[1.0, 1.0], [1.0, -1.0]])
    assert a.sensitivity == 2.0
    np.testing.assert_allclose(a.lstsq(np.array([300.0, -100.0])), [100.0, 200.0])


def test_hierarchy_depth_gives_sensitivity_for_any_n() -> None:
    assert mx.hierarchical(16, 2).sensitivity == 5.0  # log2(16) + 1 levels
    assert mx.hierarchical(100, 4).sensitivity == 5.0  # 100 -> 25 -> 7 -> 2 -> 1
    assert mx.hierarchical(4096, 16).m == 1 + 16 + 256 + 4096


def test_kron_strategy_sensitivity_and_least_squares() -> None:
    a = mx.kron_strategy(mx.hierarchical(3, 2), mx.wavelet(4))
    d = np.kron(mx.hierarchical(3, 2).dense(), mx.wavelet(4).dense())
    np.testing.assert_allclose(a.dense(), d)
    assert a.sensitivity == pytest.approx(_dense_sensitivity(d))
    x = np.arange(12.0)
    np.testing.assert_allclose(a.lstsq(a @ x), x, atol=1e-9)
    w = mx.kron(mx.prefix(3), mx.all_range(4))
    dense = np.linalg.norm(w.dense() @ np.linalg.pinv(d)) ** 2
    assert a.squared_error_factor(w) == pytest.approx(dense)


def test_workload_strategy_error_factor_is_rank() -> None:
    w = mx.marginals((3, 4, 2), 1)
    a = mx.workload_strategy(w)
    dense = np.linalg.norm(w.dense() @ np.linalg.pinv(w.dense())) ** 2
    assert a.squared_error_factor(w) == pytest.approx(dense)
    assert a.sensitivity == 3.0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: mx.hierarchical(8, 1), r"branching factor b must be an integer >= 2, got 1"),
        (lambda: mx.hierarchical(8, 2, level_weights=[1.0]), r"level_weights must be 4 numbers"),
        (lambda: mx.nested_blocks(8, [4, 2], [1, 1]), r"sizes must decrease to 1"),
        (lambda: mx.nested_blocks(8, [4, 3, 1], [1, 1, 1]), r"sizes must decrease to 1"),
        (lambda: mx.p_identity(-np.ones((1, 3))), r"theta must be a finite non-negative"),
        (lambda: mx.wavelet(0), r"n must be a positive integer, got 0"),
    ],
)
def test_invalid_strategies_raise_config_error(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


def test_opt0_gradient_matches_finite_differences() -> None:
    from dppub.dp.matrix.optimize import _opt0_loss

    w = mx.all_range(9)
    theta = np.random.default_rng(3).uniform(0, 1, (3, 9))
    diag = w.gram_diag()
    loss, grad = _opt0_loss(theta, w, diag, grad=True)
    num = np.zeros_like(theta)
    h = 1e-6
    for i in range(3):
        for j in range(9):
            t = theta.copy()
            t[i, j] += h
            t2 = theta.copy()
            t2[i, j] -= h
            num[i, j] = (
                _opt0_loss(t, w, diag, grad=False)[0] - _opt0_loss(t2, w, diag, grad=False)[0]
            ) / (2 * h)
    np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-4)
    assert loss == pytest.approx(
        np.linalg.norm(w.dense() @ np.linalg.pinv(mx.p_identity(theta).dense())) ** 2
    )
    assert math.isfinite(loss)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["all_range", "prefix", "width_range"])
@pytest.mark.parametrize("n", [64, 200])
def test_block_opt0_loss_and_gradient_match_the_dense_formula(which: str, n: int) -> None:
    # Prefix and ranges take the semiseparable path (no dense p x n array); width-k ranges the
    # generic one. n = 200 has partial blocks and windows clipped at both ends.
    import scipy.sparse as sp

    from dppub.dp.matrix.opt_blocks import _index, _loss_grad, _pattern, block_start
    from dppub.dp.matrix.optimize import _opt0_loss

    w = mx.width_range(n, 8) if which == "width_range" else getattr(mx, which)(n)
    tree = mx.nested_blocks(n, [64, 16, 4, 1], [0.6, 0.8, 0.9, 1.0]) if n == 200 else None
    pattern, init = _pattern(tree or block_start(mx.tuned_hierarchy(w)), 3)
    values = init * np.random.default_rng(0).uniform(0.5, 1.5, init.size)
    values[::7] = 0.0  # entries on the bound
    loss, grad = _loss_grad(values, _index(pattern), w, w.gram_diag())
    dense = sp.csr_matrix((values, pattern.indices, pattern.indptr), shape=pattern.shape)
    loss_d, grad_d = _opt0_loss(dense.toarray(), w, w.gram_diag(), grad=True)
    rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
    assert loss == pytest.approx(loss_d, rel=1e-10)
    np.testing.assert_allclose(grad, grad_d[rows, pattern.indices], rtol=1e-7, atol=1e-7)
    # ... and the loss is the strategy's error, ||W A^+||_F^2 from dense algebra.
    a = mx.p_identity(dense.toarray()).dense()
    assert loss == pytest.approx(np.linalg.norm(w.dense() @ np.linalg.pinv(a)) ** 2, rel=1e-8)


def test_block_opt0_gradient_matches_finite_differences() -> None:
    from dppub.dp.matrix.opt_blocks import _index, _loss_grad, _pattern

    w = mx.prefix(48)
    pattern, init = _pattern(mx.nested_blocks(48, [16, 4, 1], [0.7, 0.9, 1.0]), 3)
    ix = _index(pattern)
    values = init * np.random.default_rng(1).uniform(0.5, 1.5, init.size)
    grad = _loss_grad(values, ix, w, w.gram_diag())[1]
    for i in np.random.default_rng(2).choice(values.size, 12, replace=False):
        h = 1e-6 * max(1.0, values[i])
        up, down = values.copy(), values.copy()
        up[i] += h
        down[i] -= h
        num = (
            _loss_grad(up, ix, w, w.gram_diag())[0] - _loss_grad(down, ix, w, w.gram_diag())[0]
        ) / (2 * h)
        assert grad[i] == pytest.approx(num, rel=1e-5, abs=1e-6)


def test_block_opt0_needs_contiguous_row_supports() -> None:
    import scipy.sparse as sp

    from dppub.dp.matrix.opt_blocks import _index

    with pytest.raises(ConfigError, match="contiguous"):
        _index(sp.csr_matrix(np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])))


@pytest.mark.slow
def test_block_opt0_improves_on_its_hierarchy_start() -> None:
    w = mx.prefix(128)
    a = mx.opt_blocks(w, maxiter=60)
    start = mx.tuned_hierarchy(w)
    assert a.sensitivity == pytest.approx(1.0)
    assert _dense_sensitivity(a.dense()) == pytest.approx(1.0, rel=1e-12)
    assert mx.expected_rmse(w, a, 1.0) < 0.95 * mx.expected_rmse(w, start, 1.0)
    np.testing.assert_allclose(a.lstsq(a @ np.arange(128.0)), np.arange(128.0), atol=1e-8)


def test_block_opt0_rejects_a_start_hierarchy_of_another_size() -> None:
    with pytest.raises(ConfigError, match="start hierarchy has 32 cells, the workload 64"):
        mx.opt_blocks(mx.prefix(64), start=mx.hierarchical(32, 2))


@pytest.mark.parametrize("which", ["prefix", "all_range"])
def test_semiseparable_gram_and_sparse_quadratic_forms_match_dense(which: str) -> None:
    import scipy.sparse as sp

    from dppub.dp.matrix.strategy import quad_forms

    n = 23
    w = getattr(mx, which)(n)
    ss = w.semiseparable()
    assert ss is not None
    u, v = ss
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    np.testing.assert_allclose(u[np.minimum(a, b)] * v[np.maximum(a, b)], w.gram())
    # Rows of mixed lengths, gaps, signs and an empty row.
    rng = np.random.default_rng(3)
    h = rng.normal(size=(9, n)) * (rng.random((9, n)) < 0.4)
    h[4] = 0.0
    expected = np.einsum("ij,jk,ik->i", h, w.gram(), h)
    np.testing.assert_allclose(quad_forms(w, sp.csr_matrix(h)), expected, rtol=1e-12, atol=1e-9)
    assert mx.width_range(n, 3).semiseparable() is None


def test_block_opt0_windows_are_centred_on_their_blocks() -> None:
    # Centred windows let neighbouring rows overlap across block boundaries, like dense OPT0.
    from dppub.dp.matrix.opt_blocks import _pattern

    pattern, init = _pattern(mx.nested_blocks(64, [16, 4, 1], [2.0, 1.0, 1.0]), 3)
    first = pattern.indices[pattern.indptr[:-1]]
    last = pattern.indices[pattern.indptr[1:] - 1] + 1
    assert list(zip(first[:4], last[:4], strict=True)) == [(0, 32), (0, 48), (16, 64), (32, 64)]
    assert (first[5], last[5]) == (0, 12) and (first[19], last[19]) == (56, 64)
    # Start values: a hat with the block's mass (weight 2 x 16 cells) on a small floor.
    row = init[pattern.indptr[1] : pattern.indptr[2]]
    assert int(np.argmax(row)) in (23, 24)
    np.testing.assert_allclose(row[:8], 1e-3)
    assert float(np.sum(row - 1e-3)) == pytest.approx(32.0)


def test_block_start_splits_a_coarse_finest_level_into_16_cell_blocks() -> None:
    from dppub.dp.matrix.opt_blocks import block_start

    tree = mx.nested_blocks(200, [128, 64, 1], [0.5, 0.7, 1.0])
    start = block_start(tree)
    assert start.name == "Blocks(128,16,1)"
    sizes = start.hi - start.lo
    np.testing.assert_allclose(start.weight[sizes == 16], 0.7)
    assert int(np.count_nonzero(sizes > 1)) == 2 + 13  # 200 cells: 2 + ceil(200 / 16) blocks
    fine = mx.nested_blocks(200, [64, 16, 1], [0.5, 0.7, 1.0])
    assert block_start(fine) is fine


@pytest.mark.slow
def test_the_tuned_hierarchy_for_a_total_has_its_true_error_factor() -> None:
    """The tuned hierarchy for a single total once put its leaves at ~1e-5 of the root's weight;
    the Sherman-Morrison form of its error factor then cancelled to -2e18 and
    ``select_strategy(total(2048))`` raised IndexError. For ``W = 1^T`` the factor is
    ``1^T (A^T A)^-1 1``, computed here densely from the strategy's Gram matrix."""
    n = 2048
    w = mx.total(n)
    a = mx.tuned_hierarchy(w)
    dense = a.dense()
    true = float(np.ones(n) @ np.linalg.solve(dense.T @ dense, np.ones(n)))
    assert a.squared_error_factor(w) == pytest.approx(true, rel=1e-6)


@pytest.mark.slow
def test_select_strategy_for_a_large_total_is_near_the_optimum() -> None:
    w = mx.total(2048)
    chosen = mx.select_strategy(w)  # old code: IndexError (every score NaN or negative)
    assert chosen.sensitivity**2 * chosen.squared_error_factor(w) <= 1.01
