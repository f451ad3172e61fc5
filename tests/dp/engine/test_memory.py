"""Memory is bounded by the batch size: no step ever holds more than one batch of rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dppub.dp.axes import category_axis, numeric_axis
from dppub.dp.engine import histogram_stream, regression_statistics_stream
from dppub.dp.engine.batches import iter_batches, open_scan
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.regression.statistics import Design
from tests.dp.engine.conftest import SCHEMA


def test_iter_batches_respects_the_batch_size(partitioned: Path) -> None:
    scan = open_scan(partitioned, SCHEMA, ["age", "sex"], batch_size=64)
    sizes = [b.num_rows for f in scan.fragments for b in iter_batches(scan, f)]
    assert max(sizes) == 64
    assert sum(sizes) == 1301 + 3 + 650


def test_aggregates_only_ever_see_bounded_batches(
    partitioned: Path, batch_sizes: list[int]
) -> None:
    seen = batch_sizes
    axes = [numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["sex"])]
    counts = histogram_stream(partitioned, SCHEMA, axes, batch_size=50)
    assert counts.sum() == sum(seen) == 1954
    assert max(seen) <= 50
    assert len(seen) >= 1954 // 50
    seen.clear()
    design = Design(
        features=FeatureDomain.box([17], [90], d=1),
        target=TargetDomain(lower=0, upper=1),
        fit_intercept=True,
    )
    [stats] = regression_statistics_stream(
        partitioned, SCHEMA, features=["age"], target="hours", design=design, batch_size=33
    )
    assert stats.gram[1, 1] == sum(seen) == 1954  # the count corner saw every row once
    assert max(seen) <= 33


@pytest.mark.slow
def test_accumulator_size_does_not_grow_with_rows(partitioned: Path, census_small: Path) -> None:
    axes = [numeric_axis(SCHEMA["age"]), category_axis(SCHEMA["sex"])]
    small = histogram_stream(census_small, SCHEMA, axes, batch_size=10)
    large = histogram_stream(partitioned, SCHEMA, axes, batch_size=10)
    assert small.shape == large.shape == (74 * 2,)
    assert np.isclose(small.sum(), 3000) and large.sum() == 1954
