"""Many marginals in one pass: bit-identical to one histogram per marginal, on every batching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.axes import category_axis, hierarchy_axis, numeric_axis
from dppub.dp.engine import MarginalsAggregate, StreamingBackend, histogram_stream
from dppub.dp.errors import ConfigError
from tests.dp.engine.conftest import SCHEMA


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [37, 1 << 20])
def test_each_marginal_equals_its_own_histogram(
    partitioned: Path, hierarchies: dict[str, Hierarchy], batch_size: int
) -> None:
    axes = (
        hierarchy_axis("age", hierarchies["age"], level=2),
        category_axis(SCHEMA["sex"]),
        category_axis(SCHEMA["education"]),
        numeric_axis(SCHEMA["income"], bins=16),
    )
    marginals = ((0, 1, 3), (2,), (3, 0), (1, 2))
    got = StreamingBackend(batch_size=batch_size).run(
        MarginalsAggregate(axes, marginals), partitioned, SCHEMA
    )
    assert len(got) == len(marginals)
    for counts, m in zip(got, marginals, strict=True):
        want = histogram_stream(partitioned, SCHEMA, [axes[i] for i in m])
        assert counts.dtype == np.float64
        assert np.array_equal(counts, want)


def test_a_marginal_outside_the_axes_is_refused() -> None:
    with pytest.raises(ConfigError, match="among the declared axes"):
        MarginalsAggregate((category_axis(SCHEMA["sex"]),), ((0, 1),))
