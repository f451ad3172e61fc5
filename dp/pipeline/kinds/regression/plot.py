"""A regression in ``report.html``: its coefficients as a forest plot.

Coefficients come from a published coefficient table (``feature``, ``coefficient`` and, when
published, ``std_error``, ``ci_low``, ``ci_high``; ``task`` for a trace regression) or else
from ``model.json`` (points without intervals).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import (
    INK,
    MUTED,
    PALETTE,
    label_inches,
    new_figure,
    to_svg,
)
from dppub.dp.pipeline.html.sections import (
    INTERVAL_COLUMNS,
    Section,
    find_table,
    frame_table,
    read_json,
)
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.regression.result import RegressionResult

__all__ = ["coefficient_frame", "regression_plot"]


def coefficient_frame(summary: ReleaseSummary, folder: Path) -> pd.DataFrame:
    """``[task,] feature, coefficient[, std_error, ci_low, ci_high]``: the published table, or
    the points of ``model.json``.

    Raises:
        ValueError: the release published neither.
    """
    table = find_table(folder, summary, ("feature", "coefficient"))
    if table is not None:
        return table
    model = read_json(folder, summary, "model.json")
    if model is None:
        raise ValueError("no coefficient table and no model.json")
    features = [str(f) for f in model["features"]]
    coefs = np.asarray(model["coefficients"], dtype=float)
    tasks = model.get("tasks")
    if tasks is not None:  # trace regression: one column of coefficients per task
        labels = [str(t) for t in tasks["labels"]]
        rows = [
            {"task": t, "feature": f, "coefficient": coefs[i, j]}
            for j, t in enumerate(labels)
            for i, f in enumerate(features)
        ]
        return pd.DataFrame(rows)
    frame = pd.DataFrame({"feature": features, "coefficient": coefs.reshape(-1)})
    if model.get("intercept") is not None:
        extra = pd.DataFrame({"feature": ["intercept"], "coefficient": [model["intercept"]]})
        frame = pd.concat([frame, extra], ignore_index=True)
    return frame


def _forest(ax: Any, rows: pd.DataFrame, names: list[str], colour: str) -> bool:
    y = np.arange(len(rows), dtype=float)[::-1]
    x = rows["coefficient"].to_numpy(float)
    # An objective-perturbation table has the interval columns, empty: no band to draw.
    banded = set(INTERVAL_COLUMNS) <= set(rows.columns) and bool(
        np.isfinite(rows["ci_low"].to_numpy(float)).any()
    )
    if banded:
        lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
        ax.hlines(y, lo, hi, color=colour, linewidth=1.6)
    ax.plot(x, y, "o", color=colour, markersize=5)
    ax.axvline(0.0, color=MUTED, linewidth=0.8, linestyle="--")
    ax.set_yticks(y, names)
    ax.locator_params(axis="x", nbins=5)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    return banded


def regression_plot(summary: ReleaseSummary, result: RegressionResult, folder: Path) -> Section:
    """A forest plot: one row per coefficient (per task and feature for a trace regression)."""
    frame = coefficient_frame(summary, folder)
    # A logistic functional-mechanism table names its intervals for what they cover (the Taylor
    # surrogate's minimiser): the table keeps those names, the plot draws them as a band.
    surrogate = "surrogate_ci_low" in frame.columns
    prefix = "surrogate_" if surrogate else ""
    columns = ["task", "feature", "coefficient", *(prefix + c for c in ("std_error", "ci_low"))]
    table = frame_table(frame, caption="Coefficients", columns=[*columns, prefix + "ci_high"])
    if surrogate:
        frame = frame.rename(columns=lambda c: c.removeprefix("surrogate_"))
    title = f"{summary.name}: coefficients of {result.target}"
    if "task" in frame.columns:  # small multiples: one panel per feature, tasks as rows
        features = list(pd.unique(frame["feature"]))
        tasks = list(pd.unique(frame["task"]))
        fig = new_figure(7.0, 0.3 * len(tasks) + 1.5, left=label_inches(tasks), top=0.65, gap=0.08)
        axes = np.atleast_1d(fig.subplots(1, len(features), sharey=True))
        banded = False
        for k, (ax, f) in enumerate(zip(axes, features, strict=True)):
            rows = frame[frame["feature"] == f]
            banded = _forest(ax, rows, [str(t) for t in rows["task"]], PALETTE[k % len(PALETTE)])
            ax.set_title(f)
        fig.suptitle(title)
    else:  # one row per coefficient, each on its own scale from 0 (a slope per year of age and
        # one per category can differ by orders of magnitude); the intercept stays in the table
        rows = frame[frame["feature"] != "intercept"]
        n = len(rows)
        fig = new_figure(
            7.0, 0.62 * n + 0.45, left=label_inches(rows["feature"]), bottom=0.3, top=0.35, gap=1.0
        )
        banded = False
        for i, ax in enumerate(np.atleast_1d(fig.subplots(n, 1))):
            row = rows.iloc[[i]]
            banded = _forest(ax, row, [str(row["feature"].iloc[0])], INK) or banded
        fig.suptitle(title, y=1.0 - 0.08 / fig.get_figheight(), va="top")
    caption = "Each point is a released coefficient" + (
        "; no interval was published for this model."
        if not banded
        else "; the line is its noise-only interval around the Taylor surrogate's minimiser, "
        "not an interval for the logistic regression's coefficients."
        if surrogate
        else "; the line is its published interval."
    )
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,), tables=(table,))
