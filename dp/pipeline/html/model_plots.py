"""Plots of model releases: regression coefficients as a forest plot, k-means centres, and the
k-anonymous table's equivalence classes and suppression.

Coefficients come from a published coefficient table (``feature``, ``coefficient`` and, when
published, ``std_error``, ``ci_low``, ``ci_high``; ``task`` for a trace regression) or else
from ``model.json`` (points without intervals). Cluster sizes come from a published cluster
table (``cluster``, ``size``...) when there is one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import (
    INK,
    MUTED,
    PALETTE,
    WARN,
    label_inches,
    new_figure,
    to_svg,
)
from dppub.dp.pipeline.html.sections import (
    INTERVAL_COLUMNS,
    Section,
    Table,
    find_table,
    frame_table,
    read_json,
)
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.regression import RegressionResult

__all__ = ["clustering_plot", "coefficient_frame", "k_anonymity_plot", "regression_plot"]


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


def clustering_plot(summary: ReleaseSummary, folder: Path) -> Section:
    """The centres inside the declared feature box (the first two features; more as lines)."""
    model = read_json(folder, summary, "model.json")
    if model is None:
        raise ValueError("no model.json")
    features = [str(f) for f in model["features"]]
    centres = np.asarray(model["centres"], dtype=float).reshape(len(model["centres"]), -1)
    box = model.get("feature_bounds") or {}
    lower = np.asarray(box.get("lower", centres.min(axis=0)), dtype=float)
    upper = np.asarray(box.get("upper", centres.max(axis=0)), dtype=float)
    sizes = find_table(folder, summary, ("cluster", "size"))
    n = sizes["size"].to_numpy(float) if sizes is not None else None
    fig = new_figure(7.0, 3.4, left=0.8)
    ax = fig.subplots()
    if len(features) == 2:
        area = 40.0 if n is None else 40.0 + 400.0 * np.clip(n, 0, None) / max(n.max(), 1.0)
        ax.scatter(centres[:, 0], centres[:, 1], s=area, c=PALETTE[: len(centres)], alpha=0.8)
        for i, (x, y) in enumerate(centres):
            tag = f"centre {i}" + ("" if n is None else f" (≈{n[i]:.0f})")
            ax.annotate(tag, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
        ax.set_xlim(lower[0], upper[0])
        ax.set_ylim(lower[1], upper[1])
        ax.set_xlabel(features[0])
        ax.set_ylabel(features[1])
    else:  # parallel coordinates, each feature scaled to its declared bounds
        scaled = (centres - lower) / np.where(upper > lower, upper - lower, 1.0)
        for i, row in enumerate(scaled):
            ax.plot(range(len(features)), row, "o-", color=PALETTE[i % len(PALETTE)])
        ax.set_xticks(range(len(features)), features)
        ax.set_ylim(0.0, 1.0)
        ax.set_ylabel("position within the declared bounds")
    ax.set_title(f"{summary.name}: {len(centres)} centres")
    caption = "The released centres within the declared bounds of the features" + (
        "; marker area follows the published noisy cluster size." if n is not None else "."
    )
    tables: tuple[Table, ...] = ()
    if sizes is not None:
        tables = (frame_table(sizes, caption="Clusters", columns=[str(c) for c in sizes.columns]),)
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,), tables=tables)


def _low_end(label: str) -> float:
    match = re.search(r"\d+", label)
    return float(match.group()) if match else float("inf")


def k_anonymity_plot(summary: ReleaseSummary, folder: Path) -> Section:
    """Equivalence-class sizes and suppressed records (``metrics.json``)."""
    metrics = read_json(folder, summary, "metrics.json")
    if metrics is None:
        raise ValueError("no metrics.json")
    histogram: dict[str, int] = metrics["class_size"]["histogram"]
    bins = sorted(histogram, key=_low_end)
    fig = new_figure(7.0, 2.8, left=0.75, gap=0.3)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    left.bar(bins, [histogram[b] for b in bins], color=INK)
    left.set_xlabel("records in the class")
    left.set_ylabel("equivalence classes")
    left.set_title(f"class sizes (k = {metrics['k']})")
    records, suppressed = int(metrics["records"]), int(metrics["suppressed"])
    limit = int(metrics.get("suppression_limit") or 0)
    right.barh([0], [suppressed], color=WARN, height=0.5, label="suppressed")
    right.axvline(limit, color=MUTED, linestyle="--", label=f"limit ({limit})")
    right.set_xlim(0, max(limit, suppressed, 1) * 1.15)
    right.set_ylim(-1, 1)
    right.set_yticks([])
    right.set_xlabel("records")
    right.set_title(f"suppressed: {suppressed} of {records} records")
    right.legend(loc="upper right")
    caption = (
        "How many equivalence classes of the released table have each size, and how many "
        "records were suppressed against the limit. A syntactic release: not differentially "
        "private."
    )
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,))
