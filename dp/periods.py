"""Budget periods: a dataset's allowance renews at calendar boundaries (UTC).

``per: year`` means the budget applies to each calendar year: a run is charged to the period in
which it reserved, and a scheduled publication refused in December resumes on 1 January.
``None`` means one lifetime budget.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

from dppub.dp.errors import ConfigError

__all__ = ["LIFETIME", "Period", "next_period_start", "period_label"]

Period = Literal["year", "quarter", "month", "week", "day", "hour", "minute"]
LIFETIME = "all"


def period_label(per: Period | None, when: datetime | None = None) -> str:
    """The label of the period containing ``when`` (default: now, UTC).

    >>> period_label("month", datetime(2026, 11, 21, tzinfo=UTC))
    '2026-11'
    >>> period_label(None)
    'all'
    """
    if per is None:
        return LIFETIME
    if per not in get_args(Period):
        raise ConfigError(f"budget period must be one of {list(get_args(Period))}, got {per!r}")
    t = (when or datetime.now(UTC)).astimezone(UTC)
    if per == "year":
        return f"{t.year:04d}"
    if per == "quarter":
        return f"{t.year:04d}-Q{(t.month - 1) // 3 + 1}"
    if per == "month":
        return f"{t.year:04d}-{t.month:02d}"
    if per == "week":
        iso = t.isocalendar()
        return f"{iso.year:04d}-W{iso.week:02d}"
    if per == "day":
        return t.strftime("%Y-%m-%d")
    if per == "hour":
        return t.strftime("%Y-%m-%dT%H")
    return t.strftime("%Y-%m-%dT%H:%M")


def next_period_start(per: Period | None, when: datetime | None = None) -> datetime | None:
    """When the period after the one containing ``when`` opens (None for a lifetime budget)."""
    if per is None:
        return None
    t = (when or datetime.now(UTC)).astimezone(UTC)
    if per == "year":
        return datetime(t.year + 1, 1, 1, tzinfo=UTC)
    if per in ("quarter", "month"):
        step = 3 if per == "quarter" else 1
        first = ((t.month - 1) // step) * step + 1
        month = first + step
        return datetime(t.year + (month > 12), (month - 1) % 12 + 1, 1, tzinfo=UTC)
    if per == "week":
        start = datetime(t.year, t.month, t.day, tzinfo=UTC) - timedelta(days=t.weekday())
        return start + timedelta(weeks=1)
    if per == "day":
        return datetime(t.year, t.month, t.day, tzinfo=UTC) + timedelta(days=1)
    if per == "hour":
        return datetime(t.year, t.month, t.day, t.hour, tzinfo=UTC) + timedelta(hours=1)
    return datetime(t.year, t.month, t.day, t.hour, t.minute, tzinfo=UTC) + timedelta(minutes=1)
