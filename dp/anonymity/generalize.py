"""Full-domain generalization at config-fixed levels (the data-independent path).

This is what DP stages use: the levels come from the config, never from the data, so
the generalized column's domain is :meth:`Hierarchy.labels` at that level and reading it costs no
extra privacy budget. Levels chosen by :func:`dp.anonymity.anonymize` are data-dependent and must
not be fed back here for a DP release.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from dp.anonymity.hierarchy import Hierarchy
from dp.errors import ConfigError, InputError

__all__ = ["encode_columns", "generalize"]

IntArray = npt.NDArray[np.int64]


def _check_columns(df: pd.DataFrame, hierarchies: Mapping[str, Hierarchy]) -> list[str]:
    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if not hierarchies:
        raise ConfigError("at least one quasi-identifier hierarchy is required")
    for col, h in hierarchies.items():
        if not isinstance(h, Hierarchy):
            raise ConfigError(
                f"hierarchy of column {col!r} must be a Hierarchy, got {type(h).__name__}"
            )
        if col not in df.columns:
            raise InputError(f"column {col!r} has a hierarchy but is not in the table")
    return list(hierarchies)


def encode_columns(df: pd.DataFrame, hierarchies: Mapping[str, Hierarchy]) -> IntArray:
    """Leaf codes of every QI as an ``(n, d)`` array, in ``hierarchies`` order.

    Raises:
        InputError: a column is missing, or holds values that are not leaves (the message
            names neither the values nor how many).
    """
    cols = _check_columns(df, hierarchies)
    out = np.empty((len(df), len(cols)), dtype=np.int64)
    for i, col in enumerate(cols):
        out[:, i] = hierarchies[col].encode(df[col].rename(col))
    return out


def generalize(
    df: pd.DataFrame, hierarchies: Mapping[str, Hierarchy], levels: Mapping[str, int]
) -> pd.DataFrame:
    """Generalize each QI to its config-fixed level; other columns are returned unchanged.

    >>> h = Hierarchy.from_bands(0, 9, [5])
    >>> generalize(pd.DataFrame({"age": [3, 7]}), {"age": h}, {"age": 1})["age"].tolist()
    ['0-4', '5-9']
    """
    cols = _check_columns(df, hierarchies)
    missing = [c for c in cols if c not in levels]
    extra = [c for c in levels if c not in hierarchies]
    if missing or extra:
        raise ConfigError(
            f"levels must name exactly the hierarchy columns; missing {missing}, unknown {extra}"
        )
    out = df.copy()
    for col in cols:
        out[col] = hierarchies[col].generalize(df[col].rename(col), levels[col])
    return out
