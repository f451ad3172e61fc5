"""The data vector of the matrix mechanism: a histogram over a *declared* domain.

Each axis of the domain is defined without looking at the data: equal-width bins over declared
numeric bounds, a declared category list, or the labels of a hierarchy at a level fixed in the
configuration (a DP stage never reads a data-chosen generalization). Adding or
removing one record changes exactly one cell by one, so the histogram's L1 sensitivity is 1.
Releases count batch by batch (:mod:`dp.engine.folds.histogram_counts`); tests compare with
:func:`dp.reference.histogram.histogram` on a frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.schema import ColumnSpec

__all__ = [
    "Axis",
    "GeneralizingHierarchy",
    "category_axis",
    "hierarchy_axis",
    "numeric_axis",
]


class GeneralizingHierarchy(Protocol):
    """What an axis needs from a hierarchy (see :class:`dp.anonymity.Hierarchy`)."""

    def labels(self, level: int) -> list[str]: ...

    def generalize(self, values: pd.Series, level: int) -> pd.Series: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Axis:
    """One dimension of a declared histogram domain."""

    column: str
    """The source column."""
    labels: tuple[str, ...]
    """Cell labels along this axis, in order (the declared domain)."""
    edges: tuple[float, ...] | None = None
    """Bin edges for numeric axes (len(labels) + 1 values)."""
    hierarchy: GeneralizingHierarchy | None = None
    """Hierarchy for generalized axes."""
    level: int = 0
    """The config-fixed generalization level of a hierarchy axis."""

    @property
    def size(self) -> int:
        return len(self.labels)

    def codes(self, values: pd.Series) -> npt.NDArray[np.int64]:
        """Cell index of each value along this axis."""
        if self.edges is not None:
            edges = np.asarray(self.edges)
            v = values.to_numpy(dtype=np.float64)
            # Values were clamped to the declared bounds on read; the last bin is closed.
            idx = np.searchsorted(edges, v, side="right") - 1
            return np.clip(idx, 0, self.size - 1).astype(np.int64)
        text = values.astype(str)
        if self.hierarchy is not None:
            text = self.hierarchy.generalize(text, self.level).astype(str)
        codes = np.asarray(pd.Index(self.labels).get_indexer(pd.Index(text)), dtype=np.int64)
        if (codes < 0).any():
            raise InputError(f"column {self.column!r} has values outside its declared domain")
        return codes


def numeric_axis(spec: ColumnSpec, *, bins: int | None = None) -> Axis:
    """Equal-width bins over the declared bounds (default: one bin per integer for ``int``)."""
    if not spec.is_numeric or spec.bounds is None:
        raise ConfigError(f"column {spec.name!r} is not numeric; it cannot be binned")
    lo, hi = spec.bounds
    if bins is None:
        if spec.type != "int":
            raise ConfigError(f"column {spec.name!r}: float columns need an explicit 'bins'")
        edges = np.arange(lo, hi + 2, dtype=np.float64)
        labels = tuple(str(int(e)) for e in edges[:-1])
    else:
        if bins < 1:
            raise ConfigError(f"column {spec.name!r}: bins must be >= 1, got {bins}")
        edges = np.linspace(lo, hi, bins + 1)
        labels = tuple(f"[{a:g}, {b:g})" for a, b in pairwise(edges))
    return Axis(column=spec.name, labels=labels, edges=tuple(float(e) for e in edges))


def category_axis(spec: ColumnSpec) -> Axis:
    """One cell per declared category."""
    if spec.categories is None:
        raise ConfigError(f"column {spec.name!r} declares no categories")
    return Axis(column=spec.name, labels=spec.categories)


def hierarchy_axis(column: str, hierarchy: GeneralizingHierarchy, *, level: int) -> Axis:
    """One cell per label of ``hierarchy`` at the config-fixed ``level``."""
    return Axis(
        column=column, labels=tuple(hierarchy.labels(level)), hierarchy=hierarchy, level=level
    )
