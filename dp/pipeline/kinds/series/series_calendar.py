"""A series' calendar: period labels, their place in the horizon, the period due, row dates.

Periods are calendar months (``2027-03``), quarters (``2027-Q1``) or years (``2027``), UTC, as
:func:`dp.periods.period_label` writes them. A period's *ordinal* counts periods from year 0, so
the horizon's period ``t`` is ``ordinal(start) + t``. A row's period comes from its date column
as the engine reads it, ISO 8601 text (``2027-03-14``, or a timestamp's text starting so); a row
whose date does not parse is not read (a public rule: it depends on that row alone).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dppub.dp.errors import ConfigError
from dppub.dp.periods import period_label

__all__ = ["Per", "due_label", "label_of", "ordinal", "row_ordinals"]

Per = Literal["month", "quarter", "year"]

_PATTERNS = {
    "month": re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$"),
    "quarter": re.compile(r"^(\d{4})-Q([1-4])$"),
    "year": re.compile(r"^(\d{4})$"),
}
_EXAMPLES = {"month": "2027-03", "quarter": "2027-Q1", "year": "2027"}


def ordinal(label: str, per: Per) -> int:
    """The period's ordinal (``2027-03`` by month: ``2027 * 12 + 2``).

    >>> ordinal("2027-03", "month") - ordinal("2026-12", "month")
    3
    """
    found = _PATTERNS[per].match(label)
    if found is None:
        raise ConfigError(f"period {label!r} is not a {per} like {_EXAMPLES[per]!r}")
    year = int(found.group(1))
    if per == "year":
        return year
    return year * (12 if per == "month" else 4) + int(found.group(2)) - 1


def label_of(number: int, per: Per) -> str:
    """The label of the period with ordinal ``number``.

    >>> label_of(ordinal("2027-Q4", "quarter") + 1, "quarter")
    '2028-Q1'
    """
    if per == "year":
        return f"{number:04d}"
    size = 12 if per == "month" else 4
    year, index = divmod(number, size)
    return f"{year:04d}-{index + 1:02d}" if per == "month" else f"{year:04d}-Q{index + 1}"


def due_label(per: Per, now: datetime | None = None) -> str:
    """The newest complete period at ``now`` (default: now, UTC): the one before the period
    containing it (a run on 1 April publishes March)."""
    current = period_label(per, now or datetime.now(UTC))
    return label_of(ordinal(current, per) - 1, per)


def row_ordinals(dates: pa.Array, per: Per) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each row's period ordinal from its ISO date text, and where it parsed."""
    if pa.types.is_dictionary(dates.type):
        dates = dates.dictionary_decode()
    text = pc.cast(dates, pa.string())
    ok = pc.fill_null(pc.match_substring_regex(text, r"^\d{4}-(0[1-9]|1[0-2])(-|T|$)"), False)
    ok_np = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    safe = pc.if_else(ok, text, pa.scalar("0000-01"))
    year = np.asarray(
        pc.cast(pc.utf8_slice_codeunits(safe, 0, 4), pa.int64()).to_numpy(), dtype=np.int64
    )
    month = np.asarray(
        pc.cast(pc.utf8_slice_codeunits(safe, 5, 7), pa.int64()).to_numpy(), dtype=np.int64
    )
    if per == "year":
        number = year
    elif per == "quarter":
        number = year * 4 + (month - 1) // 3
    else:
        number = year * 12 + month - 1
    return number, ok_np
