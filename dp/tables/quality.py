"""Reliability flags and withheld cells of a published table, from its public values only.

Post-processing (no privacy cost). As the ABS and the ONS flag estimates: a row's relative
standard error ``RSE = std_error / |answer|`` (of the published, rounded values) makes it
``use with caution`` above :data:`CAUTION` (25%) and ``unreliable`` above :data:`UNRELIABLE`
(50%), thresholds a table may change; ``not assessed`` without a standard error (a quantile
drawn by the exponential mechanism); otherwise ``ok``.

``suppress: {below: N}`` withholds every row of a cell (a group with no ``*`` key) whose
published count is below ``N``: its numbers are left blank and its ``quality`` says
``suppressed``; the row stays in the table. Margins are kept whatever their count. This is a
publication convention, not disclosure control: the differential privacy guarantee holds for
every value without it, and a withheld cell can be derived from its margin and its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = [
    "CAUTION",
    "SUPPRESSED",
    "UNRELIABLE",
    "quality_flags",
    "quality_rule",
    "suppressed_rows",
]

CAUTION = 0.25
UNRELIABLE = 0.5
SUPPRESSED = "suppressed"


def quality_rule(caution: float, unreliable: float) -> str:
    """What ``release.json`` says of the ``quality`` column."""
    return (
        "from the published values only: relative standard error (std_error / |answer|) above "
        f"{caution:g} is 'use with caution', above {unreliable:g} 'unreliable'; 'not assessed' "
        "without a standard error; 'suppressed' where suppress: withheld the cell"
    )


def quality_flags(
    answer: npt.ArrayLike,
    std_error: npt.ArrayLike,
    *,
    caution: float = CAUTION,
    unreliable: float = UNRELIABLE,
) -> list[str]:
    """Each row's flag (module doc).

    >>> quality_flags([100, 100, 100, 0, 7], [10, 30, 60, 1, np.nan])
    ['ok', 'use with caution', 'unreliable', 'unreliable', 'not assessed']
    """
    value = np.abs(np.asarray(answer, dtype=np.float64))
    se = np.asarray(std_error, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rse = np.where(value > 0, se / value, np.inf)
    flags = np.select(
        [~np.isfinite(se), rse > unreliable, rse > caution],
        ["not assessed", "unreliable", "use with caution"],
        default="ok",
    )
    return [str(f) for f in flags]


def suppressed_rows(
    answers: pd.DataFrame, keys: Sequence[str], *, below: int
) -> npt.NDArray[np.bool_]:
    """The rows of cells (no ``*`` key) whose published ``count`` is below ``below``.

    >>> frame = pd.DataFrame({"sex": ["F", "M", "*", "F", "M", "*"],
    ...                       "measure": ["count"] * 3 + ["mean(age)"] * 3,
    ...                       "answer": [4.0, 12.0, 16.0, 40.0, 41.0, 40.8]})
    >>> suppressed_rows(frame, ["sex"], below=5).tolist()
    [True, False, False, True, False, False]
    """
    keys = list(keys)
    if answers.empty:
        return np.zeros(0, dtype=bool)
    cell = ~(answers[keys] == "*").any(axis=1).to_numpy()
    small = (answers["measure"] == "count").to_numpy() & cell & (answers["answer"] < below)
    groups = pd.MultiIndex.from_frame(answers[keys])
    return np.asarray(groups.isin(groups[small]) & cell, dtype=bool)
