"""Task: the k-anonymous table, a syntactic (not differentially private) release."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from prefect import task

from dp.anonymity import Hierarchy, anonymize
from dp.publication import Staging
from tasks._common import PRIVATE, run_logger


@task(name="k-anonymize", **PRIVATE)
def anonymize_release(
    frame: pd.DataFrame,
    *,
    name: str,
    hierarchies: Mapping[str, Hierarchy],
    k: int,
    max_suppression: float,
    metric: str,
    include: Sequence[str],
    staging: Staging,
) -> dict[str, Any]:
    """Generalize the quasi-identifiers to k-anonymity and stage the released table.

    The levels are chosen by looking at the data, so this release is *not* DP; DP stages never
    read its levels (they use levels fixed in the config).
    """
    done = staging.completed(name)
    if done is not None:
        return done
    qis = list(hierarchies)
    result = anonymize(
        frame[[*qis, *include]], hierarchies, k=k, max_suppression=max_suppression, metric=metric
    )
    staging.write_frame(name, "table.parquet", result.table)
    staging.write_json(name, "metrics.json", result.metrics)
    run_logger().info("k-anonymity release %r staged (k=%d)", name, k)
    return staging.complete(
        name,
        {
            "name": name,
            "kind": "k-anonymity",
            "mechanism": "generalization",
            "epsilon": 0.0,
            "delta": 0.0,
            "sensitivity": None,
            "is_dp": False,
            "guarantee": f"k={k}",
            "levels": result.levels,
            "report": result.to_markdown(),
        },
    )
