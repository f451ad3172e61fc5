"""A small partitioned census dataset with the awkward cases of issue 7."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import dppub.dp.engine.aggregate as aggregate_module
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.engine.batches import Batch, Scan, iter_batches
from dppub.dp.schema import ColumnSpec, TableSchema
from tests.conftest import generate

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="age", type="int", bounds=(17, 90)),
        ColumnSpec(name="sex", type="category", categories=tuple(generate.SEX)),
        ColumnSpec(name="race", type="category", categories=tuple(generate.RACE)),
        ColumnSpec(name="education", type="category", categories=tuple(generate.EDUCATION)),
        ColumnSpec(name="marital", type="category", categories=tuple(generate.MARITAL)),
        ColumnSpec(name="zip", type="string"),
        ColumnSpec(name="hours", type="float", bounds=(1, 99)),
        ColumnSpec(name="income", type="float", bounds=(0, 250_000)),
    )
)


def write_part(folder: Path, name: str, frame: pd.DataFrame, *, row_group_size: int) -> None:
    """One partition file with the census schema (also for zero rows)."""
    schema = pa.Schema.from_pandas(generate.make_census(1, 0), preserve_index=False)
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    pq.write_table(table, folder / name, row_group_size=row_group_size)


@pytest.fixture(scope="session")
def partitioned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Uneven partitions (1,301 / 3 / 0 / 650 rows), the last one far outside the bounds."""
    folder = tmp_path_factory.mktemp("partitioned")
    write_part(folder, "p0.parquet", generate.make_census(1301, 1), row_group_size=500)
    write_part(folder, "p1.parquet", generate.make_census(3, 2), row_group_size=500)
    write_part(folder, "p2.parquet", generate.make_census(0, 3), row_group_size=500)
    wild = generate.make_census(650, 4)
    rng = np.random.default_rng(5)
    wild["age"] = rng.integers(-50, 200, len(wild))
    wild["hours"] = rng.uniform(-100.0, 300.0, len(wild))
    wild["income"] = rng.uniform(-1e6, 1e6, len(wild))
    write_part(folder, "p3.parquet", wild, row_group_size=128)
    return folder


@pytest.fixture(scope="session")
def hierarchies() -> dict[str, Hierarchy]:
    """QI hierarchies as in configs/demo.yaml (zip leaves are the generator's zips)."""
    zips = [p + f"{s:02d}" for p in generate.ZIP_PREFIXES for s in range(50)]
    return {
        "age": Hierarchy.from_bands(17, 90, [5, 10, 20], name="age"),
        "sex": Hierarchy.from_levels({"Female": ["*"], "Male": ["*"]}, name="sex"),
        "zip": Hierarchy.from_prefix_mask(zips, name="zip"),
    }


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every batch the aggregates fold from now on (in order)."""
    seen: list[int] = []

    def recording(scan: Scan, fragment: pads.Fragment) -> Iterator[Batch]:
        for batch in iter_batches(scan, fragment):
            seen.append(batch.num_rows)
            assert all(len(v) == batch.num_rows for v in batch.numeric.values())
            yield batch

    monkeypatch.setattr(aggregate_module, "iter_batches", recording)
    return seen
