"""Task: answer a linear-query workload through the matrix mechanism."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from prefect import task

from dp import matrix
from dp.budget import PrivacyCost
from dp.engine import TableSource, exact_histogram
from dp.histogram import Axis
from dp.publication import Staging
from tasks._common import PRIVATE, run_logger


@task(name="answer-workload", **PRIVATE)
def answer_workload(
    data: pd.DataFrame | TableSource,
    *,
    name: str,
    epsilon: float,
    axes: Sequence[Axis],
    workload: Any,
    strategy: Any | None,
    reconstruction: str,
    staging: Staging,
) -> dict[str, Any]:
    """Histogram over the declared domain (from the frame, or streamed through the engine),
    Laplace measurement of the strategy, reconstruction.

    Only the noisy answers and the reconstructed histogram (post-processing) are staged; the
    exact histogram lives in memory only.
    """
    # A completed release is reused; otherwise the ledger records the draw first.
    done = staging.attempt(name, PrivacyCost(epsilon=epsilon))
    if done is not None:
        return done
    x = exact_histogram(data, axes)
    result = matrix.answer(
        workload, x, epsilon=epsilon, strategy=strategy, reconstruction=reconstruction
    )
    del x
    staging.write_frame(
        name,
        "answers.parquet",
        pd.DataFrame({"query": np.arange(len(result.answers)), "answer": result.answers}),
    )
    cells = list(itertools.product(*(a.labels for a in axes)))
    estimate = pd.DataFrame(cells, columns=[a.column for a in axes])
    estimate["estimate"] = result.estimate
    staging.write_frame(name, "estimate.parquet", estimate)
    run_logger().info("workload %r answered with strategy %s", name, result.strategy)
    return staging.complete(
        name,
        {
            "name": name,
            "kind": "workload",
            "mechanism": "laplace",
            "epsilon": epsilon,
            "delta": 0.0,
            "sensitivity": float(result.sensitivity),
            "is_dp": True,
            "strategy": str(result.strategy),
            "reconstruction": reconstruction,
            "queries": len(result.answers),
            "cells": len(result.estimate),
            "expected_rmse": float(result.expected_rmse),
            "svd_bound_rmse": float(result.svd_bound_rmse),
        },
    )
