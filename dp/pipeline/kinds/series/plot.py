"""A series' figure in ``report.html`` (and the README's): each period's newest estimate of its
first figure block, with 95% intervals, one line per measure and group."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from dppub.dp.pipeline.html.figures import PALETTE, new_figure, to_svg
from dppub.dp.pipeline.html.sections import Section
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.series.publishing import HISTORY, read_figures
from dppub.dp.pipeline.kinds.series.result import SeriesResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["series_figure", "series_plot"]


def series_figure(figures: pd.DataFrame, title: str) -> Figure:
    """Every period's newest estimate of the first block and measure, one line per group,
    its 95% interval as a band."""
    block, measure = str(figures["figure"].iloc[0]), str(figures["measure"].iloc[0])
    chosen = figures[(figures["figure"] == block) & (figures["measure"] == measure)]
    chosen = chosen.drop_duplicates(["period", "group"], keep="last")
    fig = new_figure(7.0, 3.4, left=0.8)
    ax = fig.subplots()
    for i, (group, part) in enumerate(chosen.groupby("group", sort=False)):
        part = part.sort_values("period")
        x = list(range(len(part)))
        colour = PALETTE[i % len(PALETTE)]
        ax.plot(x, part["value"], "o-", ms=3, color=colour, label=str(group))
        ax.fill_between(x, part["ci_low"], part["ci_high"], color=colour, alpha=0.2)
        ax.set_xticks(x, list(part["period"]), rotation=60, fontsize=7)
    ax.set_title(f"{title}: {measure}, {block.replace('_', ' ')}, 95% intervals", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return fig


def series_plot(summary: ReleaseSummary, result: SeriesResult, folder: Path) -> Section:
    """The release's section: the figure, from its published ``figures.csv``."""
    path = folder / summary.name / HISTORY
    if not path.is_file():
        return Section(notes=(f"no {HISTORY} published",))
    figures = read_figures(path)
    if figures.empty:
        return Section(notes=("no figure published",))
    caption = (
        "Each period's published estimate (the newest, with revisions) of the first figure and "
        "measure the config lists, by group; the band is its 95% interval."
    )
    fig = series_figure(figures, summary.name)
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,))
