"""Task: read and validate the private table (the only task that retries)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from prefect import task

from dp.io import read_table
from dp.schema import TableSchema
from tasks._common import PRIVATE, retry_on_io_error, run_logger


@task(
    name="read-private-table",
    **{**PRIVATE, "retries": 2},
    retry_delay_seconds=1,
    retry_condition_fn=retry_on_io_error,
)
def read_private_table(path: Path, schema: TableSchema, columns: Sequence[str]) -> pd.DataFrame:
    """Read the declared ``columns`` once for every release: values outside declared bounds
    are clamped, a value a ``drop`` policy rejects is NA (each release drops its own
    incomplete rows); nothing is logged but the column count."""
    frame = read_table(path, schema, columns=columns, complete=False).frame
    run_logger().info("read %d declared column(s) from %s", len(columns), path.name)
    return frame
