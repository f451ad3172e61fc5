"""One run's noise and figures: measure the rows the periods since the last run close, then
publish each period's figures in turn (caught up), consistently with what was published.

Only public values leave here: the noisy measurements and the period values (the new
:class:`~dp.series.state.SeriesState`) and the figures with standard errors and intervals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dppub.dp.pipeline.kinds.series.planning import SeriesSpec, fingerprint
from dppub.dp.pipeline.kinds.series.series_scan import SeriesExact
from dppub.dp.series.state import SeriesState

__all__ = ["FIGURE_COLUMNS", "HISTORY", "publish_run", "read_figures"]

HISTORY = "history.csv"
"""Every figure the series published so far, run after run (``figures.csv``'s columns)."""

FIGURE_COLUMNS = (
    "published",
    "period",
    "figure",
    "measure",
    "group",
    "value",
    "std_error",
    "ci_low",
    "ci_high",
)
"""``figures.csv``: the period the figure was published in, the period it is of (its last
period), its block (``per_period``, ``running_total``...), measure, group and estimate."""


def read_figures(path: Path) -> pd.DataFrame:
    """``figures.csv`` or ``history.csv`` with its labels as text (``2027`` stays a label)."""
    return pd.read_csv(path, dtype={"published": str, "period": str, "group": str})


def _block_names(spec: SeriesSpec) -> list[str]:
    return [name for name, rows in spec.release.workload.blocks for _ in range(rows)]


def publish_run(
    spec: SeriesSpec, exact: SeriesExact, *, rng: np.random.Generator | None = None
) -> tuple[SeriesState, pd.DataFrame]:
    """The state after this run and its figures (``FIGURE_COLUMNS``)."""
    release, item = spec.release, spec.item
    before = spec.published.state
    after = spec.after
    g, t = len(spec.groups), spec.period
    width = g * len(spec.labels)
    past_y = np.zeros((0, width)) if before is None else before.measurements
    past_v = np.zeros((0, width)) if before is None else before.published
    first = 0 if after is None else after + 1
    todo = [t] if item.revisions else list(range(first, t + 1))
    names, figure_periods = _block_names(spec), release.workload.periods
    rows: list[dict[str, object]] = []
    measured, values = [], []
    for j, (label, scale) in enumerate(zip(spec.labels, spec.scales, strict=True)):
        cols = slice(j * g, (j + 1) * g)
        noisy = release.measure(t, after, exact.values[j][: t + 1], rng=rng)
        y = np.vstack([past_y[:, cols], noisy])
        v = past_v[:, cols]
        for p in todo:
            figs, v = release.figures(y[: release.strategy.measured_by(p)], v)
            for i, f in enumerate(figs.figure):
                for k, group in enumerate(spec.groups):
                    rows.append(
                        {
                            "published": spec.label(p),
                            "period": spec.label(int(figure_periods[f])),
                            "figure": names[f],
                            "measure": label,
                            "group": group,
                            "value": float(figs.values[i, k]) * scale,
                            "std_error": float(figs.std_error[i]) * scale,
                            "ci_low": float(figs.ci_low[i, k]) * scale,
                            "ci_high": float(figs.ci_high[i, k]) * scale,
                        }
                    )
        measured.append(y)
        values.append(v)
    state = SeriesState(
        name=item.name,
        strategy=fingerprint(release),
        horizon=item.horizon,
        periods=(
            *(() if before is None else before.periods),
            *(spec.label(p) for p in range(first, t + 1)),
        ),
        last=t,
        columns=tuple(f"{m}:{grp}" for m in spec.labels for grp in spec.groups),
        measurements=np.hstack(measured),
        published=np.hstack(values),
    )
    return state, pd.DataFrame(rows, columns=list(FIGURE_COLUMNS))
