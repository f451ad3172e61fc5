"""Plots of a statistical table: per measure, bars over the groups with their intervals; a
heatmap for a table of two keys.

Reads ``answers.parquet`` (one column per key, ``measure``, ``answer``, ``std_error``,
``ci_low``, ``ci_high``); margins (rows with a ``*`` key) are in the table below the plots,
not in the bars.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import INK, label_inches, new_figure, to_svg
from dppub.dp.pipeline.html.sections import INTERVAL_COLUMNS, Section, frame_table
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.tables.result import TableResult

__all__ = ["table_plot"]

_MAX_MEASURES = 6
_MAX_BARS = 60


def _bars(name: str, measure: str, rows: pd.DataFrame, labels: list[str]) -> Any:
    bottom = 0.55 + 0.5 * label_inches(labels)
    fig = new_figure(7.0, 2.4 + bottom, left=0.9, bottom=bottom)
    ax = fig.subplots()
    x = np.arange(len(rows), dtype=float)
    mid = rows["answer"].to_numpy(float)
    lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    ax.bar(x, mid, color=INK, alpha=0.8, width=0.8)
    err = np.vstack([np.maximum(mid - lo, 0.0), np.maximum(hi - mid, 0.0)])
    ax.errorbar(x, mid, yerr=err, fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.set_title(f"{name}: {measure}")
    return to_svg(fig, key=f"{name}-{measure}")


def _heatmap(name: str, measure: str, rows: pd.DataFrame, keys: list[str]) -> Any:
    grid = rows.pivot_table(index=keys[0], columns=keys[1], values="answer", aggfunc="sum")
    grid = grid.reindex(index=pd.unique(rows[keys[0]]), columns=pd.unique(rows[keys[1]]))
    ylab = [str(r) for r in grid.index]
    xlab = [str(c) for c in grid.columns]
    bottom = 0.55 + 0.5 * label_inches(xlab)
    fig = new_figure(
        7.0,
        max(1.6, 0.24 * len(ylab)) + bottom + 0.35,
        left=label_inches(ylab) + 0.35,
        right=0.3,
        bottom=bottom,
    )
    ax = fig.subplots()
    image = ax.imshow(grid.to_numpy(float), aspect="auto", cmap="Blues", interpolation="nearest")
    fig.colorbar(image, ax=ax, label=measure)
    ax.set_xticks(range(len(xlab)), xlab, rotation=30, ha="right")
    ax.set_yticks(range(len(ylab)), ylab)
    ax.grid(False)
    ax.set_xlabel(keys[1])
    ax.set_ylabel(keys[0])
    ax.set_title(f"{name}: {measure}, {keys[0]} × {keys[1]}")
    return to_svg(fig, key=f"{name}-{measure}-heatmap")


def table_plot(summary: ReleaseSummary, result: TableResult, folder: Path) -> Section:
    """See the module docstring."""
    answers = pd.read_parquet(folder / summary.name / "answers.parquet")
    keys = list(result.key_columns)
    cells = answers[~(answers[keys] == "*").any(axis=1)]
    figures: list[Any] = []
    captions: list[str] = []
    for measure in list(dict.fromkeys(cells["measure"]))[:_MAX_MEASURES]:
        rows = cells[cells["measure"] == measure]
        if len(keys) == 2 and result.dimensions == 2:
            figures.append(_heatmap(summary.name, measure, rows, keys))
            captions.append(f"`{measure}` by {keys[0]} and {keys[1]}; intervals in the table.")
        elif len(rows) <= _MAX_BARS:
            labels = [" / ".join(map(str, r)) for r in rows[keys].itertuples(index=False)]
            figures.append(_bars(summary.name, measure, rows, labels))
            captions.append(
                f"`{measure}` by {', '.join(keys)}; the whiskers are each answer's published "
                "95% interval (`ci_low` to `ci_high`), which covers the noise only."
            )
    columns = [*keys, "measure", "answer", "std_error", *INTERVAL_COLUMNS]
    table = frame_table(answers, caption="Released table", columns=columns)
    return Section(figures=tuple(figures), captions=tuple(captions), tables=(table,))
