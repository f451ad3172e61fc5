"""A table's noisy count and sum components, measured and described (:mod:`dp.tables.split`
says which components a table has; :mod:`dp.tables.table` reads its measures off them).

Every component is a vector over the published rows' cells measured with the Laplace mechanism
through one strategy (:mod:`dp.tables.cells_and_margins`); quantiles' ``cdf`` components are
measured in :mod:`dp.tables.quantiles`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dppub.dp import matrix
from dppub.dp.matrix.least_squares_intervals import laplace_multiplier
from dppub.dp.numerics.fixedpoint import float_allowance
from dppub.dp.tables.cells_and_margins import Linear, measure_count_and_sum, measure_linear
from dppub.dp.tables.split import Component

__all__ = ["INTERVAL_LEVEL", "component_facts", "measure_components", "row_bound", "with_count"]

INTERVAL_LEVEL = 0.95


def measure_components(
    components: Sequence[Component],
    bounds: Mapping[str, tuple[float, float]],
    workload: matrix.Workload,
    strategy: matrix.Strategy,
    counts: npt.ArrayLike,
    centred: Mapping[str, npt.ArrayLike],
    *,
    group: int,
    rng: np.random.Generator | None,
    extra: Mapping[str, npt.ArrayLike] | None = None,
    distinct_group: int = 1,
) -> dict[str, Linear]:
    """Every count and sum component (quantiles' ``cdf`` aside) measured through ``strategy``,
    by vector: ``count``, ``count(col)``, ``centred_sum(col)`` (a pair gives both),
    ``centred_square(col)``, ``distinct``. ``extra`` holds the vectors beyond ``counts`` and
    ``centred`` by name; without ``count(col)`` there, every row has ``col`` (``counts``).

    Sensitivities, per row (times ``group``, the rows a unit may contribute, and the
    strategy's L1 norm): 1 for ``count`` and ``count(col)``, ``half`` for a centred sum,
    ``half^2 / 2`` for a centred square (:mod:`dp.engine.folds.table_sums`); ``distinct``: 1
    per cell a unit reaches, at most ``distinct_group`` cells
    (:func:`dp.tables.spread.distinct_bound`)."""
    more = extra or {}

    def vector(name: str) -> npt.ArrayLike:
        if name in more:
            return more[name]
        if name.startswith("centred_sum("):
            return centred[name.removeprefix("centred_sum(").removesuffix(")")]
        return counts  # ``count``, or ``count(col)`` of a column never missing

    out: dict[str, Linear] = {}
    for c in components:
        if c.kind == "cdf":
            continue
        half = row_bound(c, bounds)
        if c.kind in ("distinct", "centred_square"):
            out[c.name] = measure_linear(
                workload,
                strategy,
                vector(c.name),
                epsilon=c.epsilon,
                row_sensitivity=1.0 if c.kind == "distinct" else half * (1.0 + float_allowance(1)),
                group=distinct_group if c.kind == "distinct" else group,
                nonneg=c.kind == "distinct",
                rng=rng,
            )
            continue
        values = vector(c.name if c.kind != "count_sum" else f"centred_sum({c.column})")
        if c.kind == "count_sum":
            out[f"count({c.column})"], out[f"centred_sum({c.column})"] = measure_count_and_sum(
                workload,
                strategy,
                vector(f"count({c.column})"),
                values,
                epsilon=c.epsilon,
                half=half,
                group=group,
                rng=rng,
            )
            if c.whole:  # its column is never missing: count(col) is the count
                out["count"] = out[f"count({c.column})"]
            if c.rest:  # in parallel with the pair, on the other rows (dp.tables.split)
                present = np.asarray(vector(f"count({c.column})"), dtype=np.float64)
                out[f"missing({c.column})"] = measure_linear(
                    workload,
                    strategy,
                    np.asarray(counts, dtype=np.float64) - present,
                    epsilon=c.epsilon,
                    row_sensitivity=1.0,
                    group=group,
                    nonneg=True,
                    rng=rng,
                )
            continue
        out[c.name] = measure_linear(
            workload,
            strategy,
            values,
            epsilon=c.epsilon,
            # a centred sum is its exact sum rounded once (fl(S)): one rounding's allowance
            row_sensitivity=half * (1.0 + float_allowance(1 if c.kind == "centred_sum" else 0)),
            group=group,
            nonneg=c.kind == "count",
            rng=rng,
        )
    return out


def component_facts(
    components: Sequence[Component], linear: Mapping[str, Linear]
) -> dict[str, object]:
    """Each count and sum component's public facts (``release.json``'s ``components``): its
    epsilon, the measurement's sensitivity, its Laplace scale (``sensitivity / epsilon``; a
    pair's: of ``a`` and ``b``) and the strategy."""
    out: dict[str, object] = {}
    for c in components:
        if c.kind == "cdf":
            continue
        lin = linear[f"count({c.column})" if c.kind == "count_sum" else c.name]
        fact: dict[str, object] = {
            "epsilon": c.epsilon,
            "sensitivity": lin.sensitivity,
            "noise_scale": lin.sensitivity / c.epsilon,
            "strategy": lin.strategy,
        }
        out[c.name] = fact
        if c.rest:
            rest = linear[f"missing({c.column})"]
            fact["missing"] = {
                "rows": f"where {c.column} is missing, in parallel with the pair (every "
                "row adds to one of them): count = count(column) + missing",
                "sensitivity": rest.sensitivity,
                "noise_scale": rest.sensitivity / c.epsilon,
            }
    return out


def with_count(linear: Mapping[str, Linear], level: float = INTERVAL_LEVEL) -> dict[str, Linear]:
    """``linear`` with ``count`` read off a pair's ``count(col)`` and ``missing(col)`` when it
    was measured that way (:mod:`dp.tables.split`): their sum, the noises independent."""
    out = dict(linear)
    missing = next((k for k in linear if k.startswith("missing(")), None)
    if "count" in out or missing is None:
        return out
    a, b = linear["count" + missing.removeprefix("missing")], linear[missing]
    se = np.sqrt(a.std_error**2 + b.std_error**2)
    out["count"] = Linear(
        estimate=a.estimate + b.estimate,
        answers=a.answers + b.answers,
        std_error=se,
        half_width=float(laplace_multiplier(level)) * se,
        epsilon=a.epsilon,
        noise_scale=b.noise_scale,
        sensitivity=b.sensitivity,
        strategy=a.strategy,
    )
    return out


def row_bound(c: Component, bounds: Mapping[str, tuple[float, float]]) -> float:
    """A row's declared bound on a component's vector: 1 for a count (or a unit's distinct
    count), ``half`` for a centred sum or a pair (measured as ``v - lo``, ``hi - v``),
    ``half^2 / 2`` for a centred square; the float roundings' allowances are added where the
    vectors are computed (:func:`measure_components`,
    :func:`dp.tables.cells_and_margins.measure_count_and_sum`)."""
    if c.kind in ("count", "distinct"):
        return 1.0
    lo, hi = bounds[c.column or ""]
    half = (hi - lo) / 2.0
    return half * half / 2.0 if c.kind == "centred_square" else half
