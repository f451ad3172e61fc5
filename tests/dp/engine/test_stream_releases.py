"""k-anonymity, DP k-means, regression statistics and validation through the engine equal the
in-memory paths."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dppub.dp.anonymity import Hierarchy
from dppub.dp.anonymity.classes import CodedTable
from dppub.dp.engine import (
    anonymize_stream,
    distinct_values_stream,
    leaf_counts_stream,
    lloyd_statistics_stream,
)
from dppub.dp.engine import regression_statistics_stream as stats_stream
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.errors import InputError
from dppub.dp.kmeans import lloyd_step
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.reference.frame import read_table
from dppub.dp.reference.frame_anonymity import anonymize
from dppub.dp.reference.frame_kmeans import KMeans
from dppub.dp.reference.frame_regression import sufficient_statistics
from dppub.dp.regression.statistics import Design
from tests.conftest import generate
from tests.dp.engine.conftest import SCHEMA, write_part

TIMINGS = ("search_seconds", "runtime_seconds")
INCLUDE = ["marital", "hours", "race"]


def _untimed(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in TIMINGS}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("k", "sigma", "metric"), [(5, 0.05, "loss"), (3, 0.0, "entropy"), (10, 0.1, "loss_rank")]
)
def test_streamed_release_equals_the_in_memory_one(
    partitioned: Path,
    hierarchies: dict[str, Hierarchy],
    tmp_path: Path,
    k: int,
    sigma: float,
    metric: str,
) -> None:
    # Uneven partitions (one empty, one out of bounds: clamped), several batches per file.
    frame = read_table(partitioned, SCHEMA, columns=[*hierarchies, *INCLUDE]).frame
    want = anonymize(frame, hierarchies, k=k, max_suppression=sigma, metric=metric)
    out = tmp_path / "table.parquet"
    got = anonymize_stream(
        partitioned,
        SCHEMA,
        hierarchies,
        out=out,
        include=INCLUDE,
        k=k,
        max_suppression=sigma,
        metric=metric,
        batch_size=300,
    )
    assert got.levels == want.levels
    assert got.suppressed == want.suppressed
    assert got.score == want.score  # same base rows, same float operations: bit for bit
    assert _untimed(got.metrics) == _untimed(want.metrics)
    assert got.suppressed > 0 or sigma == 0.0  # the suppression path is exercised
    want.table.to_parquet(tmp_path / "want.parquet", index=False)
    pd.testing.assert_frame_equal(
        pd.read_parquet(out), pd.read_parquet(tmp_path / "want.parquet")
    )  # same rows in the same order, same dtypes
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_full_disk_mid_file_leaves_no_file(
    tmp_path: Path, hierarchies: dict[str, Hierarchy], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    write_part(folder, "p0.parquet", generate.make_census(400, 1), row_group_size=100)
    writes = iter(range(10**6))

    class FillingDisk(pq.ParquetWriter):
        def write_table(self, table: pa.Table, *args: Any, **kwargs: Any) -> None:
            if next(writes) == 2:  # the disk fills up on the third batch
                raise OSError(errno.ENOSPC, "No space left on device")
            super().write_table(table, *args, **kwargs)

    monkeypatch.setattr("dppub.dp.engine.folds.k_anonymous_table.pq.ParquetWriter", FillingDisk)
    with pytest.raises(OSError, match="No space left"):
        anonymize_stream(
            folder,
            SCHEMA,
            hierarchies,
            out=tmp_path / "table.parquet",
            include=["hours"],
            k=2,
            max_suppression=0.1,
            batch_size=64,
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_source_changed_between_the_passes_releases_nothing(
    tmp_path: Path, hierarchies: dict[str, Hierarchy], monkeypatch: pytest.MonkeyPatch
) -> None:
    import dppub.dp.engine.folds.k_anonymous_table as module
    from dppub.dp.engine.folds.anonymity_counts import leaf_counts_stream

    folder = tmp_path / "data"
    folder.mkdir()
    frame = generate.make_census(400, 1)
    write_part(folder, "p0.parquet", frame, row_group_size=100)
    counted = leaf_counts_stream  # the function k_anonymous_table.py calls, patched below

    def count_then_drop_a_row(*args: Any, **kwargs: Any) -> Any:
        leaf = counted(*args, **kwargs)
        write_part(folder, "p0.parquet", frame.iloc[1:], row_group_size=100)  # a record leaves
        return leaf

    monkeypatch.setattr(module, "leaf_counts_stream", count_then_drop_a_row)
    with pytest.raises(InputError, match="changed while it was being anonymized"):
        anonymize_stream(
            folder, SCHEMA, hierarchies, out=tmp_path / "t.parquet", k=2, max_suppression=0.1
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_leaf_rows_of_records(partitioned: Path, hierarchies: dict[str, Hierarchy]) -> None:
    leaf = leaf_counts_stream(partitioned, SCHEMA, hierarchies, batch_size=400)
    # In first-appearance order, the streamed base rows are the in-memory table's.
    frame = read_table(partitioned, SCHEMA, columns=list(hierarchies)).frame
    codes = np.column_stack([h.encode(frame[c]) for c, h in hierarchies.items()])
    table = CodedTable.build(codes, list(hierarchies.values()), None)
    order = np.argsort(leaf.first)
    assert np.array_equal(leaf.rows[order], table.rows)
    assert np.array_equal(leaf.counts[order], table.counts)
    assert np.array_equal(np.sort(leaf.first), np.unique(table.records(), return_index=True)[1])
    picked = np.array([0, len(leaf.counts) - 1, len(leaf.counts) // 2, 0])
    assert np.array_equal(leaf.row_of(leaf.rows[picked]), picked)


def test_distinct_values_are_the_frames(partitioned: Path) -> None:
    frame = read_table(partitioned, SCHEMA, columns=["zip", "age"]).frame
    for column in ("zip", "age"):
        want = sorted(frame[column].astype(str).unique().tolist())
        assert distinct_values_stream(partitioned, SCHEMA, column, batch_size=256) == want


def test_streamed_kmeans_equals_the_in_memory_fit(partitioned: Path) -> None:
    features = ["age", "hours"]
    X = read_table(partitioned, SCHEMA, columns=features).frame.to_numpy(dtype=np.float64)

    def make() -> KMeans:
        return KMeans(3, 5.0, bounds_X=([17, 1], [90, 99]), n_iter=4)

    want = make().fit(X, rng=np.random.default_rng(11))
    model = make()
    calls: list[int] = []

    def step(centres: Any) -> Any:
        calls.append(1)
        return lloyd_statistics_stream(
            partitioned,
            SCHEMA,
            features=features,
            domain=model.domain(2),
            centres=centres,
            batch_size=200,
        )

    got = model.fit_steps(step, d=2, rng=np.random.default_rng(11))
    assert len(calls) == 4  # one pass over the source per iteration
    # Same noise draws on the same exact sums (integers, rounded once): bit for bit.
    assert got.centres.tobytes() == want.centres.tobytes()
    assert got.to_dict() == want.to_dict()


def test_one_batch_kmeans_is_bit_identical(tmp_path: Path) -> None:
    source = tmp_path / "one.parquet"
    write_part(tmp_path, source.name, generate.make_census(2000, 5), row_group_size=2000)
    features = ["age", "hours"]
    X = read_table(source, SCHEMA, columns=features).frame.to_numpy(dtype=np.float64)
    want = KMeans(2, 1.0, bounds_X=([17, 1], [90, 99])).fit(X, rng=np.random.default_rng(3))
    model = KMeans(2, 1.0, bounds_X=([17, 1], [90, 99]))
    got = model.fit_steps(
        lambda c: lloyd_statistics_stream(
            source,
            SCHEMA,
            features=features,
            domain=model.domain(2),
            centres=c,
            batch_size=len(X),
        ),
        d=2,
        rng=np.random.default_rng(3),
    )
    assert got.centres.tobytes() == want.centres.tobytes()


@pytest.mark.slow
def test_dask_backend_gives_the_same_releases(
    partitioned: Path, hierarchies: dict[str, Hierarchy], tmp_path: Path
) -> None:
    # Dask's local scheduler (the 2-worker cluster is exercised in test_dask.py).
    kw: dict[str, Any] = {"include": INCLUDE, "k": 5, "max_suppression": 0.05, "batch_size": 300}
    local = anonymize_stream(partitioned, SCHEMA, hierarchies, out=tmp_path / "a.parquet", **kw)
    remote = anonymize_stream(
        partitioned,
        SCHEMA,
        hierarchies,
        out=tmp_path / "b.parquet",
        backend=DaskBackend(batch_size=300),
        **kw,
    )
    assert _untimed(remote.metrics) == _untimed(local.metrics)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    )
    centres = np.array([[0.0, 0.0], [10.0, -5.0]])
    domain = KMeans(2, 1.0, bounds_X=([17, 1], [90, 99])).domain(2)
    a = lloyd_statistics_stream(
        partitioned, SCHEMA, features=["age", "hours"], domain=domain, centres=centres
    )
    b = lloyd_statistics_stream(
        partitioned,
        SCHEMA,
        features=["age", "hours"],
        domain=domain,
        centres=centres,
        backend=DaskBackend(),
    )
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


# --- exact sums: bit for bit whatever the batches, partitions or backend --------------------

STAT_DESIGNS = [
    Design(
        features=FeatureDomain.box([17, 1], [90, 99], d=2),
        target=TargetDomain(lower=0, upper=250_000),
        fit_intercept=True,
    ),
    Design(
        features=FeatureDomain.ball(100.0, d=2),
        target=TargetDomain(lower=0, upper=250_000),
        fit_intercept=False,
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("design", STAT_DESIGNS)
def test_regression_statistics_are_bit_identical_on_every_path(
    partitioned: Path, design: Design
) -> None:
    # The sums are exact integers rounded once: the in-memory frame, any batch size, any
    # permutation of the rows and Dask all give the same float64 statistics (a float fold
    # did not: its rounding depended on the order, and so did the distance between
    # neighbours' sums).
    frame = read_table(partitioned, SCHEMA).frame
    X = frame[["age", "hours"]].to_numpy(dtype=np.float64)
    y = frame["income"].to_numpy(dtype=np.float64)
    want = sufficient_statistics(X, y, design)
    perm = np.random.default_rng(0).permutation(len(y))
    shuffled = sufficient_statistics(X[perm], y[perm], design)
    runs = [shuffled]
    kw: dict[str, Any] = {"features": ["age", "hours"], "target": "income", "design": design}
    for batch_size in (7, 200, 1 << 20):
        runs += stats_stream(partitioned, SCHEMA, batch_size=batch_size, **kw)
    runs += stats_stream(partitioned, SCHEMA, backend=DaskBackend(batch_size=90), **kw)
    for got in runs:
        assert got.gram.tobytes() == want.gram.tobytes()
        assert got.moment.tobytes() == want.moment.tobytes()


def test_grouped_statistics_are_bit_identical(partitioned: Path) -> None:
    frame = read_table(partitioned, SCHEMA).frame
    X = frame[["age", "hours"]].to_numpy(dtype=np.float64)
    edu = frame["education"].astype(str).to_numpy()
    y = frame["income"].to_numpy(dtype=np.float64)
    design = STAT_DESIGNS[0]
    got = stats_stream(
        partitioned,
        SCHEMA,
        features=["age", "hours"],
        target="income",
        design=design,
        by="education",
        batch_size=33,
    )
    for stats, level in zip(got, SCHEMA["education"].categories or (), strict=True):
        want = sufficient_statistics(X[edu == level], y[edu == level], design)
        assert stats.gram.tobytes() == want.gram.tobytes()
        assert stats.moment.tobytes() == want.moment.tobytes()


def test_lloyd_sums_are_bit_identical_on_every_path(partitioned: Path) -> None:
    features = ["age", "hours"]
    X = read_table(partitioned, SCHEMA, columns=features).frame.to_numpy(dtype=np.float64)
    model = KMeans(3, 1.0, bounds_X=([17, 1], [90, 99]), n_iter=1)
    dom = model.domain(2)
    centred = dom.translated(dom.midpoint())
    centres = np.array([[-10.0, -20.0], [0.0, 0.0], [15.0, 20.0]])
    want = lloyd_step(dom.clip(X) - dom.midpoint(), centred, centres)
    for batch_size in (7, 1 << 20):
        got = lloyd_statistics_stream(
            partitioned,
            SCHEMA,
            features=features,
            domain=dom,
            centres=centres,
            batch_size=batch_size,
        )
        assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want, strict=True))
