"""Rows per unit, binned: each unit once, counted exactly across batches and files, the same
on every batching; an ``int`` unit by its stored id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dppub.dp.contributions import bin_counts
from dppub.dp.engine import StreamingBackend
from dppub.dp.engine.folds.unit_rows import UnitRowsAggregate
from dppub.dp.schema import ColumnSpec, TableSchema


def _write(folder: Path, frame: pd.DataFrame, files: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    edges = np.linspace(0, len(frame), files + 1).astype(int)
    for i in range(files):
        frame.iloc[edges[i] : edges[i + 1]].to_parquet(
            folder / f"p{i}.parquet", index=False, row_group_size=5
        )
    return folder


def _frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(80, dtype=np.int64) * 2**40, rng.integers(1, 30, size=80))
    return pd.DataFrame({"person": rng.permutation(ids), "name": "x"})


def test_units_are_counted_once_in_the_bin_of_their_rows_on_every_batching(
    tmp_path: Path,
) -> None:
    frame = _frame(3)
    schema = TableSchema(
        columns=(
            ColumnSpec(name="person", type="int", bounds=(0, 1), unit=True),
            ColumnSpec(name="name", type="string"),
        )
    )
    agg = UnitRowsAggregate("person", (1, 2, 5, 10), 20)
    truth = bin_counts(frame["person"].value_counts().to_numpy(), (1, 2, 5, 10), 20)
    one = StreamingBackend(batch_size=1_000).run(agg, _write(tmp_path / "a", frame, 1), schema)
    many = StreamingBackend(batch_size=7, workers=2).run(
        agg, _write(tmp_path / "b", frame, 4), schema
    )
    # ids 2^40 apart are distinct units though the declared bounds [0, 1] would clamp them
    assert one.tolist() == many.tolist() == truth.tolist()
    assert int(one.sum()) == 80
