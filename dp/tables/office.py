"""A released table as an office publishes it: rounded, flagged and, if asked, withheld.

Post-processing of the released rows only (no privacy cost): each row's numbers are rounded to
the precision its noise supports (:mod:`dp.tables.precision`; values rounded under control by
``round:`` keep their value, so their margins still add up), flagged by their relative standard
error and cells with a small published count withheld (:mod:`dp.tables.quality`). The rounded
values are the only ones published: ``answers.parquet`` holds them as floats, ``answers.csv``
as text with exactly their digits (:meth:`OfficeTable.text`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.tables.precision import VALUE_COLUMNS, as_text, exponents, round_at
from dppub.dp.tables.quality import CAUTION, SUPPRESSED, UNRELIABLE, quality_flags, suppressed_rows
from dppub.dp.tables.table import TableDesign

__all__ = ["OfficeTable", "Presentation", "office_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Presentation:
    """A table's publication options (``quality:``, ``suppress:``)."""

    caution: float = CAUTION
    """Relative standard error above which a value is 'use with caution'."""
    unreliable: float = UNRELIABLE
    """Relative standard error above which a value is 'unreliable'."""
    suppress_below: int | None = None
    """Withhold cells whose published count is below this (None: withhold nothing)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OfficeTable:
    """The published rows (numbers rounded, a ``quality`` column) and each row's power of ten."""

    answers: pd.DataFrame
    exponent: npt.NDArray[np.float64]
    """The power of ten a row's numbers are written to (NaN: as they are)."""

    def text(self) -> pd.DataFrame:
        """The rows with each number written with exactly its row's digits (``answers.csv``)."""
        out = self.answers.copy()
        for c in VALUE_COLUMNS:
            out[c] = as_text(out[c].to_numpy(np.float64), self.exponent)
        return out


def office_table(
    answers: pd.DataFrame, design: TableDesign, presentation: Presentation
) -> OfficeTable:
    """Round, flag and withhold ``answers`` (module doc); ``design`` says which rows are
    counts, which were rounded under control and a quantile column's grid."""
    measure = answers["measure"].to_numpy(str)
    counts = np.isin(
        measure,
        [
            m.labels()[0]
            for m in design.measures
            if m.kind in ("count", "count_present", "count_distinct")
        ],
    )
    controlled = [m.labels()[0] for m in design.measures if m.kind in ("count", "sum")]
    fixed = np.isin(measure, controlled) & design.integer
    resolution = np.full(len(answers), np.nan)
    for m in design.measures:
        if m.kind == "quantile":
            width = float(np.min(np.diff(design.edges[m.column or ""])))
            resolution[np.isin(measure, m.labels())] = width
    se = answers["std_error"].to_numpy(np.float64)
    # a value rounded under control is a multiple of an integer base: its row to units at least
    e = exponents(se, counts=counts | fixed, resolution=resolution)
    out = answers.copy()
    for c in VALUE_COLUMNS:
        values = out[c].to_numpy(np.float64)
        rounded = round_at(values, e)
        out[c] = np.where(fixed, values, rounded) if c == "answer" else rounded
    out["quality"] = quality_flags(
        out["answer"],
        out["std_error"],
        caution=presentation.caution,
        unreliable=presentation.unreliable,
    )
    if presentation.suppress_below is not None:
        withheld = suppressed_rows(out, design.keys, below=presentation.suppress_below)
        out.loc[withheld, list(VALUE_COLUMNS)] = np.nan
        out.loc[withheld, "quality"] = SUPPRESSED
    return OfficeTable(answers=out, exponent=e)
