"""Objective perturbation through the engine equals the in-memory fit, bit for bit: the loss
sums are exact integer sums rounded once, whatever the batches or partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dppub.dp.engine import LogisticLossAggregate, logistic_sums_stream
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.errors import ConfigError
from dppub.dp.reference.frame import read_table
from dppub.dp.reference.frame_regression import LogisticRegression
from dppub.dp.regression.logistic import LogisticFit, normalised_rows, row_norm_bound
from dppub.dp.regression.losssums import logistic_sums
from tests.conftest import generate
from tests.dp.engine.conftest import SCHEMA, write_part

FEATURES = ["age", "hours"]
# (target, label rule): a numeric target cut at a threshold (the demo's high_income), and a
# category target with a positive class.
RULES: list[tuple[str, dict[str, Any]]] = [
    ("income", {"threshold": 75_000.0}),
    ("sex", {"positive": "Male"}),
]


def _model(intercept: bool = True) -> LogisticRegression:
    return LogisticRegression(0.5, bounds_X=([17, 1], [90, 99]), fit_intercept=intercept)


def _in_memory(source: Path, target: str, rule: dict[str, Any]) -> tuple[Any, Any]:
    """Rows and labels exactly as tasks.regression builds them on the pandas path."""
    frame = read_table(source, SCHEMA, columns=[*FEATURES, target]).frame
    X = frame[FEATURES].to_numpy(dtype=np.float64)
    if "positive" in rule:
        y = (frame[target].astype(str) == rule["positive"]).to_numpy(dtype=np.float64)
    else:
        y = (frame[target].to_numpy(dtype=np.float64) > rule["threshold"]).astype(np.float64)
    return X, y


def _streamed_fit(
    model: LogisticRegression, source: Path, target: str, rule: dict[str, Any], **kw: Any
) -> tuple[LogisticFit, list[int]]:
    calls: list[int] = []
    design = model.design(len(FEATURES))

    def sums(w: Any) -> Any:
        calls.append(1)
        return logistic_sums_stream(
            source, SCHEMA, features=FEATURES, target=target, design=design, w=w, **rule, **kw
        )

    return model.fit_loss_sums(sums, d=len(FEATURES), rng=np.random.default_rng(7)), calls


@pytest.mark.slow
@pytest.mark.parametrize(("target", "rule"), RULES)
@pytest.mark.parametrize("intercept", [True, False])
def test_streamed_fit_equals_the_in_memory_fit(
    partitioned: Path, target: str, rule: dict[str, Any], intercept: bool
) -> None:
    # Uneven partitions (one empty, one far outside the bounds), batches of 200 rows.
    X, y = _in_memory(partitioned, target, rule)
    assert 0 < y.sum() < len(y)  # both classes present: the labels matter
    want = _model(intercept).fit(X, y, rng=np.random.default_rng(7))
    got, calls = _streamed_fit(_model(intercept), partitioned, target, rule, batch_size=200)
    # Same noise draws, same exact sums, hence the same Newton path and release, bit for bit.
    assert got.coef.tobytes() == want.coef.tobytes() and got.intercept == want.intercept
    assert got.to_dict() == want.to_dict()
    # One pass per evaluated point: the start plus at least one Newton step.
    assert len(calls) >= 2
    # The step count depends on the data and the noise: it is not published.
    assert "newton_steps" not in got.to_dict()


def test_one_batch_fit_is_bit_identical(tmp_path: Path) -> None:
    source = tmp_path / "one.parquet"
    write_part(tmp_path, source.name, generate.make_census(3000, 8), row_group_size=3000)
    X, y = _in_memory(source, *RULES[0])
    want = _model().fit(X, y, rng=np.random.default_rng(7))
    got, _ = _streamed_fit(_model(), source, *RULES[0], batch_size=len(X))
    assert got.coef.tobytes() == want.coef.tobytes() and got.intercept == want.intercept


@pytest.mark.slow
@pytest.mark.parametrize(("target", "rule"), RULES)
def test_sums_are_the_in_memory_sums(partitioned: Path, target: str, rule: dict[str, Any]) -> None:
    X, y = _in_memory(partitioned, target, rule)
    design = _model().design(2)
    Z, _ = normalised_rows(X, design)
    w = np.array([0.7, -1.3, 0.2])
    want = logistic_sums(Z, y, w)
    for batch_size in (7, 1 << 20):  # batch boundaries change no bit
        got = logistic_sums_stream(
            partitioned,
            SCHEMA,
            features=FEATURES,
            target=target,
            design=design,
            w=w,
            batch_size=batch_size,
            **rule,
        )
        assert (got.loss, got.rows) == (want.loss, want.rows) == (got.loss, len(y))
        assert got.gradient.tobytes() == want.gradient.tobytes()
        assert got.hessian.tobytes() == want.hessian.tobytes()


@pytest.mark.slow
def test_dask_local_scheduler_is_bit_identical(partitioned: Path) -> None:
    # Dask's local scheduler (the 2-worker cluster is exercised in test_dask.py).
    local, _ = _streamed_fit(_model(), partitioned, *RULES[0], batch_size=150)
    remote, _ = _streamed_fit(_model(), partitioned, *RULES[0], backend=DaskBackend(batch_size=150))
    assert local.coef.tobytes() == remote.coef.tobytes()
    assert local.intercept == remote.intercept


def test_configuration_errors(partitioned: Path) -> None:
    design = _model().design(2)
    w = np.zeros(3)
    kw: dict[str, Any] = {"features": FEATURES, "design": design, "w": w}
    with pytest.raises(ConfigError, match="exactly one of threshold, positive"):
        LogisticLossAggregate(target="income", **kw)
    with pytest.raises(ConfigError, match="exactly one of threshold, positive"):
        LogisticLossAggregate(target="income", threshold=1.0, positive="x", **kw)
    with pytest.raises(ConfigError, match=r"w must have 3 entries, got \(2,\)"):
        LogisticLossAggregate(target="income", threshold=1.0, **{**kw, "w": np.zeros(2)})
    with pytest.raises(ConfigError, match="'sex' must be numeric"):
        logistic_sums_stream(partitioned, SCHEMA, target="sex", threshold=0.5, **kw)
    with pytest.raises(ConfigError, match="'income' must be a category column"):
        logistic_sums_stream(partitioned, SCHEMA, target="income", positive="x", **kw)
    with pytest.raises(ConfigError, match="'zip' must be numeric"):
        logistic_sums_stream(
            partitioned,
            SCHEMA,
            target="income",
            threshold=1.0,
            **{**kw, "features": ["zip", "age"]},
        )
    with pytest.raises(ConfigError, match="fit_loss_sums needs method 'objective'"):
        LogisticRegression(1.0, data_norm=1.0, method="functional").fit_loss_sums(
            lambda w: logistic_sums(np.zeros((0, len(w))), np.zeros(0), w), d=1
        )


def test_each_pass_sees_every_row_once_in_bounded_batches(
    partitioned: Path, batch_sizes: list[int]
) -> None:
    seen = batch_sizes
    design = _model().design(2)
    hess = logistic_sums_stream(
        partitioned,
        SCHEMA,
        features=FEATURES,
        target="income",
        design=design,
        w=np.zeros(3),
        threshold=75_000.0,
        batch_size=40,
    ).hessian
    assert sum(seen) == 1954 and max(seen) <= 40
    # At w = 0 every row adds 1/4 z z^T, and the constant column is 1 / the row bound (up to
    # its quantisation: the Hessian is summed on a 2^-12 grid, which only steers Newton).
    assert hess[2, 2] == pytest.approx(1954 * 0.25 / row_norm_bound(design) ** 2, rel=1e-3)
