"""A synthetic table's utility in ``report.html``: its estimated error per workload marginal,
and beside it, when the run-level comparison (:mod:`dp.pipeline.comparisons`) hands it one, the
k-anonymous table of the same run on the same marginals.

The synthetic table's error is its release's bootstrap estimate (``utility.parquet``'s
``error``, :mod:`dp.synthetic.utility`). Where a measurement covers a marginal both tables also
get a check range from published files only: the normalized L1 distance of the table's marginal
to AIM's noisy measurement covering it, minus and plus the noise's expected L1 (the synthetic
table's in ``utility.parquet``; the k-anonymous table's computed here from its
``table.parquet``). A generalized or suppressed k-anonymous value that
is not one of the synthetic axis's labels counts as spread evenly over the axis: an analyst
cannot tell where it lies.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dppub.dp.pipeline.html.figures import INK, WARN, label_inches, new_figure, to_svg
from dppub.dp.pipeline.html.sections import Section, find_table, frame_table
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.synthetic.result import SyntheticResult

__all__ = ["k_anonymous_errors", "synthetic_plot"]

_BIAS = math.sqrt(2.0 / math.pi)
_SEP = " x "


def _axis_labels(measurements: pd.DataFrame) -> dict[str, list[str]]:
    """Each column's cell labels, in order, from its one-way measurement (round 0)."""
    first = measurements[measurements["round"] == 0]
    return {
        str(name): [str(c) for c in group["cell"]]
        for name, group in first.groupby("marginal", sort=False)
    }


def _table_marginal(
    table: pd.DataFrame, columns: list[str], labels: dict[str, list[str]]
) -> np.ndarray:
    """``table``'s counts on ``columns`` over the axes' labels; a value that is no label is
    spread evenly over its axis."""
    shape = [len(labels[c]) for c in columns]
    out = np.zeros(shape)
    index = {c: {v: i for i, v in enumerate(labels[c])} for c in columns}
    grouped = table[columns].astype(str).value_counts(sort=False)
    for values, count in grouped.items():
        vector = np.asarray(float(count))
        for c, v in zip(columns, values if isinstance(values, tuple) else (values,), strict=True):
            axis = np.zeros(len(labels[c]))
            if v in index[c]:
                axis[index[c][v]] = 1.0
            else:
                axis[:] = 1.0 / len(axis)
            vector = np.multiply.outer(vector, axis)
        out += vector
    return out.ravel()


def k_anonymous_errors(
    table: pd.DataFrame, utility: pd.DataFrame, measurements: pd.DataFrame, total: float
) -> tuple[list[float], list[float]]:
    """The k-anonymous table's normalized L1 error range on each marginal of ``utility``,
    against the same noisy measurement as the synthetic table's and in the same way
    (:func:`dp.pipeline.kinds.synthetic.error_estimates.utility_frame`), rescaled to ``total``
    rows; NaN where
    a column is missing from it or no measurement covers the marginal."""
    labels = _axis_labels(measurements)
    rows = max(len(table), 1)
    scale = max(total, 1.0)
    low: list[float] = []
    high: list[float] = []
    for marginal, source in zip(utility["marginal"], utility["covered_by"], strict=True):
        columns = str(marginal).split(_SEP)
        measured = str(source).split(_SEP)
        candidates = measurements[measurements["marginal"] == source]
        if not set(columns) <= set(table.columns) or candidates.empty:
            low.append(float("nan"))
            high.append(float("nan"))
            continue
        best = candidates[candidates["sigma"] == candidates["sigma"].min()]
        best = best[best["measurement"] == best["measurement"].min()]
        noisy = best["noisy_count"].to_numpy().reshape([len(labels[c]) for c in measured])
        drop = tuple(i for i, c in enumerate(measured) if c not in columns)
        kept = [c for c in measured if c in columns]
        onto = noisy.sum(axis=drop).transpose([kept.index(c) for c in columns]).ravel()
        noise = _BIAS * float(best["sigma"].iloc[0]) * math.sqrt(noisy.size / onto.size)
        noise *= onto.size
        counts = _table_marginal(table, columns, labels) * (total / rows)
        distance = float(np.abs(counts - onto).sum())
        low.append(max(distance - noise, 0.0) / scale)
        high.append((distance + noise) / scale)
    return low, high


def _ranges(ax: Any, y: np.ndarray, low: pd.Series, high: pd.Series, **style: Any) -> None:
    """One bar per marginal from its low to its high estimate."""
    ax.barh(y, (high - low).fillna(0.0), left=low.fillna(0.0), **style)


def synthetic_plot(
    summary: ReleaseSummary,
    result: SyntheticResult,
    folder: Path,
    k_anonymous: pd.DataFrame | None = None,
) -> Section:
    """Its error ranges per workload marginal; with ``k_anonymous`` (the run's k-anonymous
    table, given by :mod:`dp.pipeline.comparisons`), that table's beside them."""
    utility = find_table(folder, summary, ["marginal", "error", "check_low", "check_high"])
    measurements = find_table(folder, summary, ["marginal", "cell", "noisy_count", "sigma"])
    if utility is None or measurements is None:
        raise ValueError("no utility or measurements table")
    total = float(result.rows)
    frame = utility.copy()
    if k_anonymous is not None:
        k_low, k_high = k_anonymous_errors(k_anonymous, utility, measurements, total)
        frame["k_anonymous_low"], frame["k_anonymous_high"] = k_low, k_high
    names = [str(m) for m in frame["marginal"]]
    fig = new_figure(7.0, 0.8 + 0.22 * len(names), left=label_inches(names))
    ax = fig.subplots()
    y = np.arange(len(names), dtype=np.float64)
    height = 0.4 if k_anonymous is not None else 0.7
    _ranges(
        ax, y, frame["error_low"], frame["error_high"], height=height, color=INK, label="synthetic"
    )
    ax.plot(frame["error"], y, "|", color="white", markersize=8)
    if k_anonymous is not None:
        _ranges(
            ax,
            y + height,
            frame["k_anonymous_low"],
            frame["k_anonymous_high"],
            height=height,
            color=WARN,
            label="k-anonymous table (not DP)",
        )
        ax.legend(loc="lower right")
    ax.set_yticks(y + (height / 2 if k_anonymous is not None else 0.0), names)
    ax.invert_yaxis()
    ax.set_xlabel("normalized L1 error (0 exact, 2 disjoint)")
    ax.set_title("error per workload marginal, estimated from public values only")
    caption = (
        "Each bar spans the synthetic table's estimated normalized L1 error on a workload "
        "marginal, from public values only (never the data): a parametric bootstrap of AIM's "
        "noise through the model and of the sampling of the rows, from its refit warm-started "
        "to its refit from scratch; the tick is the estimate."
        + (
            " Beside it the run's k-anonymous table on the marginals a measurement covers: its "
            "distance to that noisy measurement, minus and plus the noise's expected L1 "
            "(generalized values spread evenly over the axis); no bar: no measurement covers "
            "the marginal."
            if k_anonymous is not None
            else ""
        )
    )
    columns = [
        "marginal",
        "cells",
        "error",
        "error_low",
        "error_high",
        "check_low",
        "check_high",
        "k_anonymous_low",
        "k_anonymous_high",
        "covered_by",
    ]
    table = frame_table(frame, caption="estimated error per workload marginal", columns=columns)
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,), tables=(table,))
