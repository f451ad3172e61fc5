"""One release's section of ``report.html``: its plots and tables, from its published files.

A section reads only what the run publishes: the release's files (``answers.parquet``,
``estimate.parquet``, ``model.json``, ``metrics.json``, coefficient and cluster tables) and its
summary. Optional columns -- a query ``label``, ``std_error``, ``ci_low``/``ci_high`` -- are
shown when a release carries them; without them the same plots are drawn without bands.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from dppub.dp.pipeline.kinds.base import ReleaseSummary

__all__ = [
    "INTERVAL_COLUMNS",
    "MAX_TABLE_ROWS",
    "Section",
    "Table",
    "find_table",
    "frame_table",
    "read_json",
    "release_section",
]

MAX_TABLE_ROWS = 200
"""Rows of a released table shown in the page (the file holds them all)."""
INTERVAL_COLUMNS = ("ci_low", "ci_high")


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    """A table shown under a release's plots."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    """Said under the table (e.g. how many rows the file holds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    """What the page shows for one release besides its summary line."""

    figures: tuple[Markup, ...] = ()
    captions: tuple[str, ...] = ()
    """One per figure: what it shows and what its band means."""
    tables: tuple[Table, ...] = ()
    notes: tuple[str, ...] = ()
    """Why something is not shown (a file missing, no interval published)."""


def read_json(folder: Path, summary: ReleaseSummary, name: str) -> dict[str, Any] | None:
    """A release's JSON file, or None if it did not publish one."""
    path = folder / summary.name / name
    if f"{summary.name}/{name}" not in summary.files or not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def find_table(
    folder: Path, summary: ReleaseSummary, columns: Iterable[str]
) -> pd.DataFrame | None:
    """The release's first Parquet or CSV file that has all of ``columns``, or None."""
    wanted = set(columns)
    for rel in summary.files:
        path = folder / rel
        if rel.endswith(".parquet"):
            import pyarrow.parquet as pq

            if wanted <= set(pq.read_schema(path).names):
                return pd.read_parquet(path)
        elif rel.endswith(".csv"):
            frame = pd.read_csv(path)
            if wanted <= set(frame.columns):
                return frame
    return None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def frame_table(frame: pd.DataFrame, *, caption: str, columns: Sequence[str]) -> Table:
    """The first :data:`MAX_TABLE_ROWS` rows of ``frame`` in the given columns (those it has)."""
    cols = [c for c in columns if c in frame.columns]
    shown = frame[cols].head(MAX_TABLE_ROWS)
    note = ""
    if len(frame) > len(shown):
        note = f"The first {len(shown)} of {len(frame)} rows; the file holds them all."
    rows = tuple(tuple(_cell(v) for v in r) for r in shown.itertuples(index=False))
    return Table(caption=caption, headers=tuple(cols), rows=rows, note=note)


def release_section(
    plot: Callable[[ReleaseSummary, Path], Section], summary: ReleaseSummary, folder: Path
) -> Section:
    """The plots and tables of one release published in ``folder`` (the run folder), drawn
    by its kind's ``plot``.

    A plot that fails gets a note instead: the report is written before the run is
    published, and a run that drew its noise must not lose its publication (and be charged
    for nothing) over a figure.
    """
    try:
        return plot(summary, folder)
    except Exception as exc:  # any failure of a figure: see the docstring
        return Section(notes=(f"No plot for this release ({type(exc).__name__}: {exc}).",))
