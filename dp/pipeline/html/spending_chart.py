"""The audit page's chart: a dataset's spending over time as a step line against its budget.

Spending moves only when a run reserves, so it is drawn as steps (the value holds until the
next run) from the left edge of the chart to its right edge. The time axis is padded around the
runs -- 4% of their span, at least a minute each side, so one run is a step and not a vertical
line -- and labelled by matplotlib's concise date formatter, set so that every tick reads as a
time or a date on its own (``21:55:30``, not ``30``) and the date under the axis is ISO
(``2026-11-25``).
The y axis runs from zero to a little above the larger of the budget and what was spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup

from dppub.dp.pipeline.html.figures import BUDGET, INK, MUTED, WARN, new_figure, to_svg

__all__ = ["RunPoint", "Series", "chart_limits", "spending_chart"]

_MIN_PAD = timedelta(minutes=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPoint:
    """One run as the chart draws it."""

    ts: datetime
    """When it reserved its budget (UTC)."""
    epsilon: float
    """What it finally costs: its reservation (published or pending), its draws (charged)."""
    state: str
    """``committed``, ``charged`` or ``pending`` (aborted runs cost nothing and are not drawn)."""
    period: str
    """The calendar period it ran in (``all`` without periods): caps and renewing budgets
    count spending per period."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """A dataset's runs and the limits to draw beside them."""

    name: str
    runs: Sequence[RunPoint]
    """Oldest first; at least one."""
    budget: float
    """The lifetime total (or, when ``renew``, the budget of each period)."""
    renew: bool = False
    """Each period has its own budget: spending restarts at zero with each period."""
    cap: float | None = None
    """At most this much in one period (and ``budget`` in all)."""


def _steps(
    runs: Sequence[RunPoint], start: datetime, end: datetime, *, per_period: bool
) -> tuple[list[float], list[float]]:
    """Cumulative epsilon as step points from ``start`` to ``end`` (restarting each period);
    times as matplotlib date numbers."""
    xs, ys, total, period = [start], [0.0], 0.0, None
    for r in runs:
        if per_period and r.period != period:
            total, period = 0.0, r.period
        total += r.epsilon
        xs.append(r.ts)
        ys.append(total)
    xs.append(end)
    ys.append(total)
    return [_num(x) for x in xs], ys


def _num(when: datetime) -> float:
    from matplotlib.dates import date2num

    return float(date2num(when))  # type: ignore[no-untyped-call]


def chart_limits(series: Series) -> tuple[datetime, datetime, float]:
    """The time axis (start, end) and the top of the epsilon axis (its bottom is zero)."""
    runs = series.runs
    first, last = runs[0].ts, runs[-1].ts
    pad = max((last - first) * 0.04, _MIN_PAD)
    start, end = first - pad, last + pad
    lifetime = sum(r.epsilon for r in runs)  # the highest line drawn (a period holds less)
    return start, end, max(series.budget, lifetime) * 1.08


def spending_chart(series: Series) -> Markup:
    """The chart of one dataset (see the module docstring)."""
    import matplotlib.dates as mdates

    runs = list(series.runs)
    start, end, top = chart_limits(series)
    fig = new_figure(7.0, 3.2, left=0.7, right=0.3, top=0.35)
    ax = fig.subplots()
    if series.renew:
        xs, ys = _steps(runs, start, end, per_period=True)
        ax.step(xs, ys, where="post", color=INK, linewidth=1.6, label="spent in its period")
        lx, ly = _steps(runs, start, end, per_period=False)
        ax.step(lx, ly, where="post", color=MUTED, linewidth=1.2, label="lifetime total")
        ax.axhline(series.budget, color=BUDGET, linewidth=1.4, label="budget per period")
    else:
        xs, ys = _steps(runs, start, end, per_period=False)
        ax.step(xs, ys, where="post", color=INK, linewidth=1.6, label="spent (lifetime)")
        ax.axhline(series.budget, color=BUDGET, linewidth=1.4, label="lifetime budget")
        if series.cap is not None:
            px, py = _steps(runs, start, end, per_period=True)
            ax.step(px, py, where="post", color=MUTED, linewidth=1.0, label="spent in its period")
            ax.axhline(series.cap, color=BUDGET, linewidth=1.0, linestyle="--", label="cap")
    by_time = dict(zip(xs[1:-1], ys[1:-1], strict=True))
    for state, marker, colour, label in (
        ("charged", "X", WARN, "charged, not published"),
        ("pending", "o", MUTED, "pending"),
    ):
        marked = [_num(r.ts) for r in runs if r.state == state]
        if marked:
            ax.plot(marked, [by_time[t] for t in marked], marker, color=colour, label=label)
    ax.set_xlim(_num(start), _num(end))
    ax.set_ylim(0.0, top)
    locator = mdates.AutoDateLocator(minticks=3, maxticks=7)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(  # type: ignore[no-untyped-call]
            locator,
            formats=["%Y", "%b", "%d", "%H:%M", "%H:%M", "%H:%M:%S"],
            zero_formats=["", "%Y", "%b", "%b %d", "%H:%M", "%H:%M"],
            offset_formats=["", "%Y", "%Y-%m", "%Y-%m-%d", "%Y-%m-%d", "%Y-%m-%d"],
        )
    )
    ax.set_ylabel("epsilon")
    count = f"{len(runs)} run" + ("" if len(runs) == 1 else "s")
    ax.set_title(f"{series.name}: spending over time ({count}, UTC)")
    ax.legend(loc="best", fontsize=8)
    return to_svg(fig, key=f"spending-{series.name}")
