"""The rows-per-unit release's typed result: what ``release.json`` states (the unit, the
bins, the noise, and per candidate bound the shares of units over it and of rows dropped)."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.base import Result
from dppub.dp.pipeline.kinds.release_file import Stated

SHARES_METHOD = (
    "post-processing of the published counts (as they are, negative ones too): for a bound at "
    "a bin's upper end "
    "the units over it are those in the bins above; the rows it drops, sum of max(rows - bound, "
    "0) over sum of rows, take each bin's units at its midpoint (exact for a one-value bin) and "
    "the top bin's at cap, so where the top bin is not empty they are a lower bound; each "
    "range is the noise's 95% range (the published counts redrawn with the published noise, "
    "2000 times, seeded); each share cut to [0, 1] and non-increasing in the bound"
)


class Candidate(Stated):
    """One candidate ``max_rows_per_unit`` and what it would cost in units and rows."""

    bound: int
    units_over: float
    units_over_low: float
    units_over_high: float
    rows_dropped: float
    rows_dropped_low: float
    rows_dropped_high: float


class ContributionsResult(Result):
    """A rows-per-unit release's public account (its ``release.json`` details)."""

    column: str
    """The counted column (the privacy unit, or a column counted per value)."""
    per_unit: bool
    """True: counted per the neighbours' unit; False: per value, neighbours one row."""
    cap: int
    bins: tuple[str, ...]
    """The bins' labels (``1``, ``5-9``, ``>= 64``)."""
    units: tuple[int, ...]
    """The published units per bin (noisy, rounded; negative where noise around an empty
    bin came out below zero)."""
    sensitivity: int
    noise_scale: float
    sensitivity_rule: str
    candidates: tuple[Candidate, ...]
    rows_dropped_is_lower_bound: bool
    shares_method: str = SHARES_METHOD
    interval_level: float = 0.95
