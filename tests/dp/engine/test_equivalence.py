"""The streaming engine gives the aggregates of the pandas path (dp.io + dp.axes + ...)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dppub.dp.anonymity.classes import CodedTable
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.axes import Axis, category_axis, hierarchy_axis, numeric_axis
from dppub.dp.engine import histogram_stream, leaf_counts_stream, node_class_sizes
from dppub.dp.engine import regression_statistics_stream as stats_stream
from dppub.dp.engine.batches import iter_batches, open_scan
from dppub.dp.errors import ConfigError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.reference.frame import read_table
from dppub.dp.reference.frame_regression import sufficient_statistics
from dppub.dp.reference.histogram import histogram
from dppub.dp.regression.statistics import Design
from tests.dp.engine.conftest import SCHEMA

# Float sums differ from the whole-table ones only in addition order: ~1e-15 relative here.
RTOL = 1e-9


def _axes(hierarchies: dict[str, Hierarchy]) -> list[list[Axis]]:
    return [
        [numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["sex"])],
        [
            numeric_axis(SCHEMA["age"]),
            category_axis(SCHEMA["sex"]),
            category_axis(SCHEMA["race"]),
            category_axis(SCHEMA["education"]),
            numeric_axis(SCHEMA["income"], bins=64),
        ],
        [numeric_axis(SCHEMA["hours"], bins=7), category_axis(SCHEMA["marital"])],
        [hierarchy_axis("age", hierarchies["age"], level=2), category_axis(SCHEMA["sex"])],
        [hierarchy_axis("zip", hierarchies["zip"], level=3)],
    ]


def test_the_fixture_has_the_awkward_partitions(partitioned: Path) -> None:
    scan = open_scan(partitioned, SCHEMA, ["age"])
    sizes = [f.count_rows() for f in scan.fragments]
    assert sizes == [1301, 3, 0, 650]  # uneven, one empty
    assert read_table(partitioned, SCHEMA).clamped["age"] > 100  # the wild partition clamps


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 37, 500, 1 << 20])
def test_histograms_are_bit_identical(
    partitioned: Path, hierarchies: dict[str, Hierarchy], batch_size: int
) -> None:
    frame = read_table(partitioned, SCHEMA).frame
    for axes in _axes(hierarchies) if batch_size != 1 else _axes(hierarchies)[:1]:
        got = histogram_stream(partitioned, SCHEMA, axes, batch_size=batch_size)
        want = histogram(frame, axes)
        assert got.dtype == want.dtype == np.float64
        assert np.array_equal(got, want)


def test_clamped_counts_match(partitioned: Path) -> None:
    scan = open_scan(partitioned, SCHEMA, ["age", "hours", "income"], batch_size=100)
    total = {"age": 0, "hours": 0, "income": 0}
    for fragment in scan.fragments:
        for batch in iter_batches(scan, fragment):
            for k, v in batch.clamped.items():
                total[k] += v
    assert total == read_table(partitioned, SCHEMA, columns=list(total)).clamped


def _xy(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    frame = read_table(path, SCHEMA).frame
    X = frame[["age", "hours"]].to_numpy(dtype=np.float64)
    return X, frame["income"].to_numpy(dtype=np.float64), frame["education"].astype(str).to_numpy()


@pytest.mark.slow
@pytest.mark.parametrize(
    "design",
    [
        Design(
            features=FeatureDomain.box([17, 1], [90, 99], d=2),
            target=TargetDomain(lower=0, upper=250_000),
            fit_intercept=True,
        ),
        Design(  # tighter than the schema: the design's own clip must still apply
            features=FeatureDomain.box([20, 10], [70, 60], d=2),
            target=TargetDomain(lower=1000, upper=150_000),
            fit_intercept=True,
        ),
        Design(
            features=FeatureDomain.ball(100.0, d=2),
            target=TargetDomain(lower=0, upper=250_000),
            fit_intercept=False,
        ),
    ],
)
def test_regression_statistics_match(partitioned: Path, design: Design) -> None:
    X, y, _ = _xy(partitioned)
    want = sufficient_statistics(X, y, design)
    [got] = stats_stream(
        partitioned,
        SCHEMA,
        features=["age", "hours"],
        target="income",
        design=design,
        batch_size=97,
    )
    assert got.fit_intercept == want.fit_intercept
    np.testing.assert_allclose(got.gram, want.gram, rtol=RTOL, atol=0)
    np.testing.assert_allclose(got.moment, want.moment, rtol=RTOL, atol=0)


def test_logistic_response_and_groups_match(partitioned: Path) -> None:
    X, y, edu = _xy(partitioned)
    design = Design(
        features=FeatureDomain.box([17, 1], [90, 99], d=2),
        target=TargetDomain(lower=-0.5, upper=0.5),
        fit_intercept=False,
    )
    labels = (y > 75_000).astype(np.float64) - 0.5
    got = stats_stream(
        partitioned,
        SCHEMA,
        features=["age", "hours"],
        target="income",
        design=design,
        response=lambda t: (t > 75_000).astype(np.float64) - 0.5,
        by="education",
        batch_size=200,
    )
    categories = SCHEMA["education"].categories or ()
    assert len(got) == len(categories)
    for stats, level in zip(got, categories, strict=True):
        rows = edu == level
        want = sufficient_statistics(X[rows], labels[rows], design)
        np.testing.assert_allclose(stats.gram, want.gram, rtol=RTOL, atol=1e-9)
        np.testing.assert_allclose(stats.moment, want.moment, rtol=RTOL, atol=1e-9)


def test_leaf_counts_give_the_class_sizes_of_every_node(
    partitioned: Path, hierarchies: dict[str, Hierarchy]
) -> None:
    leaf = leaf_counts_stream(partitioned, SCHEMA, hierarchies, batch_size=300)
    frame = read_table(partitioned, SCHEMA, columns=list(hierarchies)).frame
    assert leaf.n == len(frame)
    codes = np.column_stack([h.encode(frame[c]) for c, h in hierarchies.items()])
    table = CodedTable.build(codes, list(hierarchies.values()), None)
    for levels in [(0, 0, 0), (2, 1, 3), (4, 0, 6), (1, 1, 2)]:
        node = table.classes(levels, 1, None)
        _, first = np.unique(node.class_id, return_index=True)
        want = np.sort(node.class_size[first]).astype(np.int64)
        assert np.array_equal(np.sort(node_class_sizes(leaf, levels)), want)


def test_binary_labels_of_a_category_target_match(partitioned: Path) -> None:
    frame = read_table(partitioned, SCHEMA, columns=["age", "hours", "sex"]).frame
    X = frame[["age", "hours"]].to_numpy(dtype=np.float64)
    labels = np.asarray(frame["sex"].astype(str) == "Female", dtype=np.float64) - 0.5
    design = Design(
        features=FeatureDomain.box([17, 1], [90, 99], d=2),
        target=TargetDomain(lower=-0.5, upper=0.5),
        fit_intercept=True,
    )
    [got] = stats_stream(
        partitioned,
        SCHEMA,
        features=["age", "hours"],
        target="sex",
        positive="Female",
        response=lambda v: v - 0.5,
        design=design,
        batch_size=150,
    )
    want = sufficient_statistics(X, labels, design)
    np.testing.assert_allclose(got.gram, want.gram, rtol=RTOL, atol=1e-9)
    np.testing.assert_allclose(got.moment, want.moment, rtol=RTOL, atol=1e-9)
    with pytest.raises(ConfigError, match="'sex' must be numeric"):
        stats_stream(partitioned, SCHEMA, features=["age"], target="sex", design=design)
