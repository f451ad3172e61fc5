"""The published folder keeps its shape: the demo, tables and synthetic examples published
in-process on the sample data have the same files and, per file, the same fields as the
snapshot in ``snapshots/`` (the values, noisy, may differ; the structure may not), and the
ledger the same rows in the same columns.

A deliberate change of the published format regenerates the snapshots:
``DPPUB_SNAPSHOT=write python -m pytest -n 0 tests/dp/pipeline/test_published_shape.py``.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.dp.pipeline.published_run import demo_config, publish_in_process
from tests.examples import example

SNAPSHOTS = Path(__file__).parent / "snapshots"
_RUN = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")
_DIGITS = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")
_LEDGER = ("event", "release", "kind", "mechanism", "epsilon", "delta", "sensitivity", "is_dp")

Tree = dict[str, "Tree"] | list["Tree"] | str


def _tree(value: object) -> Tree:
    """The key tree of a JSON value: objects by key, a list as the union of its items' trees."""
    if isinstance(value, dict):
        return {str(k): _tree(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        merged: dict[str, Tree] = {}
        kinds = set()
        for item in value:
            tree = _tree(item)
            if isinstance(tree, dict):
                merged.update(tree)
                kinds.add("object")
            else:
                kinds.add("list" if isinstance(tree, list) else "value")
        items: list[Tree] = [dict(sorted(merged.items()))] if merged else []
        return [*items, *sorted(kinds - {"object"})]
    return "value"


def _headings(text: str, pattern: str) -> list[str]:
    return [_DIGITS.sub("#", _RUN.sub("RUN", m)) for m in re.findall(pattern, text, re.M)]


def _file_shape(path: Path) -> object:
    if path.suffix == ".json":
        return _tree(json.loads(path.read_text()))
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return next(csv.reader(f), [])
    if path.suffix == ".parquet":
        return list(pq.read_schema(path).names)
    if path.suffix == ".md":
        return _headings(path.read_text(), r"^(#+ .*)$")
    if path.suffix == ".html":
        return _headings(path.read_text(), r"<h[1-4][^>]*>(.*?)</h[1-4]>")
    return "file"


def _ledger_rows(ledger: Path) -> list[list[object]]:
    with sqlite3.connect(ledger) as con:
        columns = [row[1] for row in con.execute("PRAGMA table_info(entries)")]
        rows = con.execute(f"SELECT {', '.join(_LEDGER)} FROM entries ORDER BY seq").fetchall()
    return [columns, *([list(r) for r in rows])]


def shape(folder: Path, ledger: Path) -> dict[str, object]:
    """The structure of a published folder and its ledger, free of noisy values."""
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return {
        "files": {name: _file_shape(folder / name) for name in files},
        "ledger": _ledger_rows(ledger),
    }


def _example(directory: Path, data: Path, name: str) -> Path:
    if name == "demo.yaml":
        return demo_config(directory, data)
    raw = example(name)
    raw["dataset"]["path"] = str(data)
    raw.pop("schedule", None)
    path = directory / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow  # the demo ~15 s, tables ~5 s, synthetic ~30 s (XLA compiles)
@pytest.mark.parametrize("name", ["demo.yaml", "tables.yaml", "synthetic.yaml"])
def test_the_published_folder_keeps_its_files_and_fields(
    tmp_path: Path, census_small: Path, name: str
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    published = publish_in_process(_example(tmp_path, census_small, name), ledger, tmp_path / "out")
    got = json.loads(json.dumps(shape(published.folder, ledger)))
    snapshot = SNAPSHOTS / f"{name.removesuffix('.yaml')}.json"
    if os.environ.get("DPPUB_SNAPSHOT") == "write":
        snapshot.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(snapshot.read_text())
