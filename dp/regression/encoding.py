"""Regression features from declared columns: numeric columns as they are, category columns
one-hot over their declared categories.

Layout. Features are encoded column by column in the declared order. A numeric column is one
feature named after it, bounded by its declared ``[lo, hi]``. A category column with declared
categories ``c_1, ..., c_K`` becomes the indicators ``column=c_k``; with an intercept the first
declared category ``c_1`` is the *reference level* and its indicator is dropped (its effect is
the intercept), so the column contributes ``K - 1`` features. Without an intercept the first
category column keeps all ``K`` indicators (they play the intercept's role) and later ones drop
their reference level, as R's ``model.matrix`` does: the design is never collinear by
construction.

Undeclared values. A value that is not a declared category (the reader normally refuses it
earlier; in-memory data may hold anything) sets *no* indicator of its column: with a dropped
reference level it is encoded like the reference level. The rule is fixed here, data-independent,
never refuses a row, and keeps the row inside the declared domain below.

Row norm. A one-hot block has at most one entry equal to 1 and the rest 0, whatever the data:
its L1, L2 and L4 norms are all at most 1, the bound a numeric feature of magnitude 1 has. The
block therefore enters every sensitivity of :mod:`dp.regression.sensitivity` as *one* group of
magnitude 1 (:meth:`FeatureDomain.group_magnitudes`), not as ``K - 1`` independent features of
magnitude 1: with six category columns of 45 indicators the quadratic part's add/remove L1
sensitivity is ``(6^2 + 6) / 2 = 21`` instead of ``(45^2 + 45) / 2 = 1035``. The bound comes
from the declared categories alone, so every sensitivity stays data-independent. Blocks are
never shifted or scaled (:class:`~dp.regression.statistics.Design`): any shift would make the
block dense and its norm larger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.numerics.domains import (
    BoundLike,
    FeatureDomain,
    check_n_features,
    declared_feature_bounds,
)
from dppub.dp.schema import ColumnSpec, TableSchema

__all__ = ["FeatureEncoding", "check_encoding", "declared_features", "resolve_d"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureEncoding:
    """How declared feature columns become the columns of the design matrix.

    >>> enc = FeatureEncoding.from_specs(
    ...     [ColumnSpec(name="age", type="int", bounds=(17, 90)),
    ...      ColumnSpec(name="sex", type="category", categories=("F", "M", "X"))],
    ...     fit_intercept=True)
    >>> enc.names, enc.blocks
    (('age', 'sex=M', 'sex=X'), ((1, 3),))
    >>> enc.encode({"age": [30, 40], "sex": ["M", "F"]}).tolist()
    [[30.0, 1.0, 0.0], [40.0, 0.0, 0.0]]
    """

    columns: tuple[ColumnSpec, ...]
    """The declared feature columns (numeric with bounds, or category), in model order."""
    levels: tuple[tuple[str, ...] | None, ...]
    """Per column: the encoded categories (reference dropped where it is), None if numeric."""

    @classmethod
    def from_specs(cls, specs: Sequence[ColumnSpec], *, fit_intercept: bool) -> FeatureEncoding:
        """The encoding of ``specs`` for a model with or without an intercept (module doc)."""
        if not specs:
            raise ConfigError("a regression needs at least one feature")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ConfigError(f"features must be distinct, got {names}")
        levels: list[tuple[str, ...] | None] = []
        full_first = not fit_intercept
        for spec in specs:
            if spec.is_numeric:
                levels.append(None)
            elif spec.categories is None:
                raise ConfigError(
                    f"feature {spec.name!r} must be numeric with declared bounds or a category "
                    "column with declared categories"
                )
            else:
                cats = spec.categories if full_first else spec.categories[1:]
                full_first = False
                if not cats:
                    raise ConfigError(
                        f"feature {spec.name!r} declares one category: after dropping the "
                        "reference level it has no indicator left"
                    )
                levels.append(cats)
        return cls(columns=tuple(specs), levels=tuple(levels))

    @classmethod
    def from_schema(
        cls, schema: TableSchema, features: Sequence[str], *, fit_intercept: bool
    ) -> FeatureEncoding:
        """The encoding of the declared columns ``features`` of ``schema``."""
        return cls.from_specs([schema[f] for f in features], fit_intercept=fit_intercept)

    @property
    def column_names(self) -> tuple[str, ...]:
        """The source columns, in model order."""
        return tuple(s.name for s in self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        """One name per encoded feature: the column, or ``column=category`` for an indicator."""
        out: list[str] = []
        for spec, lv in zip(self.columns, self.levels, strict=True):
            out.extend([spec.name] if lv is None else [f"{spec.name}={c}" for c in lv])
        return tuple(out)

    @property
    def dim(self) -> int:
        """Number of encoded features ``d``."""
        return sum(1 if lv is None else len(lv) for lv in self.levels)

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """``[start, stop)`` of each category column's indicators in the encoded row."""
        out, at = [], 0
        for lv in self.levels:
            width = 1 if lv is None else len(lv)
            if lv is not None:
                out.append((at, at + width))
            at += width
        return tuple(out)

    @property
    def has_categories(self) -> bool:
        """Whether any feature is a category column."""
        return any(lv is not None for lv in self.levels)

    def domain(self) -> FeatureDomain:
        """The declared box: numeric bounds, ``[0, 1]`` per indicator, one-hot ``blocks``."""
        lower: list[float] = []
        upper: list[float] = []
        for spec, lv in zip(self.columns, self.levels, strict=True):
            if lv is None and spec.bounds is not None:
                lower.append(spec.bounds[0])
                upper.append(spec.bounds[1])
            elif lv is not None:
                lower.extend([0.0] * len(lv))
                upper.extend([1.0] * len(lv))
        return FeatureDomain.box(lower, upper, d=self.dim, blocks=self.blocks)

    def encode(self, data: pd.DataFrame | Mapping[str, object]) -> FloatArray:
        """The ``(n, d)`` design matrix of the columns ``data[name]`` (a frame or a mapping).

        Numeric columns are converted to float (the domain clips them later); category
        columns set the indicator of their value, or none for an undeclared value (module doc).

        Raises:
            InputError: a column is missing, or the columns differ in length.
        """
        parts: list[FloatArray] = []
        n: int | None = None
        for spec, lv in zip(self.columns, self.levels, strict=True):
            if spec.name not in data:
                raise InputError(f"feature column {spec.name!r} is missing")
            raw = data[spec.name]
            if lv is None:
                col = np.asarray(raw, dtype=np.float64).reshape(-1, 1)
            else:
                col = self.indicators(spec.name, raw)
            if n is not None and col.shape[0] != n:
                raise InputError(f"feature column {spec.name!r} has {col.shape[0]} rows, not {n}")
            n = col.shape[0]
            parts.append(col)
        return np.asarray(np.hstack(parts), dtype=np.float64)

    def indicators(self, column: str, values: object) -> FloatArray:
        """The ``(n, len(levels))`` indicators of one category column's values."""
        lv = self.levels[self.column_names.index(column)]
        if lv is None:
            raise ConfigError(f"feature {column!r} is numeric, not a category column")
        codes = pd.Index(lv).get_indexer(pd.Index(np.asarray(values, dtype=object).astype(str)))
        return self.indicators_from_codes(column, np.asarray(codes, dtype=np.int64))

    def indicators_from_codes(self, column: str, codes: npt.NDArray[np.int64]) -> FloatArray:
        """Indicators from codes into the encoded levels (``-1``: no indicator set)."""
        lv = self.levels[self.column_names.index(column)] or ()
        out = np.zeros((codes.shape[0], len(lv)))
        hit = codes >= 0
        out[np.flatnonzero(hit), codes[hit]] = 1.0
        return out

    def level_codes(self, column: str, values: Sequence[object]) -> npt.NDArray[np.int64]:
        """The code of each value among the encoded levels of ``column`` (``-1`` if none)."""
        lv = self.levels[self.column_names.index(column)] or ()
        lookup = {c: i for i, c in enumerate(lv)}
        return np.array([lookup.get(str(v), -1) for v in values], dtype=np.int64)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description: encoded names and each category column's reference level."""
        refs: dict[str, str | None] = {}
        for spec, lv in zip(self.columns, self.levels, strict=True):
            if lv is not None and spec.categories is not None:
                dropped = len(lv) < len(spec.categories)
                refs[spec.name] = spec.categories[0] if dropped else None
        return {
            "features": list(self.names),
            "reference_levels": refs,
            "undeclared_categories": "no indicator set (encoded as the reference level)",
        }


def resolve_d(d: int | None, encoding: FeatureEncoding | None) -> int:
    """``d``, or the encoding's width when ``d`` is None; they must agree when both are given."""
    if encoding is None:
        if d is None:
            raise ConfigError("d (the number of features) is required without an encoding")
        return check_n_features(d)
    if d is not None and d != encoding.dim:
        raise ConfigError(
            f"d={d!r} but the encoding has {encoding.dim} features {list(encoding.names)}"
        )
    return encoding.dim


def check_encoding(encoding: FeatureEncoding, fit_intercept: bool) -> None:
    """The encoding must drop reference levels exactly when the model has an intercept."""
    rebuilt = FeatureEncoding.from_specs(encoding.columns, fit_intercept=fit_intercept)
    if rebuilt != encoding:
        raise ConfigError(
            f"the encoding was built for fit_intercept={not fit_intercept}, "
            f"the model has fit_intercept={fit_intercept}"
        )


def declared_features(
    bounds_X: tuple[BoundLike, BoundLike] | None,
    data_norm: float | None,
    encoding: FeatureEncoding | None,
    *,
    fit_intercept: bool,
) -> tuple[tuple[BoundLike, BoundLike] | None, float | None]:
    """Validate a model's feature declaration: exactly one of a box, an L2 bound or an encoding
    (built for the model's ``fit_intercept``); returns the box and bound (None with an encoding)."""
    if encoding is None:
        return declared_feature_bounds(bounds_X, data_norm)
    if bounds_X is not None or data_norm is not None:
        raise ConfigError("declare the features by encoding or by bounds_X/data_norm, not both")
    check_encoding(encoding, fit_intercept)
    return None, None
