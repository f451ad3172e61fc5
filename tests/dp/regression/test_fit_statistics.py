"""fit_statistics on the streaming engine's statistics reproduces fit on the same rows.

Both paths draw the same noise from the same seeded rng. The exact statistics differ only in the
order of float64 additions (the engine sums batch by batch; ~2e-13 absolute here, a few ulps),
and the test sampler snaps each exact value to a grid of ~1e-9 noise scales before adding noise
(dp.mechanisms), so the coefficients came out bit-identical for these data (20 seeds measured).
A value sitting on a grid boundary could still move one noisy entry by one grid step, and the
solvers may amplify rounding, hence the stated tolerances: RTOL = 1e-9 (ATOL = 1e-12) for the
closed-form solves, TRACE_RTOL = 1e-6 (TRACE_ATOL = 1e-8) for trace regression's cvxpy solve.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dppub.dp.engine import regression_statistics_stream
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.frame_regression import (
    LinearRegression,
    LogisticRegression,
    TraceRegression,
)
from dppub.dp.regression.statistics import SufficientStatistics
from dppub.dp.schema import ColumnSpec, TableSchema

RTOL, ATOL = 1e-9, 1e-12
TRACE_RTOL, TRACE_ATOL = 1e-6, 1e-8
N, D = 3000, 2
BATCH = 257  # several uneven batches, so the engine really re-orders the sums
TASKS = ("t0", "t1", "t2", "empty")  # the last task has no rows: it is still released
SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="x0", type="float", bounds=(-1.0, 1.0)),
        ColumnSpec(name="x1", type="float", bounds=(-1.0, 1.0)),
        ColumnSpec(name="y", type="float", bounds=(-2.0, 2.0)),
        ColumnSpec(name="label", type="int", bounds=(0, 1)),
        ColumnSpec(name="task", type="category", categories=TASKS),
    )
)
FEATURES = ["x0", "x1"]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    """Rows inside the schema's bounds (the engine's schema clamp is then a no-op)."""
    rng = np.random.default_rng(11)
    z = rng.normal(size=(N, D))
    X = z / np.linalg.norm(z, axis=1, keepdims=True) * rng.random(N)[:, None] ** (1 / D)
    task = rng.integers(0, 3, N)
    W = np.array([[0.8, -0.4, 0.4], [0.3, 0.5, -0.15]])
    y = np.clip(np.einsum("nd,dn->n", X, W[:, task]) + 0.1 * rng.normal(size=N), -2.0, 2.0)
    label = (rng.random(N) < 1 / (1 + np.exp(-3 * X[:, 0] + X[:, 1]))).astype(np.int64)
    frame = pd.DataFrame(
        {"x0": X[:, 0], "x1": X[:, 1], "y": y, "label": label, "task": np.array(TASKS)[task]}
    )
    path = tmp_path_factory.mktemp("fit_statistics") / "rows.parquet"
    frame.to_parquet(path, index=False)
    return path, frame


def _xy(frame: pd.DataFrame, target: str) -> tuple[np.ndarray, np.ndarray]:
    return frame[FEATURES].to_numpy(np.float64), frame[target].to_numpy(np.float64)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bounds_X": (-1.0, 1.0)},
        {"bounds_X": ([-1.0, -0.5], [1.0, 1.0]), "fit_intercept": False},
        {"data_norm": 1.0},
        {"data_norm": 1.0, "method": "adassp", "delta": 1e-6},
    ],
)
def test_linear_from_engine_statistics_equals_fit(
    table: tuple[Path, pd.DataFrame], kwargs: dict[str, object]
) -> None:
    path, frame = table
    model = LinearRegression(1.0, bounds_y=(-2.0, 2.0), **kwargs)  # type: ignore[arg-type]
    [stats] = regression_statistics_stream(
        path, SCHEMA, features=FEATURES, target="y", design=model.design(D), batch_size=BATCH
    )
    streamed = model.fit_statistics(stats, d=D, rng=np.random.default_rng(3))
    coef, intercept, info = streamed.coef.copy(), streamed.intercept, streamed.to_dict()
    X, y = _xy(frame, "y")
    fitted = LinearRegression(1.0, bounds_y=(-2.0, 2.0), **kwargs).fit(  # type: ignore[arg-type]
        X, y, rng=np.random.default_rng(3)
    )
    np.testing.assert_allclose(coef, fitted.coef, rtol=RTOL, atol=ATOL)
    assert intercept == pytest.approx(fitted.intercept, rel=RTOL, abs=ATOL)
    assert info.keys() == fitted.to_dict().keys()
    # The noise really is there: another seed moves the coefficients.
    other = model.fit_statistics(stats, d=D, rng=np.random.default_rng(4)).coef
    assert not np.allclose(other, coef, rtol=1e-6)


@pytest.mark.parametrize("kwargs", [{"bounds_X": (-1.0, 1.0)}, {"data_norm": 1.0}])
def test_logistic_functional_from_engine_statistics_equals_fit(
    table: tuple[Path, pd.DataFrame], kwargs: dict[str, object]
) -> None:
    path, frame = table
    model = LogisticRegression(2.0, method="functional", **kwargs)  # type: ignore[arg-type]
    [stats] = regression_statistics_stream(
        path,
        SCHEMA,
        features=FEATURES,
        target="label",
        design=model.design(D),
        response=model.response,
        batch_size=BATCH,
    )
    fit = model.fit_statistics(stats, d=D, rng=np.random.default_rng(5))
    coef, intercept = fit.coef, fit.intercept
    X, y = _xy(frame, "label")
    fitted = LogisticRegression(2.0, method="functional", **kwargs).fit(  # type: ignore[arg-type]
        X, y, rng=np.random.default_rng(5)
    )
    np.testing.assert_allclose(coef, fitted.coef, rtol=RTOL, atol=ATOL)
    assert intercept == pytest.approx(fitted.intercept, rel=RTOL, abs=ATOL)
    assert coef[0] > 0 > coef[1]  # the signal survives epsilon = 2 at n = 3000


def test_trace_from_engine_statistics_equals_fit(table: tuple[Path, pd.DataFrame]) -> None:
    path, frame = table
    model = TraceRegression(2.0, n_tasks=len(TASKS), bounds_X=(-1.0, 1.0), bounds_y=(-2.0, 2.0))
    stats = regression_statistics_stream(
        path,
        SCHEMA,
        features=FEATURES,
        target="y",
        design=model.design(D),
        by="task",
        batch_size=BATCH,
    )
    assert len(stats) == len(TASKS) and stats[-1].gram.sum() == 0.0  # the empty task
    fit = model.fit_statistics(stats, d=D, rng=np.random.default_rng(7))
    coef, independent = fit.coef, fit.independent_coef
    X, y = _xy(frame, "y")
    tasks = frame["task"].map({t: i for i, t in enumerate(TASKS)}).to_numpy(np.int64)
    fitted = TraceRegression(
        2.0, n_tasks=len(TASKS), bounds_X=(-1.0, 1.0), bounds_y=(-2.0, 2.0)
    ).fit(X, y, tasks=tasks, rng=np.random.default_rng(7))
    assert coef.shape == (D, len(TASKS))
    np.testing.assert_allclose(coef, fitted.coef, rtol=TRACE_RTOL, atol=TRACE_ATOL)
    np.testing.assert_allclose(independent, fitted.independent_coef, rtol=RTOL, atol=ATOL)
    assert np.abs(coef).max() > 0.05  # a non-trivial fit, not two zero matrices


# --- errors --------------------------------------------------------------------------------


def _stats(d: int, *, intercept: bool) -> SufficientStatistics:
    p = d + int(intercept)
    return SufficientStatistics(gram=np.eye(p), moment=np.zeros(p), fit_intercept=intercept)


def test_logistic_objective_has_no_statistics_path() -> None:
    model = LogisticRegression(1.0, bounds_X=(-1.0, 1.0))  # method="objective" by default
    with pytest.raises(ConfigError, match=r"fit_statistics needs method 'functional', got 'obj"):
        model.fit_statistics(_stats(D, intercept=True), d=D)


def test_logistic_response_rejects_non_labels() -> None:
    with pytest.raises(InputError, match=r"only the labels 0 and 1"):
        LogisticRegression.response(np.array([0.0, 0.5, 1.0]))


@pytest.mark.parametrize(
    ("stats", "d", "error", "match"),
    [
        (_stats(3, intercept=True), D, InputError, r"gram \(3, 3\) .* got gram \(4, 4\)"),
        (_stats(D, intercept=False), D, InputError, r"exact has fit_intercept=False"),
        ("not statistics", D, InputError, r"must be a SufficientStatistics, got str"),
        (_stats(D, intercept=True), 0, ConfigError, r"d must be an integer >= 1, got 0"),
    ],
)
def test_linear_rejects_statistics_of_another_layout(
    stats: object, d: int, error: type[Exception], match: str
) -> None:
    model = LinearRegression(1.0, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0))
    with pytest.raises(error, match=match):
        model.fit_statistics(stats, d=d)  # type: ignore[arg-type]


def test_linear_rejects_non_finite_statistics() -> None:
    bad = _stats(D, intercept=True)
    bad.gram[0, 0] = np.nan
    model = LinearRegression(1.0, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0))
    with pytest.raises(InputError, match=r"must be finite"):
        model.fit_statistics(bad, d=D)


def test_trace_needs_one_block_per_task() -> None:
    model = TraceRegression(1.0, n_tasks=3, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0))
    two = [_stats(D, intercept=False)] * 2
    with pytest.raises(InputError, match=r"list of 3 block statistics, got 2 entries"):
        model.fit_statistics(two, d=D)
    with pytest.raises(InputError, match=r"got one SufficientStatistics"):
        model.fit_statistics(_stats(D, intercept=False), d=D)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"matrix covariates need data_norm"):
        model.design(D, matrix=True)


BOX = (-1.0, 1.0)
_ESTIMATORS: dict[str, Callable[[], LinearRegression | LogisticRegression | TraceRegression]] = {
    "linear": lambda: LinearRegression(1.0, bounds_X=BOX, bounds_y=(-2.0, 2.0)),
    "logistic-objective": lambda: LogisticRegression(1.0, bounds_X=BOX),
    "logistic-functional": lambda: LogisticRegression(1.0, bounds_X=BOX, method="functional"),
    "trace": lambda: TraceRegression(1.0, n_tasks=3, bounds_X=BOX, bounds_y=(-2.0, 2.0)),
}


@pytest.mark.parametrize("name", list(_ESTIMATORS))
def test_a_fit_leaves_its_estimator_as_configured(
    table: tuple[Path, pd.DataFrame], name: str
) -> None:
    # A plan is cached and shared by retries: its estimator must never change when it fits.
    _, frame = table
    estimator = _ESTIMATORS[name]()
    target = "label" if name.startswith("logistic") else "y"
    X, y = _xy(frame.iloc[:500], target)
    tasks = {"tasks": frame["task"].iloc[:500].map(TASKS.index).to_numpy(np.int64)}

    def fit() -> Any:
        extra = tasks if name == "trace" else {}
        return estimator.fit(X, y, rng=np.random.default_rng(3), **extra)

    configured = pickle.dumps(estimator)
    first = fit()
    assert pickle.dumps(estimator) == configured
    assert fit().coef.tobytes() == first.coef.tobytes()  # the same estimator, the same release
    with pytest.raises(ValueError, match="read-only"):
        first.coef[0] = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.coef = np.zeros(2)
