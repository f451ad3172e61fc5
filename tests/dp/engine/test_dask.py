"""The Dask backend gives bit-identical aggregates to the streaming engine (2 local workers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.axes import category_axis, hierarchy_axis, numeric_axis
from dppub.dp.engine import (
    histogram_stream,
    leaf_counts_stream,
    logistic_sums_stream,
    regression_statistics_stream,
)
from dppub.dp.engine.dask import DaskBackend
from dppub.dp.errors import InputError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.regression import LogisticRegression
from dppub.dp.regression.logistic import LogisticFit
from dppub.dp.regression.losssums import LossSums
from dppub.dp.regression.statistics import Design, SufficientStatistics
from tests.conftest import generate
from tests.dp.engine.conftest import SCHEMA, write_part

# Slow: a local Dask cluster of worker processes. `distributed` is imported where it is used, so
# that the fast tier does not pay for it while collecting.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    from distributed import LocalCluster

    with LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c.scheduler_address


def test_histogram_is_bit_identical(
    partitioned: Path, hierarchies: dict[str, Hierarchy], cluster: str
) -> None:
    axes = [
        numeric_axis(SCHEMA["income"], bins=16),
        category_axis(SCHEMA["race"]),
        hierarchy_axis("age", hierarchies["age"], level=1),
    ]
    backend = DaskBackend(address=cluster, batch_size=100)
    got = histogram_stream(partitioned, SCHEMA, axes, backend=backend)
    assert np.array_equal(got, histogram_stream(partitioned, SCHEMA, axes, batch_size=100))


def test_float_statistics_are_bit_identical(partitioned: Path, cluster: str) -> None:
    design = Design(
        features=FeatureDomain.box([17, 1], [90, 99], d=2),
        target=TargetDomain(lower=0, upper=250_000),
        fit_intercept=True,
    )

    def stats(backend: DaskBackend | None) -> list[SufficientStatistics]:
        return regression_statistics_stream(
            partitioned,
            SCHEMA,
            features=["age", "hours"],
            target="income",
            design=design,
            by="sex",
            batch_size=77,
            backend=backend,
        )

    local = stats(None)
    from distributed import Client

    # The current default client (no address on the backend).
    with Client(cluster):  # type: ignore[no-untyped-call]
        remote = stats(DaskBackend(batch_size=77))
    for a, b in zip(local, remote, strict=True):
        assert a.gram.tobytes() == b.gram.tobytes()  # bit for bit, not approximately
        assert a.moment.tobytes() == b.moment.tobytes()


def test_objective_perturbation_is_bit_identical(partitioned: Path, cluster: str) -> None:
    # Every Newton iterate's loss sums are bit-identical, so the whole fit is.
    def fit(backend: DaskBackend | None) -> LogisticFit:
        model = LogisticRegression(0.5, bounds_X=([17, 1], [90, 99]))
        design = model.design(2)

        def sums(w: np.ndarray) -> LossSums:
            return logistic_sums_stream(
                partitioned,
                SCHEMA,
                features=["age", "hours"],
                target="income",
                design=design,
                w=w,
                threshold=75_000.0,
                batch_size=77,
                backend=backend,
            )

        return model.fit_loss_sums(sums, d=2, rng=np.random.default_rng(4))

    local = fit(None)
    remote = fit(DaskBackend(address=cluster, batch_size=77))
    assert local.coef.tobytes() == remote.coef.tobytes()
    assert local.intercept == remote.intercept


def test_leaf_counts_match(
    partitioned: Path, hierarchies: dict[str, Hierarchy], cluster: str
) -> None:
    backend = DaskBackend(address=cluster, batch_size=250)
    remote = leaf_counts_stream(partitioned, SCHEMA, hierarchies, backend=backend)
    local = leaf_counts_stream(partitioned, SCHEMA, hierarchies)
    assert np.array_equal(remote.rows, local.rows)
    assert np.array_equal(remote.counts, local.counts)


def test_worker_errors_keep_their_message(tmp_path: Path, cluster: str) -> None:
    write_part(tmp_path, "a.parquet", generate.make_census(50, 1), row_group_size=10)
    narrow = {"zip": Hierarchy.from_prefix_mask(["190101"], name="zip")}
    with pytest.raises(InputError, match="column 'zip' has values that are not leaves"):
        leaf_counts_stream(tmp_path, SCHEMA, narrow, backend=DaskBackend(address=cluster))


def _histogram_on_worker(path: Path, address: str) -> bytes:
    axes = [category_axis(SCHEMA["race"]), numeric_axis(SCHEMA["income"], bins=8)]
    backend = DaskBackend(batch_size=50, address=address)
    return histogram_stream(path, SCHEMA, axes, backend=backend).tobytes()


def test_runs_inside_a_worker_task_without_deadlock(partitioned: Path, cluster: str) -> None:
    # Both workers' only threads hold an outer task (as Prefect tasks on the DaskTaskRunner do);
    # the fragment tasks can only run because the backend secedes from the worker's pool.
    axes = [category_axis(SCHEMA["race"]), numeric_axis(SCHEMA["income"], bins=8)]
    expected = histogram_stream(partitioned, SCHEMA, axes, batch_size=50).tobytes()
    from distributed import Client, get_task_stream

    with (
        Client(cluster, set_as_default=False) as client,  # type: ignore[no-untyped-call]
        get_task_stream(client) as stream,
    ):
        futures = [
            client.submit(_histogram_on_worker, partitioned, cluster, pure=False) for _ in range(2)
        ]
        assert [f.result(timeout=120) for f in futures] == [expected, expected]
    # ... and the fragments ran as cluster tasks, not serially inside the outer task.
    fragments = [t for t in stream.data if str(t["key"]).startswith("fragment_partial")]
    assert len(fragments) == 2 * len(list(partitioned.glob("*.parquet")))


def test_a_csv_folder_folds_on_workers_as_streamed(
    partitioned: Path, tmp_path: Path, cluster: str
) -> None:
    # A CSV fragment pickled to a worker loses its malformed-row handler: the worker reopens it.
    # Old code: the folder was read as Parquet ("cannot read ... as Parquet").
    folder = tmp_path / "csv"
    folder.mkdir()
    for part in sorted(partitioned.iterdir()):
        frame = pd.read_parquet(part)
        text = frame.to_csv(index=False)
        if part.name == "p3.parquet":
            text += "1,2,3\n"  # a row with too few fields, left out on the worker too
        (folder / f"{part.stem}.csv").write_text(text, encoding="utf-8")
    axes = [numeric_axis(SCHEMA["income"], bins=16), category_axis(SCHEMA["race"])]
    got = histogram_stream(folder, SCHEMA, axes, backend=DaskBackend(address=cluster))
    assert np.array_equal(got, histogram_stream(partitioned, SCHEMA, axes))
