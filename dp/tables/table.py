"""A statistical table from its exact aggregates: every measure per group, with intervals.

What each measure is read from and how epsilon is split: :mod:`dp.tables.split`; counts and
centred sums over cells and margins: :mod:`dp.tables.cells_and_margins` (the components
measured: :mod:`dp.tables.components`); quantiles:
:mod:`dp.tables.quantiles`; controlled rounding: :mod:`dp.tables.rounding`. From the components:

* the count and a centred sum measured together (:mod:`dp.tables.split`) are read off as if
  measured apart (:func:`dp.tables.cells_and_margins.measure_count_and_sum`);
* ``count`` = the count component's rows (non-negative; with ``round:`` multiples of the base
  that still add up); ``count(col)`` and ``count_distinct`` likewise from theirs (not rounded
  under control);
* ``sum(col)`` = ``S + mid N`` (``S``: the centred sum's rows, ``N``: ``count(col)``'s, the
  rows where ``col`` is present (:data:`dp.tables.split.MISSING_RULE`), before rounding;
  with ``round:`` multiples of :func:`dp.tables.rounding.sum_base` that add up);
  its noise standard deviation is ``sqrt(se_S^2 + mid^2 se_N^2)`` (uncorrelated noises:
  independent, or, measured together, ``L (e_a + e_b) / (2 half)`` and
  ``L (e_a - e_b) / 2`` for one linear ``L`` and i.i.d. ``e_a``, ``e_b``);
* ``mean(col)`` = ``S / max(N, 1) + mid``, clamped to ``[lo, hi]``; its standard error is the
  delta method's ``sqrt(se_S^2 + (S / N)^2 se_N^2) / max(N, 1)``;
* ``variance(col)``, ``std(col)``: :mod:`dp.tables.spread`;
* sums and means get ``+- k se`` intervals (``k`` the Laplace-safe 95% multiplier, which covers
  a single Laplace variable and any sum of them), a mean's clamped to the bounds.

Every interval covers the noise only (not the clamping to the declared bounds, not sampling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp import matrix
from dppub.dp.matrix.cache import cached_select_strategy
from dppub.dp.matrix.least_squares_intervals import laplace_multiplier
from dppub.dp.tables.cells_and_margins import Linear
from dppub.dp.tables.components import (
    INTERVAL_LEVEL,
    component_facts,
    measure_components,
    row_bound,
    with_count,
)
from dppub.dp.tables.margins import Dimension, Published, published_rows
from dppub.dp.tables.quantiles import (
    QUANTILE_INTERVAL_COVERS,
    cdf_strategy,
    measure_quantiles,
    measure_quantiles_jointly,
    quantile_method,
)
from dppub.dp.tables.rounding import round_to_base, sum_base
from dppub.dp.tables.split import Component, Measure
from dppub.dp.tables.spread import spread_rows

__all__ = [
    "INTERVAL_LEVEL",
    "TableDesign",
    "TableRelease",
    "component_facts",
    "measure_components",
    "release_table",
    "row_bound",
    "table_mechanism",
    "table_strategy",
    "with_count",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class TableDesign:
    """Everything about a table known before its data: keys, measures, split, options."""

    keys: tuple[str, ...]
    """The published key columns: each dimension's fine key, then its coarser levels' keys."""
    dims: tuple[Dimension, ...]
    """The cells' dimensions (one per key column)."""
    measures: tuple[Measure, ...]
    components: tuple[Component, ...]
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    edges: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """A quantile column's fine grid."""
    integer_grids: frozenset[str] = frozenset()
    """Quantile columns whose grid has one bin per integer value (``int`` columns by default)."""
    margins: bool = False
    integer: bool = False
    """Controlled rounding (``round:``) of counts and sums, to multiples of :attr:`base`."""
    base: int = 1
    group: int = 1
    """Rows a unit may contribute (1: neighbours differ by one row)."""
    distinct_group: int = 1
    """Cells a unit may have a row in (``count_distinct``'s sensitivity,
    :func:`dp.tables.spread.distinct_bound`)."""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    def rows(self, margins: bool | None = None) -> Published:
        """The published rows (with the design's margins, or ``margins`` if given)."""
        return published_rows(self.dims, self.margins if margins is None else margins)

    def component(self, kind: str, column: str | None = None) -> Component | None:
        for c in self.components:
            if c.kind == kind and c.column == column:
                return c
        return None


def table_mechanism(design: TableDesign, selection: str | None = None) -> str:
    """The mechanisms a table runs, by name, joined by ``+`` (the ledger's, the manifest's and
    ``release.json``'s ``mechanism``): ``selection`` (a private-keys rule's,
    :attr:`dp.tables.keys.KeyRule.mechanism`), ``laplace`` for counts, sums and a hierarchical
    CDF, ``exponential`` for quantiles drawn by the exponential mechanism -- the method
    :func:`dp.tables.quantiles.quantile_method` chooses from public values (with margins always
    the CDF).

    >>> table_mechanism(TableDesign(keys=(), dims=(), measures=(), components=()), "x")
    'x'
    """
    names = [] if selection is None else [selection]
    for c in design.components:
        method = "cdf"
        if c.kind == "cdf" and not design.margins:
            (at,) = (m.at for m in design.measures if m.kind == "quantile" and m.column == c.column)
            bins = len(design.edges[c.column or ""]) - 1
            method = quantile_method(bins, at, c.epsilon, design.group)[0]
        names.append("exponential" if method == "exponential" else "laplace")
    return "+".join(dict.fromkeys(names))


def table_strategy(design: TableDesign) -> matrix.Strategy:
    """The strategy the count and centred sums are measured with (data-independent)."""
    if not design.margins:
        return matrix.identity_strategy(int(np.prod(design.shape)))
    return cached_select_strategy(design.rows().workload(), noise="laplace")


@dataclass(frozen=True, slots=True, kw_only=True)
class TableRelease:
    """The published rows and the public facts of how they were made."""

    answers: pd.DataFrame
    facts: dict[str, object]


def release_table(
    design: TableDesign,
    counts: npt.ArrayLike,
    centred: Mapping[str, npt.ArrayLike],
    histograms: Mapping[str, npt.ArrayLike],
    *,
    rng: np.random.Generator | None = None,
    measured: tuple[Mapping[str, Linear], Mapping[str, object]] | None = None,
    extra: Mapping[str, npt.ArrayLike] | None = None,
) -> TableRelease:
    """Draw every component's noise and read the measures off them (module doc); with
    ``measured``, the count and centred sums over the published rows were measured already,
    with their components' facts (a joint table's, :mod:`dp.tables.joint`). ``extra``: the
    other vectors by name (``count(col)``, ``centred_square(col)``, ``distinct``)."""
    published = design.rows()
    if measured is None:
        linear, facts = _measure_linear(design, published, counts, centred, rng, extra)
    else:
        linear, facts = dict(measured[0]), dict(measured[1])
    linear = with_count(linear)
    frames: list[pd.DataFrame] = []
    for m in design.measures:
        if m.kind == "quantile":
            frames.extend(_quantile_frames(design, m, histograms[m.column or ""], facts, rng))
        elif m.kind in ("variance", "std"):
            lo, hi = design.bounds[m.column or ""]
            rows = spread_rows(m.kind, m.column or "", lo, hi, linear, INTERVAL_LEVEL)
            frames.append(_frame(design.keys, published.labels, m.labels()[0], *rows))
        else:
            rows = _linear_rows(design, published, m, linear)
            frames.append(_frame(design.keys, published.labels, m.labels()[0], *rows))
    return TableRelease(answers=pd.concat(frames, ignore_index=True), facts=facts)


def _measure_linear(
    design: TableDesign,
    published: Published,
    counts: npt.ArrayLike,
    centred: Mapping[str, npt.ArrayLike],
    rng: np.random.Generator | None,
    extra: Mapping[str, npt.ArrayLike] | None,
) -> tuple[dict[str, Linear], dict[str, object]]:
    """The count and centred sums over the cells and margins (one strategy), by ``count`` and
    ``centred_sum(col)``, and each component's public facts."""
    linear = measure_components(
        design.components,
        design.bounds,
        published.workload(),
        table_strategy(design),
        counts,
        centred,
        group=design.group,
        rng=rng,
        extra=extra,
        distinct_group=design.distinct_group,
    )
    return linear, component_facts(design.components, linear)


Rows = tuple[FloatArray, FloatArray, FloatArray, FloatArray]
"""answer, std_error, ci_low, ci_high."""


def _linear_rows(
    design: TableDesign, published: Published, m: Measure, linear: Mapping[str, Linear]
) -> Rows:
    """A count, sum or mean over the published rows (module doc)."""
    k = float(laplace_multiplier(INTERVAL_LEVEL))
    if m.kind in ("count_present", "count_distinct"):
        name = m.labels()[0].replace("count_distinct", "distinct")
        own = linear[name] if name in linear else linear["count"]  # never missing: the count
        answer = own.answers
        low = np.clip(answer - own.half_width, 0.0, None)
        return answer, own.std_error, low, answer + own.half_width
    # a column never missing has no count of its own: its count is the table's
    count = linear.get(f"count({m.column})", linear.get("count"))
    size = len(published.labels)
    n_ans = count.answers if count is not None else np.zeros(size)
    n_se = count.std_error if count is not None else np.zeros(size)
    if m.kind == "count":
        assert count is not None
        answer = count.answers
        if design.integer:
            rows = published.matrix
            answer = rows @ round_to_base(count.estimate, rows, base=design.base)
        low = np.clip(answer - count.half_width, 0.0, None)
        return answer, count.std_error, low, answer + count.half_width
    s = linear[f"centred_sum({m.column})"]
    lo, hi = design.bounds[m.column or ""]
    mid = (lo + hi) / 2.0
    if m.kind == "sum":
        answer = s.answers + mid * n_ans
        se = np.sqrt(s.std_error**2 + mid**2 * n_se**2)
        if design.integer:
            rows, base = published.matrix, sum_base(design.base, se)
            cells = s.estimate + mid * (count.estimate if count is not None else 0.0)
            answer = rows @ round_to_base(cells, rows, base=base, nonneg=lo >= 0)
        return answer, se, answer - k * se, answer + k * se
    n = np.maximum(n_ans, 1.0)
    centred_mean = np.clip(s.answers / n, lo - mid, hi - mid)
    answer = centred_mean + mid
    se = np.sqrt(s.std_error**2 + centred_mean**2 * n_se**2) / n
    return answer, se, np.clip(answer - k * se, lo, hi), np.clip(answer + k * se, lo, hi)


def _quantile_frames(
    design: TableDesign,
    m: Measure,
    histograms: npt.ArrayLike,
    facts: dict[str, object],
    rng: np.random.Generator | None,
) -> list[pd.DataFrame]:
    """One frame per probability of a quantile measure, over the published rows (with margins
    each margin's quantiles from its own CDF: :mod:`dp.tables.quantiles`)."""
    c = design.component("cdf", m.column)
    assert c is not None
    edges = design.edges[m.column or ""]
    bins = len(edges) - 1
    hist = np.asarray(histograms, dtype=np.float64).reshape(-1, bins)
    tied = m.column in design.integer_grids
    published = design.rows()
    if design.margins:
        q = measure_quantiles_jointly(
            hist,
            edges,
            m.at,
            rows=published.workload(),
            groups=table_strategy(design),
            epsilon=c.epsilon,
            group=design.group,
            rng=rng,
            tied=tied,
        )
    else:
        q = measure_quantiles(
            hist, edges, m.at, epsilon=c.epsilon, group=design.group, rng=rng, tied=tied
        )
    common: dict[str, object] = {
        "epsilon": c.epsilon,
        "sensitivity": q.sensitivity,
        "noise_scale": q.noise_scale,
    }
    if q.method == "cdf":
        common["interval_covers"] = QUANTILE_INTERVAL_COVERS
    if design.margins:
        facts[c.name] = {
            **common,
            "method": "hierarchical CDF of every cell and margin from one measurement: the "
            "Kronecker product of the counts' strategy and the tree, least squares; a margin's "
            "CDF is the sum of its cells'; the interval inverts its noise band",
            "strategy": f"{table_strategy(design).name} x {cdf_strategy(bins).name}",
            "bins": bins,
            "rank_std_error": q.rank_std_error,
        }
    elif q.method == "exponential":
        facts[c.name] = {
            **common,
            "method": "exponential mechanism over the grid's edges, epsilon / "
            f"{len(m.at)} per probability (report-noisy-max, exponential noise); no value "
            "interval: the rank is within rank_error_95 rows of the best edge's with "
            "probability 95%",
            "bins": bins,
            "rank_error_95": q.rank_std_error,
        }
    else:
        facts[c.name] = {
            **common,
            "method": "hierarchical CDF, least squares; the interval inverts its noise band",
            "strategy": cdf_strategy(bins).name,
            "bins": bins,
            "rank_std_error": q.rank_std_error,
        }
    return [
        _frame(
            design.keys,
            published.labels,
            label,
            q.values[:, j],
            q.std_error[:, j],
            q.ci_low[:, j],
            q.ci_high[:, j],
        )
        for j, label in enumerate(m.labels())
    ]


def _frame(
    keys: Sequence[str],
    rows: Sequence[tuple[str, ...]],
    measure: str,
    answer: FloatArray,
    se: FloatArray,
    low: FloatArray,
    high: FloatArray,
) -> pd.DataFrame:
    out = pd.DataFrame(list(rows), columns=list(keys), dtype=str)
    out["measure"] = measure
    out["answer"], out["std_error"], out["ci_low"], out["ci_high"] = answer, se, low, high
    return out
