"""Declared table schemas: every column a DP stage reads has a declared domain.

Domains come from configuration, never from data (SPEC §1): numeric columns declare bounds
``[lo, hi]``, categorical columns their category list; free-text columns (``string``) can only be
read by non-DP stages (k-anonymity) or through a hierarchy that declares their leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dp.errors import ConfigError
from dp.validation import check_bounds

__all__ = ["ColumnSpec", "ColumnType", "TableSchema"]

ColumnType = Literal["int", "float", "category", "string"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnSpec:
    """One declared column."""

    name: str
    """Column name in the Parquet file."""
    type: ColumnType
    """``int`` / ``float`` (numeric, bounded), ``category`` (declared list) or ``string``."""
    bounds: tuple[float, float] | None = None
    """Declared ``[lo, hi]`` for numeric columns; values outside are clamped on read."""
    categories: tuple[str, ...] | None = None
    """Declared categories for ``category`` columns; any other value is an input error."""

    def __post_init__(self) -> None:
        if self.type in ("int", "float"):
            if self.bounds is None:
                raise ConfigError(f"column {self.name!r}: numeric columns must declare bounds")
            bounds = check_bounds(self.bounds, name=f"{self.name}.bounds")
            object.__setattr__(self, "bounds", bounds)
        elif self.bounds is not None:
            raise ConfigError(f"column {self.name!r}: bounds are only for int/float columns")
        if self.type == "category":
            cats = self.categories
            if not cats:
                raise ConfigError(f"column {self.name!r}: category columns must list categories")
            if len(set(cats)) != len(cats):
                raise ConfigError(f"column {self.name!r}: categories must be unique")
            object.__setattr__(self, "categories", tuple(str(c) for c in cats))
        elif self.categories is not None:
            raise ConfigError(f"column {self.name!r}: categories are only for category columns")

    @property
    def is_numeric(self) -> bool:
        return self.type in ("int", "float")


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSchema:
    """The declared columns of a dataset, in order."""

    columns: tuple[ColumnSpec, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if not names:
            raise ConfigError("a dataset must declare at least one column")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"columns declared twice: {dupes}")

    def __getitem__(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise ConfigError(f"column {name!r} is not declared in the dataset schema")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)
