"""Workloads: implicit operators agree with their dense definitions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.matrix as mx
from dppub.dp.errors import ConfigError


def _all_range_dense(n: int) -> np.ndarray:
    rows = []
    for i in range(n):
        for j in range(i, n):
            row = np.zeros(n)
            row[i : j + 1] = 1.0
            rows.append(row)
    return np.array(rows)


def _reference(name: str, n: int) -> np.ndarray:
    if name == "identity":
        return np.eye(n)
    if name == "total":
        return np.ones((1, n))
    if name == "prefix":
        return np.tril(np.ones((n, n)))
    if name == "all_range":
        return _all_range_dense(n)
    k = min(3, n)
    return np.array([[1.0 if i <= c < i + k else 0.0 for c in range(n)] for i in range(n - k + 1)])


def _build(name: str, n: int) -> mx.Workload:
    if name == "width_range":
        return mx.width_range(n, min(3, n))
    built: mx.Workload = getattr(mx, name)(n)
    return built


NAMES = ["identity", "total", "prefix", "all_range", "width_range"]


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(NAMES), n=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_one_dim_workloads_match_dense_definition(name: str, n: int, seed: int) -> None:
    w = _build(name, n)
    ref = _reference(name, n)
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, 3)), rng.normal(size=(w.m, 2))
    assert w.shape == ref.shape
    np.testing.assert_allclose(w.dense(), ref)
    np.testing.assert_allclose(w @ x, ref @ x, atol=1e-9)
    np.testing.assert_allclose(w @ x[:, 0], ref @ x[:, 0], atol=1e-9)
    np.testing.assert_allclose(w.rmatvec(y), ref.T @ y, atol=1e-9)
    np.testing.assert_allclose(w.gram(), ref.T @ ref, atol=1e-9)
    np.testing.assert_allclose(w.gram_diag(), np.sum(ref**2, axis=0))
    assert w.sensitivity == pytest.approx(np.abs(ref).sum(axis=0).max())
    sv = np.sort(np.linalg.svd(ref, compute_uv=False))[::-1]
    np.testing.assert_allclose(np.sort(w.singular_values())[::-1][: sv.size], sv, atol=1e-8)


def _check_against_dense(w: mx.Workload, seed: int = 0) -> None:
    d = w.dense()
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(w.n, 2)), rng.normal(size=(w.m, 2))
    np.testing.assert_allclose(w @ x, d @ x, atol=1e-9)
    np.testing.assert_allclose(w.rmatvec(y), d.T @ y, atol=1e-9)
    np.testing.assert_allclose(w.gram_matmul(x), d.T @ d @ x, atol=1e-8)
    np.testing.assert_allclose(w.gram_diag(), np.sum(d**2, axis=0), atol=1e-9)
    assert w.sensitivity == pytest.approx(np.abs(d).sum(axis=0).max())
    sv = np.linalg.svd(d, compute_uv=False)
    assert np.sum(w.singular_values()) == pytest.approx(np.sum(sv), rel=1e-8)


def test_kron_matches_numpy_kron() -> None:
    w = mx.kron(mx.prefix(3), mx.all_range(4))
    np.testing.assert_allclose(w.dense(), np.kron(np.tril(np.ones((3, 3))), _all_range_dense(4)))
    assert w.domain == (3, 4)
    _check_against_dense(w)


def test_union_stacks_weighted_parts() -> None:
    w = mx.union(mx.prefix(5), mx.identity(5), weights=[2.0, 1.0])
    np.testing.assert_allclose(w.dense(), np.vstack([2 * np.tril(np.ones((5, 5))), np.eye(5)]))
    _check_against_dense(w)


@pytest.mark.parametrize(
    ("shape", "k", "m"), [((2, 3, 4), 2, 6 + 8 + 12), ((3, 4), 1, 7), ((3, 4), 0, 1)]
)
def test_marginals_shape_and_spectrum(shape: tuple[int, ...], k: int, m: int) -> None:
    w = mx.marginals(shape, k)
    assert w.shape == (m, int(np.prod(shape)))
    _check_against_dense(w)


def test_two_way_marginal_counts_cells() -> None:
    x = np.arange(6.0)  # a 2 x 3 table in C order
    np.testing.assert_allclose(mx.marginals((2, 3), 1) @ x, [3.0, 12.0, 3.0, 5.0, 7.0])


def test_range_boxes_answer_boxes_and_adjoint() -> None:
    w = mx.range_boxes((3, 4), [[0, 0], [1, 2], [2, 3]], [[2, 3], [1, 3], [2, 3]])
    x = np.arange(12.0)
    np.testing.assert_allclose(w @ x, [66.0, 6.0 + 7.0, 11.0])
    _check_against_dense(w)


def test_all_range_never_materializes_rows_for_gram() -> None:
    w = mx.all_range(4096)  # 8.4 million rows: only O(n) work per column
    v = np.zeros(4096)
    v[0] = 1.0
    g = w.gram_matmul(v)
    # Column 0 of W^T W: cell 0 lies in n ranges; only [0, n-1] also holds cell n-1.
    assert g[0] == pytest.approx(4096.0)
    assert g[4095] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: mx.identity(0), r"n must be a positive integer, got 0"),
        (lambda: mx.prefix(2.5), r"n must be a positive integer, got 2.5"),  # type: ignore[arg-type]
        (lambda: mx.width_range(5, 6), r"width must be <= n = 5, got 6"),
        (lambda: mx.marginals((2, 3), 3), r"k must be an integer in \[0, 2\], got 3"),
        (lambda: mx.union(mx.prefix(3), mx.prefix(4)), r"union needs one domain shape"),
        (lambda: mx.union(mx.prefix(3), weights=[-1.0]), r"union weights must be 1 numbers > 0"),
        (lambda: mx.range_boxes((3,), [[2]], [[1]]), r"box 0 must satisfy 0 <= lo <= hi"),
        (lambda: mx.prefix(3) @ np.ones(4), r"needs an operand with 3 rows, got shape \(4,\)"),
    ],
)
def test_invalid_workloads_raise_config_error(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()
