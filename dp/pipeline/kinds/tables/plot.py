"""Plots of a statistical table: per measure, its groups with their published intervals; a
heatmap with its numbers and margins for a table of two keys.

Reads ``answers.parquet`` (one column per key, ``*`` where a margin sums a key out,
``measure``, ``answer``, ``ci_low``, ``ci_high``) and, for the numbers written in a heatmap's
cells, ``answers.csv`` (the same values with the digits they are published with).

What each figure draws is what its caption says it draws:

- counts, sums and means: a bar per group and, where the row publishes one, a whisker from its
  ``ci_low`` to its ``ci_high`` exactly (never clipped to the bar's top);
- quantiles: a point per group (a quantile is a value, not an amount from zero) with the same
  whisker where an interval is published. A quantile drawn by the exponential mechanism has no
  value interval (its bound is in ranks: ``rank_error_95`` in ``release.json``): the caption
  says so and gives the bound, the point is drawn hollow;
- two keys: the first key down, the second across, each cell's published value written in it,
  and with ``margins: true`` the published ``Total`` row and column (written, not coloured, so
  the colour scale is the cells').
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import INK, MUTED, label_inches, new_figure, to_svg
from dppub.dp.pipeline.html.sections import INTERVAL_COLUMNS, Section, frame_table
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.tables.result import JointResult, TableResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["TOTAL", "heatmap_grid", "measure_figure", "table_plot"]

_MAX_MEASURES = 6
_MAX_BARS = 60
_MAX_WRITTEN = 400
"""Cells of a heatmap up to which each one's number is written in it."""
TOTAL = "Total"
"""A margin's label in a heatmap (``*`` in the published files)."""


def _has_interval(rows: pd.DataFrame) -> np.ndarray:
    lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    return np.asarray(np.isfinite(lo) & np.isfinite(hi), dtype=bool)


def _intervals(ax: Axes, x: np.ndarray, rows: pd.DataFrame) -> int:
    """Whiskers from each row's published ``ci_low`` to its ``ci_high``; how many."""
    shown = _has_interval(rows)
    if shown.any():
        lo, hi = rows["ci_low"].to_numpy(float)[shown], rows["ci_high"].to_numpy(float)[shown]
        ax.vlines(x[shown], lo, hi, colors="black", linewidth=0.9)
        ax.plot(x[shown], lo, "_", x[shown], hi, "_", color="black", markersize=5)
    return int(shown.sum())


def _rank_bound(result: TableResult, measure: str) -> float | None:
    """The 95% rank bound ``release.json`` states for a quantile measure's column, if any."""
    column = measure.removeprefix("quantile(").split(",")[0].strip()
    fact = result.components.get(f"cdf({column})")
    return None if fact is None else fact.rank_error_95


def _caption(measure: str, keys: list[str], drawn: int, rows: int, rank: float | None) -> str:
    what = "points" if measure.startswith("quantile(") else "bars"
    text = f"`{measure}` by {', '.join(keys)} ({what})."
    if drawn:
        some = "" if drawn == rows else f" ({drawn} of {rows} answers)"
        text += (
            f" Whiskers{some}: each answer's published 95% interval, `ci_low` to `ci_high`, "
            "which covers the noise only."
        )
    if drawn < rows:
        text += f" {'These' if drawn == 0 else 'The other'} answers have no published interval"
        if measure.startswith("quantile("):
            text += (
                " (hollow points): drawn by the exponential mechanism, whose error bound is in "
                "ranks, not values"
            )
            if rank is not None:
                text += f": within {rank:.3g} rows of the group's own rank, with probability 95%"
        text += "."
    return text


def measure_figure(
    name: str, measure: str, rows: pd.DataFrame, keys: list[str], result: TableResult
) -> tuple[Figure, str]:
    """One measure over the groups (bars, or points for a quantile) with the published
    intervals, and its caption."""
    labels = [" / ".join(map(str, r)) for r in rows[keys].itertuples(index=False)]
    bottom = 0.55 + 0.5 * label_inches(labels)
    # a rotated first label reaches left of its tick by about 0.87 of its length
    left = max(0.9, 0.87 * label_inches(labels[:1]) - 0.2)
    fig = new_figure(7.0, 2.4 + bottom, left=left, bottom=bottom)
    ax = fig.subplots()
    x = np.arange(len(rows), dtype=float)
    mid = rows["answer"].to_numpy(float)
    if measure.startswith("quantile("):
        shown = _has_interval(rows)
        ax.plot(x[shown], mid[shown], "o", color=INK, markersize=5)
        ax.plot(x[~shown], mid[~shown], "o", mfc="white", mec=INK, markersize=5)
    else:
        ax.bar(x, np.nan_to_num(mid), color=INK, alpha=0.8, width=0.8)
    drawn = _intervals(ax, x, rows)
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.set_title(f"{name}: {measure}")
    return fig, _caption(measure, keys, drawn, len(rows), _rank_bound(result, measure))


def _published_text(folder: Path, name: str, answers: pd.DataFrame) -> pd.Series:
    """Each answer as ``answers.csv`` publishes it (its digits), aligned with ``answers``;
    formatted here if the CSV is not there or does not line up."""
    fallback = pd.Series(
        ["" if not np.isfinite(v) else f"{v:.6g}" for v in answers["answer"].to_numpy(float)],
        index=answers.index,
    )
    path = folder / name / "answers.csv"
    if not path.is_file():
        return fallback
    text = pd.read_csv(path, dtype=str, keep_default_na=False)
    same = [c for c in answers.columns if c in text.columns and answers[c].dtype == object]
    if len(text) != len(answers) or "answer" not in text.columns:
        return fallback
    if any((text[c].to_numpy() != answers[c].astype(str).to_numpy()).any() for c in same):
        return fallback
    return pd.Series(text["answer"].to_numpy(), index=answers.index)


def heatmap_grid(
    rows: pd.DataFrame, keys: list[str], text: pd.Series
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One measure's rows (cells and margins) as grids: the first key down, the second across,
    in their published order, a margin's ``*`` as :data:`TOTAL` (last); the values (NaN where
    none is published) and their published text."""
    down, across = keys
    labels = rows[[down, across]].astype(str).replace("*", TOTAL)
    order = [
        [v for v in pd.unique(labels[k]) if v != TOTAL]
        + ([TOTAL] if (labels[k] == TOTAL).any() else [])
        for k in (down, across)
    ]
    frame = labels.assign(
        value=rows["answer"].to_numpy(float), text=text.loc[rows.index].to_numpy()
    )
    values = frame.pivot_table(
        index=down, columns=across, values="value", aggfunc="first", dropna=False
    )
    words = frame.pivot(index=down, columns=across, values="text")
    values = values.reindex(index=order[0], columns=order[1])
    words = words.reindex(index=order[0], columns=order[1]).fillna("")
    return values, words


def _heatmap(
    name: str, measure: str, values: pd.DataFrame, words: pd.DataFrame, keys: list[str]
) -> Figure:
    from matplotlib.colors import Normalize

    ylab = [str(r) for r in values.index]
    xlab = [str(c) for c in values.columns]
    bottom = 0.55 + 0.5 * label_inches(xlab)
    # wide enough for every number at 7 points (a bold digit about 0.68 em), up to 12 inches
    longest = max((len(w) for w in words.to_numpy(str).ravel()), default=1)
    written = values.size <= _MAX_WRITTEN
    column = 0.68 * 7.0 / 72.0 * longest + 0.12 if written else 0.0
    width = float(np.clip(label_inches(ylab) + 1.9 + len(xlab) * column, 7.0, 12.0))
    fig = new_figure(
        width,
        max(1.6, 0.3 * len(ylab)) + bottom + 0.35,
        left=label_inches(ylab) + 0.35,
        right=0.3,
        bottom=bottom,
    )
    ax = fig.subplots()
    grid = values.to_numpy(float)
    margin = np.zeros(grid.shape, dtype=bool)
    if ylab[-1] == TOTAL:
        margin[-1, :] = True
    if xlab[-1] == TOTAL:
        margin[:, -1] = True
    cells = np.ma.masked_array(grid, mask=margin | ~np.isfinite(grid))
    finite = cells.compressed()
    norm = Normalize(*(finite.min(), finite.max()) if finite.size else (0.0, 1.0))
    image = ax.imshow(cells, aspect="auto", cmap="Blues", norm=norm, interpolation="nearest")
    fig.colorbar(image, ax=ax, label=measure)
    if margin.any():
        shade = np.ma.masked_array(np.ones(grid.shape), mask=~margin)
        ax.imshow(shade, aspect="auto", cmap="Greys", vmin=0.0, vmax=10.0, interpolation="nearest")
        if ylab[-1] == TOTAL:
            ax.axhline(len(ylab) - 1.5, color=MUTED, linewidth=1.0)
        if xlab[-1] == TOTAL:
            ax.axvline(len(xlab) - 1.5, color=MUTED, linewidth=1.0)
    if written:
        # a cell's width in points over its longest number
        cell = 72.0 * (width - label_inches(ylab) - 1.9) / len(xlab) - 6.0
        size = float(np.clip(cell / (0.68 * longest), 4.5, 8.0))
        for (i, j), word in np.ndenumerate(words.to_numpy(str)):
            dark = not margin[i, j] and np.isfinite(grid[i, j]) and norm(grid[i, j]) > 0.6
            ax.text(
                j,
                i,
                word or "–",
                ha="center",
                va="center",
                fontsize=size,
                color="white" if dark else "black",
                fontweight="bold" if margin[i, j] else "normal",
            )
    ax.set_xticks(range(len(xlab)), xlab, rotation=30, ha="right")
    ax.set_yticks(range(len(ylab)), ylab)
    ax.grid(False)
    ax.set_xlabel(keys[1])
    ax.set_ylabel(keys[0])
    ax.set_title(f"{name}: {measure}, {keys[0]} × {keys[1]}")
    return fig


def _heatmap_caption(
    measure: str, keys: list[str], values: pd.DataFrame, words: pd.DataFrame
) -> str:
    text = f"`{measure}` by {keys[0]} (down) and {keys[1]} (across); " + (
        "each cell's published value is written in it"
        if values.size <= _MAX_WRITTEN
        else f"more than {_MAX_WRITTEN} cells: their values are in the table, not written"
    )
    if TOTAL in values.index or TOTAL in values.columns:
        text += (
            f"; the {TOTAL} row and column are the published margins (shaded, outside the "
            "colour scale, which is the cells')"
        )
    if (words == "").to_numpy().any():
        text += "; – where no value is published (a withheld cell)"
    return text + ". Intervals are in the table below."


def table_plot(summary: ReleaseSummary, result: TableResult | JointResult, folder: Path) -> Section:
    """See the module docstring; a joint group's: each table's, from ``<group>/<table>/``."""
    if isinstance(result, TableResult):
        return _table_section(summary.name, result, folder)
    sections = [
        _table_section(f"{summary.name}/{t.name}", t.table, folder, f"Released table {t.name}")
        for t in result.tables
    ]
    return Section(
        figures=tuple(f for s in sections for f in s.figures),
        captions=tuple(c for s in sections for c in s.captions),
        tables=tuple(t for s in sections for t in s.tables),
    )


def _table_section(
    name: str, result: TableResult, folder: Path, title: str = "Released table"
) -> Section:
    """The section of the table published in ``folder / name``."""
    answers = pd.read_parquet(folder / name / "answers.parquet")
    keys = list(result.key_columns)
    margins = (answers[keys] == "*").any(axis=1)
    cells = answers[~margins]
    text = _published_text(folder, name, answers) if len(keys) == 2 else None
    figures: list[Any] = []
    captions: list[str] = []
    for measure in list(dict.fromkeys(cells["measure"]))[:_MAX_MEASURES]:
        key = f"{name.replace('/', '-')}-{measure}"
        quantile = str(measure).startswith("quantile(")
        if text is not None and result.dimensions == 2 and not quantile:
            values, words = heatmap_grid(answers[answers["measure"] == measure], keys, text)
            figures.append(
                to_svg(_heatmap(name, measure, values, words, keys), key=f"{key}-heatmap")
            )
            captions.append(_heatmap_caption(measure, keys, values, words))
            continue
        rows = cells[cells["measure"] == measure]
        if len(rows) <= _MAX_BARS:
            fig, caption = measure_figure(name, measure, rows, keys, result)
            figures.append(to_svg(fig, key=key))
            captions.append(caption)
    columns = [*keys, "measure", "answer", "std_error", *INTERVAL_COLUMNS]
    table = frame_table(answers, caption=title, columns=columns)
    return Section(figures=tuple(figures), captions=tuple(captions), tables=(table,))
