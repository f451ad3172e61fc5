"""Plots of a workload release: CDFs and ranges with their interval bands, marginals as heatmaps.

Reads ``answers.parquet`` (``query``, ``answer``, and when published ``label``, ``std_error``,
``ci_low``, ``ci_high``) and ``estimate.parquet`` (one column per axis, then ``estimate``). The
workload's shape comes from the release's typed result (``workload``) or, where it names none,
from its files: the number of axes, the number of queries and the query labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import BAND, INK, label_inches, new_figure, to_svg
from dppub.dp.pipeline.html.sections import INTERVAL_COLUMNS, Section, frame_table
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.workload.result import WorkloadResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["workload_plot", "workload_shape"]

_MAX_TICKS = 12
_MAX_CATEGORY_TICKS = 40
"""A heatmap labels every cell up to this many (its axes are categories and bands)."""
_ANNOTATE_CELLS = 60


def workload_shape(declared: str | None, answers: pd.DataFrame, cells: int, axes: int) -> str:
    """``prefix``, ``all_range``, ``total``, ``marginals`` or ``identity``: ``declared`` if
    given, else what the files show.

    >>> workload_shape(None, pd.DataFrame({"answer": [1.0] * 6}), 3, 1)
    'all_range'
    >>> workload_shape(None, pd.DataFrame({"label": ["age <= 17", "age <= 18"]}), 2, 1)
    'prefix'
    """
    if declared:
        return declared
    q = len(answers)
    if q == 1 and cells > 1:
        return "total"
    if axes == 1 and cells > 1 and q == cells * (cells + 1) // 2:
        return "all_range"
    labelled = axes == 1 and "label" in answers.columns and q > 1
    if labelled and "<" in str(answers["label"].iloc[-1]):  # ``age <= 90``: an upper bound
        return "prefix"
    return "marginals" if axes > 1 else "identity"


def _ticks(labels: Sequence[str], most: int = _MAX_TICKS) -> tuple[list[int], list[str], bool]:
    """At most ``most`` cell labels, evenly spaced (74 ages would overprint), and whether
    they are long enough to be turned."""
    step = max(1, int(np.ceil(len(labels) / most)))
    ticks = list(range(0, len(labels), step))
    shown = [labels[i] for i in ticks]
    return ticks, shown, max(map(len, shown), default=0) > 4


def _bottom(labels: Sequence[str], most: int = _MAX_TICKS) -> float:
    """The bottom margin (inches) for cell labels under an axis, and its title."""
    _, shown, turned = _ticks(labels, most)
    return 0.55 + (0.5 * label_inches(shown) if turned else 0.0)


def _cell_ticks(
    ax: Axes, labels: Sequence[str], *, axis: str = "x", most: int = _MAX_TICKS
) -> None:
    ticks, shown, turned = _ticks(labels, most)
    if axis == "x":
        # A turned label ends at its tick (anchored there, not its box's corner), so it sits
        # under its own column.
        ax.set_xticks(ticks, shown)
        if turned:
            ax.tick_params(axis="x", labelrotation=30)
            for label in ax.get_xticklabels():
                label.set_horizontalalignment("right")
                label.set_rotation_mode("anchor")
    else:
        ax.set_yticks(ticks, shown)


def _band(ax: Axes, x: np.ndarray, rows: pd.DataFrame, *, bars: bool) -> bool:
    """Draw the published intervals of ``rows`` at ``x``; False if there are none."""
    if not set(INTERVAL_COLUMNS) <= set(rows.columns):
        return False
    lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    if bars:
        mid = rows["answer"].to_numpy(float)
        err = np.vstack([np.maximum(mid - lo, 0.0), np.maximum(hi - mid, 0.0)])
        ax.errorbar(x, mid, yerr=err, fmt="none", ecolor=INK, elinewidth=0.8, capsize=2)
    else:
        ax.fill_between(x, lo, hi, color=BAND, alpha=0.6, linewidth=0, label="interval")
    return True


def _series(ax: Axes, rows: pd.DataFrame, labels: Sequence[str], *, bars: bool) -> bool:
    x = np.arange(len(rows), dtype=float)
    banded = _band(ax, x, rows, bars=bars)
    if bars:  # one outline for all cells: a patch per bar costs ~10 ms each to lay out
        edges = np.arange(len(rows) + 1, dtype=float) - 0.5
        ax.stairs(rows["answer"].to_numpy(float), edges, fill=True, color=INK, alpha=0.8)
    else:
        ax.plot(x, rows["answer"].to_numpy(float), color=INK, linewidth=1.4, label="answer")
    _cell_ticks(ax, labels)
    ax.set_xlim(-0.5, len(rows) - 0.5)
    return banded


def _band_caption(banded: bool) -> str:
    if banded:
        return " The band is each answer's published interval (`ci_low` to `ci_high`)."
    return " No intervals were published with these answers."


def _one_axis(
    summary: ReleaseSummary, shape: str, answers: pd.DataFrame, labels: list[str], column: str
) -> tuple[list[Any], list[str]]:
    """Figures and captions for a workload over one attribute."""
    name = summary.name
    if shape == "all_range":
        n = len(labels)
        starts = [i * n - i * (i - 1) // 2 for i in range(n)]  # rows (i, i): ranges by i, then j
        fig = new_figure(7.0, 4.6 + _bottom(labels), left=0.9, bottom=_bottom(labels), gap=0.3)
        top, bottom = fig.subplots(2, 1, sharex=True)
        banded = _series(top, answers.iloc[:n], labels, bars=False)
        top.set_title(f"{name}: ranges from the first cell ({column} up to x), cumulative count")
        _series(bottom, answers.iloc[starts], labels, bars=True)
        bottom.set_title(f"{name}: one-cell ranges ({column} = x)")
        bottom.set_xlabel(column)
        text = (
            f"{len(answers)} range queries over {n} cells of `{column}`: the ranges that start at "
            "the first cell (top) and the one-cell ranges (bottom); all of them are in "
            "`answers.parquet`." + _band_caption(banded)
        )
        return [to_svg(fig, key=name)], [text]
    cdf = shape == "prefix"
    if cdf and set(INTERVAL_COLUMNS) <= set(answers.columns):
        return _cdf(summary, answers, labels, column)
    fig = new_figure(7.0, 2.6 + _bottom(labels), left=0.9, bottom=_bottom(labels))
    ax = fig.subplots()
    banded = _series(ax, answers, labels, bars=not cdf)
    ax.set_xlabel(column)
    ax.set_ylabel("count up to x" if cdf else "count")
    ax.set_title(f"{name}: {'cumulative counts (CDF)' if cdf else 'counts'} by {column}")
    text = (
        ("Released cumulative counts of " if cdf else "Released counts of ")
        + f"`{column}`."
        + _band_caption(banded)
    )
    return [to_svg(fig, key=name)], [text]


def _cdf(
    summary: ReleaseSummary, answers: pd.DataFrame, labels: list[str], column: str
) -> tuple[list[Any], list[str]]:
    """A CDF with intervals: the counts reach the table's size, where a band of a few dozen
    is thinner than the line, so a second panel draws each interval around its answer."""
    name, bottom = summary.name, _bottom(labels)
    fig = new_figure(7.0, 3.9 + bottom, left=0.9, bottom=bottom, gap=0.25)
    top, below = fig.subplots(2, 1, sharex=True, height_ratios=(2.2, 1.0))
    _series(top, answers, labels, bars=False)
    top.set_ylabel("count up to x")
    top.set_title(f"{name}: cumulative counts (CDF) by {column}")
    x = np.arange(len(answers), dtype=float)
    mid = answers["answer"].to_numpy(float)
    lo, hi = answers["ci_low"].to_numpy(float) - mid, answers["ci_high"].to_numpy(float) - mid
    below.fill_between(x, lo, hi, color=BAND, alpha=0.8, linewidth=0)
    below.axhline(0.0, color=INK, linewidth=1.0)
    below.set_ylabel("interval − answer")
    _cell_ticks(below, labels)
    below.set_xlabel(column)
    text = (
        f"Released cumulative counts of `{column}` (top). The band is each answer's published "
        "interval (`ci_low` to `ci_high`): drawn on the counts (top, thinner than the line "
        "where the counts are large) and around each answer (bottom, on its own scale)."
    )
    return [to_svg(fig, key=name)], [text]


def _heatmap(summary: ReleaseSummary, estimate: pd.DataFrame, axes: list[str]) -> Any:
    """The reconstructed histogram over the first two axes (summed over any others)."""
    rows, cols = axes[0], axes[1]
    grid = estimate.pivot_table(index=rows, columns=cols, values="estimate", aggfunc="sum")
    grid = grid.reindex(index=pd.unique(estimate[rows]), columns=pd.unique(estimate[cols]))
    values = grid.to_numpy(float)
    x_labels, y_labels = [str(c) for c in grid.columns], [str(r) for r in grid.index]
    most = _MAX_CATEGORY_TICKS
    bottom = _bottom(x_labels, most)
    fig = new_figure(
        max(7.0, 0.3 * len(x_labels) + label_inches(y_labels) + 2.0),  # room for every label
        max(1.6, 0.24 * min(len(y_labels), most)) + bottom + 0.35,
        left=label_inches(y_labels) + 0.35,
        right=0.3,  # the colour bar takes its room from the axes
        bottom=bottom,
    )
    ax = fig.subplots()
    image = ax.imshow(values, aspect="auto", cmap="Blues", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="estimated count")
    _cell_ticks(ax, x_labels, most=most)
    _cell_ticks(ax, y_labels, axis="y", most=most)
    ax.grid(False)
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    ax.set_title(f"{summary.name}: estimated counts, {rows} × {cols}")
    if values.size <= _ANNOTATE_CELLS:
        middle = np.nanmax(values) / 2 if np.isfinite(values).any() else 0.0
        for (i, j), v in np.ndenumerate(values):
            colour = "white" if v > middle else "black"
            ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7, color=colour)
    return to_svg(fig, key=summary.name)


def workload_plot(summary: ReleaseSummary, result: WorkloadResult, folder: Path) -> Section:
    """See the module docstring."""
    base = folder / summary.name
    answers = pd.read_parquet(base / "answers.parquet")
    estimate = pd.read_parquet(base / "estimate.parquet")
    axes = [str(c) for c in estimate.columns[: estimate.columns.get_loc("estimate")]]
    shape = workload_shape(result.workload, answers, len(estimate), len(axes))
    figures: list[Any] = []
    captions: list[str] = []
    if len(axes) >= 2:
        figures.append(_heatmap(summary, estimate, axes))
        captions.append(
            "The reconstructed histogram (`estimate.parquet`) as a heatmap"
            + (f", summed over {', '.join(axes[2:])}" if len(axes) > 2 else "")
            + "; the released answers, with their intervals when published, are below."
        )
    elif shape != "total":
        labels = [str(v) for v in estimate[axes[0]]]
        figures, captions = _one_axis(summary, shape, answers, labels, axes[0])
    columns = ["query", "label", "answer", "std_error", *INTERVAL_COLUMNS]
    table = frame_table(answers, caption="Released answers", columns=columns)
    return Section(figures=tuple(figures), captions=tuple(captions), tables=(table,))
