"""Task: fit a differentially private linear regression and stage the model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from prefect import task

from dp.publication import Staging
from dp.regression import LinearRegression
from tasks._common import PRIVATE, run_logger


@task(name="fit-regression", **PRIVATE)
def fit_regression(
    frame: pd.DataFrame,
    *,
    name: str,
    epsilon: float,
    features: Sequence[str],
    target: str,
    bounds_X: tuple[Sequence[float], Sequence[float]],
    bounds_y: tuple[float, float],
    fit_intercept: bool,
    method: str,
    staging: Staging,
) -> dict[str, Any]:
    """Fit with bounds from the config (never from data) and stage ``model.json``."""
    done = staging.completed(name)
    if done is not None:
        return done
    model = LinearRegression(
        epsilon, bounds_X=bounds_X, bounds_y=bounds_y, fit_intercept=fit_intercept, method=method
    )
    X = frame[list(features)].to_numpy(dtype=np.float64)
    y = frame[target].to_numpy(dtype=np.float64)
    model.fit(X, y)
    cost = model.privacy_cost
    staging.write_json(
        name, "model.json", {**model.to_dict(), "features": list(features), "target": target}
    )
    run_logger().info("regression %r fitted (%s)", name, method)
    return staging.complete(
        name,
        {
            "name": name,
            "kind": "regression",
            "mechanism": f"{method}-laplace",
            "epsilon": cost.epsilon,
            "delta": cost.delta,
            "sensitivity": getattr(model, "sensitivity_", None),
            "is_dp": True,
            "features": list(features),
            "target": target,
        },
    )
