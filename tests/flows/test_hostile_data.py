"""Hostile data folders through the real CLI (issue 29 items 1-2, issue 24 item 8): rows read
twice are refused before the budget; a file's storage types never decide the exit status.

The CLI runs in-process (typer's CliRunner), without Prefect (no Prefect API is configured).
"""

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from dppub.dp.ledger import Ledger
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(tmp: Path, data: Path, engine: str = "auto") -> tuple[Any, Path, Path]:
    """``dppub run`` of the demo's workloads over ``data``: (result, ledger, output folder)."""
    raw: dict[str, Any] = example("demo.yaml")
    for key in ("schedule", "anonymize", "regressions", "clustering"):
        raw.pop(key)  # the workloads read every column kind; the rest only costs time here
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["workers"] = 1  # engine dask: one worker process (each imports dppub)
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    ledger, out = tmp / "ledger.sqlite", tmp / "out"
    args = ["run", str(config), "--ledger", str(ledger), "--out", str(out), "--engine", engine]
    return CliRunner().invoke(cli.app, args), ledger, out


def _events(ledger: Path) -> list[tuple[object, ...]]:
    """The ledger's shape: each row's event, release, cost and state (no time, no run id; in
    a fixed order, as releases run in parallel)."""
    rows = Ledger(ledger).history()
    return sorted((str(r["event"]), str(r["release"]), r["epsilon"], r["state"]) for r in rows)


def _published(out: Path) -> list[Path]:
    return [p for p in (out / "census_demo").iterdir() if not p.name.startswith(".")]


def _split(frame: pd.DataFrame, folder: Path) -> Path:
    folder.mkdir()
    frame.iloc[: len(frame) // 2].to_parquet(folder / "a.parquet", index=False)
    frame.iloc[len(frame) // 2 :].to_parquet(folder / "b.parquet", index=False)
    return folder


LINKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "looping symlink": (lambda d: (d / "self").symlink_to("."), "must not loop"),
    "second link to a file": (
        lambda d: (d / "c.parquet").symlink_to(d / "a.parquet"),
        "are the same file",
    ),
}


@pytest.mark.parametrize("name", list(LINKS))
def test_a_folder_that_reads_rows_twice_is_refused_before_the_budget(
    tmp_path: Path, census_frame: pd.DataFrame, name: str
) -> None:
    # Old code read the 'self -> .' folder 41 times over (and a linked file twice) with noise
    # sized for one read: now one line, exit 2, nothing reserved, nothing published.
    link, message = LINKS[name]
    data = _split(census_frame, tmp_path / "data")
    link(data)
    result, ledger, out = _run(tmp_path, data)
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (out / "census_demo").exists()
    if ledger.exists():  # not even a reserve/abort pair
        with sqlite3.connect(ledger) as con:
            assert con.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0


ENGINES = ["memory", "stream", "dask"]


@pytest.mark.parametrize("engine", ENGINES)
def test_storage_types_never_decide_the_exit_status(
    tmp_path: Path, census_frame: pd.DataFrame, engine: str
) -> None:
    # 'age' stored as int64 in one file and as double in the other; neighbouring inputs put
    # 40.0, 40.5 or NaN in one record of the double file. Old code cast the double file to
    # int64 after the budget hold: 40.5 and NaN exited 2, 40.0 exited 0.
    shapes = {}
    for label, value in (("whole", 40.0), ("fraction", 40.5), ("nan", np.nan)):
        tmp = tmp_path / label
        tmp.mkdir()
        data = _split(census_frame, tmp / "data")
        doubles = census_frame.iloc[len(census_frame) // 2 :].astype({"age": "float64"})
        age = doubles.columns.get_loc("age")
        assert isinstance(age, int)  # one column of that name
        doubles.iloc[3, age] = value
        doubles.to_parquet(data / "b.parquet", index=False)
        assert pq.read_schema(data / "a.parquet").field("age").type == pa.int64()
        assert pq.read_schema(data / "b.parquet").field("age").type == pa.float64()
        result, ledger, out = _run(tmp, data, engine)
        assert result.exit_code == 0, (label, result.output)
        assert len(_published(out)) == 1
        shapes[label] = _events(ledger)
    assert shapes["whole"] == shapes["fraction"] == shapes["nan"], shapes
    assert [e[0] for e in shapes["whole"]].count("release") == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_a_first_file_with_a_null_typed_column_does_not_fail_the_scan(
    tmp_path: Path, census_frame: pd.DataFrame, engine: str
) -> None:
    # pandas writes a column of only None as Arrow's null type; old code took the first file's
    # types as the scan schema and failed on the next file ("Unsupported cast from double to
    # null") after the budget hold.
    data = _split(census_frame, tmp_path / "data")
    empty = census_frame.head(5).assign(hours=None, income=None)
    empty.to_parquet(data / "0.parquet", index=False)
    assert pq.read_schema(data / "0.parquet").field("hours").type == pa.null()
    result, ledger, out = _run(tmp_path, data, engine)
    assert result.exit_code == 0, result.output
    assert len(_published(out)) == 1
    assert [e[0] for e in _events(ledger)].count("release") == 3
