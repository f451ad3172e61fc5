"""Declared table schemas: every column a DP stage reads has a declared domain.

Domains come from configuration, never from data: numeric columns declare bounds ``[lo, hi]``,
categorical columns their category list; free-text columns (``string``) can only be read by
non-DP stages (k-anonymity) or through a hierarchy that declares their leaves.

Values that do not fit are handled by declared, data-independent policies, so no single record
can make a run fail: numbers outside the bounds (infinities included) are clamped; a missing
value (null, NaN) and, for categories, an undeclared value are either dropped (the row is left
out of every release of the run) or mapped to a declared value. Each is a per-row
transformation, so neighbouring tables stay neighbours and no sensitivity changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dppub.dp.errors import ConfigError
from dppub.dp.validation import check_bounds

__all__ = ["DROP", "ColumnSpec", "ColumnType", "TableSchema"]

ColumnType = Literal["int", "float", "category", "string", "date"]
DROP = "drop"
"""The policy that leaves a row out of the run (the default for missing and unknown values)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnSpec:
    """One declared column."""

    name: str
    """Column name in the Parquet file."""
    type: ColumnType
    """``int`` / ``float`` (numeric, bounded), ``category`` (declared list), ``string`` or
    ``date`` (a calendar date or timestamp, or ISO text; read as its ``YYYY-MM-DD`` text)."""
    bounds: tuple[float, float] | None = None
    """Declared ``[lo, hi]`` for numeric columns; values outside are clamped on read."""
    categories: tuple[str, ...] | None = None
    """Declared categories for ``category`` columns."""
    missing: str | float = DROP
    """A null or NaN: ``drop`` the row, or this value (within the bounds / a declared category)."""
    unknown: str = DROP
    """A value outside ``categories``: ``drop`` the row, or map it to this declared category."""
    length: int | None = None
    """Text columns of fixed-length codes (prefix-masked zip codes): a value of another length
    is unknown, and its row is dropped."""
    unit: bool = False
    """The privacy-unit column: each row's unit is its value *as stored* (an ``int`` id exactly,
    a text id by its characters), never a value rule's result; it is ``int``, ``string`` or
    ``category`` and maps no missing or unknown value (a row without a known unit is dropped).
    An ``int`` unit column's bounds apply only where a release reads it as a value."""

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
        self._check_policies()

    def _check_policies(self) -> None:
        where = f"column {self.name!r}"
        mapped = self.missing != DROP or self.unknown != DROP
        if self.unit and (self.type in ("float", "date") or mapped):
            raise ConfigError(
                f"{where} is the privacy unit: it must be int, string or category, with "
                f"missing and unknown 'drop' (a float id or a mapped value could merge units), "
                f"got type {self.type}, missing {self.missing!r}, unknown {self.unknown!r}"
            )
        if self.length is not None and (self.type != "string" or self.length < 1):
            raise ConfigError(f"{where}: a code length is only for text columns, and >= 1")
        if self.length is not None and self.unknown != DROP:
            raise ConfigError(f"{where}: a code of another length can only be dropped")
        if self.unknown != DROP and (
            self.categories is None or self.unknown not in self.categories
        ):
            raise ConfigError(f"{where}: unknown must be 'drop' or a declared category")
        if self.missing == DROP:
            return
        if self.is_numeric:
            value = self.missing
            lo, hi = self.bounds or (0.0, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{where}: missing must be 'drop' or a number, got {value!r}")
            if not lo <= value <= hi:
                raise ConfigError(f"{where}: missing value {value!r} is outside [{lo:g}, {hi:g}]")
            if self.type == "int" and float(value) != int(value):
                raise ConfigError(f"{where}: missing value {value!r} must be an integer")
        elif self.categories is not None and self.missing not in self.categories:
            raise ConfigError(f"{where}: missing must be 'drop' or a declared category")
        elif not isinstance(self.missing, str):
            raise ConfigError(f"{where}: missing must be 'drop' or a text value")

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
