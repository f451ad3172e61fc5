"""Task: fit a DP model (regression or k-means) and stage its JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from prefect import task

from dp.engine import (
    TableSource,
    lloyd_statistics_stream,
    logistic_sums_stream,
    regression_statistics_stream,
)
from dp.publication import Staging
from dp.regression import LogisticRegression
from tasks._common import PRIVATE, run_logger


def _labels(frame: pd.DataFrame, target: str, positive: str | None, threshold: float | None) -> Any:
    if positive is not None:
        return (frame[target].astype(str) == positive).to_numpy(dtype=np.int64)
    return (frame[target].to_numpy(dtype=np.float64) > float(threshold or 0.0)).astype(np.int64)


def _objective(estimator: Any) -> bool:
    return isinstance(estimator, LogisticRegression) and estimator.method == "objective"


@task(name="fit-model", **PRIVATE)
def fit_model(
    data: pd.DataFrame | TableSource,
    *,
    name: str,
    kind: str,
    mechanism: str,
    estimator: Any,
    features: Sequence[str],
    target: str | None = None,
    positive: str | None = None,
    threshold: float | None = None,
    task_column: str | None = None,
    task_labels: Sequence[str] = (),
    staging: Staging,
) -> dict[str, Any]:
    """Fit ``estimator`` (bounds from the config, never from data) and stage ``model.json``.

    A trace regression's tasks are disjoint row partitions: its per-task costs are returned
    as ``partitions`` so the ledger records (and recomposes) them in parallel.
    """
    # A completed release is reused; otherwise the ledger records the draw first.
    done = staging.attempt(name, estimator.privacy_cost)
    if done is not None:
        return done
    if isinstance(data, TableSource) and kind == "clustering":
        # Each Lloyd iteration's exact counts and sums, folded over the batches by the engine;
        # the estimator adds the noise once per iteration to the combined aggregates.
        domain = estimator.domain(len(features))

        def step(centres: Any) -> Any:
            return lloyd_statistics_stream(
                data.path,
                data.schema,
                features=list(features),
                domain=domain,
                centres=centres,
                backend=data.backend,
            )

        estimator.fit_steps(step, d=len(features))
    elif isinstance(data, TableSource) and _objective(estimator):
        # Objective perturbation: each Newton iterate's exact loss sums, one engine pass per
        # evaluated point; the estimator draws the noise once and returns the exact minimiser.
        design = estimator.design(len(features))

        def sums(w: Any) -> Any:
            return logistic_sums_stream(
                data.path,
                data.schema,
                features=list(features),
                target=target or "",
                design=design,
                w=w,
                threshold=threshold,
                positive=positive,
                backend=data.backend,
            )

        estimator.fit_loss_sums(sums, d=len(features))
    elif isinstance(data, TableSource):
        # Exact statistics summed batch by batch through the engine; the design (the clipping
        # the sensitivity relies on) always comes from the estimator itself.
        binary = threshold is not None or positive is not None
        stats = regression_statistics_stream(
            data.path,
            data.schema,
            features=list(features),
            target=target or "",
            design=estimator.design(len(features)),
            response=estimator.response if binary else None,
            threshold=threshold,
            positive=positive,
            by=task_column,
            backend=data.backend,
        )
        exact = stats if task_column is not None else stats[0]
        estimator.fit_statistics(exact, d=len(features))
    else:
        X = data[list(features)].to_numpy(dtype=np.float64)
        if target is None:
            estimator.fit(X)
        elif positive is not None or threshold is not None:
            estimator.fit(X, _labels(data, target, positive, threshold))
        elif task_column is not None:
            labels = pd.Index(list(task_labels))
            tasks = labels.get_indexer(pd.Index(data[task_column].astype(str)))
            estimator.fit(X, data[target].to_numpy(dtype=np.float64), tasks=tasks)
        else:
            estimator.fit(X, data[target].to_numpy(dtype=np.float64))
    partitions = [] if task_column is None else _partitions(estimator, name, task_column)
    return _finish(
        estimator,
        name=name,
        kind=kind,
        mechanism=mechanism,
        features=features,
        target=target,
        partitions=partitions,
        staging=staging,
    )


def _partitions(estimator: Any, name: str, key: str) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "partition": list(p.partition),
            "epsilon": p.cost.epsilon,
            "delta": p.cost.delta,
        }
        for p in estimator.partition_costs(name, key=key)
    ]


def _finish(
    estimator: Any,
    *,
    name: str,
    kind: str,
    mechanism: str,
    features: Sequence[str],
    target: str | None,
    partitions: list[dict[str, Any]],
    staging: Staging,
) -> dict[str, Any]:
    cost = estimator.privacy_cost
    model = {**estimator.to_dict(), "features": list(features), "target": target}
    staging.write_json(name, "model.json", model)
    run_logger().info("%s %r fitted (%s)", kind, name, mechanism)
    return staging.complete(
        name,
        {
            "name": name,
            "kind": kind,
            "mechanism": mechanism,
            "epsilon": cost.epsilon,
            "delta": cost.delta,
            "sensitivity": None,
            "is_dp": True,
            "features": list(features),
            "target": target,
            "partitions": partitions,
            "zcdp_rho": getattr(estimator, "zcdp_rho", None),
        },
    )
