"""Human-readable predicates for the rows of a workload, in the order ``dp.matrix`` builds them.

A published answer needs to say what it counts in data terms: ``age <= 30`` rather than "query
12". Each workload kind is a product of per-axis selections (HDMM's view of a workload as
Kronecker products, McKenna et al. VLDB 2018): a cell, a prefix, a contiguous range, or the whole
axis (a ``Total`` factor, which adds no condition). The rows are enumerated exactly as
:mod:`dp.matrix.workload` and :mod:`dp.matrix.product` order them: identity and Kronecker
products in C order over the axes, ranges ``[i, j]`` by ``i`` then ``j``, marginals subset by
subset in ``itertools.combinations`` order with each marginal's cells in C order.

Each selection is rendered from the axis's declared domain (:class:`dp.axes.Axis`):

* integer columns (one cell per value): ``age = 30``, ``age <= 30``, ``age in [20, 30]``;
* binned numeric columns (half-open bins, the last one closed): ``income in [0, 3906.25)``,
  ``income < 7812.5``, ``income in [3906.25, 250000]``;
* integer bands of a hierarchy level: ``age 17-21`` for one band, ``age in [17, 36]`` or
  ``age <= 36`` for several;
* categories and other hierarchy labels: ``sex = Female``, ``education in {HS-grad, Masters}``.

Conditions on several axes are joined with ``&``; a query with none is ``total``. Values are
clamped into the declared numeric bounds on read, so ``age <= 30`` on ages 17-90 counts every
row whose (clamped) age is at most 30.

>>> from dppub.dp.schema import ColumnSpec
>>> from dppub.dp.axes import category_axis, numeric_axis
>>> age = numeric_axis(ColumnSpec(name="age", type="int", bounds=(17, 19)))
>>> query_labels("prefix", [age])
['age <= 17', 'age <= 18', 'age <= 19']
>>> sex = category_axis(ColumnSpec(name="sex", type="category", categories=("F", "M")))
>>> query_labels("marginals", [age, sex], marginal_k=1)
['age = 17', 'age = 18', 'age = 19', 'sex = F', 'sex = M']
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from dppub.dp.axes import Axis
from dppub.dp.errors import ConfigError

__all__ = ["WORKLOAD_KINDS", "query_labels"]

WORKLOAD_KINDS = ("identity", "total", "prefix", "all_range", "marginals")
"""Workload kinds a pipeline config can name."""

# One axis's part of a query: the inclusive cell range (lo, hi) and whether it is a prefix
# (rendered as an upper bound even for the first cell), or None for the whole axis.
_Selection = tuple[int, int, bool] | None
_BAND = re.compile(r"^(-?\d+)(?:-(-?\d+))?$")


def _number(value: float) -> str:
    """Shortest text that reads back as the same float (``3906.25``, ``250000``)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _int_interval(column: str, a: int, b: int, *, from_start: bool) -> str:
    if from_start:
        return f"{column} <= {b}"
    if a == b:
        return f"{column} = {a}"
    return f"{column} in [{a}, {b}]"


def _bands(axis: Axis) -> list[tuple[int, int]] | None:
    """``(first, last)`` integer of each label if the labels are contiguous integer bands."""
    out = []
    for label in axis.labels:
        match = _BAND.match(label)
        if match is None:
            return None
        a = int(match.group(1))
        b = int(match.group(2)) if match.group(2) is not None else a
        out.append((a, b))
    contiguous = all(b1 + 1 == a2 for (_, b1), (a2, _) in itertools.pairwise(out))
    return out if contiguous and all(a <= b for a, b in out) else None


def _is_integer_axis(axis: Axis) -> bool:
    """One cell per integer value (``numeric_axis`` of an ``int`` column without ``bins``)."""
    edges = axis.edges
    if edges is None:
        return False
    return all(float(e).is_integer() for e in edges) and all(
        lab == str(int(e)) and b - e == 1.0
        for lab, e, b in zip(axis.labels, edges[:-1], edges[1:], strict=True)
    )


def _render(axis: Axis, lo: int, hi: int, prefix: bool) -> str:
    """The condition selecting cells ``lo..hi`` (inclusive) of ``axis``."""
    col, n = axis.column, axis.size
    from_start = prefix or (lo == 0 and lo != hi)
    if axis.edges is not None and _is_integer_axis(axis):
        a, b = int(axis.edges[lo]), int(axis.edges[hi])
        return _int_interval(col, a, b, from_start=from_start)
    if axis.edges is not None:
        left, right = _number(axis.edges[lo]), _number(axis.edges[hi + 1])
        last = hi == n - 1  # the last bin is closed (values were clamped to the upper bound)
        if from_start:
            return f"{col} {'<=' if last else '<'} {right}"
        return f"{col} in [{left}, {right}{']' if last else ')'}"
    bands = _bands(axis) if axis.hierarchy is not None else None
    if bands is not None:
        if lo == hi and not prefix and bands[lo][0] != bands[lo][1]:
            return f"{col} {axis.labels[lo]}"
        return _int_interval(col, bands[lo][0], bands[hi][1], from_start=from_start)
    if lo == hi:
        return f"{col} = {axis.labels[lo]}"
    return f"{col} in {{{', '.join(axis.labels[lo : hi + 1])}}}"


def _per_axis(kind: str, size: int) -> list[_Selection]:
    if kind == "identity":
        return [(j, j, False) for j in range(size)]
    if kind == "prefix":
        return [(0, j, True) for j in range(size)]
    if kind == "all_range":
        return [(i, j, False) for i in range(size) for j in range(i, size)]
    return [None]  # total


def _join(axes: Sequence[Axis], selections: Sequence[_Selection]) -> str:
    parts = [_render(a, *s) for a, s in zip(axes, selections, strict=True) if s is not None]
    return " & ".join(parts) if parts else "total"


def query_labels(kind: str, axes: Sequence[Axis], *, marginal_k: int = 1) -> list[str]:
    """One predicate per workload row, in the row order of the workload matrix.

    The workload is the one a pipeline builds from ``kind`` and ``axes``: ``identity`` and
    ``total`` over the flattened product domain, ``prefix`` and ``all_range`` on one axis or
    their Kronecker product over several, ``marginals`` all ``marginal_k``-way marginals.

    Args:
        kind: one of :data:`WORKLOAD_KINDS`.
        axes: the declared histogram axes, in the workload's axis order.
        marginal_k: the marginal order (``marginals`` only).

    Returns:
        A list of ``W.m`` strings.
    """
    if kind not in WORKLOAD_KINDS:
        raise ConfigError(f"workload kind must be one of {list(WORKLOAD_KINDS)}, got {kind!r}")
    if not axes:
        raise ConfigError("query labels need at least one axis")
    sizes = [a.size for a in axes]
    if kind == "total":
        return ["total"]
    if kind == "marginals":
        if isinstance(marginal_k, bool) or not 0 <= marginal_k <= len(axes):
            raise ConfigError(f"marginal_k must be in [0, {len(axes)}], got {marginal_k!r}")
        out = []
        for subset in itertools.combinations(range(len(axes)), marginal_k):
            kinds = ["identity" if i in subset else "total" for i in range(len(axes))]
            per = [_per_axis(k, s) for k, s in zip(kinds, sizes, strict=True)]
            out += [_join(axes, sel) for sel in itertools.product(*per)]
        return out
    per_axis = [_per_axis(kind, s) for s in sizes]
    return [_join(axes, sel) for sel in itertools.product(*per_axis)]
