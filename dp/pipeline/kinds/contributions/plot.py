"""The rows-per-unit release in ``report.html``: the published units per bin with their 95%
intervals, and per candidate ``max_rows_per_unit`` the shares of rows dropped and of units
over it, with the noise's ranges (from ``histogram.parquet`` and ``bounds.parquet``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import BAND, INK, WARN, label_inches, new_figure, to_svg
from dppub.dp.pipeline.html.sections import Section, frame_table
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.contributions.result import ContributionsResult

__all__ = ["contributions_plot"]


def contributions_plot(
    summary: ReleaseSummary, result: ContributionsResult, folder: Path
) -> Section:
    """See the module docstring."""
    histogram = pd.read_parquet(folder / summary.name / "histogram.parquet")
    bounds = pd.read_parquet(folder / summary.name / "bounds.parquet")
    labels = [str(b) for b in histogram["bin"]]
    bottom = 0.55 + 0.5 * label_inches(labels)
    fig = new_figure(7.0, 2.4 + bottom, left=0.9, bottom=bottom)
    ax = fig.subplots()
    x = np.arange(len(histogram), dtype=float)
    ax.bar(x, histogram["units"].to_numpy(float), color=INK, alpha=0.8, width=0.8)
    lo, hi = histogram["ci_low"].to_numpy(float), histogram["ci_high"].to_numpy(float)
    ax.vlines(x, lo, hi, colors="black", linewidth=0.9)
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_xlabel("rows")
    ax.set_ylabel("units")
    ax.set_title(f"{summary.name}: {result.column}s by their number of rows")
    first = to_svg(fig, key=f"{summary.name}-histogram")

    fig = new_figure(7.0, 3.0, left=0.9)
    ax = fig.subplots()
    b = bounds["max_rows_per_unit"].to_numpy(float)
    for column, colour, name in (
        ("rows_dropped", INK, "rows dropped"),
        ("units_over", WARN, "units with more rows"),
    ):
        values = 100 * bounds[column].to_numpy(float)
        low = 100 * bounds[f"{column}_low"].to_numpy(float)
        high = 100 * bounds[f"{column}_high"].to_numpy(float)
        ax.fill_between(
            b, low, high, color=BAND if colour == INK else colour, alpha=0.35, step=None
        )
        ax.plot(b, values, "o-", color=colour, label=name, markersize=4)
    ax.set_xscale("log")
    ax.set_xticks(b, [str(int(v)) for v in b])
    ax.minorticks_off()
    ax.set_xlabel("max_rows_per_unit")
    ax.set_ylabel("% (95% noise range)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right")
    ax.set_title("what each candidate bound would drop, from the published counts")
    second = to_svg(fig, key=f"{summary.name}-bounds")
    lower = (
        " Some units have cap rows or more: counted at cap, so the rows dropped are a lower bound."
        if result.rows_dropped_is_lower_bound
        else ""
    )
    captions = (
        f"Units per bin of their number of rows (Laplace noise of scale {result.noise_scale:.3g}, "
        "each unit in exactly one bin); whiskers: each count's published 95% interval, "
        "`ci_low` to `ci_high`.",
        "For each candidate `max_rows_per_unit` (a bin's upper end), the share of rows it would "
        "drop and of units with more rows, computed from the published counts only "
        "(post-processing: each bin's units at its midpoint); bands: the noise's 95% range."
        + lower,
    )
    table = frame_table(
        bounds,
        caption="Candidate bounds",
        columns=[
            "max_rows_per_unit",
            "units_over",
            "units_over_low",
            "units_over_high",
            "rows_dropped",
            "rows_dropped_low",
            "rows_dropped_high",
        ],
    )
    counts = frame_table(
        histogram,
        caption="Released histogram",
        columns=["bin", "units", "std_error", "ci_low", "ci_high"],
    )
    return Section(figures=(first, second), captions=captions, tables=(counts, table))
