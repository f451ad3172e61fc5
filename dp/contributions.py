"""The distribution of rows per privacy unit, and the share of rows a bound would drop.

A dataset with a privacy unit needs ``max_rows_per_unit``: every release reads at most that
many rows of a unit, and its noise grows with it. Chosen by looking at the data, the bound
leaks; chosen blind, it either drops many rows or adds needless noise. PipelineDP's utility
analysis computes the contribution histogram (``L1_CONTRIBUTIONS``: privacy units by their
number of rows) and, per candidate bound, the ratio of data it would drop
(``compute_ratio_dropped``) -- from the raw data, outside any privacy accounting. Here the
histogram is itself a DP release with its own epsilon and one ledger row, and the shares are
post-processing of the published counts, so an office chooses the bound from a released figure.

**The histogram.** Each unit counts once, in the bin holding its number of rows: declared bins
with lower edges ``e_0 = 1 < e_1 < ... < e_k < cap`` (bin ``i`` holds ``e_i .. e_{i+1} - 1``
rows, the last declared one ``e_k .. cap - 1``) and a top bin of ``cap`` rows or more. The
edges and the cap come from the config, never from the data.

**Sensitivity** (:func:`histogram_sensitivity`), derived from the neighbour relation:

- counted per the neighbours' own unit, add/remove one unit adds or removes all its rows, so one
  unit enters or leaves exactly one bin and the rest stay: L1 = 1 (replace, one unit's rows
  changed for another's: it leaves one bin and enters one, L1 = 2);
- counted per the values of a column while neighbours differ by one row (no privacy unit): one
  value's count moves by one, so that value moves between two adjacent bins (or, from zero rows,
  enters the first): L1 = 2 (replace moves two values: L1 = 4).

A property test checks both on random neighbours. The counts get Laplace noise of scale
``sensitivity / epsilon`` from the vetted sampler (:func:`dp.mechanisms.laplace`).

**The shares** (:func:`dropped_shares`), from the published counts only (as they are: a
negative count is noise around an empty bin, and clamping it would bias every share upwards):
for a candidate bound ``b`` at the upper end of a declared bin, the units with more rows than
``b`` are exactly those in the bins above, so the share of units over the bound is read off
the counts; the share of rows dropped, ``sum over units of max(rows - b, 0) / sum of rows``,
needs each bin's rows, which are not published: a bin's units are taken at its midpoint (exact
for a one-value bin) and the top bin's at ``cap`` (so where it is not empty the share is a
lower bound: more rows up there only drop more). :func:`noise_range` redraws the noise around
the published counts (a parametric bootstrap of public values; the numpy noise there protects
nothing and needs to) for each share's 95% range.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError

__all__ = [
    "INTERVAL_LEVEL",
    "Relation",
    "Shares",
    "bin_counts",
    "bin_labels",
    "check_edges",
    "default_edges",
    "dropped_shares",
    "histogram_sensitivity",
    "noise_range",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Relation = Literal["add-remove", "replace"]
"""How two neighbouring datasets differ: one unit (or row) added or removed, or replaced."""

INTERVAL_LEVEL = 0.95


def histogram_sensitivity(*, relation: Relation, per_unit: bool) -> int:
    """The L1 sensitivity of the rows-per-unit histogram (module docstring).

    ``per_unit``: the counted column is the neighbours' unit (all of a unit's rows come and go
    together); else neighbours differ by one row and rows are counted per column value.

    >>> histogram_sensitivity(relation="add-remove", per_unit=True)
    1
    >>> histogram_sensitivity(relation="replace", per_unit=False)
    4
    """
    one = 1 if per_unit else 2
    return one if relation == "add-remove" else 2 * one


def default_edges(cap: int) -> tuple[int, ...]:
    """Lower edges 1, 2, 3, 4, 5, 10, 20, 40, ... below ``cap``.

    >>> default_edges(64)
    (1, 2, 3, 4, 5, 10, 20, 40)
    """
    edges = [e for e in (1, 2, 3, 4, 5) if e < cap]
    e = 10
    while e < cap:
        edges.append(e)
        e *= 2
    return tuple(edges)


def check_edges(edges: Sequence[int], cap: int) -> tuple[int, ...]:
    """Declared lower edges, checked: from 1, strictly increasing, below ``cap``."""
    out = tuple(int(e) for e in edges)
    if not out or out[0] != 1:
        raise ConfigError(f"bins must start at 1 (a unit has at least one row), got {list(out)}")
    if any(b <= a for a, b in itertools.pairwise(out)):
        raise ConfigError(f"bins must be strictly increasing lower edges, got {list(out)}")
    if out[-1] >= cap:
        raise ConfigError(f"bins must lie below cap {cap} (the top bin), got {list(out)}")
    return out


def _uppers(edges: Sequence[int], cap: int) -> list[int]:
    """Each declared bin's highest row count."""
    return [nxt - 1 for nxt in (*edges[1:], cap)]


def bin_labels(edges: Sequence[int], cap: int) -> list[str]:
    """``1``, ``5-9``, ..., ``>= cap``.

    >>> bin_labels((1, 2, 5), 10)
    ['1', '2-4', '5-9', '>= 10']
    """
    labels = [
        str(lo) if lo == hi else f"{lo}-{hi}"
        for lo, hi in zip(edges, _uppers(edges, cap), strict=True)
    ]
    return [*labels, f">= {cap}"]


def bin_counts(rows_per_unit: npt.ArrayLike, edges: Sequence[int], cap: int) -> IntArray:
    """Units per bin (the last: ``cap`` rows or more) of the units' row counts (each >= 1).

    >>> bin_counts([1, 1, 2, 7, 12, 100], (1, 2, 5), 10).tolist()
    [2, 1, 1, 2]
    """
    rows = np.asarray(rows_per_unit, dtype=np.int64)
    at = np.searchsorted(np.asarray([*edges, cap], dtype=np.int64), rows, side="right") - 1
    return np.bincount(np.maximum(at, 0), minlength=len(edges) + 1).astype(np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class Shares:
    """Per candidate bound: the shares of units over it and of rows it would drop."""

    bounds: tuple[int, ...]
    """Candidate ``max_rows_per_unit``: each declared bin's upper end."""
    units_over: FloatArray
    rows_dropped: FloatArray
    rows_dropped_is_lower_bound: bool
    """True where the top bin (``cap`` rows or more) is not empty."""


def dropped_shares(units: npt.ArrayLike, edges: Sequence[int], cap: int) -> Shares:
    """The shares each candidate bound implies, from (published) units per bin (module
    docstring). Noisy counts are used as they are, negative ones too (clamping them at zero
    biases every empty bin upwards: in a simulation the noise ranges then held the true share
    as rarely as 0.74 of the time); each share is then cut to ``[0, 1]`` and made
    non-increasing in the bound (a larger bound never drops more). An empty histogram drops
    nothing.

    >>> s = dropped_shares([2, 1, 1, 0], (1, 2, 3), 10)
    >>> s.bounds, s.units_over.round(3).tolist(), s.rows_dropped.round(3).tolist()
    ((1, 2, 9), [0.5, 0.25, 0.0], [0.6, 0.4, 0.0])
    """
    n = np.asarray(units, dtype=np.float64)
    uppers = _uppers(edges, cap)
    mids = np.asarray([(lo + hi) / 2.0 for lo, hi in zip(edges, uppers, strict=True)] + [cap])
    total_units, total_rows = float(n.sum()), float((n * mids).sum())
    over, dropped = [], []
    for k, b in enumerate(uppers):
        above = n[k + 1 :]
        over.append(float(above.sum()) / total_units if total_units > 0 else 0.0)
        lost = float((above * (mids[k + 1 :] - b)).sum())
        dropped.append(lost / total_rows if total_rows > 0 else 0.0)
    return Shares(
        bounds=tuple(uppers),
        units_over=np.minimum.accumulate(np.clip(over, 0.0, 1.0)),
        rows_dropped=np.minimum.accumulate(np.clip(dropped, 0.0, 1.0)),
        rows_dropped_is_lower_bound=bool(n[-1] > 0),
    )


def noise_range(
    units: npt.ArrayLike,
    scale: float,
    edges: Sequence[int],
    cap: int,
    *,
    draws: int = 2000,
    seed: int = 0,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The noise's 95% range of each share: the published counts redrawn with Laplace noise
    of the published ``scale`` (public values only; seeded, so a report is reproducible), the
    shares recomputed each time; ``(units_over low, high, rows_dropped low, high)``."""
    rng = np.random.default_rng(seed)
    n = np.asarray(units, dtype=np.float64)
    redrawn = n + rng.laplace(0.0, scale, size=(draws, n.size))
    over = np.empty((draws, len(edges)))
    dropped = np.empty((draws, len(edges)))
    for i in range(draws):
        s = dropped_shares(redrawn[i], edges, cap)
        over[i], dropped[i] = s.units_over, s.rows_dropped
    q = ((1.0 - INTERVAL_LEVEL) / 2.0, (1.0 + INTERVAL_LEVEL) / 2.0)
    o_lo, o_hi = np.quantile(over, q, axis=0)
    d_lo, d_hi = np.quantile(dropped, q, axis=0)
    return o_lo, o_hi, d_lo, d_hi
