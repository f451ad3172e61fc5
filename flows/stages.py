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
from dp.clustering import KMeans
from dp.engine import (
    EngineName,
    TableSource,
    distinct_values_stream,
    make_backend,
)
from dp.errors import ConfigError
from dp.histogram import Axis, category_axis, hierarchy_axis, numeric_axis
from dp.regression import LinearRegression, LogisticRegression, TraceRegression
from flows.config import (
    ClusteringModel,
    HierarchyModel,
    PipelineConfig,
    RegressionModel,
    WorkloadModel,
)

__all__ = [
    "anonymity_hierarchies",
    "checked_leaves",
    "clustering_estimator",
    "declared_hierarchy",
    "expected_errors",
    "feature_bounds",
    "regression_estimator",
    "table_source",
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
    length = model.prefix_mask or 0
    if spec.categories is not None:
        leaves = list(spec.categories)
    elif data is not None:
        # Values of another length were dropped on read; with no rows at all, one placeholder
        # code keeps the hierarchy's shape (its height is the declared length).
        leaves = sorted(data.astype(str).unique().tolist()) or ["*" * length]
    else:
        raise ConfigError(
            f"hierarchy of {column!r}: a DP stage needs declared leaves; declare the column's "
            "categories"
        )
    return Hierarchy.from_prefix_mask(leaves)


def checked_leaves(cfg: PipelineConfig) -> dict[str, list[str]]:
    """Build every hierarchy that declares its leaves, check it against the column's declared
    categories (each must be a leaf: a structural problem, found before any value is read),
    and return the leaves of text columns, which become their domain."""
    out: dict[str, list[str]] = {}
    for column, model in cfg.hierarchies.items():
        spec = cfg.dataset.columns[column]
        if model.file is None and model.levels is None:
            if model.prefix_mask is not None and spec.categories is not None:
                declared_hierarchy(cfg, column)  # declared codes must have the declared length
            continue
        leaves = declared_hierarchy(cfg, column).levels[0]
        if spec.categories is not None:
            missing = [c for c in spec.categories if c not in set(leaves)]
            if missing:
                raise ConfigError(
                    f"hierarchy of {column!r}: declared categor{'ies' if len(missing) > 1 else 'y'}"
                    f" {missing} {'are' if len(missing) > 1 else 'is'} not among its leaves"
                )
        elif spec.type == "string":
            out[column] = list(leaves)
    return out


def anonymity_hierarchies(
    cfg: PipelineConfig, data: pd.DataFrame | TableSource
) -> dict[str, Hierarchy]:
    """Hierarchies of the quasi-identifiers for the (non-DP) k-anonymity release.

    Leaves a hierarchy takes from the data come from the frame, or from one streaming pass over
    the column (its distinct values only) through the source's engine.
    """
    if cfg.anonymize is None:
        return {}
    out: dict[str, Hierarchy] = {}
    for q in cfg.anonymize.quasi_identifiers:
        if not _leaves_from_data(cfg, q):
            out[q] = declared_hierarchy(cfg, q)
        elif isinstance(data, TableSource):
            leaves = distinct_values_stream(data.path, data.schema, q, backend=data.backend)
            out[q] = declared_hierarchy(cfg, q, data=pd.Series(leaves, dtype=object))
        else:
            out[q] = declared_hierarchy(cfg, q, data=data[q])
    return out


def _leaves_from_data(cfg: PipelineConfig, column: str) -> bool:
    model = cfg.hierarchies[column]
    declared = model.file is not None or model.levels is not None or model.bands is not None
    return not declared and cfg.dataset.columns[column].categories is None


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


def feature_bounds(
    cfg: PipelineConfig, name: str, features: list[str]
) -> tuple[list[float], list[float]]:
    """Per-feature box from the declared column bounds only."""
    lows, highs = [], []
    for f in features:
        bounds = cfg.schema[f].bounds
        if bounds is None:
            raise ConfigError(f"{name!r}: feature {f!r} must be numeric with declared bounds")
        lows.append(bounds[0])
        highs.append(bounds[1])
    return lows, highs


def regression_estimator(cfg: PipelineConfig, r: RegressionModel) -> Any:
    """The configured estimator (not yet fitted); every bound comes from the declaration."""
    box = feature_bounds(cfg, r.name, r.features)
    y_bounds = cfg.schema[r.target].bounds
    if r.model in ("linear", "trace") and y_bounds is None:
        raise ConfigError(f"regression {r.name!r}: target {r.target!r} must be numeric")
    if r.model == "linear":
        return LinearRegression(
            r.epsilon,
            bounds_X=box,
            bounds_y=y_bounds,
            fit_intercept=r.fit_intercept,
            method=r.resolved_method,
            delta=r.delta,
        )
    if r.model == "logistic":
        return LogisticRegression(
            r.epsilon, bounds_X=box, fit_intercept=r.fit_intercept, method=r.resolved_method
        )
    labels = cfg.schema[r.tasks or ""].categories or ()
    return TraceRegression(r.epsilon, n_tasks=len(labels), bounds_X=box, bounds_y=y_bounds)


def clustering_estimator(cfg: PipelineConfig, k: ClusteringModel) -> Any:
    return KMeans(
        k.k, k.epsilon, bounds_X=feature_bounds(cfg, k.name, k.features), n_iter=k.iterations
    )


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


def table_source(cfg: PipelineConfig, engine: EngineName, period: str | None = None) -> TableSource:
    """The dataset of ``period`` (default: now) as a streaming engine scans it."""
    backend = make_backend(
        engine, scheduler=cfg.dataset.scheduler, batch_size=cfg.dataset.batch_size
    )
    return TableSource(path=cfg.data_path(period), schema=cfg.schema, backend=backend)
