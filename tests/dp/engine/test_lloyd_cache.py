"""The projected cache of iterative stages: exactly the source's rows, bounded, and a k-means
fit from it equal to the streamed one bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dppub.dp.engine.lloyd_cache as projection_module
from dppub.dp.engine import (
    MemoryBackend,
    Projection,
    ProjectionAggregate,
    StreamingBackend,
    lloyd_statistics_stream,
    projected_lloyd_step,
)
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.kmeans import KMeans, lloyd_partial
from dppub.dp.numerics.fixedpoint import MAX_ROWS
from dppub.dp.reference.frame import read_table
from tests.dp.engine.conftest import SCHEMA

FEATURES = ("age", "hours")


def _counts(frame: pd.DataFrame) -> pd.Series:
    return frame.value_counts().sort_index()


def _expanded(p: Projection) -> pd.DataFrame:
    return pd.DataFrame({c: np.repeat(v, p.weights) for c, v in p.values.items()})


@pytest.mark.parametrize("batch_size", [7, 1 << 20])
def test_the_projection_holds_every_complete_row_once(partitioned: Path, batch_size: int) -> None:
    want = read_table(partitioned, SCHEMA, columns=list(FEATURES)).frame
    got = StreamingBackend(batch_size=batch_size, workers=2).run(
        ProjectionAggregate(columns=FEATURES), partitioned, SCHEMA
    )
    assert isinstance(got, Projection)
    assert got.rows == len(want) == 1954
    assert len(got.weights) < got.rows  # the clamped wild partition repeats rows
    assert got.weights.min() >= 1
    assert _counts(_expanded(got)).equals(_counts(want))
    assert got.values["age"].dtype == want["age"].dtype  # the batches' dtypes, int64 kept


def test_a_projection_that_outgrows_its_bound_gives_up(partitioned: Path) -> None:
    distinct = len(read_table(partitioned, SCHEMA, columns=list(FEATURES)).frame.drop_duplicates())
    fits = ProjectionAggregate(columns=FEATURES, max_rows=distinct)
    over = ProjectionAggregate(columns=FEATURES, max_rows=distinct - 1)
    backend = StreamingBackend(batch_size=64)
    assert backend.run(fits, partitioned, SCHEMA) is not None
    assert backend.run(over, partitioned, SCHEMA) is None
    assert over.merge([], None) is None and over.merge(None, []) is None
    with pytest.raises(ConfigError):
        ProjectionAggregate(columns=("age", "age"))


def test_once_one_fragment_gives_up_the_others_stop_collecting(
    partitioned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grouped: list[int] = []
    named = projection_module._named

    def counting(*args: Any) -> Any:
        grouped.append(1)
        return named(*args)

    monkeypatch.setattr(projection_module, "_named", counting)
    # 1,301 rows in the first file: 64-row batches outgrow 100 distinct rows within it.
    got = StreamingBackend(batch_size=64).run(
        ProjectionAggregate(columns=FEATURES, max_rows=100), partitioned, SCHEMA
    )
    assert got is None
    assert 0 < len(grouped) <= 4  # the later files' 12 batches were never grouped


def test_an_empty_source_projects_to_no_rows(partitioned: Path) -> None:
    empty = ProjectionAggregate(columns=FEATURES).finish([])
    assert empty is not None and empty.rows == 0 and len(empty.values["age"]) == 0


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-50, 50), st.floats(-50, 50), st.integers(1, 10**6)),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 2**32 - 1),
)
def test_weighted_lloyd_sums_equal_the_repeated_rows(rows: list[Any], seed: int) -> None:
    model = KMeans(3, 1.0, bounds_X=([-40, -40], [40, 40]), n_iter=1)
    dom = model.domain(2)
    centred = dom.translated(dom.midpoint())
    X = np.array([[a, b] for a, b, _ in rows])
    w = np.array([n for *_, n in rows], dtype=np.int64)
    centres = np.random.default_rng(seed).uniform(-40, 40, (3, 2))
    clipped = dom.clip(X) - dom.midpoint()
    got = lloyd_partial(clipped, centred, centres, w)
    want = lloyd_partial(np.repeat(clipped, w, axis=0), centred, centres)
    assert [list(a) for a in got[1]] == [list(a) for a in want[1]]
    assert list(got[0]) == list(want[0])


def test_weights_beyond_the_row_limit_are_refused() -> None:
    model = KMeans(1, 1.0, bounds_X=([0], [1]), n_iter=1)
    dom = model.domain(1)
    with pytest.raises(InputError):
        lloyd_partial(np.zeros((1, 1)), dom, np.zeros((1, 1)), np.array([MAX_ROWS + 1]))


@pytest.mark.parametrize("engine", ["stream", "memory"])
def test_kmeans_from_the_projection_equals_the_streamed_fit(partitioned: Path, engine: str) -> None:
    backend: Any = StreamingBackend(batch_size=100, workers=2)
    if engine == "memory":
        backend = MemoryBackend.load(partitioned, SCHEMA, FEATURES, batch_size=100)
    projection = backend.run(ProjectionAggregate(columns=FEATURES), partitioned, SCHEMA)

    def make() -> KMeans:
        return KMeans(3, 5.0, bounds_X=([17, 1], [90, 99]), n_iter=4)

    streamed = make()
    passes: list[int] = []

    def step(centres: Any) -> Any:
        passes.append(1)
        return lloyd_statistics_stream(
            partitioned,
            SCHEMA,
            features=list(FEATURES),
            domain=streamed.domain(2),
            centres=centres,
            backend=backend,
        )

    want = streamed.fit_steps(step, d=2, rng=np.random.default_rng(11))
    assert len(passes) == 4
    cached = make()
    got = cached.fit_steps(
        projected_lloyd_step(projection, features=FEATURES, domain=cached.domain(2)),
        d=2,
        rng=np.random.default_rng(11),
    )
    assert got.centres.tobytes() == want.centres.tobytes()
    assert got.to_dict() == want.to_dict()
