"""Build the dp objects each stage needs from the validated config (no private data).

The one exception is :func:`anonymity_hierarchies`, which may take a prefix-masking hierarchy's
leaves from the data: that is allowed for the k-anonymity release (not DP) only. Hierarchies for
DP axes must have leaves declared in the config (SPEC §3.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dp import matrix
from dp.anonymity import Hierarchy
from dp.errors import ConfigError
from dp.histogram import Axis, category_axis, hierarchy_axis, numeric_axis
from flows.config import HierarchyModel, PipelineConfig, RegressionModel, WorkloadModel

__all__ = [
    "anonymity_hierarchies",
    "declared_hierarchy",
    "expected_errors",
    "regression_bounds",
    "workload_axes",
    "workload_operator",
]


def declared_hierarchy(
    cfg: PipelineConfig, column: str, *, data: pd.Series | None = None
) -> Hierarchy:
    """The hierarchy of ``column``; leaves come from the config, or from ``data`` if given."""
    model: HierarchyModel = cfg.hierarchies[column]
    spec = cfg.dataset.columns[column]
    if model.file is not None:
        return Hierarchy.from_csv(cfg.resolve(model.file), sep=model.sep)
    if model.levels is not None:
        return Hierarchy.from_levels(model.levels)
    if model.bands is not None:
        if spec.type != "int" or spec.bounds is None:
            raise ConfigError(f"hierarchy of {column!r}: bands need an int column with bounds")
        lo, hi = spec.bounds
        return Hierarchy.from_bands(int(lo), int(hi), model.bands)
    if spec.categories is not None:
        leaves = list(spec.categories)
    elif data is not None:
        leaves = sorted(data.astype(str).unique().tolist())
    else:
        raise ConfigError(
            f"hierarchy of {column!r}: a DP stage needs declared leaves; declare the column's "
            "categories"
        )
    return Hierarchy.from_prefix_mask(leaves)


def anonymity_hierarchies(cfg: PipelineConfig, frame: pd.DataFrame) -> dict[str, Hierarchy]:
    """Hierarchies of the quasi-identifiers for the (non-DP) k-anonymity release."""
    if cfg.anonymize is None:
        return {}
    return {q: declared_hierarchy(cfg, q, data=frame[q]) for q in cfg.anonymize.quasi_identifiers}


def workload_axes(cfg: PipelineConfig, w: WorkloadModel) -> list[Axis]:
    """The declared histogram domain of a workload (config-fixed levels only)."""
    schema = cfg.schema
    axes = []
    for a in w.attributes:
        spec = schema[a.column]
        if a.level is not None:
            axes.append(hierarchy_axis(a.column, declared_hierarchy(cfg, a.column), level=a.level))
        elif spec.is_numeric:
            axes.append(numeric_axis(spec, bins=a.bins))
        elif spec.categories is not None:
            axes.append(category_axis(spec))
        else:
            raise ConfigError(
                f"workload {w.name!r}: column {a.column!r} has no declared domain "
                "(declare categories, bounds or a hierarchy level)"
            )
    return axes


def workload_operator(w: WorkloadModel, axes: list[Axis]) -> tuple[Any, Any | None]:
    """``(W, A)``: the workload and the strategy (None: chosen by expected error)."""
    sizes = [a.size for a in axes]
    n = int(np.prod(sizes))
    per_axis = {"prefix": matrix.prefix, "all_range": matrix.all_range}
    if w.workload == "identity":
        W = matrix.identity(n)
    elif w.workload == "total":
        W = matrix.total(n)
    elif w.workload == "marginals":
        if w.marginal_k > len(axes):
            raise ConfigError(
                f"workload {w.name!r}: marginal_k={w.marginal_k} exceeds {len(axes)} attribute(s)"
            )
        W = matrix.marginals(tuple(sizes), w.marginal_k)
    else:
        make = per_axis[w.workload]
        W = make(sizes[0]) if len(sizes) == 1 else matrix.kron(*(make(s) for s in sizes))
    if w.strategy == "auto":
        return W, None
    if len(sizes) != 1:
        raise ConfigError(
            f"workload {w.name!r}: strategy {w.strategy!r} is for one attribute; use 'auto'"
        )
    if w.strategy == "identity":
        return W, matrix.identity_strategy(n)
    return W, matrix.hierarchical(n, 2)


def regression_bounds(
    cfg: PipelineConfig, r: RegressionModel
) -> tuple[tuple[list[float], list[float]], tuple[float, float]]:
    """Per-feature box and target bounds, from the declared column bounds only."""
    schema = cfg.schema
    lows, highs = [], []
    for f in (*r.features, r.target):
        spec = schema[f]
        if not spec.is_numeric or spec.bounds is None:
            raise ConfigError(f"regression {r.name!r}: column {f!r} must be numeric with bounds")
    for f in r.features:
        lo, hi = schema[f].bounds or (0.0, 0.0)
        lows.append(lo)
        highs.append(hi)
    y_bounds = schema[r.target].bounds or (0.0, 0.0)
    return (lows, highs), y_bounds


def expected_errors(cfg: PipelineConfig, w: WorkloadModel) -> dict[str, Any]:
    """Data-independent accuracy of a workload release: the strategy it would use, the expected
    per-query RMSE of least-squares answers, and the SVD lower bound for any strategy."""
    W, A = workload_operator(w, workload_axes(cfg, w))
    strategy = matrix.select_strategy(W) if A is None else A
    return {
        "queries": int(W.shape[0]),
        "cells": int(W.shape[1]),
        "strategy": strategy.name,
        "expected_rmse": matrix.expected_rmse(W, strategy, w.epsilon),
        "svd_bound_rmse": matrix.svd_bound_rmse(W, w.epsilon),
    }
