"""The rows-per-unit release's typed result: what ``release.json`` states (the unit, the
bins, the noise, and per candidate bound the shares of units over it and of rows dropped)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import (
    JSON,
    as_float,
    as_int,
    as_list,
    as_object,
    as_str,
    as_strs,
)

SHARES_METHOD = (
    "post-processing of the published counts (as they are, negative ones too): for a bound at "
    "a bin's upper end "
    "the units over it are those in the bins above; the rows it drops, sum of max(rows - bound, "
    "0) over sum of rows, take each bin's units at its midpoint (exact for a one-value bin) and "
    "the top bin's at cap, so where the top bin is not empty they are a lower bound; each "
    "range is the noise's 95% range (the published counts redrawn with the published noise, "
    "2000 times, seeded); each share cut to [0, 1] and non-increasing in the bound"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One candidate ``max_rows_per_unit`` and what it would cost in units and rows."""

    bound: int
    units_over: float
    units_over_low: float
    units_over_high: float
    rows_dropped: float
    rows_dropped_low: float
    rows_dropped_high: float

    def to_json(self) -> dict[str, JSON]:
        return {
            "bound": self.bound,
            "units_over": self.units_over,
            "units_over_low": self.units_over_low,
            "units_over_high": self.units_over_high,
            "rows_dropped": self.rows_dropped,
            "rows_dropped_low": self.rows_dropped_low,
            "rows_dropped_high": self.rows_dropped_high,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> Candidate:
        return cls(
            bound=as_int(data["bound"]),
            units_over=as_float(data["units_over"]),
            units_over_low=as_float(data["units_over_low"]),
            units_over_high=as_float(data["units_over_high"]),
            rows_dropped=as_float(data["rows_dropped"]),
            rows_dropped_low=as_float(data["rows_dropped_low"]),
            rows_dropped_high=as_float(data["rows_dropped_high"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContributionsResult:
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

    def to_json(self) -> dict[str, JSON]:
        return {
            "column": self.column,
            "per_unit": self.per_unit,
            "cap": self.cap,
            "bins": list(self.bins),
            "units": list(self.units),
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "sensitivity_rule": self.sensitivity_rule,
            "candidates": [c.to_json() for c in self.candidates],
            "rows_dropped_is_lower_bound": self.rows_dropped_is_lower_bound,
            "shares_method": self.shares_method,
            "interval_level": self.interval_level,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> ContributionsResult:
        return cls(
            column=as_str(data["column"]),
            per_unit=bool(data["per_unit"]),
            cap=as_int(data["cap"]),
            bins=as_strs(data["bins"]),
            units=tuple(as_int(u) for u in as_list(data["units"])),
            sensitivity=as_int(data["sensitivity"]),
            noise_scale=as_float(data["noise_scale"]),
            sensitivity_rule=as_str(data["sensitivity_rule"]),
            candidates=tuple(
                Candidate.from_json(as_object(c)) for c in as_list(data["candidates"])
            ),
            rows_dropped_is_lower_bound=bool(data["rows_dropped_is_lower_bound"]),
            shares_method=as_str(data["shares_method"]),
            interval_level=as_float(data["interval_level"]),
        )
