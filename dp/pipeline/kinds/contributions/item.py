"""A rows-per-unit config item (one entry of ``contributions:``)."""

from __future__ import annotations

from pydantic import Field

from dppub.dp.pipeline.config import Cost, Integer, Name


class ContributionsModel(Cost):
    """The DP distribution of rows per privacy unit, at its own epsilon (pure: no delta).

    ``contributions: [{name: rows_per_person, epsilon: 0.1, cap: 64}]``; ``bins`` (lower
    edges from 1, below ``cap``; default 1, 2, 3, 4, 5, 10, 20, 40, ...) and, on a dataset
    without a privacy unit, ``unit`` (the column whose rows per value are counted, under the
    row-level guarantee) are optional."""

    name: Name
    cap: Integer = Field(ge=2, le=1_000_000)
    """The top bin: units with ``cap`` rows or more."""
    bins: list[Integer] | None = Field(default=None, min_length=1)
    """Lower edges of the declared bins below ``cap``, from 1 (default: 1, 2, 3, 4, 5, 10,
    20, 40, ... below ``cap``)."""
    unit: str | None = Field(default=None, min_length=1)
    """The column counted per value: the dataset's ``privacy_unit`` (the default; naming
    another is refused), or, without one, any declared column (neighbours then differ by one
    row)."""
