"""A workload's typed result: what ``release.json`` states (strategy, noise, expected error,
intervals).
"""

from __future__ import annotations

from typing import ClassVar

from dppub.dp.pipeline.kinds.base import JSON, Result

MAX_INTERVAL_CELLS = 2048
"""Workloads over more cells publish answers without intervals: their variances need the
strategy's Gram inverse (seconds to minutes, or no structured form at all)."""

NO_INTERVALS: dict[str, JSON] = {
    "interval_method": f"none: intervals are computed for up to {MAX_INTERVAL_CELLS} cells",
    "interval_level": None,
    "bootstrap_replicates": 0,
}


class WorkloadResult(Result):
    """An answered workload's public account: its ``release.json`` details. With Gaussian
    noise it states its unit-level ``zcdp_rho``; with a ``rho`` budget, its ``accounting``."""

    keep_null: ClassVar[frozenset[str]] = frozenset({"interval_level"})

    workload: str
    strategy: str
    reconstruction: str
    queries: int
    cells: int
    expected_rmse: float
    svd_bound_rmse: float
    noise: str
    noise_scale: float
    interval_method: str
    """How the answers' intervals were computed."""
    interval_level: float | None
    """Their nominal coverage; None without intervals."""
    bootstrap_replicates: int
