"""One run's noise and figures: measure the rows the periods since the last run close, then
publish each period's figures in turn (caught up), consistently with what was published.

Only public values leave here: the noisy measurements and the period values (the new
:class:`~dp.series.state.SeriesState`) and the figures with standard errors and intervals.

The figures are published with the digits their noise supports (:data:`PRECISION`, the tables'
rule of :mod:`dp.tables.precision`): :func:`write_figures` writes ``figures.csv`` and
``history.csv`` rounded. The state keeps full precision, and it alone feeds a later run; the
full-precision figures any run published are :func:`state_figures` of its state.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from dppub.dp.pipeline.kinds.series.planning import SeriesSpec, fingerprint
from dppub.dp.pipeline.kinds.series.series_scan import SeriesExact
from dppub.dp.series.period_release import Figures
from dppub.dp.series.state import SeriesState, load_state
from dppub.dp.tables.precision import as_text, exponents, round_at

__all__ = [
    "FIGURES",
    "FIGURE_COLUMNS",
    "HISTORY",
    "PRECISION",
    "VALUES",
    "full_figures",
    "publish_run",
    "read_figures",
    "rounded_figures",
    "state_figures",
    "write_figures",
]

FIGURES = "figures.csv"
"""This run's figures."""

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

VALUES = ("value", "std_error", "ci_low", "ci_high")
"""A figure's numbers, rounded to one power of ten together."""

PRECISION = (
    "post-processing of the released values (no privacy cost): each figure's value, "
    "std_error, ci_low and ci_high are rounded (half to even) to the largest power of ten at "
    "or below a tenth of its standard error (two significant digits of the standard error), "
    "counts to integers at least, and figures.csv and history.csv show exactly those digits; "
    "state.json keeps the noisy measurements and period values at full precision, and later "
    "periods are estimated from it"
)


def read_figures(path: Path) -> pd.DataFrame:
    """``figures.csv`` or ``history.csv`` with its labels as text (``2027`` stays a label)."""
    return pd.read_csv(path, dtype={"published": str, "period": str, "group": str})


def _block_names(spec: SeriesSpec) -> list[str]:
    return [name for name, rows in spec.release.workload.blocks for _ in range(rows)]


def _rows(
    spec: SeriesSpec, period: int, figs: Figures, label: str, scale: float
) -> list[dict[str, object]]:
    """One measure's figures published at ``period``, one row per figure and group."""
    names, figure_periods = _block_names(spec), spec.release.workload.periods
    return [
        {
            "published": spec.label(period),
            "period": spec.label(int(figure_periods[f])),
            "figure": names[f],
            "measure": label,
            "group": group,
            "value": float(figs.values[i, k]) * scale,
            "std_error": float(figs.std_error[i]) * scale,
            "ci_low": float(figs.ci_low[i, k]) * scale,
            "ci_high": float(figs.ci_high[i, k]) * scale,
        }
        for i, f in enumerate(figs.figure)
        for k, group in enumerate(spec.groups)
    ]


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
    rows: list[dict[str, object]] = []
    measured, values = [], []
    for j, (label, scale) in enumerate(zip(spec.labels, spec.scales, strict=True)):
        cols = slice(j * g, (j + 1) * g)
        noisy = release.measure(t, after, exact.values[j][: t + 1], rng=rng)
        y = np.vstack([past_y[:, cols], noisy])
        v = past_v[:, cols]
        for p in todo:
            figs, v = release.figures(y[: release.strategy.measured_by(p)], v)
            rows.extend(_rows(spec, p, figs, label, scale))
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


def state_figures(spec: SeriesSpec, state: SeriesState) -> pd.DataFrame:
    """Every figure published up to ``state`` (``history.csv``'s rows, oldest period first) at
    full precision, recomputed from the state's measurements and period values exactly as its
    runs computed them: without revisions each period's figures, with revisions the last
    run's. ``spec`` is any run's of the series (its mechanism, measures and groups)."""
    release, g = spec.release, len(spec.groups)
    todo = [state.last] if spec.item.revisions else list(range(state.last + 1))
    rows: list[dict[str, object]] = []
    for p in todo:
        for j, (label, scale) in enumerate(zip(spec.labels, spec.scales, strict=True)):
            cols = slice(j * g, (j + 1) * g)
            y = state.measurements[: release.strategy.measured_by(p), cols]
            figs, _ = release.figures(y, state.published[:p, cols])
            rows.extend(_rows(spec, p, figs, label, scale))
    return pd.DataFrame(rows, columns=list(FIGURE_COLUMNS))


def full_figures(spec: SeriesSpec, folder: Path) -> pd.DataFrame:
    """:func:`state_figures` of the ``state.json`` a run published in ``folder``."""
    text = (folder / "state.json").read_text()
    state = load_state(
        text,
        hashlib.sha256(text.encode("utf-8")).hexdigest(),
        name=spec.item.name,
        strategy=fingerprint(spec.release),
        horizon=spec.item.horizon,
    )
    return state_figures(spec, state)


def rounded_figures(frame: pd.DataFrame, counts: tuple[str, ...]) -> pd.DataFrame:
    """``frame`` (``FIGURE_COLUMNS``) as published (:data:`PRECISION`): each row's numbers
    written with exactly the digits of its power of ten, a row of a measure in ``counts`` to
    units at least.

    >>> frame = pd.DataFrame({"measure": ["count", "sum_cost"], "value": [2086.0911, 1.23456],
    ...     "std_error": [9.1786, 0.0342], "ci_low": [2068.1, 1.16753], "ci_high": [2104.08, 1.3]})
    >>> rounded_figures(frame, ("count",)).values.tolist()
    [['count', '2086', '9', '2068', '2104'], ['sum_cost', '1.235', '0.034', '1.168', '1.300']]
    """
    e = exponents(
        frame["std_error"].to_numpy(np.float64), counts=frame["measure"].isin(counts).to_numpy()
    )
    out = frame.copy()
    for c in VALUES:
        out[c] = as_text(round_at(frame[c].to_numpy(np.float64), e), e)
    return out


def write_figures(folder: Path, spec: SeriesSpec, frame: pd.DataFrame) -> None:
    """Write this run's ``frame`` rounded to ``figures.csv`` and ``history.csv`` into the
    release's ``folder``. Without revisions the history is the newest committed run's history,
    its text kept as published (a rounded number rounded again could lose a digit), and these
    figures after it; with revisions this run's figures are every period's newest already."""
    counts = tuple(
        label for m, label in zip(spec.item.measures, spec.labels, strict=True) if m == "count"
    )
    text = rounded_figures(frame, counts)
    text.to_csv(folder / FIGURES, index=False)
    earlier, history = spec.published.folder, text
    if not spec.item.revisions and earlier is not None and (earlier / HISTORY).is_file():
        before = pd.read_csv(earlier / HISTORY, dtype=str, keep_default_na=False)
        history = pd.concat([before, text], ignore_index=True)
    history.to_csv(folder / HISTORY, index=False)
