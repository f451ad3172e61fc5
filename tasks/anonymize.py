"""Task: the k-anonymous table, a syntactic (not differentially private) release."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from prefect import task

from dp.anonymity import Hierarchy, anonymize
from dp.anonymity.result import AnonymizationReport
from dp.budget import PrivacyCost
from dp.engine import DEFAULT_BATCH_SIZE, TableSource, anonymize_stream
from dp.publication import Staging
from tasks._common import PRIVATE, run_logger


@task(name="k-anonymize", **PRIVATE)
def anonymize_release(
    data: pd.DataFrame | TableSource,
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

    From a frame, or through the engine from a :class:`TableSource`: leaf counts, then the table
    written batch by batch (same levels, metrics and rows; memory bounded by the leaf domain).
    The levels are chosen by looking at the data, so this release is *not* DP; DP stages never
    read its levels (they use levels fixed in the config).
    """
    # A completed release is reused; otherwise the ledger records the draw first.
    done = staging.attempt(name, PrivacyCost.zero(), is_dp=False)
    if done is not None:
        return done
    qis = list(hierarchies)
    result: AnonymizationReport
    if isinstance(data, TableSource):
        result = anonymize_stream(
            data.path,
            data.schema,
            hierarchies,
            out=staging.release_dir(name) / "table.parquet",
            include=include,
            k=k,
            max_suppression=max_suppression,
            metric=metric,
            suppress_if_impossible=True,
            batch_size=getattr(data.backend, "batch_size", DEFAULT_BATCH_SIZE),
            backend=data.backend,
        )
    else:
        frame = anonymize(
            data[[*qis, *include]],
            hierarchies,
            k=k,
            max_suppression=max_suppression,
            metric=metric,
            suppress_if_impossible=True,
        )
        staging.write_frame(name, "table.parquet", frame.table)
        result = frame
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
